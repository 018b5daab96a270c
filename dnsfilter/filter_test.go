package dnsfilter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/hermetic-dev/hermetic/policy"
)

// zone is an in-memory upstream: answers by lower-case question name and
// type, and remembers every question it was asked.
type zone struct {
	mu    sync.Mutex
	asked []string
	rr    map[string][]dns.RR // "name.|TYPE"
	rcode map[string]int      // "name." -> rcode
	fail  bool
}

func newZone(records ...string) *zone {
	z := &zone{rr: map[string][]dns.RR{}, rcode: map[string]int{}}
	for _, s := range records {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		z.add(rr)
	}
	return z
}

func (z *zone) add(rr dns.RR) {
	h := rr.Header()
	k := strings.ToLower(h.Name) + "|" + dns.TypeToString[h.Rrtype]
	z.rr[k] = append(z.rr[k], rr)
}

func (z *zone) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.asked = append(z.asked, q.Question[0].Name)
	if z.fail {
		return nil, errors.New("upstream down")
	}
	return z.answer(q), nil
}

// answer follows CNAMEs within the zone, as a recursive resolver would,
// and adds whatever "extra" records the zone holds for the name.
func (z *zone) answer(q *dns.Msg) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(q)
	qq := q.Question[0]
	name := strings.ToLower(qq.Name)
	if c, ok := z.rcode[name]; ok {
		r.Rcode = c
		return r
	}
	for range 10 {
		if cn := z.rr[name+"|CNAME"]; len(cn) > 0 && qq.Qtype != dns.TypeCNAME {
			r.Answer = append(r.Answer, cn...)
			name = strings.ToLower(cn[0].(*dns.CNAME).Target)
			continue
		}
		break
	}
	r.Answer = append(r.Answer, z.rr[name+"|"+dns.TypeToString[qq.Qtype]]...)
	r.Answer = append(r.Answer, z.rr[name+"|EXTRA"]...)
	r.Extra = append(r.Extra, z.rr[name+"|GLUE"]...)
	if len(r.Answer) == 0 {
		soa, _ := dns.NewRR("example. 86400 IN SOA ns.example. host.example. 1 2 3 4 60")
		r.Ns = append(r.Ns, soa)
	}
	return r
}

func (z *zone) questions() []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return slices.Clone(z.asked)
}

type recorder struct {
	mu sync.Mutex
	ds []policy.Decision
}

func (r *recorder) Record(d policy.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = append(r.ds, d)
}

func (r *recorder) denied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.ds {
		if !d.Allowed() && !d.Audited {
			s := d.Host + " " + string(d.Reason)
			if d.Addr.IsValid() && d.Addr.String() != d.Host {
				s += " " + d.Addr.String()
			}
			out = append(out, s)
		}
	}
	return out
}

type fixture struct {
	f       *Filter
	z       *zone
	rec     *recorder
	learned *Learned
	pol     *policy.Policy
	now     time.Time
}

func newFixture(t testing.TB, cfg policy.Config, z *zone, static map[string][]netip.Addr) *fixture {
	t.Helper()
	// The policy reads the learned table at the real time.
	fx := &fixture{z: z, rec: &recorder{}, learned: NewLearned(0), now: time.Now()}
	cfg.Learned = fx.learned
	pol, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx.pol = pol
	fx.f, err = New(Config{Policy: pol, Upstream: z, Static: static, Learned: fx.learned, Recorder: fx.rec,
		Ports: DecisionPorts(cfg), Now: func() time.Time { return fx.now }})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// show renders the parts of an answer the tests compare.
func show(m *dns.Msg) string {
	if m == nil {
		return "<nil>"
	}
	var parts []string
	parts = append(parts, dns.RcodeToString[m.Rcode])
	if m.Truncated {
		parts = append(parts, "TC")
	}
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			parts = append(parts, "A="+rr.A.String())
		case *dns.AAAA:
			parts = append(parts, "AAAA="+rr.AAAA.String())
		case *dns.CNAME:
			parts = append(parts, "CNAME="+rr.Target)
		default:
			parts = append(parts, dns.TypeToString[rr.Header().Rrtype])
		}
	}
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				parts = append(parts, fmt.Sprintf("EDE=%d", e.InfoCode))
			}
		}
	}
	return strings.Join(parts, " ")
}

