package dnsfilter

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/hermetic-dev/hermetic/policy"
)

// Config is what a Filter is built from.
type Config struct {
	// Policy decides names and the addresses they resolve to. Required.
	Policy *policy.Policy
	// Upstream answers the queries for allowed names; normally a
	// *Forwarder over the host's resolvers. Required unless every name
	// is answered from Static.
	Upstream Exchanger
	// Static holds --resolve answers, by normalised name. They are
	// filtered like forwarded answers, and the names are still decided.
	Static map[string][]netip.Addr
	// Learned, if set, records the addresses handed out for allowed names;
	// give the same table to policy.Config.Learned.
	Learned *Learned
	// Recorder, if set, receives a decision for every question and for
	// every address dropped from an answer.
	Recorder policy.Recorder
	// Ports are the ports a name is decided at: a name is answered when
	// the policy allows it at any of them, so that a rule such as
	// api.example.com:8443 still lets the name resolve. Nil means 443 and
	// 80; see DecisionPorts.
	Ports []uint16
	// Timeout bounds the work on one query; zero means 5 seconds.
	Timeout time.Duration
	// MaxInFlight bounds the queries answered at once; more are answered
	// SERVFAIL at once. Zero means 256.
	MaxInFlight int
	// Now is the clock for decisions and TTLs; nil means time.Now.
	Now func() time.Time
}

// Filter answers DNS queries under a policy. It implements dns.Handler and
// is safe for concurrent use.
type Filter struct {
	cfg   Config
	ports []uint16
	sem   chan struct{}
	srv   servers
}

