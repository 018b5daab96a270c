package socks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
)

// wait bounds every blocking step of a test; nothing is expected to get near it.
const wait = 20 * time.Second

var loopback4 = netip.MustParseAddr("127.0.0.1")

// resolver maps test names to addresses and records every name it is asked
// about. answer, when set, overrides the map and sees how many times the
// name was asked before (for DNS rebinding).
type resolver struct {
	names  map[string][]netip.Addr
	answer func(ctx context.Context, host string, call int) []netip.Addr

	mu    sync.Mutex
	asked []string
}

func (r *resolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	// The dialer asks for rooted names.
	host = strings.TrimSuffix(host, ".")
	r.mu.Lock()
	call := 0
	for _, h := range r.asked {
		if h == host {
			call++
		}
	}
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	var addrs []netip.Addr
	if r.answer != nil {
		addrs = r.answer(ctx, host, call)
	} else {
		addrs = r.names[host]
	}
	if len(addrs) == 0 {
		// An answer that came only when the lookup's deadline passed is a
		// timeout, as net.Resolver reports it.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &net.DNSError{Err: ctx.Err().Error(), Name: host, IsTimeout: true}
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (r *resolver) wasAsked(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.asked, host)
}

func (r *resolver) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// recorder keeps every decision the dialer made.
type recorder struct {
	mu   sync.Mutex
	decs []policy.Decision
}

func (r *recorder) Record(d policy.Decision) {
	r.mu.Lock()
	r.decs = append(r.decs, d)
	r.mu.Unlock()
}

func (r *recorder) all() []policy.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.decs)
}

func (r *recorder) allowed() int {
	n := 0
	for _, d := range r.all() {
		if d.Allowed() {
			n++
		}
	}
	return n
}

// proxy is a running Server on loopback with its policy's test doubles.
type testProxy struct {
	srv    *Server
	addr   string
	pol    *policy.Policy
	res    *resolver
	rec    *recorder
	served chan error
}

type setup struct {
	cfg         policy.Config
	res         *resolver
	opts        Options       // Dialer is filled in
	dialTimeout time.Duration // the dialer's Timeout; 0 means wait
}

func startProxy(t testing.TB, su setup) *testProxy {
	t.Helper()
	pol, err := policy.New(su.cfg)
	if err != nil {
		t.Fatalf("policy.New: %v", err)
	}
	if su.res == nil {
		su.res = &resolver{}
	}
	p := &testProxy{pol: pol, res: su.res, rec: &recorder{}, served: make(chan error, 1)}
	opts := su.opts
	timeout := su.dialTimeout
	if timeout == 0 {
		timeout = wait
	}
	opts.Dialer = &policy.Dialer{Policy: pol, Resolver: p.res, Recorder: p.rec, Timeout: timeout}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	p.srv, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	go func() { p.served <- p.srv.Serve(l) }()
	t.Cleanup(func() { p.close(t) })
	return p
}

// close shuts the server down and checks that Serve returned nil.
func (p *testProxy) close(t testing.TB) {
	t.Helper()
	p.srv.Close()
	select {
	case err, ok := <-p.served:
		if ok && err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
		if ok {
			close(p.served)
		}
	case <-time.After(wait):
		t.Error("Serve did not return after Close")
	}
}

// backend is a loopback TCP server that echoes each connection until EOF,
// half-closes, and counts the connections it accepted.
type backend struct {
	l        net.Listener
	accepted atomic.Int64
	port     uint16
}

func startBackend(t testing.TB, network, addr string) *backend {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{l: l, port: uint16(l.Addr().(*net.TCPAddr).Port)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(wait))
				// A plain loop: io.Copy would splice through pipes from the
				// runtime's pool, which only the GC closes and which would
				// muddle the descriptor count of the leak test.
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						break
					}
				}
				c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	return b
}

// Request encoding.

func greeting() []byte { return []byte{5, 1, 0} }

func request(cmd, atyp byte, addr []byte, port uint16) []byte {
	b := []byte{5, cmd, 0, atyp}
	if atyp == 3 {
		b = append(b, byte(len(addr)))
	}
	b = append(b, addr...)
	return binary.BigEndian.AppendUint16(b, port)
}

func connectName(name string, port uint16) []byte { return request(1, 3, []byte(name), port) }

func connectAddr(a netip.Addr, port uint16) []byte {
	if a.Is4() {
		return request(1, 1, a.AsSlice(), port)
	}
	return request(1, 4, a.AsSlice(), port)
}

func dialProxy(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(wait))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// connect performs a no-auth handshake and a request and returns the reply
// code; the connection is ready for tunnel data when it is 0.
func connect(t testing.TB, c net.Conn, req []byte) byte {
	t.Helper()
	if _, err := c.Write(append(greeting(), req...)); err != nil {
		t.Fatal(err)
	}
	rep, err := readReply(c)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// readReply reads the method selection and the request reply.
func readReply(c net.Conn) (byte, error) {
	m := make([]byte, 2)
	if _, err := io.ReadFull(c, m); err != nil {
		return 0, fmt.Errorf("reading method selection: %w", err)
	}
	if m[0] != 5 || m[1] != 0 {
		return 0, fmt.Errorf("method selection % x", m)
	}
	h := make([]byte, 4)
	if _, err := io.ReadFull(c, h); err != nil {
		return 0, fmt.Errorf("reading reply: %w", err)
	}
	n := 0
	switch h[3] {
	case 1:
		n = 4
	case 4:
		n = 16
	default:
		return 0, fmt.Errorf("reply address type %d", h[3])
	}
	if _, err := io.ReadFull(c, make([]byte, n+2)); err != nil {
		return 0, fmt.Errorf("reading reply address: %w", err)
	}
	if h[0] != 5 {
		return 0, fmt.Errorf("reply version %d", h[0])
	}
	return h[1], nil
}

// closedByPeer reads c to the end and reports whether the proxy ended it
// (EOF or reset) rather than the test's own deadline.
func closedByPeer(c net.Conn) (rest []byte, ok bool) {
	c.SetReadDeadline(time.Now().Add(wait))
	rest, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return rest, false
	}
	return rest, true
}
