package policy

import (
	"context"

	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// recordingResolver answers from a table, one answer per call in turn, and
// records every name it was asked about.
type recordingResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	asked   []string
}

func (r *recordingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	a := r.answers[strings.TrimSuffix(host, ".")]
	if len(a) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	first := a[0]
	if len(a) > 1 {
		r.answers[host] = a[1:]
	}
	return first, nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddr(x)
	}
	return out
}

func listen(t *testing.T) (netip.AddrPort, func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return netip.MustParseAddrPort(l.Addr().String()), func() int { mu.Lock(); defer mu.Unlock(); return accepted }
}

func TestDialer(t *testing.T) {
	srv, _ := listen(t)
	port := srv.Port()
	hp := func(h string) string { return net.JoinHostPort(h, itoa(port)) }

	tests := []struct {
		name      string
		cfg       Config
		answers   map[string][][]netip.Addr
		dest      string
		wantErr   Reason // "" for a successful dial
		wantAsked []string
	}{
		{
			name:      "allowed name to loopback covered by a rule",
			cfg:       Config{Allow: []string{"allowed.test", "127.0.0.0/8"}},
			answers:   map[string][][]netip.Addr{"allowed.test": {addrs("127.0.0.1")}},
			dest:      hp("allowed.test"),
			wantAsked: []string{"allowed.test."},
		},
		{
			name:      "denied name is never resolved",
			cfg:       Config{Allow: []string{"allowed.test", "127.0.0.0/8"}},
			answers:   map[string][][]netip.Addr{"denied.test": {addrs("127.0.0.1")}},
			dest:      hp("denied.test"),
			wantErr:   ReasonNotAllowlisted,
			wantAsked: nil,
		},
		{
			name:      "name resolving to metadata",
			cfg:       Config{Allow: []string{"allowed.test"}},
			answers:   map[string][][]netip.Addr{"allowed.test": {addrs("169.254.169.254")}},
			dest:      hp("allowed.test"),
			wantErr:   ReasonCloudMetadata,
			wantAsked: []string{"allowed.test."},
		},
		{
			name:      "name resolving to loopback without a rule",
			cfg:       Config{Allow: []string{"allowed.test"}},
			answers:   map[string][][]netip.Addr{"allowed.test": {addrs("127.0.0.1")}},
			dest:      hp("allowed.test"),
			wantErr:   ReasonPrivateAddress,
			wantAsked: []string{"allowed.test."},
		},
		{
			name:      "bad addresses skipped, good one dialled",
			cfg:       Config{Allow: []string{"allowed.test", "127.0.0.1"}},
			answers:   map[string][][]netip.Addr{"allowed.test": {addrs("169.254.169.254", "10.0.0.1", "127.0.0.1")}},
			dest:      hp("allowed.test"),
			wantAsked: []string{"allowed.test."},
		},
		{
			name:      "localhost is answered locally, never resolved",
			cfg:       Config{AllowLocalhost: true},
			answers:   map[string][][]netip.Addr{"x.localhost": {addrs("198.51.100.7")}},
			dest:      hp("x.localhost"),
			wantAsked: nil,
		},
		{
			name:    "self",
			cfg:     Config{Allow: []string{"127.0.0.0/8"}, Self: []netip.AddrPort{srv}},
			dest:    srv.String(),
			wantErr: ReasonSelf,
		},
		{
			name:    "empty host",
			cfg:     Config{Network: "open"},
			dest:    ":" + itoa(port),
			wantErr: ReasonInvalidHost,
		},
		{
			name:    "no port",
			cfg:     Config{Network: "open"},
			dest:    "allowed.test",
			wantErr: ReasonInvalidHost,
		},
		{
			name:      "audit lets a denied name through",
			cfg:       Config{Allow: []string{"127.0.0.0/8"}, Audit: true},
			answers:   map[string][][]netip.Addr{"other.test": {addrs("127.0.0.1")}},
			dest:      hp("other.test"),
			wantAsked: []string{"other.test."},
		},
		{
			name:      "audit never lets metadata through",
			cfg:       Config{Network: "open", Audit: true},
			answers:   map[string][][]netip.Addr{"other.test": {addrs("169.254.169.254")}},
			dest:      hp("other.test"),
			wantErr:   ReasonCloudMetadata,
			wantAsked: []string{"other.test."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := &recordingResolver{answers: tt.answers}
			var recorded []Decision
			d := &Dialer{Policy: p, Resolver: res, Recorder: RecorderFunc(func(d Decision) { recorded = append(recorded, d) })}
			conn, dec, err := d.Dial(context.Background(), ComponentHTTP, "tcp", tt.dest)
			if conn != nil {
				conn.Close()
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Dial(%s) error: %v", tt.dest, err)
				}
			} else {
				got, ok := IsDenied(err)
				if !ok || got.Reason != tt.wantErr {
					t.Fatalf("Dial(%s) = %v (%v); want refusal %s", tt.dest, dec, err, tt.wantErr)
				}
			}
			if len(recorded) != 1 {
				t.Errorf("recorded %d decisions, want 1: %v", len(recorded), recorded)
			} else if recorded[0].Component != ComponentHTTP || recorded[0].Time.IsZero() {
				t.Errorf("recorded decision lacks component or time: %+v", recorded[0])
			}
			if !equalStrings(res.asked, tt.wantAsked) {
				t.Errorf("resolver asked %v, want %v", res.asked, tt.wantAsked)
			}
		})
	}
}

// TestDialerRebinding: the resolver answers an allowed address first and an
// internal one next; the dialer resolves once and dials what it checked.
func TestDialerRebinding(t *testing.T) {
	srv, _ := listen(t)
	p, err := New(Config{Allow: []string{"rebind.test", "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	res := &recordingResolver{answers: map[string][][]netip.Addr{"rebind.test": {addrs("127.0.0.1"), addrs("10.0.0.1")}}}
	d := &Dialer{Policy: p, Resolver: res}
	conn, dec, err := d.Dial(context.Background(), ComponentSOCKS, "tcp", net.JoinHostPort("rebind.test", itoa(srv.Port())))
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	conn.Close()
	if dec.Addr != netip.MustParseAddr("127.0.0.1") || len(res.asked) != 1 {
		t.Errorf("dialled %v after %d lookups; want 127.0.0.1 after 1", dec.Addr, len(res.asked))
	}
}

// TestDialCheckedControl: the Control hook refuses any address but the one
// that passed, whatever the dial is asked to do.
func TestDialCheckedControl(t *testing.T) {
	srv, _ := listen(t)
	var d Dialer
	_, err := d.dialChecked(context.Background(), "tcp", netip.MustParseAddr("127.0.0.1"), srv.Port())
	if err != nil {
		t.Fatalf("dial of the checked address failed: %v", err)
	}
	nd := net.Dialer{Control: d.control(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), srv.Port()))}
	if c, err := nd.Dial("tcp", srv.String()); err == nil {
		c.Close()
		t.Fatal("Control hook let an unchecked address through")
	}
}

func TestDialerUnsupportedNetwork(t *testing.T) {
	p, _ := New(Config{Network: "open"})
	d := &Dialer{Policy: p}
	if _, err := d.DialContext(context.Background(), ComponentHTTP, "udp", "127.0.0.1:53"); err == nil {
		t.Fatal("udp dial accepted")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
