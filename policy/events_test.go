package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestTraceLine(t *testing.T) {
	tests := []struct {
		d    Decision
		want string
	}{
		{Decision{Verdict: Deny, Reason: ReasonNoNetwork, Host: "example.com", Port: 443, Component: ComponentHTTP},
			"[hermetic] blocked http.connect host=example.com port=443 reason=no-network"},
		{Decision{Verdict: Deny, Reason: ReasonCloudMetadata, Host: "evil.test", Port: 80, Addr: netip.MustParseAddr("169.254.169.254"), Component: ComponentSOCKS},
			"[hermetic] blocked socks.connect host=evil.test port=80 reason=cloud-metadata addr=169.254.169.254"},
		// Control bytes in an invalid host cannot forge a second line.
		{Decision{Verdict: Deny, Reason: ReasonInvalidHost, Host: "a\n[hermetic] allowed", Port: 1, Component: ComponentSOCKS},
			`[hermetic] blocked socks.connect host="a\n[hermetic] allowed" port=1 reason=invalid-host`},
	}
	for _, tt := range tests {
		if got := TraceLine(tt.d); got != tt.want {
			t.Errorf("TraceLine = %q, want %q", got, tt.want)
		}
	}
}

// TestRefusalHidesResolvedInternalAddress: the refusal goes to the client,
// which must not learn internal addresses that a name resolves to.
func TestRefusalHidesResolvedInternalAddress(t *testing.T) {
	p, err := New(Config{Allow: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	d := p.CheckAddr(p.Decide("api.example.com", 443), netip.MustParseAddr("10.20.30.40"))
	if d.Reason != ReasonPrivateAddress {
		t.Fatalf("got %v", d)
	}
	if r := d.Refusal(); strings.Contains(r, "10.20.30.40") {
		t.Errorf("Refusal() = %q names the internal address", r)
	}
	if !strings.Contains(TraceLine(d), "addr=10.20.30.40") || !strings.Contains(d.Hint, "--allow-cidr 10.20.30.40") {
		t.Errorf("the user-facing trace and hint must keep it: %q / %q", TraceLine(d), d.Hint)
	}
}

func TestTraceWriterOnlyDenials(t *testing.T) {
	var buf bytes.Buffer
	tw := NewTraceWriter(&buf)
	tw.Record(Decision{Verdict: Allow, Reason: ReasonAllowlisted, Host: "ok.test", Port: 443})
	tw.Record(Decision{Verdict: Deny, Reason: ReasonNotAllowlisted, Host: "no.test", Port: 443, Component: ComponentHTTP})
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "host=no.test") {
		t.Errorf("trace output %q, want one line for no.test", got)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("no space left on device")
}

func TestJSONWriter(t *testing.T) {
	var buf bytes.Buffer
	jw := NewJSONWriter(&buf, nil)
	when := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	jw.Record(Decision{Verdict: Allow, Reason: ReasonAllowlisted, Rule: "example.com", Host: "api.example.com", Port: 443,
		Addr: netip.MustParseAddr("203.0.113.7"), Component: ComponentHTTP, Time: when})
	jw.Record(Decision{Verdict: Deny, Reason: ReasonNotAllowlisted, Host: "evil.test", Port: 443, Component: ComponentSOCKS, Time: when, Hint: "allow it with --allow-domain evil.test"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"verdict": "allow", "reason": "allowlisted", "rule": "example.com", "host": "api.example.com",
		"port": 443.0, "addr": "203.0.113.7", "component": "http", "time": "2026-11-23T10:00:00Z"} {
		if first[k] != v {
			t.Errorf("field %s = %v, want %v", k, first[k], v)
		}
	}
	if jw.Err() != nil {
		t.Fatal(jw.Err())
	}

	// A full disk is reported once and never stops recording attempts.
	fw := &failWriter{}
	var reported []error
	bad := NewJSONWriter(fw, func(err error) { reported = append(reported, err) })
	bad.Record(Decision{})
	bad.Record(Decision{})
	if bad.Err() == nil || fw.n != 2 {
		t.Errorf("Err() = %v after %d writes; want the error and 2 attempts", bad.Err(), fw.n)
	}
	if len(reported) != 1 || reported[0] != bad.Err() {
		t.Errorf("onErr got %v, want the first error once", reported)
	}
}

func TestRecorders(t *testing.T) {
	var a, b int
	rs := Recorders{RecorderFunc(func(Decision) { a++ }), RecorderFunc(func(Decision) { b++ })}
	rs.Record(Decision{})
	if a != 1 || b != 1 {
		t.Errorf("fan-out reached %d and %d recorders", a, b)
	}
}
