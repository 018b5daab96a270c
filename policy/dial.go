package policy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name. The dialer always passes a
// rooted name ("example.com."), so that no search list applies.
// *net.Resolver satisfies it; tests and --resolve inject their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Recorder receives every decision the dialer makes, allowed or denied.
// Implementations must be safe for concurrent use.
type Recorder interface {
	Record(Decision)
}

// RecorderFunc adapts a function to a Recorder.
type RecorderFunc func(Decision)

// Record calls f(d).
func (f RecorderFunc) Record(d Decision) { f(d) }

// Dialer is the one guarded dial path shared by every proxy route:
// normalise, decide, resolve once, check every resolved address, and dial an
// address that passed. A name the policy denies is never resolved, and the
// connection never goes to the result of a second lookup.
type Dialer struct {
	Policy *Policy
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// Recorder, if set, receives each decision.
	Recorder Recorder
	// Timeout bounds the TCP connect; zero means 30 seconds.
	Timeout time.Duration
	// Now is the clock for decision times; nil means time.Now.
	Now func() time.Time
}

// DialContext connects to address ("host:port") over TCP on behalf of
// component c. A refusal is returned as *DeniedError.
func (d *Dialer) DialContext(ctx context.Context, c Component, network, address string) (net.Conn, error) {
	conn, _, err := d.Dial(ctx, c, network, address)
	return conn, err
}

// Dial is DialContext that also returns the decision it made.
func (d *Dialer) Dial(ctx context.Context, c Component, network, address string) (net.Conn, Decision, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, Decision{}, fmt.Errorf("hermetic: network %q is not supported", network)
	}
	host, portStr, err := net.SplitHostPort(address)
	var port uint16
	if err == nil {
		port, err = ParsePort(portStr)
	}
	if err != nil {
		dec := d.stamp(Decision{Verdict: Deny, Reason: ReasonInvalidHost, Host: address, Hint: "not a valid HOST:PORT"}, c)
		d.record(dec)
		return nil, dec, &DeniedError{Decision: dec}
	}
	dec := d.stamp(d.Policy.Decide(host, port), c)
	if !d.Policy.permits(&dec) {
		d.record(dec)
		return nil, dec, &DeniedError{Decision: dec}
	}

	// One deadline covers resolution and every attempt, so a name with
	// many unreachable addresses cannot hold a connection slot for long.
	ctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()

	var candidates []netip.Addr
	switch {
	case dec.Addr.IsValid():
		candidates = []netip.Addr{dec.Addr}
	case isLocalhostName(dec.Host):
		// RFC 6761 §6.3: localhost names are loopback, answered here and
		// never sent to a resolver that might say otherwise.
		candidates = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	default:
		// The rooted name: a resolver's search list must not turn the
		// name that was decided into another one.
		addrs, err := d.resolver().LookupNetIP(ctx, "ip", dec.Host+".")
		if err != nil {
			d.record(dec)
			return nil, dec, fmt.Errorf("hermetic: resolving %s: %w", dec.Host, err)
		}
		candidates = addrs
	}

	var (
		firstDenied *Decision
		lastErr     error
	)
	for _, a := range candidates {
		checked := d.Policy.CheckAddr(dec, a)
		if !d.Policy.permits(&checked) {
			if firstDenied == nil {
				firstDenied = &checked
			}
			continue
		}
		conn, err := d.dialChecked(ctx, network, checked.Addr, port)
		if err != nil {
			lastErr = err
			continue
		}
		d.record(checked)
		return conn, checked, nil
	}
	if firstDenied != nil && lastErr == nil {
		d.record(*firstDenied)
		return nil, *firstDenied, &DeniedError{Decision: *firstDenied}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("hermetic: %s has no addresses", dec.Host)
	}
	// The policy allowed the destination; the log still shows the attempt.
	d.record(dec)
	return nil, dec, lastErr
}

// dialChecked dials exactly addr. The Control hook is the last line of
// defence: whatever happens above, the socket can only connect to the address
// that passed the policy.
func (d *Dialer) dialChecked(ctx context.Context, network string, addr netip.Addr, port uint16) (net.Conn, error) {
	want := netip.AddrPortFrom(addr, port)
	// No TCP keepalive: tunnels have their own idle timeout, and the
	// setsockopt calls are a measurable share of connection set-up.
	nd := net.Dialer{KeepAlive: -1, Control: d.control(want)}
	return nd.DialContext(ctx, network, want.String())
}

func (d *Dialer) control(want netip.AddrPort) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		got, err := netip.ParseAddrPort(address)
		if err != nil || got.Addr().Unmap() != want.Addr() || got.Port() != want.Port() {
			return fmt.Errorf("hermetic: refusing to dial %s: only %s passed the policy", address, want)
		}
		return nil
	}
}

func (d *Dialer) resolver() Resolver {
	if d.Resolver != nil {
		return d.Resolver
	}
	return net.DefaultResolver
}

func (d *Dialer) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return 30 * time.Second
}

func (d *Dialer) stamp(dec Decision, c Component) Decision {
	dec.Component = c
	if d.Now != nil {
		dec.Time = d.Now()
	} else {
		dec.Time = time.Now()
	}
	return dec
}

func (d *Dialer) record(dec Decision) {
	if d.Recorder != nil {
		d.Recorder.Record(dec)
	}
}

// IsDenied reports whether err is a policy refusal and returns its decision.
func IsDenied(err error) (Decision, bool) {
	var de *DeniedError
	if errors.As(err, &de) {
		return de.Decision, true
	}
	return Decision{}, false
}

// ParsePort parses a port the way rules and destinations spell it: ASCII
// decimal 1-65535, no sign, no leading zero.
func ParsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("port %q: want a decimal number from 1 to 65535", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q: want a decimal number from 1 to 65535", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want a decimal number from 1 to 65535", s)
	}
	return uint16(n), nil
}
