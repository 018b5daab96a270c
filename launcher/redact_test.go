package launcher

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"http://user:pw@proxy.test:8080/x", "http://REDACTED@proxy.test:8080/x"},
		{"socks5h://tok@127.0.0.1:1080", "socks5h://REDACTED@127.0.0.1:1080"},
		{"HTTPS://a:b@c", "HTTPS://REDACTED@c"},
		{"see http://x:y@h and ftp://p@q", "see http://REDACTED@h and ftp://REDACTED@q"},
		{"Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: REDACTED"},
		{"proxy-authorization=Bearer abc.def", "proxy-authorization=REDACTED"},
		{"Authorization: token123", "Authorization: REDACTED"},
		{"http://host/path?q=a@b", "http://host/path?q=a@b"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, h := range []string{"user:secret@example.com", "a@b@secret@example.com"} {
		if got := redactHost(h); strings.Contains(got, "secret") || !strings.HasSuffix(got, "example.com") {
			t.Errorf("redactHost(%q) = %q", h, got)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"http://u:p@h", "Proxy-Authorization: Basic x", "a@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := redact(s)
		// Redaction is idempotent and never leaves URL credentials.
		if redact(out) != out {
			t.Fatalf("redact not idempotent on %q: %q", s, out)
		}
		if m := userinfoRE().FindString(out); m != "" && !strings.HasSuffix(m, "REDACTED@") {
			t.Fatalf("credentials left in %q: %q", out, m)
		}
	})
}
