package dnsfilter

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/hermetic-dev/hermetic/policy"
)

// hostileUpstream answers every question with the name's addresses and
// addresses that must never reach the client.
type hostileUpstream struct{ asked []string }

func (h *hostileUpstream) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	h.asked = append(h.asked, q.Question[0].Name)
	r := new(dns.Msg)
	r.SetReply(q)
	name := q.Question[0].Name
	for _, s := range []string{
		name + " 60 IN A 203.0.113.10",
		name + " 60 IN A 10.0.0.1",
		name + " 60 IN A 169.254.169.254",
		name + " 60 IN AAAA ::ffff:10.0.0.1",
		name + " 60 IN AAAA fd00::1",
		name + " 60 IN AAAA 64:ff9b::a9fe:a9fe",
		name + " 60 IN AAAA 2001:db8::10",
		name + " 60 IN HTTPS 1 . ipv4hint=10.0.0.1",
		"other.test. 60 IN A 198.51.100.1",
	} {
		if rr, err := dns.NewRR(s); err == nil {
			r.Answer = append(r.Answer, rr)
		}
	}
	return r, nil
}

// FuzzAnswer: whatever the query, the filter never panics, answers with a
// message that packs, asks upstream only about allowed names, and never
// hands out an address the policy denies or an SVCB/HTTPS record.
func FuzzAnswer(f *testing.F) {
	for _, s := range []struct {
		name  string
		qtype uint16
	}{
		{"allowed.test.", dns.TypeA}, {"a.allowed.test.", dns.TypeAAAA}, {"denied.test.", dns.TypeA},
		{"allowed.test.evil.", dns.TypeA}, {"localhost.", dns.TypeA}, {"allowed.test.", dns.TypeHTTPS},
		{"allowed.test\\000.", dns.TypeA}, {"169.254.169.254.", dns.TypeA}, {"allowed.test.", dns.TypeANY},
	} {
		m := new(dns.Msg)
		m.SetQuestion(s.name, s.qtype)
		m.SetEdns0(4096, true)
		b, err := m.Pack()
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req dns.Msg
		if req.Unpack(data) != nil {
			return
		}
		pol, err := policy.New(policy.Config{AllowDomains: []string{"allowed.test"}})
		if err != nil {
			t.Fatal(err)
		}
		up := &hostileUpstream{}
		flt, err := New(Config{Policy: pol, Upstream: up})
		if err != nil {
			t.Fatal(err)
		}
		resp := flt.Answer(context.Background(), &req)
		for _, n := range up.asked {
			if n != "allowed.test." && !strings.HasSuffix(n, ".allowed.test.") {
				t.Fatalf("upstream asked about %q", n)
			}
		}
		if resp == nil {
			if !req.Response {
				t.Fatal("no answer to a query")
			}
			return
		}
		resp.Truncate(512)
		if _, err := resp.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, resp)
		}
		for _, rr := range append(append(resp.Answer, resp.Ns...), resp.Extra...) {
			var a netip.Addr
			switch rr := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(rr.A)
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(rr.AAAA)
			case *dns.SVCB, *dns.HTTPS:
				t.Fatalf("SVCB/HTTPS record handed out: %v", rr)
			default:
				continue
			}
			a = a.Unmap()
			if a.IsLoopback() && strings.HasSuffix(strings.ToLower(rr.Header().Name), "localhost.") {
				continue
			}
			if a != netip.MustParseAddr("203.0.113.10") && a != netip.MustParseAddr("2001:db8::10") {
				t.Fatalf("handed out %s for %s", a, rr.Header().Name)
			}
		}
	})
}