var testZone = []string{
	"allowed.test. 300 IN A 203.0.113.10",
	"allowed.test. 300 IN AAAA 2001:db8::10",
	"allowed.test. 300 IN MX 10 mail.allowed.test.",
	"allowed.test. 300 IN TXT \"hello\"",
	"allowed.test. 300 IN HTTPS 1 . ipv4hint=10.0.0.1",
	"meta.allowed.test. 300 IN A 169.254.169.254",
	"meta.allowed.test. 300 IN A 203.0.113.11",
	"meta6.allowed.test. 300 IN AAAA fd00:ec2::254",
	"meta6.allowed.test. 300 IN AAAA ::ffff:169.254.169.254",
	"internal.allowed.test. 300 IN A 10.1.2.3",
	"internal.allowed.test. 300 IN A 192.168.1.1",
	"internal.allowed.test. 300 IN A 127.0.0.1",
	"internal.allowed.test. 300 IN AAAA 64:ff9b::a00:1",
	"lab.allowed.test. 300 IN A 10.9.9.9",
	"cdn.allowed.test. 300 IN CNAME edge.elsewhere.test.",
	"edge.elsewhere.test. 300 IN A 198.51.100.7",
	// Records a poisoned or sloppy upstream adds beside the answer.
	"extra.allowed.test. 300 IN A 198.51.100.8",
	"extra.allowed.test. 300 IN EXTRA unrelated.test. 300 IN A 198.51.100.66",
	"extra.allowed.test. 300 IN GLUE ns.extra.allowed.test. 300 IN A 198.51.100.67",
	"long.allowed.test. 999999 IN A 198.51.100.9",
	"denied.test. 300 IN A 198.51.100.1",
	"svc.allowed.test. 300 IN SVCB 1 . ipv6hint=fd00::1",
	"dname.allowed.test. 300 IN A 198.51.100.12",
}

func zoneWithExtras() *zone {
	z := newZone()
	for _, s := range testZone {
		switch {
		case strings.Contains(s, " IN EXTRA "):
			rr, _ := dns.NewRR(strings.SplitN(s, " IN EXTRA ", 2)[1])
			z.rr["extra.allowed.test.|EXTRA"] = append(z.rr["extra.allowed.test.|EXTRA"], rr)
		case strings.Contains(s, " IN GLUE "):
			rr, _ := dns.NewRR(strings.SplitN(s, " IN GLUE ", 2)[1])
			z.rr["extra.allowed.test.|GLUE"] = append(z.rr["extra.allowed.test.|GLUE"], rr)
		default:
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(fmt.Sprint(s, err))
			}
			z.add(rr)
		}
	}
	z.rcode["gone.allowed.test."] = dns.RcodeNameError
	z.rcode["broken.allowed.test."] = dns.RcodeServerFailure
	z.rcode["refusing.allowed.test."] = dns.RcodeRefused
	return z
}

