package launcher

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermetic-dev/hermetic/policy"
)

func TestRuleCovers(t *testing.T) {
	tests := []struct {
		c, r string
		want bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "api.example.com", true},
		{"example.com", "*.example.com", true},
		{"example.com", "a.b.example.com:443", true},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "*.api.example.com", true},
		{"*.example.com", "example.com", false},
		{"example.com", "notexample.com", false},
		{"example.com", "com.example.com.evil.test", false},
		{"example.com:443", "example.com:443", true},
		{"example.com:443", "example.com", false},
		{"example.com:443", "example.com:80", false},
		{"example.com", "example.com:80", true},
		{"10.0.0.0/8", "10.1.0.0/16", true},
		{"10.0.0.0/8", "10.1.2.3", true},
		{"10.1.0.0/16", "10.0.0.0/8", false},
		{"10.0.0.0/8", "11.0.0.0/8", false},
		{"10.0.0.0/8", "[::ffff:10.0.0.1]", true},
		{"fd00::/8", "fd00:1::/32", true},
		{"fd00::/8", "10.0.0.0/8", false},
		{"10.0.0.0/8:443", "10.0.0.1:443", true},
		{"10.0.0.0/8:443", "10.0.0.1", false},
		{"127.0.0.1", "localhost", false},
		{"localhost", "127.0.0.1", false},
	}
	for _, tt := range tests {
		c, err := policy.ParseRule(tt.c, policy.AnyRule, true)
		if err != nil {
			t.Fatal(err)
		}
		r, err := policy.ParseRule(tt.r, policy.AnyRule, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := ruleCovers(c, r); got != tt.want {
			t.Errorf("ruleCovers(%s, %s) = %v, want %v", tt.c, tt.r, got, tt.want)
		}
	}
}

func TestNarrow(t *testing.T) {
	// An index-like ceiling: a name, a wildcard of another, a deny rule.
	pypi := Settings{Net: policy.Config{Allow: []string{"index.test", "*.files.test"}, Profile: true, Deny: []string{"evil.files.test"}}, Guards: Guards{NoSubprocess: true}}
	blocked := Settings{Net: policy.Config{NoNetwork: true}}
	blockedLocal := Settings{Net: policy.Config{NoNetwork: true, AllowLocalhost: true}}
	open := Settings{Net: policy.Config{Network: "open", DenyDomains: []string{"bad.test"}}}
	none := Settings{}
	fsRoot := Settings{Guards: Guards{FSReadonly: true, FSRoot: "/srv/data"}}

	tests := []struct {
		name    string
		session Settings
		opts    RunOptions
		widen   string // substring of the WideningError, "" for success
	}{
		{"inherit", pypi, RunOptions{}, ""},
		{"tighten to blocked", pypi, RunOptions{Net: &policy.Config{NoNetwork: true}}, ""},
		{"subset", pypi, RunOptions{Net: &policy.Config{Allow: []string{"a.files.test:443"}}}, ""},
		{"wildcard covers", pypi, RunOptions{Net: &policy.Config{AllowDomains: []string{"b.a.files.test"}}}, ""},
		{"new host", pypi, RunOptions{Net: &policy.Config{AllowDomains: []string{"index.test", "example.com"}}}, "does not cover example.com"},
		{"open under allowlist", pypi, RunOptions{Net: &policy.Config{Network: "open"}}, "open posture is wider than the session's allowlist"},
		{"none under allowlist", pypi, RunOptions{Net: &policy.Config{}}, "none posture is wider"},
		{"localhost under allowlist", pypi, RunOptions{Net: &policy.Config{AllowLocalhost: true, Allow: []string{"index.test"}}}, "--allow-localhost"},
		{"audit widens", pypi, RunOptions{Net: &policy.Config{Audit: true, Allow: []string{"index.test"}}}, "--audit"},
		{"allowlist under blocked", blocked, RunOptions{Net: &policy.Config{AllowDomains: []string{"a.test"}}}, "wider than the session's blocked"},
		{"localhost under blocked", blocked, RunOptions{Net: &policy.Config{NoNetwork: true, AllowLocalhost: true}}, "--allow-localhost"},
		{"localhost under blocked+localhost", blockedLocal, RunOptions{Net: &policy.Config{NoNetwork: true, AllowLocalhost: true}}, ""},
		{"anything under open", open, RunOptions{Net: &policy.Config{AllowDomains: []string{"a.test"}, AllowLocalhost: true}}, ""},
		{"none under open", open, RunOptions{Net: &policy.Config{}}, "none posture"},
		{"anything under none", none, RunOptions{Net: &policy.Config{Network: "open"}}, ""},
		{"fs root inside", fsRoot, RunOptions{Guards: Guards{FSRoot: "/srv/data/sub"}}, ""},
		{"fs root outside", fsRoot, RunOptions{Guards: Guards{FSRoot: "/srv"}}, "outside the session's /srv/data"},
		{"fs root sibling", fsRoot, RunOptions{Guards: Guards{FSRoot: "/srv/data2"}}, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSession(tt.session)
			if err != nil {
				t.Fatal(err)
			}
			run, err := s.narrow(tt.opts)
			if tt.widen == "" {
				if err != nil {
					t.Fatalf("narrow: %v", err)
				}
				// The session's guards and deny rules always stay.
				if tt.session.Guards.NoSubprocess && !run.Guards.NoSubprocess {
					t.Error("a guard was removed")
				}
				for _, d := range tt.session.Net.Deny {
					if !strings.Contains(strings.Join(run.Net.Deny, " "), d) {
						t.Errorf("deny rule %s was dropped", d)
					}
				}
				return
			}
			var we *WideningError
			if !errors.As(err, &we) || !strings.Contains(err.Error(), tt.widen) {
				t.Fatalf("narrow error = %v, want a WideningError containing %q", err, tt.widen)
			}
		})
	}
}

