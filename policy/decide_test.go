package policy

import (
	"net/netip"
	"testing"
	"time"
)

type decideCase struct {
	name     string
	cfg      Config
	host     string
	port     uint16
	resolved string // optional: the address the name resolves to (step 5)
	verdict  Verdict
	reason   Reason
	rule     string // checked when not empty
}

func runDecideCases(t *testing.T, tests []decideCase) {
	t.Helper()
	for _, tt := range tests {
		p, err := New(tt.cfg)
		if err != nil {
			t.Errorf("%s: New: %v", tt.name, err)
			continue
		}
		port := tt.port
		if port == 0 {
			port = 443
		}
		d := p.Decide(tt.host, port)
		if tt.resolved != "" {
			if !d.Allowed() {
				t.Errorf("%s: Decide(%q) = %v before resolution; want it allowed so step 5 runs", tt.name, tt.host, d)
				continue
			}
			d = p.CheckAddr(d, netip.MustParseAddr(tt.resolved))
		}
		if d.Verdict != tt.verdict || d.Reason != tt.reason || (tt.rule != "" && d.Rule != tt.rule) {
			t.Errorf("%s: Decide(%q, %d) resolved=%q = %v (hint %q); want %v reason=%s rule=%s",
				tt.name, tt.host, port, tt.resolved, d, d.Hint, tt.verdict, tt.reason, tt.rule)
		}
		if !d.Allowed() && d.Hint == "" {
			t.Errorf("%s: denial of %q carries no hint", tt.name, tt.host)
		}
	}
}

func allowCfg(rules ...string) Config { return Config{Allow: rules} }

