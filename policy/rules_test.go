package policy

import (
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in    string
		kind  RuleKind
		allow bool
		want  string // canonical text; "" when an error is expected
		err   string // substring of the error
	}{
		{in: "example.com", want: "example.com"},
		{in: ".example.com", want: "example.com"},
		{in: "Example.COM.", want: "example.com"},
		{in: "*.example.com", want: "*.example.com"},
		{in: "*.Example.com.", want: "*.example.com"},
		{in: "api.example.com:443", want: "api.example.com:443"},
		{in: "*.example.com:8443", want: "*.example.com:8443"},
		{in: "1.2.3.4", want: "1.2.3.4"},
		{in: "1.2.3.4:80", want: "1.2.3.4:80"},
		{in: "0x7f.1", want: "127.0.0.1"},
		{in: "[2001:db8::1]", want: "2001:db8::1"},
		{in: "2001:db8::1", want: "2001:db8::1"},
		{in: "2001:DB8:0:0::1", want: "2001:db8::1"},
		{in: "[2001:db8::1]:8080", want: "[2001:db8::1]:8080"},
		{in: "[::1]:8080", want: "[::1]:8080"},
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "10.0.0.0/8:443", want: "10.0.0.0/8:443"},
		{in: "fd00::/8", want: "fd00::/8"},
		{in: "[fd00::/8]:443", want: "[fd00::/8]:443"},
		{in: "::ffff:10.0.0.0/104", want: "10.0.0.0/8"},
		{in: "::ffff:1.2.3.4", want: "1.2.3.4"},
		{in: "localhost", want: "localhost"},
		{in: "_dmarc.example.com", want: "_dmarc.example.com"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		// 25 three-byte runes: 75 bytes of UTF-8, but a 27-byte A-label.
		{in: strings.Repeat("例", 25) + ".example", want: "xn--fsqaaaaaaaaaaaaaaaaaaaaaaaa.example"},
		{in: "faß.de", want: "xn--fa-hia.de"},
		{in: "github.io", allow: true, want: "github.io"}, // private section: allowed
		{in: "example.test", allow: true, want: "example.test"},
		{in: "*", want: "*"},
		{in: "com", want: "com"},         // deny lists may name public suffixes
		{in: "*.co.uk", want: "*.co.uk"}, // likewise

		{in: "", err: "empty rule"},
		{in: "*", allow: true, err: "deny lists only"},
		{in: "https://example.com/path", err: `give the host only, as "example.com"`},
		{in: "http://user:pw@example.com:8080/", err: `give the host only, as "example.com:8080"`},
		{in: "example.com/path", err: "give the host only"},
		{in: "ex*ample.com", err: "whole leading label"},
		{in: "*example.com", err: "whole leading label"},
		{in: "a.*.example.com", err: "whole leading label"},
		{in: "*.*.example.com", err: "whole leading label"},
		{in: "example.*", err: "whole leading label"},
		{in: "**.example.com", err: "whole leading label"},
		{in: "*.", err: "empty host"},
		{in: "..example.com", err: "empty label"},
		{in: "a..example.com", err: "empty label"},
		{in: "example.com..", err: "two dots"},
		{in: "example.com:0", err: "port"},
		{in: "example.com:65536", err: "port"},
		{in: "example.com:080", err: "port"},
		{in: "example.com:+80", err: "port"},
		{in: "example.com:-1", err: "port"},
		{in: "example.com:", err: "empty port"},
		{in: "example.com:４４３", err: "port"},
		{in: "example.com: 443", err: "port"},
		{in: "[::1]:", err: "empty port"},
		{in: "[::1]x", err: "after ']'"},
		{in: "[::1", err: "unbalanced"},
		{in: "[1.2.3.4]", err: "only IPv6"},
		{in: "fe80::1%eth0", err: "zones"},
		{in: "10.0.0.1/8", err: "did you mean 10.0.0.0/8?"},
		{in: "fd00::1/8", err: "did you mean fd00::/8?"},
		{in: "10.0.0.0/33", err: "prefix length"},
		{in: "10.0.0.0/-1", err: "prefix length"},
		{in: "10.0.0.0/08", err: "prefix length"},
		{in: "256.0.0.0/8", err: "not an IP address"},
		{in: "*.10.0.0.1", err: "not an address"},
		{in: "256.1.1.1", err: "not an IPv4 address"},
		{in: "1.2.3.4.5", err: "not an IPv4 address"},
		{in: "exa mple.com", err: "cannot hold"},
		{in: "exa\x00mple.com", err: "cannot hold"},
		{in: "example.com\n", err: "cannot hold"},
		{in: "exa%2ample.com", err: "cannot hold"},
		{in: "a@b.com", err: "cannot hold"},
		{in: "a\\b.com", err: "cannot hold"},
		{in: "a／b.com", err: "cannot hold"},
		{in: "\xff.com", err: "UTF-8"},
		{in: strings.Repeat("a", 64) + ".com", err: "label of 64 bytes"},
		{in: strings.Repeat("a.", 127) + "com", err: "over the limit of 253"},
		{in: "xn--a.com", err: "international"},
		{in: "com", allow: true, err: "public suffix"},
		{in: "COM.", allow: true, err: "public suffix"},
		{in: "*.com", allow: true, err: "public suffix"},
		{in: "co.uk", allow: true, err: "public suffix"},
		{in: "*.co.uk", allow: true, err: "public suffix"},
		{in: ".co.uk", allow: true, err: "public suffix"},
		{in: "example.com", kind: AddrRule, allow: true, err: "use --allow-domain example.com"},
		{in: "10.0.0.0/8", kind: NameRule, allow: true, err: "use --allow-cidr 10.0.0.0/8"},
		{in: "1.2.3.4", kind: NameRule, err: "use --deny-cidr 1.2.3.4"},
		{in: "2130706433", kind: NameRule, allow: true, err: "use --allow-cidr 127.0.0.1"},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in, tt.kind, tt.allow)
		if tt.err != "" {
			if err == nil {
				t.Errorf("ParseRule(%q, allow=%v) = %q, want error containing %q", tt.in, tt.allow, r.Text, tt.err)
			} else if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRule(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
			} else if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseRule(%q) error spans lines: %q", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRule(%q) error: %v", tt.in, err)
			continue
		}
		if r.Text != tt.want {
			t.Errorf("ParseRule(%q).Text = %q, want %q", tt.in, r.Text, tt.want)
		}
		// The canonical form parses to itself.
		r2, err := ParseRule(r.Text, AnyRule, false)
		if err != nil || r2.Text != r.Text {
			t.Errorf("canonical %q reparsed to %q, %v", r.Text, r2.Text, err)
		}
	}
}

func TestNewErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{AllowDomains: []string{"https://x.example/"}}, `--allow-domain "https://x.example/"`},
		{Config{AllowCIDRs: []string{"10.0.0.1/8"}}, `--allow-cidr "10.0.0.1/8": range has host bits set; did you mean 10.0.0.0/8?`},
		{Config{Deny: []string{"a..b"}}, `deny "a..b"`},
		{Config{Network: "open", AllowDomains: []string{"example.com"}}, "--network=open"},
		{Config{Network: "open", NoNetwork: true}, "--no-network"},
		{Config{Network: "open", AllowLocalhost: true}, "--allow-localhost"},
		{Config{Network: "open", Profile: true}, "profile"},
		{Config{Network: "blocked", AllowDomains: []string{"example.com"}}, "--network=blocked"},
		{Config{Network: "closed"}, `--network="closed"`},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) error = %v, want it to contain %q", tt.cfg, err, tt.want)
		}
	}
}

func TestPosture(t *testing.T) {
	tests := []struct {
		cfg  Config
		want Posture
	}{
		{Config{}, PostureNone},
		{Config{NoNetwork: true}, PostureBlocked},
		{Config{NoNetwork: true, AllowLocalhost: true}, PostureBlocked},
		{Config{AllowLocalhost: true}, PostureAllowlist},
		{Config{AllowDomains: []string{"example.com"}}, PostureAllowlist},
		{Config{NoNetwork: true, AllowDomains: []string{"example.com"}}, PostureAllowlist},
		{Config{Profile: true}, PostureAllowlist},
		{Config{DenyDomains: []string{"example.com"}}, PostureOpen},
		{Config{NoNetwork: true, DenyDomains: []string{"example.com"}}, PostureBlocked},
		{Config{Network: "open", DenyCIDRs: []string{"10.0.0.0/8"}}, PostureOpen},
		{Config{Network: "allowlist"}, PostureAllowlist},
		{Config{Network: "blocked", AllowLocalhost: true}, PostureBlocked},
	}
	for _, tt := range tests {
		p, err := New(tt.cfg)
		if err != nil {
			t.Errorf("New(%+v): %v", tt.cfg, err)
			continue
		}
		if p.Posture() != tt.want {
			t.Errorf("New(%+v).Posture() = %v, want %v", tt.cfg, p.Posture(), tt.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		allow []string
		warn  bool
	}{
		{[]string{"169.254.169.254"}, true},
		{[]string{"169.254.0.0/16"}, true},
		{[]string{"169.254.1.0/24"}, true},
		{[]string{"metadata.google.internal"}, true},
		{[]string{"x.metadata"}, true},
		{[]string{"fd00:ec2::254"}, true},
		{[]string{"0.0.0.0/8"}, true},
		{[]string{"::"}, true},
		{[]string{"169.254.169.254:80"}, true},
		{[]string{"169.0.0.0/8"}, false},
		{[]string{"example.com"}, false},
		{[]string{"10.0.0.0/8"}, false},
		{[]string{"notmetadata"}, false},
	}
	for _, tt := range tests {
		p, err := New(Config{Allow: tt.allow})
		if err != nil {
			t.Fatalf("New(%v): %v", tt.allow, err)
		}
		if got := len(p.Warnings()) > 0; got != tt.warn {
			t.Errorf("New(allow %v) warnings = %q, want warning: %v", tt.allow, p.Warnings(), tt.warn)
		}
	}
}

func TestPortParsing(t *testing.T) {
	for _, s := range []string{"", "0", "00", "01", "65536", "99999", "+1", "-1", "1 ", " 1", "0x50", "１", "123456"} {
		if p, err := ParsePort(s); err == nil {
			t.Errorf("ParsePort(%q) = %d, want error", s, p)
		}
	}
	for s, want := range map[string]uint16{"1": 1, "80": 80, "443": 443, "65535": 65535} {
		if p, err := ParsePort(s); err != nil || p != want {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", s, p, err, want)
		}
	}
}
