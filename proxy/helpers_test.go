package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
)

// ioWait bounds every blocking read or write in the tests, so a bug shows
// as a failure rather than a hung test. It is never a performance limit.
const ioWait = 20 * time.Second

var loopback = netip.MustParseAddr("127.0.0.1")

// testResolver maps test names to loopback and records every name it was
// asked for, so tests can check that denied names are never resolved.
// A name with several answer sets gets them in turn (DNS rebinding).
type testResolver struct {
	mu     sync.Mutex
	static map[string][]netip.Addr
	seq    map[string][][]netip.Addr
	asked  []string
}

func newTestResolver() *testResolver {
	return &testResolver{
		static: map[string][]netip.Addr{
			"allowed.test": {loopback},
			"other.test":   {loopback},
			// Denied names also map to loopback: were one ever resolved and
			// dialled, the connection would reach a test server and show.
			"denied.test":  {loopback},
			"blocked.test": {loopback},
			"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		},
		seq: map[string][][]netip.Addr{
			"rebind.test": {{loopback}, {netip.MustParseAddr("169.254.169.254")}},
		},
	}
}

func (r *testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	// The dialer asks for rooted names.
	host = strings.TrimSuffix(host, ".")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	if s, ok := r.seq[host]; ok && len(s) > 0 {
		a := s[0]
		if len(s) > 1 {
			r.seq[host] = s[1:]
		}
		return a, nil
	}
	if a, ok := r.static[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *testResolver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
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
	return append([]policy.Decision(nil), r.decs...)
}

// testPolicy allows a few test names and loopback, by explicit rules, so
// that loopback upstreams pass step 5 of the real decision path.
func testPolicy() policy.Config {
	return policy.Config{
		AllowDomains: []string{"allowed.test", "other.test", "rebind.test", "meta.test"},
		AllowCIDRs:   []string{"127.0.0.0/8", "::1"},
		DenyDomains:  []string{"blocked.test"},
	}
}

type env struct {
	addr string // the proxy's listening address
	srv  *Server
	res  *testResolver
	rec  *recorder
}

// startProxy serves a proxy on loopback under cfg (with the proxy's own
// address added to Self) and closes it when the test ends. Options.Dialer
// may set Resolver and Timeout.
func startProxy(t testing.TB, cfg policy.Config, opts Options) *env {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Self = append(cfg.Self, netip.MustParseAddrPort(l.Addr().String()))
	pol, err := policy.New(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	e := &env{addr: l.Addr().String(), res: newTestResolver(), rec: &recorder{}}
	// A caller's opts.Dialer may bring its own Resolver and Timeout; the
	// policy and the recorder are always the test's.
	d := &policy.Dialer{Policy: pol, Resolver: e.res, Recorder: e.rec, Timeout: 5 * time.Second}
	if opts.Dialer != nil {
		if opts.Dialer.Resolver != nil {
			d.Resolver = opts.Dialer.Resolver
		}
		if opts.Dialer.Timeout != 0 {
			d.Timeout = opts.Dialer.Timeout
		}
	}
	opts.Dialer = d
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	e.srv, err = New(opts)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(l) }()
	t.Cleanup(func() {
		if err := e.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// checkResolved fails if any name outside allowed was resolved.
func (e *env) checkResolved(t testing.TB, allowed ...string) {
	t.Helper()
	for _, n := range e.res.names() {
		ok := false
		for _, a := range allowed {
			ok = ok || n == a
		}
		if !ok {
			t.Errorf("resolved %q; only %q may be", n, allowed)
		}
	}
}

// countingListener counts the connections a test server accepts.
type countingListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *countingListener) port() int { return l.Addr().(*net.TCPAddr).Port }

// tcpServer runs handle for every connection on a loopback listener until
// the test ends, then waits for the handlers.
func tcpServer(t testing.TB, network, addr string, handle func(net.Conn)) *countingListener {
	t.Helper()
	inner, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(ioWait))
				handle(c)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l
}

// echoServer echoes until EOF, then half-closes.
func echoServer(t testing.TB) *countingListener {
	return tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
}

// httpUpstream is a plain HTTP server that reports the Host and headers it
// received.
type httpUpstream struct {
	*countingListener
	srv *http.Server
	mu  sync.Mutex
	got []*http.Request
}

func newHTTPUpstream(t testing.TB) *httpUpstream {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &httpUpstream{countingListener: &countingListener{Listener: inner}}
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.got = append(u.got, r.Clone(context.Background()))
		u.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.Path)
	})}
	done := make(chan struct{})
	go func() { u.srv.Serve(u.countingListener); close(done) }()
	t.Cleanup(func() { u.srv.Close(); <-done })
	return u
}

func (u *httpUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.got...)
}

// rawExchange sends raw bytes to the proxy and reads everything it sends
// back until it closes. halfClose ends the client's input after req; use it
// only for CONNECT: net/http takes the end of a client's input as the client
// going away and cancels a forwarded request.
func rawExchange(t testing.TB, addr, req string, halfClose bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	b, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("reading response to %q: %v", req, err)
	}
	return string(b)
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || errors.Is(err, net.ErrClosed))
}

// readResponse reads one response from br for a request with method.
func readResponse(t testing.TB, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		return resp, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// cleanEnv is the environment for client subprocesses: the caller's,
// without any proxy settings that could send them elsewhere.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}
