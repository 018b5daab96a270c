package policy

import (
	"net/netip"
	"strings"
	"testing"
)

var fuzzHosts = []string{
	"example.com", "EXAMPLE.com.", "example.com..", ".example.com", "a..b", "xn--zca.de", "xn--a", "ß.de",
	"１６９.２５４.１６９.２５４", "169。254。169。254", "0xa9fea9fe.", "2130706433", "0177.0.0.1", "127.1",
	"256.1.1.1", "1.2.3.4.5", "08.0.0.1", "1.2.3.4 x", "[::ffff:169.254.169.254]", "[fe80::1%eth0]",
	"64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "::169.254.169.254", "exa\x00mple.com", "a／b.com", "\xff",
	"metadata", "x.METADATA.", "_dmarc.example.com", "-a.com", "a" + strings.Repeat(".a", 130), "",
}

func FuzzNormalize(f *testing.F) {
	for _, h := range fuzzHosts {
		f.Add(h)
	}
	n := NewNormalizer()
	f.Fuzz(func(t *testing.T, s string) {
		h, err := n.Normalize(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error for %q: %q", s, err)
			}
			return
		}
		if h.IsAddr() == (h.Name != "") {
			t.Fatalf("Normalize(%q) = %+v: want exactly one of Name and Addr", s, h)
		}
		if h.IsAddr() && (h.Addr.Zone() != "" || h.Addr.Is4In6()) {
			t.Fatalf("Normalize(%q) = %v: zone or mapped address survived", s, h.Addr)
		}
		if !h.IsAddr() {
			if len(h.Name) > maxNameLen || checkNameChars(h.Name) != nil || checkLabels(h.Name, true) != nil {
				t.Fatalf("Normalize(%q) = %q: not a valid name", s, h.Name)
			}
		}
		again, err := n.Normalize(h.String())
		if err != nil || again != h {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, h, again, err)
		}
	})
}

func FuzzParseRule(f *testing.F) {
	for _, r := range []string{"example.com", "*.example.com", "*", "10.0.0.0/8:443", "[fd00::/8]:443", "[::1]:8080",
		"https://x/", "10.0.0.1/8", "com", "*.co.uk", "a*b", "example.com:080", "::ffff:10.0.0.0/104", "[1.2.3.4]"} {
		f.Add(r, true)
		f.Add(r, false)
	}
	f.Fuzz(func(t *testing.T, s string, allow bool) {
		r, err := ParseRule(s, AnyRule, allow)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error for %q: %q", s, err)
			}
			return
		}
		if allow && r.Any {
			t.Fatalf("ParseRule(%q) allowed `*`", s)
		}
		r2, err := ParseRule(r.Text, AnyRule, allow)
		if err != nil || r2.Text != r.Text {
			t.Fatalf("canonical %q of %q reparsed to %q, %v", r.Text, s, r2.Text, err)
		}
	})
}

// FuzzDecide checks the invariants that must hold under any policy: an
// always-denied address is never allowed, an invalid host is never allowed,
// and a denied name is never turned into an allowed one by step 5.
func FuzzDecide(f *testing.F) {
	for _, h := range fuzzHosts {
		f.Add(h, uint16(443), "example.com", "*", []byte{169, 254, 169, 254}, false)
		f.Add(h, uint16(80), "169.254.0.0/16", "", []byte{10, 0, 0, 1}, true)
	}
	f.Fuzz(func(t *testing.T, host string, port uint16, allowRule, denyRule string, resolved []byte, open bool) {
		if port == 0 {
			port = 1
		}
		cfgs := []Config{{Network: "open"}, {NoNetwork: true, AllowLocalhost: true}}
		if _, err := ParseRule(allowRule, AnyRule, true); err == nil && !open {
			cfgs = append(cfgs, Config{Allow: []string{allowRule, "0.0.0.0/0", "::/0"}, AllowLocalhost: true})
		}
		if _, err := ParseRule(denyRule, AnyRule, false); err == nil {
			cfgs = append(cfgs, Config{Network: "open", Deny: []string{denyRule}})
		}
		for _, cfg := range cfgs {
			p, err := New(cfg)
			if err != nil {
				t.Fatalf("New(%+v): %v", cfg, err)
			}
			d := p.Decide(host, port)
			h, nerr := p.Normalize(host)
			if nerr != nil && d.Allowed() {
				t.Fatalf("invalid host %q allowed: %v", host, d)
			}
			if nerr == nil && h.IsAddr() && mustDeny(h.Addr) && d.Allowed() {
				t.Fatalf("always-denied %v allowed under %+v: %v", h.Addr, cfg, d)
			}
			if nerr == nil && !h.IsAddr() {
				if _, meta := isMetadataName(h.Name); meta && d.Allowed() {
					t.Fatalf("metadata name %q allowed: %v", h.Name, d)
				}
			}
			a, ok := netip.AddrFromSlice(resolved)
			if !ok {
				continue
			}
			c := p.CheckAddr(d, a)
			if c.Allowed() && (!d.Allowed() || mustDeny(a.Unmap())) {
				t.Fatalf("CheckAddr(%v, %v) = %v", d, a, c)
			}
			if c.Allowed() && c.Reason == ReasonLocalhost && !a.Unmap().IsLoopback() {
				t.Fatalf("localhost decision reached non-loopback %v: %v", a, c)
			}
		}
	})
}

// mustDeny is the always-denied set, including addresses that embed it.
func mustDeny(a netip.Addr) bool {
	if _, _, ok := alwaysDenied(a); ok {
		return true
	}
	if e, ok := embeddedIPv4(a); ok {
		_, _, ok := alwaysDenied(e)
		return ok
	}
	return false
}