func TestDecide(t *testing.T) {
	self := Config{Allow: []string{"127.0.0.0/8"}, Self: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8123")}}
	runDecideCases(t, []decideCase{
		// Dot-anchored suffixes.
		{name: "apex", cfg: allowCfg("example.com"), host: "example.com", verdict: Allow, reason: ReasonAllowlisted, rule: "example.com"},
		{name: "sub", cfg: allowCfg("example.com"), host: "a.b.example.com", verdict: Allow, reason: ReasonAllowlisted, rule: "example.com"},
		{name: "not a suffix", cfg: allowCfg("example.com"), host: "notexample.com", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "attacker suffix", cfg: allowCfg("example.com"), host: "example.com.evil.test", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "case and dot", cfg: allowCfg("example.com"), host: "API.Example.COM.", verdict: Allow, reason: ReasonAllowlisted},
		{name: "two dots", cfg: allowCfg("example.com"), host: "example.com..", verdict: Deny, reason: ReasonInvalidHost},
		{name: "leading dot", cfg: allowCfg("example.com"), host: ".example.com", verdict: Deny, reason: ReasonInvalidHost},
		{name: "wildcard apex", cfg: allowCfg("*.example.com"), host: "example.com", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "wildcard deep", cfg: allowCfg("*.example.com"), host: "a.b.c.example.com", verdict: Allow, reason: ReasonAllowlisted, rule: "*.example.com"},
		{name: "port rule right", cfg: allowCfg("api.example.com:443"), host: "api.example.com", port: 443, verdict: Allow, reason: ReasonAllowlisted},
		{name: "port rule wrong", cfg: allowCfg("api.example.com:443"), host: "api.example.com", port: 80, verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "specific port then any", cfg: allowCfg("a.example.com:22", "example.com"), host: "a.example.com", port: 80, verdict: Allow, reason: ReasonAllowlisted, rule: "example.com"},
		{name: "homoglyph", cfg: allowCfg("example.com"), host: "exаmple.com", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "fullwidth", cfg: allowCfg("example.com"), host: "ｅｘａｍｐｌｅ.com", verdict: Allow, reason: ReasonAllowlisted},
		{name: "ideographic dots", cfg: allowCfg("example.com"), host: "api。example。com", verdict: Allow, reason: ReasonAllowlisted},
		{name: "NUL", cfg: allowCfg("example.com"), host: "example.com\x00.evil.test", verdict: Deny, reason: ReasonInvalidHost},
		{name: "NUL suffix", cfg: allowCfg("example.com"), host: "evil.test\x00example.com", verdict: Deny, reason: ReasonInvalidHost},
		{name: "percent", cfg: allowCfg("example.com"), host: "evil.test%2eexample.com", verdict: Deny, reason: ReasonInvalidHost},
		{name: "userinfo", cfg: allowCfg("example.com"), host: "example.com@evil.test", verdict: Deny, reason: ReasonInvalidHost},
		{name: "not utf8", cfg: allowCfg("example.com"), host: "\xffexample.com", verdict: Deny, reason: ReasonInvalidHost},
		// Addresses.
		{name: "address rule never allows a name", cfg: allowCfg("93.184.216.34"), host: "example.com", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "cidr", cfg: allowCfg("203.0.113.0/24"), host: "203.0.113.7", verdict: Allow, reason: ReasonAllowlisted, rule: "203.0.113.0/24"},
		{name: "cidr inet_aton", cfg: allowCfg("203.0.113.0/24"), host: "3405803783", verdict: Allow, reason: ReasonAllowlisted},
		{name: "cidr outside", cfg: allowCfg("203.0.113.0/24"), host: "203.0.114.7", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "v6 rule", cfg: allowCfg("2001:db8::/32"), host: "[2001:DB8::7]", verdict: Allow, reason: ReasonAllowlisted},
		{name: "mapped is v4", cfg: allowCfg("203.0.113.0/24"), host: "[::ffff:203.0.113.9]", verdict: Allow, reason: ReasonAllowlisted},
		{name: "zone", cfg: allowCfg("fe80::/10"), host: "[fe80::1%25eth0]", verdict: Deny, reason: ReasonInvalidHost},
		// Always denied.
		{name: "metadata allowlisted", cfg: allowCfg("169.254.169.254"), host: "169.254.169.254", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata decimal", cfg: Config{Network: "open"}, host: "2852039166", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata hex", cfg: Config{Network: "open"}, host: "0xa9fea9fe.", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata octal", cfg: Config{Network: "open"}, host: "0251.0376.0251.0376", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata fullwidth", cfg: Config{Network: "open"}, host: "１６９.２５４.１６９.２５４", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata mapped", cfg: Config{Network: "open"}, host: "[::ffff:a9fe:a9fe]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata nat64", cfg: Config{Network: "open"}, host: "[64:ff9b::a9fe:a9fe]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata 6to4", cfg: Config{Network: "open"}, host: "[2002:a9fe:a9fe::1]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata teredo", cfg: Config{Network: "open"}, host: "[2001:0:4136:e378:8000:63bf:5601:5601]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata compat", cfg: Config{Network: "open"}, host: "[::169.254.169.254]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata name", cfg: allowCfg("google.internal"), host: "METADATA.google.internal.", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata sub", cfg: Config{Network: "open"}, host: "a.metadata.google.internal", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata bare", cfg: Config{Network: "open"}, host: "x.metadata", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "notmetadata", cfg: Config{Network: "open"}, host: "notmetadata", verdict: Allow, reason: ReasonOpen},
		{name: "ecs", cfg: Config{Network: "open"}, host: "169.254.170.2", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "aws v6", cfg: Config{Network: "open"}, host: "fd00:ec2::254", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "link-local neighbour", cfg: Config{Network: "open"}, host: "169.254.169.253", verdict: Deny, reason: ReasonLinkLocal},
		{name: "alibaba neighbour", cfg: Config{Network: "open"}, host: "100.100.100.201", verdict: Allow, reason: ReasonOpen},
		{name: "v6 link-local", cfg: Config{Network: "open"}, host: "fe80::1", verdict: Deny, reason: ReasonLinkLocal},
		{name: "unspecified", cfg: Config{Network: "open"}, host: "0.0.0.0", verdict: Deny, reason: ReasonUnspecified},
		{name: "unspecified short", cfg: Config{Network: "open"}, host: "0", verdict: Deny, reason: ReasonUnspecified},
		{name: "unspecified v6", cfg: Config{Network: "open"}, host: "::", verdict: Deny, reason: ReasonUnspecified},
		{name: "self", cfg: self, host: "127.0.0.1", port: 8123, verdict: Deny, reason: ReasonSelf},
		{name: "self other port", cfg: self, host: "127.0.0.1", port: 8124, verdict: Allow, reason: ReasonAllowlisted},
		{name: "self spelled", cfg: self, host: "0x7f000001", port: 8123, verdict: Deny, reason: ReasonSelf},
		// Deny wins.
		{name: "deny sub", cfg: Config{Allow: []string{"example.com"}, Deny: []string{"secret.example.com"}}, host: "x.secret.example.com", verdict: Deny, reason: ReasonDenylisted, rule: "secret.example.com"},
		{name: "deny star", cfg: Config{Allow: []string{"example.com"}, Deny: []string{"*"}}, host: "example.com", verdict: Deny, reason: ReasonDenylisted, rule: "*"},
		{name: "deny port", cfg: Config{Network: "open", Deny: []string{"example.com:22"}}, host: "example.com", port: 22, verdict: Deny, reason: ReasonDenylisted},
		{name: "deny other port", cfg: Config{Network: "open", Deny: []string{"example.com:22"}}, host: "example.com", port: 443, verdict: Allow, reason: ReasonOpen},
		{name: "deny under blocked", cfg: Config{NoNetwork: true, Deny: []string{"example.com"}}, host: "example.com", verdict: Deny, reason: ReasonDenylisted},
		{name: "deny embedded", cfg: Config{Network: "open", Deny: []string{"10.0.0.0/8"}}, host: "[64:ff9b::a00:1]", verdict: Deny, reason: ReasonDenylisted},
		// Blocked and localhost.
		{name: "blocked", cfg: Config{NoNetwork: true}, host: "example.com", verdict: Deny, reason: ReasonNoNetwork},
		{name: "blocked loopback", cfg: Config{NoNetwork: true}, host: "127.0.0.1", verdict: Deny, reason: ReasonNoNetwork},
		{name: "blocked localhost", cfg: Config{NoNetwork: true, AllowLocalhost: true}, host: "127.0.0.2", verdict: Allow, reason: ReasonLocalhost},
		{name: "blocked localhost name", cfg: Config{NoNetwork: true, AllowLocalhost: true}, host: "localhost", resolved: "127.0.0.1", verdict: Allow, reason: ReasonLocalhost},
		{name: "blocked localhost name to public", cfg: Config{NoNetwork: true, AllowLocalhost: true}, host: "a.localhost", resolved: "203.0.113.1", verdict: Deny, reason: ReasonNoNetwork},
		{name: "allow-localhost alone", cfg: Config{AllowLocalhost: true}, host: "::1", verdict: Allow, reason: ReasonLocalhost},
		// A localhost name is loopback only, whatever it resolves to.
		{name: "allow-localhost name to public", cfg: Config{AllowLocalhost: true}, host: "x.localhost", resolved: "198.51.100.7", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "allow-localhost name to private", cfg: Config{AllowLocalhost: true}, host: "x.localhost", resolved: "10.0.0.1", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "allow-localhost name to loopback", cfg: Config{AllowLocalhost: true}, host: "x.localhost", resolved: "::1", verdict: Allow, reason: ReasonLocalhost},
		{name: "metadata nat64 local-use", cfg: Config{Network: "open"}, host: "[64:ff9b:1::a9fe:a9fe]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "metadata ipv4-translated", cfg: Config{Network: "open"}, host: "[::ffff:0:a9fe:a9fe]", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "allow-localhost not embedded", cfg: Config{AllowLocalhost: true}, host: "[::127.0.0.1]", verdict: Deny, reason: ReasonNotAllowlisted},
		// Step 5.
		{name: "resolves public", cfg: allowCfg("example.com"), host: "example.com", resolved: "93.184.216.34", verdict: Allow, reason: ReasonAllowlisted},
		{name: "resolves private", cfg: allowCfg("example.com"), host: "example.com", resolved: "10.1.2.3", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "resolves private covered", cfg: allowCfg("example.com", "10.0.0.0/8"), host: "example.com", resolved: "10.1.2.3", verdict: Allow, reason: ReasonAllowlisted},
		{name: "resolves cgnat", cfg: allowCfg("example.com"), host: "example.com", resolved: "100.64.0.1", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "resolves ula", cfg: allowCfg("example.com"), host: "example.com", resolved: "fd12::1", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "resolves site-local", cfg: allowCfg("example.com"), host: "example.com", resolved: "fec0::1", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "resolves loopback", cfg: allowCfg("example.com"), host: "example.com", resolved: "127.0.0.1", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "resolves loopback allowed", cfg: Config{Allow: []string{"example.com"}, AllowLocalhost: true}, host: "example.com", resolved: "127.0.0.1", verdict: Allow, reason: ReasonAllowlisted},
		{name: "resolves metadata", cfg: allowCfg("example.com"), host: "example.com", resolved: "169.254.169.254", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "resolves mapped metadata", cfg: allowCfg("example.com"), host: "example.com", resolved: "::ffff:169.254.169.254", verdict: Deny, reason: ReasonCloudMetadata},
		{name: "resolves denied", cfg: Config{Allow: []string{"example.com"}, Deny: []string{"203.0.113.0/24"}}, host: "example.com", resolved: "203.0.113.5", verdict: Deny, reason: ReasonDenylisted},
		{name: "resolves nat64 internal", cfg: allowCfg("example.com"), host: "example.com", resolved: "64:ff9b::a00:1", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "open resolves private", cfg: Config{Network: "open"}, host: "example.com", resolved: "10.1.2.3", verdict: Allow, reason: ReasonOpen},
		{name: "open nat64 internal", cfg: Config{Network: "open"}, host: "[64:ff9b::a00:1]", verdict: Allow, reason: ReasonOpen},
		{name: "nat64 rule alone", cfg: allowCfg("64:ff9b::/96"), host: "[64:ff9b::a00:1]", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "nat64 rule and v4", cfg: allowCfg("64:ff9b::/96", "10.0.0.0/8"), host: "[64:ff9b::a00:1]", verdict: Allow, reason: ReasonAllowlisted},
		{name: "nat64 public", cfg: allowCfg("64:ff9b::/96"), host: "[64:ff9b::cb00:7101]", verdict: Allow, reason: ReasonAllowlisted},
		{name: "compat loopback localhost", cfg: Config{Allow: []string{"::/96"}, AllowLocalhost: true}, host: "[::127.0.0.1]", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "6to4 internal", cfg: allowCfg("2002::/16"), host: "[2002:c0a8:101::1]", verdict: Deny, reason: ReasonPrivateAddress},
		{name: "teredo internal", cfg: allowCfg("2001::/32"), host: "[2001:0:4136:e378:8000:63bf:f5ff:fefe]", verdict: Deny, reason: ReasonPrivateAddress},
	})
}

// learnedFunc is a Learned backed by a function.
type learnedFunc func(netip.Addr) (string, bool)

func (f learnedFunc) Lookup(a netip.Addr, _ time.Time) (string, bool) { return f(a) }

func TestDecideLearned(t *testing.T) {
	learned := learnedFunc(func(a netip.Addr) (string, bool) {
		if a == netip.MustParseAddr("203.0.113.10") {
			return "api.example.com", true
		}
		return "", false
	})
	runDecideCases(t, []decideCase{
		{name: "learned", cfg: Config{Allow: []string{"example.com"}, Learned: learned}, host: "203.0.113.10", verdict: Allow, reason: ReasonAllowlisted, rule: "example.com"},
		{name: "learned other", cfg: Config{Allow: []string{"example.com"}, Learned: learned}, host: "203.0.113.11", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "learned name now denied", cfg: Config{Allow: []string{"example.com"}, Deny: []string{"api.example.com"}, Learned: learned}, host: "203.0.113.10", verdict: Deny, reason: ReasonNotAllowlisted},
		{name: "learned wrong port", cfg: Config{Allow: []string{"example.com:443"}, Learned: learned}, host: "203.0.113.10", port: 80, verdict: Deny, reason: ReasonNotAllowlisted},
	})
}

func TestAuditPermits(t *testing.T) {
	p, err := New(Config{Allow: []string{"example.com"}, Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decide("other.test", 443)
	if d.Allowed() || !p.permits(&d) || !d.Audited {
		t.Errorf("audit: %v audited=%v; want denied, permitted and marked", d, d.Audited)
	}
	m := p.Decide("169.254.169.254", 80)
	if p.permits(&m) {
		t.Errorf("audit let cloud metadata through: %v", m)
	}
}