// New checks cfg and builds a Filter.
func New(cfg Config) (*Filter, error) {
	if cfg.Policy == nil {
		return nil, errors.New("dnsfilter: Config.Policy is required")
	}
	if cfg.Upstream == nil {
		cfg.Upstream = &Forwarder{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ports := cfg.Ports
	if len(ports) == 0 {
		ports = []uint16{443, 80}
	}
	return &Filter{cfg: cfg, ports: slices.Clone(ports), sem: make(chan struct{}, cfg.MaxInFlight)}, nil
}

// DecisionPorts returns the ports at which the filter should decide names
// under c: 443 and 80, and every port a name rule (allow or deny) names.
// Rules that do not parse are skipped; policy.New reports them.
func DecisionPorts(c policy.Config) []uint16 {
	ports := []uint16{443, 80}
	add := func(rules []string, kind policy.RuleKind, allow bool) {
		for _, s := range rules {
			r, err := policy.ParseRule(s, kind, allow)
			if err == nil && r.IsName() && r.Port != 0 && !slices.Contains(ports, r.Port) {
				ports = append(ports, r.Port)
			}
		}
	}
	add(c.AllowDomains, policy.NameRule, true)
	add(c.Allow, policy.AnyRule, true)
	add(c.DenyDomains, policy.NameRule, false)
	add(c.Deny, policy.AnyRule, false)
	return ports
}

// serverUDPSize is the EDNS buffer size the filter advertises and the most
// it sends over UDP: the DNS flag day 2020 value.
const serverUDPSize = 1232

// Answer computes the reply to req. It returns nil when nothing should be
// sent (req is itself a response). The reply is not yet fitted to a
// transport; ServeDNS truncates it for UDP.
func (f *Filter) Answer(ctx context.Context, req *dns.Msg) *dns.Msg {
	if req == nil || req.Response {
		return nil
	}
	resp := new(dns.Msg)
	resp.Id = req.Id
	resp.Response = true
	resp.Opcode = req.Opcode
	resp.RecursionDesired = req.RecursionDesired
	resp.RecursionAvailable = true
	resp.CheckingDisabled = req.CheckingDisabled
	if len(req.Question) > 0 {
		resp.Question = req.Question[:1:1]
	}

	if req.Opcode != dns.OpcodeQuery {
		return rcode(resp, dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 || len(req.Answer) != 0 || len(req.Ns) != 0 {
		return rcode(resp, dns.RcodeFormatError)
	}
	var reqOpt *dns.OPT
	for _, rr := range req.Extra {
		opt, ok := rr.(*dns.OPT)
		if !ok {
			// TSIG, SIG(0) or stray records: nothing a stub sends.
			return rcode(resp, dns.RcodeFormatError)
		}
		if reqOpt != nil || opt.Hdr.Name != "." {
			return rcode(resp, dns.RcodeFormatError)
		}
		reqOpt = opt
	}
	if reqOpt != nil {
		// RFC 6891 §7: a responder that got an OPT answers with one.
		resp.SetEdns0(serverUDPSize, false)
		if reqOpt.Version() != 0 {
			return rcode(resp, dns.RcodeBadVers)
		}
	}

	q := req.Question[0]
	if q.Qclass != dns.ClassINET {
		// Only the Internet class; CHAOS (version.bind) and the rest
		// would only fingerprint the resolver.
		return rcode(resp, dns.RcodeRefused)
	}
	switch {
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		return rcode(resp, dns.RcodeRefused)
	case q.Qtype == dns.TypeOPT || q.Qtype == dns.TypeTSIG || q.Qtype == dns.TypeTKEY:
		return rcode(resp, dns.RcodeFormatError)
	case q.Qtype == dns.TypeANY || q.Qtype >= 128 && q.Qtype <= 255:
		// RFC 8482 lets a resolver decline ANY; meta types are not
		// questions about data.
		return rcode(resp, dns.RcodeNotImplemented)
	}

	name, ok := f.normalize(q.Name)
	if !ok {
		f.record(policy.Decision{Verdict: policy.Deny, Reason: policy.ReasonInvalidHost, Host: q.Name, Port: f.ports[0],
			Hint: "not a valid host name"})
		return prohibited(resp, reqOpt, "invalid host name")
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761 §6.3: loopback, answered here, never sent upstream.
		return f.localhost(resp, q)
	}
	dec, ok := f.decide(name)
	f.record(dec)
	if !ok {
		return prohibited(resp, reqOpt, "hermetic: "+string(dec.Reason))
	}
	if q.Qtype == dns.TypeSVCB || q.Qtype == dns.TypeHTTPS {
		// Their address hints and ECH keys would bypass the address
		// check; an empty answer makes clients fall back to A/AAAA.
		return resp
	}
	if addrs, ok := f.cfg.Static[name]; ok {
		return f.static(resp, q, name, dec, addrs)
	}

	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	default:
		return rcode(resp, dns.RcodeServerFailure)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	up := new(dns.Msg)
	up.SetQuestion(name+".", q.Qtype)
	up.RecursionDesired = true
	up.SetEdns0(upstreamUDPSize, false)
	ur, err := f.cfg.Upstream.Exchange(ctx, up)
	if err != nil {
		return rcode(resp, dns.RcodeServerFailure)
	}
	return f.filter(resp, q, name, dec, ur)
}

func rcode(resp *dns.Msg, code int) *dns.Msg {
	resp.Rcode = code
	return resp
}

// prohibited is REFUSED with an Extended DNS Error saying why, when the
// client speaks EDNS.
func prohibited(resp *dns.Msg, reqOpt *dns.OPT, why string) *dns.Msg {
	resp.Rcode = dns.RcodeRefused
	if reqOpt != nil {
		if opt := resp.IsEdns0(); opt != nil {
			opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited, ExtraText: why})
		}
	}
	return resp
}

// normalize turns a question name into the policy's normalised name. A
// name with escapes (a label holding a dot, NUL or any byte outside
// printable ASCII: miekg/dns writes those as \X or \DDD) is not a host
// name, and neither is one that reads as an address.
func (f *Filter) normalize(qname string) (string, bool) {
	if qname == "." || strings.ContainsRune(qname, '\\') || !strings.HasSuffix(qname, ".") {
		return "", false
	}
	h, err := f.cfg.Policy.Normalize(qname)
	if err != nil || h.IsAddr() || h.Name == "" {
		return "", false
	}
	return h.Name, true
}

// decide returns the first allowing decision for name at the filter's
// ports, or the decision at the first port when none allows it.
func (f *Filter) decide(name string) (policy.Decision, bool) {
	var first policy.Decision
	for i, port := range f.ports {
		d := f.stamp(f.cfg.Policy.Decide(name, port))
		if f.permits(&d) {
			return d, true
		}
		if i == 0 {
			first = d
		}
	}
	return first, false
}

// permits mirrors the policy's rule for --audit: what is not always
// denied goes ahead, marked.
func (f *Filter) permits(d *policy.Decision) bool {
	if d.Allowed() {
		return true
	}
	if f.cfg.Policy.Audit() && !d.Reason.AlwaysDenied() {
		d.Audited = true
		return true
	}
	return false
}

func (f *Filter) stamp(d policy.Decision) policy.Decision {
	d.Component = policy.ComponentDNS
	d.Time = f.cfg.Now()
	return d
}

func (f *Filter) record(d policy.Decision) {
	if f.cfg.Recorder != nil {
		d.Component = policy.ComponentDNS
		if d.Time.IsZero() {
			d.Time = f.cfg.Now()
		}
		f.cfg.Recorder.Record(d)
	}
}

// localhostTTL is the TTL of answers made up locally.
const localhostTTL = 300

func (f *Filter) localhost(resp *dns.Msg, q dns.Question) *dns.Msg {
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: localhostTTL}
	switch q.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: []byte{127, 0, 0, 1}})
	case dns.TypeAAAA:
		hdr.Rrtype = dns.TypeAAAA
		resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: netip.IPv6Loopback().AsSlice()})
	}
	return resp
}