func TestAnswer(t *testing.T) {
	cfg := policy.Config{AllowDomains: []string{"allowed.test", "odd.test:8443"}, AllowCIDRs: []string{"10.9.9.9"}}
	tests := []struct {
		name  string
		qname string
		qtype uint16
		edns  bool
		want  string
		// denied are the decisions recorded as denials.
		denied []string
		// asked says whether the upstream must have seen the question.
		asked bool
	}{
		{name: "allowed A", qname: "allowed.test.", qtype: dns.TypeA, want: "NOERROR A=203.0.113.10", asked: true},
		{name: "allowed AAAA", qname: "allowed.test.", qtype: dns.TypeAAAA, want: "NOERROR AAAA=2001:db8::10", asked: true},
		{name: "0x20 case", qname: "AlLoWeD.TeSt.", qtype: dns.TypeA, want: "NOERROR A=203.0.113.10", asked: true},
		{name: "MX kept", qname: "allowed.test.", qtype: dns.TypeMX, want: "NOERROR MX", asked: true},
		{name: "TXT kept", qname: "allowed.test.", qtype: dns.TypeTXT, want: "NOERROR TXT", asked: true},
		{name: "HTTPS query empty", qname: "allowed.test.", qtype: dns.TypeHTTPS, want: "NOERROR"},
		{name: "SVCB query empty", qname: "svc.allowed.test.", qtype: dns.TypeSVCB, want: "NOERROR"},
		{name: "denied name refused", qname: "denied.test.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"denied.test not-allowlisted"}},
		{name: "denied name EDE", qname: "denied.test.", qtype: dns.TypeA, edns: true, want: "REFUSED EDE=18",
			denied: []string{"denied.test not-allowlisted"}},
		{name: "suffix trick", qname: "allowed.test.denied.test.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"allowed.test.denied.test not-allowlisted"}},
		{name: "metadata answer dropped", qname: "meta.allowed.test.", qtype: dns.TypeA, want: "NOERROR A=203.0.113.11", asked: true,
			denied: []string{"meta.allowed.test cloud-metadata 169.254.169.254"}},
		{name: "metadata AAAA dropped", qname: "meta6.allowed.test.", qtype: dns.TypeAAAA, want: "NOERROR", asked: true,
			denied: []string{"meta6.allowed.test cloud-metadata fd00:ec2::254", "meta6.allowed.test cloud-metadata 169.254.169.254"}},
		{name: "internal answers dropped", qname: "internal.allowed.test.", qtype: dns.TypeA, want: "NOERROR", asked: true,
			denied: []string{"internal.allowed.test private-address 10.1.2.3", "internal.allowed.test private-address 192.168.1.1", "internal.allowed.test private-address 127.0.0.1"}},
		{name: "embedded internal dropped", qname: "internal.allowed.test.", qtype: dns.TypeAAAA, want: "NOERROR", asked: true,
			denied: []string{"internal.allowed.test private-address 64:ff9b::a00:1"}},
		{name: "internal covered by address rule", qname: "lab.allowed.test.", qtype: dns.TypeA, want: "NOERROR A=10.9.9.9", asked: true},
		{name: "CNAME chain", qname: "cdn.allowed.test.", qtype: dns.TypeA, want: "NOERROR CNAME=edge.elsewhere.test. A=198.51.100.7", asked: true},
		{name: "unrelated records dropped", qname: "extra.allowed.test.", qtype: dns.TypeA, want: "NOERROR A=198.51.100.8", asked: true},
		{name: "NXDOMAIN passed on", qname: "gone.allowed.test.", qtype: dns.TypeA, want: "NXDOMAIN", asked: true},
		{name: "SERVFAIL passed on", qname: "broken.allowed.test.", qtype: dns.TypeA, want: "SERVFAIL", asked: true},
		{name: "upstream REFUSED is SERVFAIL", qname: "refusing.allowed.test.", qtype: dns.TypeA, want: "SERVFAIL", asked: true},
		{name: "port rule name resolves", qname: "odd.test.", qtype: dns.TypeA, want: "NOERROR", asked: true},
		{name: "localhost local", qname: "localhost.", qtype: dns.TypeA, want: "NOERROR A=127.0.0.1"},
		{name: "localhost sub AAAA", qname: "x.localhost.", qtype: dns.TypeAAAA, want: "NOERROR AAAA=::1"},
		{name: "metadata name", qname: "metadata.google.internal.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"metadata.google.internal cloud-metadata"}},
		{name: "address as name", qname: "169.254.169.254.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"169.254.169.254. invalid-host"}},
		{name: "inet_aton name", qname: "0x7f.1.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"0x7f.1. invalid-host"}},
		{name: "NUL byte", qname: "allowed.test\\000.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"allowed.test\\000. invalid-host"}},
		{name: "dot in label", qname: "evil\\.allowed.test.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"evil\\.allowed.test. invalid-host"}},
		{name: "high bytes", qname: "\\195\\159.allowed.test.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"\\195\\159.allowed.test. invalid-host"}},
		{name: "space", qname: "a\\ b.allowed.test.", qtype: dns.TypeA, want: "REFUSED",
			denied: []string{"a\\ b.allowed.test. invalid-host"}},
		{name: "root", qname: ".", qtype: dns.TypeNS, want: "REFUSED", denied: []string{". invalid-host"}},
		{name: "PTR refused", qname: "10.113.0.203.in-addr.arpa.", qtype: dns.TypePTR, want: "REFUSED",
			denied: []string{"10.113.0.203.in-addr.arpa not-allowlisted"}},
		{name: "ANY", qname: "allowed.test.", qtype: dns.TypeANY, want: "NOTIMP"},
		{name: "AXFR", qname: "allowed.test.", qtype: dns.TypeAXFR, want: "REFUSED"},
		{name: "IXFR", qname: "allowed.test.", qtype: dns.TypeIXFR, want: "REFUSED"},
		{name: "MAILB", qname: "allowed.test.", qtype: dns.TypeMAILB, want: "NOTIMP"},
		{name: "OPT type", qname: "allowed.test.", qtype: dns.TypeOPT, want: "FORMERR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, cfg, zoneWithExtras(), nil)
			q := query(tt.qname, tt.qtype)
			if tt.edns {
				q.SetEdns0(1232, false)
			}
			got := fx.f.Answer(context.Background(), q)
			if s := show(got); s != tt.want {
				t.Errorf("answer = %q, want %q\n%v", s, tt.want, got)
			}
			if got != nil && (len(got.Question) != 1 || got.Question[0] != q.Question[0] || got.Id != q.Id) {
				t.Errorf("question or id not echoed: %v", got)
			}
			if d := fx.rec.denied(); !slices.Equal(d, tt.denied) {
				t.Errorf("denials = %q, want %q", d, tt.denied)
			}
			if asked := len(fx.z.questions()) > 0; asked != tt.asked {
				t.Errorf("upstream asked = %v (%q), want %v", asked, fx.z.questions(), tt.asked)
			}
			if _, err := got.Pack(); err != nil {
				t.Errorf("answer does not pack: %v", err)
			}
		})
	}
}

func TestAnswerTTLCappedAndLearned(t *testing.T) {
	fx := newFixture(t, policy.Config{AllowDomains: []string{"allowed.test"}}, zoneWithExtras(), nil)
	got := fx.f.Answer(context.Background(), query("long.allowed.test.", dns.TypeA))
	if len(got.Answer) != 1 || got.Answer[0].Header().Ttl != 3600 {
		t.Fatalf("TTL not capped: %v", got)
	}
	a := netip.MustParseAddr("198.51.100.9")
	if name, ok := fx.learned.Lookup(a, fx.now); !ok || name != "long.allowed.test" {
		t.Fatalf("learned = %q %v", name, ok)
	}
	if _, ok := fx.learned.Lookup(a, fx.now.Add(3601*time.Second)); ok {
		t.Fatal("still learned after the capped TTL")
	}
	// Dropped addresses are never learned.
	fx.f.Answer(context.Background(), query("meta.allowed.test.", dns.TypeA))
	if _, ok := fx.learned.Lookup(netip.MustParseAddr("169.254.169.254"), fx.now); ok {
		t.Fatal("a dropped address was learned")
	}
	// Denied names are never learned.
	fx.f.Answer(context.Background(), query("denied.test.", dns.TypeA))
	if _, ok := fx.learned.Lookup(netip.MustParseAddr("198.51.100.1"), fx.now); ok {
		t.Fatal("an address of a denied name was learned")
	}
}

// TestLearnedFeedsPolicy: an address the filter handed out for an allowed
// name is allowed by the policy for the TTL (SPEC §3.2 step 6), and only
// that address.
func TestLearnedFeedsPolicy(t *testing.T) {
	fx := newFixture(t, policy.Config{AllowDomains: []string{"allowed.test:443"}}, zoneWithExtras(), nil)
	before := fx.pol.Decide("203.0.113.10", 443)
	if before.Allowed() {
		t.Fatal("allowed before the lookup")
	}
	fx.f.Answer(context.Background(), query("allowed.test.", dns.TypeA))
	after := fx.pol.Decide("203.0.113.10", 443)
	if !after.Allowed() || after.Rule != "allowed.test:443" {
		t.Fatalf("after the lookup: %v", after)
	}
	if d := fx.pol.Decide("203.0.113.10", 80); d.Allowed() {
		t.Fatalf("learned address allowed at another port: %v", d)
	}
	if d := fx.pol.Decide("203.0.113.99", 443); d.Allowed() {
		t.Fatalf("another address allowed: %v", d)
	}
}

func TestStatic(t *testing.T) {
	static := map[string][]netip.Addr{
		"svc.test":  {netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("169.254.169.254")},
		"deny.test": {netip.MustParseAddr("203.0.113.6")},
	}
	fx := newFixture(t, policy.Config{AllowDomains: []string{"svc.test"}}, newZone(), static)
	for _, tt := range []struct {
		name  string
		qtype uint16
		want  string
	}{
		{"svc.test.", dns.TypeA, "NOERROR A=203.0.113.5"},
		{"svc.test.", dns.TypeAAAA, "NOERROR AAAA=2001:db8::5"},
		{"svc.test.", dns.TypeMX, "NOERROR"},
		{"deny.test.", dns.TypeA, "REFUSED"},
	} {
		if got := show(fx.f.Answer(context.Background(), query(tt.name, tt.qtype))); got != tt.want {
			t.Errorf("%s %s = %q, want %q", tt.name, dns.TypeToString[tt.qtype], got, tt.want)
		}
	}
	if q := fx.z.questions(); len(q) != 0 {
		t.Errorf("static names went upstream: %q", q)
	}
	if _, ok := fx.learned.Lookup(netip.MustParseAddr("203.0.113.5"), fx.now); !ok {
		t.Error("static answer not learned")
	}
}

// TestHostileMessages feeds Answer messages that the server's accept
// function would already reject, so that the handler stands on its own.
func TestHostileMessages(t *testing.T) {
	fx := newFixture(t, policy.Config{AllowDomains: []string{"allowed.test"}}, zoneWithExtras(), nil)
	two := query("allowed.test.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "denied.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	none := query("allowed.test.", dns.TypeA)
	none.Question = nil
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	hesiod := query("allowed.test.", dns.TypeA)
	hesiod.Question[0].Qclass = dns.ClassHESIOD
	anyClass := query("allowed.test.", dns.TypeA)
	anyClass.Question[0].Qclass = dns.ClassANY
	update := query("allowed.test.", dns.TypeA)
	update.Opcode = dns.OpcodeUpdate
	notify := query("allowed.test.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	resp := query("allowed.test.", dns.TypeA)
	resp.Response = true
	withAnswer := query("allowed.test.", dns.TypeA)
	rr, _ := dns.NewRR("allowed.test. 1 IN A 10.0.0.1")
	withAnswer.Answer = []dns.RR{rr}
	withNs := query("allowed.test.", dns.TypeA)
	withNs.Ns = []dns.RR{rr}
	withExtra := query("allowed.test.", dns.TypeA)
	withExtra.Extra = []dns.RR{rr}
	twoOpt := query("allowed.test.", dns.TypeA)
	twoOpt.SetEdns0(1232, false)
	twoOpt.Extra = append(twoOpt.Extra, twoOpt.Extra[0])
	badVers := query("allowed.test.", dns.TypeA)
	badVers.SetEdns0(1232, false)
	badVers.IsEdns0().SetVersion(1)
	tsig := query("allowed.test.", dns.TypeA)
	tsig.SetTsig("key.", dns.HmacSHA256, 300, 0)
	longName := query(strings.Repeat("a.", 125)+"allowed.test.", dns.TypeA)
	longLabel := query(strings.Repeat("a", 64)+".allowed.test.", dns.TypeA)
	badPuny := query("xn--zz.allowed.test.", dns.TypeA)
	notFQDN := query("allowed.test.", dns.TypeA)
	notFQDN.Question[0].Name = "allowed.test"
	emptyLabel := query("allowed.test.", dns.TypeA)
	emptyLabel.Question[0].Name = "a..allowed.test."
	star := query("*.allowed.test.", dns.TypeA)

	for _, tt := range []struct {
		name string
		m    *dns.Msg
		want string
	}{
		{"two questions", two, "FORMERR"},
		{"no question", none, "FORMERR"},
		{"CHAOS class", chaos, "REFUSED"},
		{"HESIOD class", hesiod, "REFUSED"},
		{"ANY class", anyClass, "REFUSED"},
		{"update", update, "NOTIMP"},
		{"notify", notify, "NOTIMP"},
		{"response", resp, "<nil>"},
		{"answer section", withAnswer, "FORMERR"},
		{"authority section", withNs, "FORMERR"},
		{"additional record", withExtra, "FORMERR"},
		{"two OPT", twoOpt, "FORMERR"},
		{"EDNS version 1", badVers, "BADSIG"}, // BADVERS shares code 16
		{"TSIG", tsig, "FORMERR"},
		{"name over 253", longName, "REFUSED"},
		{"label over 63", longLabel, "REFUSED"},
		{"bad punycode", badPuny, "REFUSED"},
		{"not fully qualified", notFQDN, "REFUSED"},
		{"empty label", emptyLabel, "REFUSED"},
		{"wildcard label", star, "REFUSED"},
		{"nil", nil, "<nil>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := fx.f.Answer(context.Background(), tt.m)
			if s := show(got); s != tt.want {
				t.Errorf("answer = %q, want %q\n%v", s, tt.want, got)
			}
		})
	}
	for _, q := range fx.z.questions() {
		if q != "allowed.test." {
			t.Errorf("upstream was asked %q", q)
		}
	}
}

func TestUpstreamFailure(t *testing.T) {
	z := zoneWithExtras()
	z.fail = true
	fx := newFixture(t, policy.Config{AllowDomains: []string{"allowed.test"}}, z, nil)
	if got := show(fx.f.Answer(context.Background(), query("allowed.test.", dns.TypeA))); got != "SERVFAIL" {
		t.Fatalf("answer = %q", got)
	}
}

// blockingUpstream holds every query until released.
type blockingUpstream struct{ entered, release chan struct{} }

func (b blockingUpstream) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r := new(dns.Msg)
	r.SetReply(q)
	return r, nil
}

func TestMaxInFlight(t *testing.T) {
	pol, err := policy.New(policy.Config{AllowDomains: []string{"allowed.test"}})
	if err != nil {
		t.Fatal(err)
	}
	up := blockingUpstream{entered: make(chan struct{}, 2), release: make(chan struct{})}
	f, err := New(Config{Policy: pol, Upstream: up, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Answer(context.Background(), query("allowed.test.", dns.TypeA))
		}()
	}
	// Both slots are taken once both queries are upstream.
	<-up.entered
	<-up.entered
	got := show(f.Answer(context.Background(), query("allowed.test.", dns.TypeA)))
	close(up.release)
	wg.Wait()
	if got != "SERVFAIL" {
		t.Fatalf("third query = %q, want SERVFAIL", got)
	}
}

func TestBlockedPosture(t *testing.T) {
	fx := newFixture(t, policy.Config{NoNetwork: true, AllowLocalhost: true}, zoneWithExtras(), nil)
	for name, want := range map[string]string{
		"allowed.test.": "REFUSED",
		"localhost.":    "NOERROR A=127.0.0.1",
	} {
		if got := show(fx.f.Answer(context.Background(), query(name, dns.TypeA))); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if q := fx.z.questions(); len(q) != 0 {
		t.Errorf("upstream asked %q under --no-network", q)
	}
}

func TestAuditAnswersButRecords(t *testing.T) {
	fx := newFixture(t, policy.Config{Audit: true, AllowDomains: []string{"allowed.test"}}, zoneWithExtras(), nil)
	if got := show(fx.f.Answer(context.Background(), query("denied.test.", dns.TypeA))); got != "NOERROR A=198.51.100.1" {
		t.Fatalf("audit answer = %q", got)
	}
	// Always-denied stays denied under --audit.
	if got := show(fx.f.Answer(context.Background(), query("meta.allowed.test.", dns.TypeA))); got != "NOERROR A=203.0.113.11" {
		t.Fatalf("audit metadata answer = %q", got)
	}
	var audited bool
	for _, d := range fx.rec.ds {
		audited = audited || d.Audited && d.Host == "denied.test"
	}
	if !audited {
		t.Fatalf("no audited decision recorded: %v", fx.rec.ds)
	}
}

func TestDecisionPorts(t *testing.T) {
	got := DecisionPorts(policy.Config{
		AllowDomains: []string{"a.test:8443", "b.test", "c.test:443"},
		Allow:        []string{"d.test:9000", "10.0.0.0/8:22"},
		DenyDomains:  []string{"e.test:25"},
		AllowCIDRs:   []string{"10.0.0.1:7000"},
	})
	want := []uint16{443, 80, 8443, 9000, 25}
	if !slices.Equal(got, want) {
		t.Fatalf("DecisionPorts = %v, want %v", got, want)
	}
}

func TestParseResolvConf(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"nameserver 10.0.0.2\nnameserver ::1\nsearch x\n", "10.0.0.2:53 [::1]:53"},
		{"# nothing\n", "127.0.0.1:53"},
		{"nameserver 1.1.1.1\nnameserver 1.0.0.1\nnameserver 8.8.8.8\nnameserver 8.8.4.4\n", "1.1.1.1:53 1.0.0.1:53 8.8.8.8:53"},
		{"nameserver bogus\nnameserver 192.0.2.1\n", "192.0.2.1:53"},
	} {
		got, err := ParseResolvConf(strings.NewReader(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("%q: %q, want %q", tt.in, s, tt.want)
		}
	}
}

func TestLearnedBounded(t *testing.T) {
	l := NewLearned(2)
	now := time.Unix(0, 0)
	l.Record("a.test", netip.MustParseAddr("192.0.2.1"), time.Second, now)
	l.Record("b.test", netip.MustParseAddr("192.0.2.2"), time.Minute, now)
	l.Record("c.test", netip.MustParseAddr("192.0.2.3"), time.Minute, now)
	if l.Len() != 2 {
		t.Fatalf("len = %d", l.Len())
	}
	if _, ok := l.Lookup(netip.MustParseAddr("192.0.2.3"), now); ok {
		t.Fatal("recorded past the bound with every entry live")
	}
	// Once the first entry expires (after the 10s floor), there is room.
	later := now.Add(11 * time.Second)
	l.Record("c.test", netip.MustParseAddr("192.0.2.3"), time.Minute, later)
	if name, ok := l.Lookup(netip.MustParseAddr("::ffff:192.0.2.3"), later); !ok || name != "c.test" {
		t.Fatalf("lookup = %q %v", name, ok)
	}
	if _, ok := l.Lookup(netip.MustParseAddr("192.0.2.1"), later); ok {
		t.Fatal("expired entry found")
	}
}

// serveFilter runs f on fresh UDP and TCP sockets on loopback and returns
// their shared address.
func serveFilter(t *testing.T, f *Filter) string {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	for range 20 {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		l = nil
	}
	if l == nil {
		t.Fatal("no port free for both UDP and TCP")
	}
	errs := make(chan error, 2)
	go func() { errs <- f.ServePacket(pc) }()
	go func() { errs <- f.Serve(l) }()
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	return pc.LocalAddr().String()
}

// upstreamServer runs a real name server for z on loopback, UDP and TCP,
// truncating over UDP as a real one does.
func upstreamServer(t *testing.T, z *zone) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		r := z.answer(q)
		if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
			size := dns.MinMsgSize
			if opt := q.IsEdns0(); opt != nil {
				size = int(opt.UDPSize())
				r.SetEdns0(opt.UDPSize(), false)
			}
			r.Truncate(size)
		}
		w.WriteMsg(r)
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Skipf("cannot listen on TCP at the UDP port: %v", err)
	}
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: l, Handler: h}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	t.Cleanup(func() { us.Shutdown(); ts.Shutdown() })
	return pc.LocalAddr().String()
}

// TestHundredRecords: a 100-record answer reaches the client whole over
// TCP, and truncated (TC set) over UDP, so that its resolver retries over
// TCP; the forwarder itself goes through the same dance upstream.
func TestHundredRecords(t *testing.T) {
	z := newZone()
	for i := range 100 {
		rr, _ := dns.NewRR(fmt.Sprintf("big.allowed.test. 300 IN A 198.51.%d.%d", 100+i/50, i%50+1))
		z.add(rr)
	}
	pol, err := policy.New(policy.Config{AllowDomains: []string{"allowed.test"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Policy: pol, Upstream: &Forwarder{Servers: []string{upstreamServer(t, z)}, Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveFilter(t, f)
	for _, tt := range []struct {
		name    string
		net     string
		edns    uint16
		records int
		tc      bool
	}{
		{"udp plain", "udp", 0, -1, true},
		{"udp edns 4096", "udp", 4096, -1, true},
		{"tcp", "tcp", 0, 100, false},
		{"tcp edns", "tcp", 1232, 100, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := query("big.allowed.test.", dns.TypeA)
			if tt.edns > 0 {
				q.SetEdns0(tt.edns, false)
			}
			c := &dns.Client{Net: tt.net, Timeout: 5 * time.Second, UDPSize: tt.edns}
			r, _, err := c.Exchange(q, addr)
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated != tt.tc {
				t.Errorf("TC = %v, want %v", r.Truncated, tt.tc)
			}
			if tt.records >= 0 && len(r.Answer) != tt.records {
				t.Errorf("%d records, want %d", len(r.Answer), tt.records)
			}
			r.Compress = true
			wire, _ := r.Pack()
			limit := 512
			if tt.edns > 0 {
				limit = serverUDPSize
			}
			if tt.net == "udp" && len(wire) > limit {
				t.Errorf("UDP answer of %d bytes exceeds %d", len(wire), limit)
			}
			if tt.edns > 0 {
				opt := r.IsEdns0()
				if opt == nil || opt.UDPSize() != serverUDPSize {
					t.Errorf("answer OPT = %v, want one advertising %d", opt, serverUDPSize)
				}
			}
		})
	}
}

// TestServerRawInput sends raw datagrams that are not well-formed queries:
// garbage, a truncated header, a response, an oversized query, an update.
// Each gets FORMERR, NOTIMP or nothing, and the server keeps answering.
func TestServerRawInput(t *testing.T) {
	fx := newFixture(t, policy.Config{AllowDomains: []string{"allowed.test"}}, zoneWithExtras(), nil)
	addr := serveFilter(t, fx.f)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pack := func(m *dns.Msg, id uint16) []byte {
		m.Id = id
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const probeID = 0x1234
	resp := query("allowed.test.", dns.TypeA)
	resp.Response = true
	upd := query("allowed.test.", dns.TypeA)
	upd.Opcode = dns.OpcodeUpdate
	twoQ := query("allowed.test.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, twoQ.Question[0])
	valid := pack(query("allowed.test.", dns.TypeA), probeID)
	huge := append(append([]byte{}, valid...), make([]byte, 9000)...)
	badCount := append([]byte{}, valid...)
	badCount[5] = 200 // QDCOUNT 200 with one question present
	for i, tt := range []struct {
		name string
		in   []byte
		want string // "" = no reply
	}{
		{"garbage", []byte("\x12\x34\x01\x00\x00\x01garbage"), "FORMERR"},
		{"short header", []byte{0x12, 0x34, 3}, ""},
		{"response", pack(resp, probeID), ""},
		{"update", pack(upd, probeID), "NOTIMP"},
		{"two questions", pack(twoQ, probeID), "FORMERR"},
		{"qdcount lies", badCount, "FORMERR"},
		// Read truncated to the 4096-byte buffer; miekg/dns ignores
		// bytes after the message, so the question in it is answered.
		{"huge", huge, "NOERROR"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := conn.Write(tt.in); err != nil {
				t.Fatal(err)
			}
			// Replies may come in any order (one goroutine per query):
			// read until the probe's reply (if one is due) and the reply
			// to a valid query sent after it have both arrived.
			check := uint16(0x4000 + i)
			if _, err := conn.Write(pack(query("allowed.test.", dns.TypeA), check)); err != nil {
				t.Fatal(err)
			}
			gotProbe, gotCheck := "", false
			buf := make([]byte, 65536)
			for range 10 {
				if gotCheck && (tt.want == "" || gotProbe != "") {
					break
				}
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("server stopped answering: %v", err)
				}
				if n < 4 {
					t.Fatalf("short reply %x", buf[:n])
				}
				id := uint16(buf[0])<<8 | uint16(buf[1])
				switch id {
				case check:
					gotCheck = true
				case probeID:
					gotProbe = dns.RcodeToString[int(buf[3]&0xF)]
				default:
					t.Fatalf("reply with unexpected id %#x", id)
				}
			}
			if gotProbe != tt.want {
				t.Fatalf("probe reply %q, want %q", gotProbe, tt.want)
			}
		})
	}
}

func TestCloseBeforeServe(t *testing.T) {
	pol, _ := policy.New(policy.Config{NoNetwork: true})
	f, err := New(Config{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ServePacket(pc); err != nil {
		t.Fatalf("ServePacket after Close = %v", err)
	}
}