func TestNarrowKeepsCeilingDenies(t *testing.T) {
	s, err := NewSession(Settings{Net: policy.Config{AllowDomains: []string{"example.com"}, DenyDomains: []string{"bad.example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.narrow(RunOptions{Net: &policy.Config{AllowDomains: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.New(run.Net)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Decide("bad.example.com", 443); d.Allowed() {
		t.Errorf("the session's deny rule does not apply to the run: %v", d)
	}
}

// TestSessionRuns drives the session API end to end: one session, a run
// that inherits its ceiling, a run that narrows it (and is held to the
// narrower policy by the real proxies), and a run that would widen it,
// which fails before anything starts.
func TestSessionRuns(t *testing.T) {
	port := loopbackServer(t)
	ceiling := Settings{
		Net:     policy.Config{AllowDomains: []string{"a.test", "b.test"}, AllowCIDRs: []string{"127.0.0.1"}},
		Resolve: []string{"a.test=127.0.0.1", "b.test=127.0.0.1", "c.test=127.0.0.1"},
		Quiet:   true,
	}
	urls := []string{"http://a.test:" + port + "/", "http://b.test:" + port + "/", "http://c.test:" + port + "/"}

	_, out, _, err := runHelper(t, ceiling, RunOptions{}, "get", urls...)
	if err != nil || !strings.Contains(out, urls[0]+" 200") || !strings.Contains(out, urls[1]+" 200") || !strings.Contains(out, urls[2]+" 403") {
		t.Errorf("run under the ceiling: %v\n%s", err, out)
	}

	narrow := &policy.Config{AllowDomains: []string{"a.test"}, AllowCIDRs: []string{"127.0.0.1"}}
	res, out, _, err := runHelper(t, ceiling, RunOptions{Net: narrow}, "get", urls...)
	if err != nil || !strings.Contains(out, urls[0]+" 200") || !strings.Contains(out, urls[1]+" 403") || !strings.Contains(out, urls[2]+" 403") {
		t.Errorf("narrowed run: %v\n%s", err, out)
	}
	if res != nil && len(res.Denials) != 2 {
		t.Errorf("narrowed run denials: %+v", res.Denials)
	}

	wide := &policy.Config{AllowDomains: []string{"a.test", "c.test"}, AllowCIDRs: []string{"127.0.0.1"}}
	res, out, _, err = runHelper(t, ceiling, RunOptions{Net: wide}, "get", urls...)
	var we *WideningError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "does not cover c.test") || res != nil || out != "" {
		t.Errorf("widening run: res %+v, err %v, output %q; want a WideningError and no run", res, err, out)
	}
	if ExitCode(err) != 1 {
		t.Errorf("widening error exit code %d, want 1", ExitCode(err))
	}
}