// static answers from the --resolve table; addresses still pass the
// policy's address checks.
func (f *Filter) static(resp *dns.Msg, q dns.Question, name string, dec policy.Decision, addrs []netip.Addr) *dns.Msg {
	for _, a := range addrs {
		a = a.Unmap()
		var rr dns.RR
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: localhostTTL}
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			hdr.Rrtype = dns.TypeA
			rr = &dns.A{Hdr: hdr, A: a.AsSlice()}
		case q.Qtype == dns.TypeAAAA && a.Is6():
			hdr.Rrtype = dns.TypeAAAA
			rr = &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()}
		default:
			continue
		}
		if f.passes(name, dec, a, localhostTTL) {
			resp.Answer = append(resp.Answer, rr)
		}
	}
	return resp
}

// passes checks one answer address (SPEC §3.2 step 5), records a drop, and
// learns an address that passed (step 6).
func (f *Filter) passes(name string, dec policy.Decision, a netip.Addr, ttl uint32) bool {
	checked := f.cfg.Policy.CheckAddr(dec, a)
	if !f.permits(&checked) {
		f.record(checked)
		return false
	}
	if checked.Audited && !dec.Audited {
		f.record(checked)
	}
	if f.cfg.Learned != nil {
		f.cfg.Learned.Record(name, checked.Addr, time.Duration(ttl)*time.Second, f.cfg.Now())
	}
	return true
}

// filter builds the client's answer from the upstream one: only records
// on the chain of names from the question, of the asked type or CNAME,
// addresses checked, TTLs capped; authority keeps its SOA (for negative
// caching); nothing from the additional section (glue would skip the
// checks).
func (f *Filter) filter(resp *dns.Msg, q dns.Question, name string, dec policy.Decision, ur *dns.Msg) *dns.Msg {
	switch ur.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		resp.Rcode = ur.Rcode
	default:
		return rcode(resp, dns.RcodeServerFailure)
	}
	// The chain: the question's name and every CNAME target reached from
	// it. Bounded: each pass adds a name or stops.
	chain := map[string]bool{name + ".": true}
	for range len(ur.Answer) {
		grew := false
		for _, rr := range ur.Answer {
			c, ok := rr.(*dns.CNAME)
			if !ok || c.Hdr.Class != dns.ClassINET || !chain[strings.ToLower(c.Hdr.Name)] {
				continue
			}
			if t := strings.ToLower(c.Target); !chain[t] {
				chain[t] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	for _, rr := range ur.Answer {
		h := rr.Header()
		if h.Class != dns.ClassINET || !chain[strings.ToLower(h.Name)] {
			continue
		}
		capTTL(h)
		switch rr := rr.(type) {
		case *dns.CNAME:
			resp.Answer = append(resp.Answer, rr)
		case *dns.A:
			a, ok := netip.AddrFromSlice(rr.A)
			if q.Qtype == dns.TypeA && ok && a.Unmap().Is4() && f.passes(name, dec, a.Unmap(), h.Ttl) {
				resp.Answer = append(resp.Answer, rr)
			}
		case *dns.AAAA:
			a, ok := netip.AddrFromSlice(rr.AAAA)
			if q.Qtype == dns.TypeAAAA && ok && f.passes(name, dec, a, h.Ttl) {
				resp.Answer = append(resp.Answer, rr)
			}
		case *dns.SVCB, *dns.HTTPS, *dns.DNAME, *dns.RRSIG, *dns.NSEC, *dns.NSEC3:
			// Hints that bypass the address check; DNSSEC records that no
			// longer match a filtered answer; DNAME, whose synthesised
			// CNAME is kept.
		default:
			if h.Rrtype == q.Qtype {
				resp.Answer = append(resp.Answer, rr)
			}
		}
	}
	for _, rr := range ur.Ns {
		if soa, ok := rr.(*dns.SOA); ok && soa.Hdr.Class == dns.ClassINET {
			capTTL(&soa.Hdr)
			resp.Ns = append(resp.Ns, soa)
			break
		}
	}
	// The question as the client asked it (0x20 case and all).
	return resp
}

func capTTL(h *dns.RR_Header) {
	if h.Ttl > uint32(maxTTL/time.Second) {
		h.Ttl = uint32(maxTTL / time.Second)
	}
}
