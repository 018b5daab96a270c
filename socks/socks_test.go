package socks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/hermetic-dev/hermetic/internal/testnet"
	"github.com/hermetic-dev/hermetic/policy"
)

// httpBackend serves a fixed body on loopback.
func httpBackend(t *testing.T) (port uint16) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// allowedSetup allows the name allowed.test (mapped to 127.0.0.1) and
// loopback, and nothing else.
func allowedSetup() setup {
	return setup{
		cfg: policy.Config{AllowDomains: []string{"allowed.test"}, AllowLocalhost: true},
		res: &resolver{names: map[string][]netip.Addr{"allowed.test": {loopback4}}},
	}
}

func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	port := httpBackend(t)
	p := startProxy(t, allowedSetup())
	run := func(host string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/"
		cmd := exec.CommandContext(ctx, curl, "-sS", "--max-time", "10",
			"--proxy", "socks5h://"+p.addr, url)
		// Only PATH: inherited proxy variables must not change the route.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("allowed.test")
	if err != nil || out != "hello from allowed.test:"+strconv.Itoa(int(port)) {
		t.Fatalf("curl through the proxy to allowed.test: %v\n%s", err, out)
	}

	out, err = run("denied.test")
	if err == nil || strings.Contains(out, "hello") {
		t.Fatalf("curl to denied.test succeeded: %s", out)
	}
	t.Logf("curl on refusal: %s", strings.TrimSpace(out))
	if p.res.wasAsked("denied.test") {
		t.Fatal("the denied name was resolved")
	}
	checkLastDecision(t, p, "denied.test", policy.ReasonNotAllowlisted)
}

func checkLastDecision(t *testing.T, p *testProxy, host string, reason policy.Reason) {
	t.Helper()
	decs := p.rec.all()
	if len(decs) == 0 {
		t.Fatal("no decision recorded")
	}
	d := decs[len(decs)-1]
	if d.Host != host || d.Reason != reason || d.Component != policy.ComponentSOCKS {
		t.Fatalf("last decision %v (component %s), want host %q reason %s from socks", d, d.Component, host, reason)
	}
}

func TestGoHTTPClient(t *testing.T) {
	port := httpBackend(t)
	p := startProxy(t, allowedSetup())
	d, err := proxy.SOCKS5("tcp", p.addr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{
		Timeout:   wait,
		Transport: &http.Transport{DialContext: d.(proxy.ContextDialer).DialContext},
	}
	defer client.CloseIdleConnections()
	for _, host := range []string{"allowed.test", "127.0.0.1", "ALLOWED.test."} {
		hp := net.JoinHostPort(host, strconv.Itoa(int(port)))
		resp, err := client.Get("http://" + hp + "/")
		if err != nil {
			t.Fatalf("GET via %s: %v", host, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello from "+hp {
			t.Fatalf("GET via %s: %q, %v", host, body, err)
		}
	}
	if _, err := client.Get("http://denied.test:" + strconv.Itoa(int(port)) + "/"); err == nil {
		t.Fatal("GET denied.test succeeded")
	}
	if p.res.wasAsked("denied.test") {
		t.Fatal("the denied name was resolved")
	}
}

// TestAddressTypes tunnels to an echo server by IPv4, IPv6 and name.
func TestAddressTypes(t *testing.T) {
	b4 := startBackend(t, "tcp4", "127.0.0.1:0")
	tests := []struct {
		name string
		req  func(t *testing.T) []byte
	}{
		{"ipv4", func(t *testing.T) []byte { return connectAddr(loopback4, b4.port) }},
		{"domain", func(t *testing.T) []byte { return connectName("allowed.test", b4.port) }},
		{"ipv4-mapped ipv6", func(t *testing.T) []byte {
			return request(1, 4, netip.AddrFrom16(loopback4.As16()).AsSlice(), b4.port)
		}},
		{"ipv6", func(t *testing.T) []byte {
			l, err := net.Listen("tcp6", "[::1]:0")
			if err != nil {
				t.Skipf("no IPv6 loopback: %v", err)
			}
			l.Close()
			b6 := startBackend(t, "tcp6", "[::1]:0")
			return connectAddr(netip.IPv6Loopback(), b6.port)
		}},
	}
	p := startProxy(t, allowedSetup())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req(t)
			c := dialProxy(t, p.addr)
			if rep := connect(t, c, req); rep != 0 {
				t.Fatalf("reply %#x, want success", rep)
			}
			msg := []byte("echo " + tt.name)
			c.Write(msg)
			c.CloseWrite()
			got, ok := closedByPeer(c)
			if !ok || !bytes.Equal(got, msg) {
				t.Fatalf("echo %q (closed %v), want %q", got, ok, msg)
			}
		})
	}
}

// guardLoopback fails the test, before anything is sent, if the policy would
// let (host, port) or any address in addrs through: the test would then send
// traffic off loopback.
func guardLoopback(t *testing.T, pol *policy.Policy, host string, port uint16, addrs []netip.Addr) {
	t.Helper()
	d := pol.Decide(host, port)
	if d.Allowed() && d.Addr.IsValid() && !d.Addr.IsLoopback() {
		t.Fatalf("policy allows %s; refusing to run a test that could leave loopback", d)
	}
	for _, a := range addrs {
		if c := pol.CheckAddr(d, a); c.Allowed() && !a.IsLoopback() {
			t.Fatalf("policy allows %s; refusing to run a test that could leave loopback", c)
		}
	}
}

// TestRefusals: every refusal is reply 0x02, decided by the policy, with no
// dial and, for a refused name, no resolution.
func TestRefusals(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	metadata := netip.MustParseAddr("169.254.169.254")
	su := allowedSetup()
	su.cfg.AllowDomains = append(su.cfg.AllowDomains, "meta.test", "private.test")
	su.res.names["meta.test"] = []netip.Addr{metadata}
	su.res.names["private.test"] = []netip.Addr{netip.MustParseAddr("10.1.2.3")}
	su.cfg.AllowLocalhost = false
	su.cfg.AllowCIDRs = []string{"127.0.0.1:" + strconv.Itoa(int(b.port))}
	p := startProxy(t, su)

	tests := []struct {
		name   string
		host   string // as sent, in a domain-name request unless addr is set
		addr   netip.Addr
		port   uint16
		reason policy.Reason
		// resolves is whether the policy may resolve the name.
		resolves bool
	}{
		{name: "not allowlisted", host: "denied.test", reason: policy.ReasonNotAllowlisted},
		{name: "suffix trick", host: "allowed.test.evil.test", reason: policy.ReasonNotAllowlisted},
		{name: "name resolving to metadata", host: "meta.test", reason: policy.ReasonCloudMetadata, resolves: true},
		{name: "name resolving to a private address", host: "private.test", reason: policy.ReasonPrivateAddress, resolves: true},
		{name: "metadata name", host: "metadata.google.internal", reason: policy.ReasonCloudMetadata},
		{name: "metadata address", addr: metadata, reason: policy.ReasonCloudMetadata},
		{name: "metadata address as a name", host: "169.254.169.254", reason: policy.ReasonCloudMetadata},
		{name: "metadata in inet_aton form", host: "0xa9fea9fe", reason: policy.ReasonCloudMetadata},
		{name: "private address", addr: netip.MustParseAddr("10.0.0.1"), reason: policy.ReasonNotAllowlisted},
		{name: "unspecified", addr: netip.IPv4Unspecified(), reason: policy.ReasonUnspecified},
		{name: "loopback on another port", addr: loopback4, port: 1, reason: policy.ReasonNotAllowlisted},
		{name: "allowed name to loopback on another port", host: "allowed.test", port: 1, reason: policy.ReasonPrivateAddress, resolves: true},
		{name: "empty name", host: "", reason: policy.ReasonInvalidHost},
		{name: "NUL in name", host: "allowed.test\x00.evil", reason: policy.ReasonInvalidHost},
		{name: "colon in name", host: "allowed.test:22", reason: policy.ReasonInvalidHost},
		{name: "name too long", host: strings.Repeat("a", 255), reason: policy.ReasonInvalidHost},
		{name: "port zero", host: "allowed.test", port: 0, reason: policy.ReasonInvalidHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := tt.port
			if port == 0 && tt.name != "port zero" {
				port = 8080
			}
			var req []byte
			if tt.addr.IsValid() {
				guardLoopback(t, p.pol, tt.addr.String(), port, nil)
				req = connectAddr(tt.addr, port)
			} else {
				guardLoopback(t, p.pol, tt.host, port, p.res.names[tt.host])
				req = connectName(tt.host, port)
			}
			before := len(p.res.calls())
			accepted := b.accepted.Load()
			c := dialProxy(t, p.addr)
			if rep := connect(t, c, req); rep != 2 {
				t.Fatalf("reply %#x, want 0x02 (not allowed by ruleset)", rep)
			}
			if _, ok := closedByPeer(c); !ok {
				t.Fatal("connection left open after a refusal")
			}
			decs := p.rec.all()
			d := decs[len(decs)-1]
			if d.Allowed() || d.Reason != tt.reason || d.Component != policy.ComponentSOCKS {
				t.Fatalf("decision %v (component %s), want a %s denial from socks", d, d.Component, tt.reason)
			}
			if asked := p.res.calls()[before:]; !tt.resolves && len(asked) > 0 {
				t.Fatalf("a refused name was resolved: %q", asked)
			}
			if b.accepted.Load() != accepted {
				t.Fatal("the backend got a connection")
			}
		})
	}
}

// TestDNSRebinding: the resolver answers an allowed loopback address first
// and a disallowed one next; the connection must go to the address that was
// checked, and the next lookup's answer is judged on its own.
func TestDNSRebinding(t *testing.T) {
	good := startBackend(t, "tcp4", "127.0.0.1:0")
	// The "internal" address is another loopback address so that even a
	// broken dialer sends nothing off the machine.
	evil, err := net.Listen("tcp4", "127.0.0.2:"+strconv.Itoa(int(good.port)))
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	evil.Close()
	bad := startBackend(t, "tcp4", "127.0.0.2:"+strconv.Itoa(int(good.port)))

	p := startProxy(t, setup{
		cfg: policy.Config{AllowDomains: []string{"rebind.test"}, AllowCIDRs: []string{"127.0.0.1/32"}},
		res: &resolver{answer: func(_ context.Context, host string, call int) []netip.Addr {
			if call == 0 {
				return []netip.Addr{loopback4}
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}
		}},
	})

	c := dialProxy(t, p.addr)
	if rep := connect(t, c, connectName("rebind.test", good.port)); rep != 0 {
		t.Fatalf("first connect: reply %#x", rep)
	}
	c.Write([]byte("x"))
	c.CloseWrite()
	if got, _ := closedByPeer(c); string(got) != "x" {
		t.Fatalf("echo %q", got)
	}
	if n := len(p.res.calls()); n != 1 {
		t.Fatalf("resolved %d times for one connection, want once", n)
	}

	c = dialProxy(t, p.addr)
	if rep := connect(t, c, connectName("rebind.test", good.port)); rep != 2 {
		t.Fatalf("second connect (rebound to 127.0.0.2): reply %#x, want 0x02", rep)
	}
	checkLastDecision(t, p, "rebind.test", policy.ReasonPrivateAddress)
	if good.accepted.Load() != 1 || bad.accepted.Load() != 0 {
		t.Fatalf("accepted: checked address %d, rebound address %d; want 1 and 0", good.accepted.Load(), bad.accepted.Load())
	}
}

func TestCommandsRefused(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	p := startProxy(t, allowedSetup())
	for _, cmd := range []byte{2, 3, 0, 4, 0xff} {
		t.Run(fmt.Sprintf("command %d", cmd), func(t *testing.T) {
			c := dialProxy(t, p.addr)
			req := request(cmd, 1, loopback4.AsSlice(), b.port)
			if rep := connect(t, c, req); rep != 7 {
				t.Fatalf("reply %#x, want 0x07 (command not supported)", rep)
			}
			if _, ok := closedByPeer(c); !ok {
				t.Fatal("connection left open")
			}
		})
	}
	if len(p.rec.all()) != 0 || b.accepted.Load() != 0 {
		t.Fatal("a refused command reached the dialer")
	}
}

// TestMalformed: hostile and broken handshakes get the protocol's answer (or
// none), are closed, and never reach the dialer.
func TestMalformed(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	valid := append(greeting(), connectName("allowed.test", b.port)...)
	tests := []struct {
		name string
		in   []byte
		want []byte // what the proxy answers before closing; nil for nothing
	}{
		{"empty", nil, nil},
		{"socks4", []byte{4, 1, 0, 80, 127, 0, 0, 1, 0}, nil},
		{"wrong version", []byte{6, 1, 0}, nil},
		{"HTTP", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), nil},
		{"zero methods", []byte{5, 0}, []byte{5, 0xff}},
		{"only user/pass offered", []byte{5, 1, 2}, []byte{5, 0xff}},
		{"255 methods announced, 3 sent", []byte{5, 255, 0, 1, 2}, nil},
		{"request with wrong version", append(greeting(), 4, 1, 0, 1, 127, 0, 0, 1, 0, 80), []byte{5, 0}},
		{"unknown address type", append(greeting(), 5, 1, 0, 9, 127, 0, 0, 1, 0, 80),
			[]byte{5, 0, 5, 8, 0, 1, 0, 0, 0, 0, 0, 0}},
		{"name length 255, 3 bytes sent", append(greeting(), 5, 1, 0, 3, 255, 'a', 'b', 'c'), []byte{5, 0}},
		{"name length 0, port missing", append(greeting(), 5, 1, 0, 3, 0), []byte{5, 0}},
	}
	// A valid request cut short at every byte never gets to dial.
	for i := range len(valid) {
		want := []byte(nil)
		if i >= 3 {
			want = []byte{5, 0}
		}
		tests = append(tests, struct {
			name string
			in   []byte
			want []byte
		}{fmt.Sprintf("truncated at %d", i), valid[:i], want})
	}
	p := startProxy(t, allowedSetup())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, p.addr)
			c.Write(tt.in)
			c.CloseWrite()
			got, ok := closedByPeer(c)
			if !ok {
				t.Fatal("connection left open")
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("proxy answered % x, want % x", got, tt.want)
			}
		})
	}
	if n := len(p.rec.all()); n != 0 || b.accepted.Load() != 0 {
		t.Fatalf("malformed input reached the dialer (%d decisions)", n)
	}
}

// TestHandshakeDeadline: a client that stalls is closed by the deadline.
func TestHandshakeDeadline(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	su := allowedSetup()
	su.opts.HandshakeTimeout = 50 * time.Millisecond
	p := startProxy(t, su)
	req := append(greeting(), connectName("allowed.test", b.port)...)
	for _, n := range []int{0, 1, 3, len(req) - 1} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			c := dialProxy(t, p.addr)
			c.Write(req[:n])
			if _, ok := closedByPeer(c); !ok {
				t.Fatal("stalled handshake was not closed")
			}
		})
	}
	// The deadline covers the handshake only, not the tunnel after it.
	c := dialProxy(t, p.addr)
	if rep := connect(t, c, connectName("allowed.test", b.port)); rep != 0 {
		t.Fatalf("reply %#x", rep)
	}
	time.Sleep(4 * su.opts.HandshakeTimeout)
	c.Write([]byte("still here"))
	c.CloseWrite()
	if got, _ := closedByPeer(c); string(got) != "still here" {
		t.Fatalf("tunnel after the handshake deadline: %q", got)
	}
}

// TestEarlyData: bytes sent right behind the request, before the reply, are
// tunnelled, not lost in the library's read buffer.
func TestEarlyData(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	p := startProxy(t, allowedSetup())
	c := dialProxy(t, p.addr)
	payload := bytes.Repeat([]byte("early "), 2000)
	msg := append(append(greeting(), connectName("allowed.test", b.port)...), payload...)
	go func() {
		c.Write(msg)
		c.CloseWrite()
	}()
	if rep, err := readReply(c); err != nil || rep != 0 {
		t.Fatalf("reply %#x, %v", rep, err)
	}
	if got, _ := closedByPeer(c); !bytes.Equal(got, payload) {
		t.Fatalf("echoed %d bytes, want the %d early ones", len(got), len(payload))
	}
}

// TestHalfClosedUpstream: the upstream finishing first is passed on as EOF,
// and the client can still send afterwards.
func TestHalfClosedUpstream(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		c.Write([]byte("banner"))
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	p := startProxy(t, allowedSetup())
	c := dialProxy(t, p.addr)
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	if rep := connect(t, c, connectName("allowed.test", port)); rep != 0 {
		t.Fatalf("reply %#x", rep)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != "banner" {
		t.Fatalf("read %q, %v; want the banner then EOF", b, err)
	}
	c.Write([]byte("after EOF"))
	c.CloseWrite()
	select {
	case s := <-got:
		if s != "after EOF" {
			t.Fatalf("upstream received %q", s)
		}
	case <-time.After(wait):
		t.Fatal("upstream received nothing")
	}
}

func TestIdleTunnelClosed(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	su := allowedSetup()
	su.opts.IdleTimeout = 50 * time.Millisecond
	p := startProxy(t, su)
	c := dialProxy(t, p.addr)
	if rep := connect(t, c, connectName("allowed.test", b.port)); rep != 0 {
		t.Fatalf("reply %#x", rep)
	}
	if _, ok := closedByPeer(c); !ok {
		t.Fatal("idle tunnel was not closed")
	}
}

// TestMaxConns: beyond the limit, a client waits until a slot frees.
func TestMaxConns(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	su := allowedSetup()
	su.opts.MaxConns = 1
	p := startProxy(t, su)
	first := dialProxy(t, p.addr)
	if rep := connect(t, first, connectName("allowed.test", b.port)); rep != 0 {
		t.Fatalf("reply %#x", rep)
	}
	second := dialProxy(t, p.addr)
	second.Write(append(greeting(), connectName("allowed.test", b.port)...))
	second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := second.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a connection over MaxConns was served")
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(wait))
	if rep, err := readReply(second); err != nil || rep != 0 {
		t.Fatalf("queued connection after a slot freed: %#x, %v", rep, err)
	}
}

func TestNewValidates(t *testing.T) {
	pol, err := policy.New(policy.Config{AllowLocalhost: true})
	if err != nil {
		t.Fatal(err)
	}
	d := &policy.Dialer{Policy: pol}
	for _, o := range []Options{
		{},
		{Dialer: &policy.Dialer{}},
		{Dialer: d, MaxConns: -1},
		{Dialer: d, HandshakeTimeout: -1},
		{Dialer: d, IdleTimeout: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestServeAfterClose(t *testing.T) {
	p := startProxy(t, allowedSetup())
	p.close(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.srv.Serve(l); err != nil {
		t.Fatalf("Serve after Close = %v, want nil", err)
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("listener still open after Serve returned")
	}
}

// TestCloseLeaksNothing: Close ends tunnels, stalled handshakes and dials in
// flight, and goroutines and descriptors return to where they were.
func TestCloseLeaksNothing(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	su := allowedSetup()
	su.res.answer = func(ctx context.Context, host string, _ int) []netip.Addr {
		if host == "slow.test" {
			// A lookup that only ends when its context does: Close must
			// cancel dials in flight.
			<-ctx.Done()
			return nil
		}
		return []netip.Addr{loopback4}
	}
	su.cfg.AllowDomains = append(su.cfg.AllowDomains, "slow.test")

	runtime.GC()
	goroutines, fds := runtime.NumGoroutine(), testnet.OpenFDs(t)

	p := startProxy(t, su)
	var clients []net.Conn
	for range 5 {
		c := dialProxy(t, p.addr)
		if rep := connect(t, c, connectName("allowed.test", b.port)); rep != 0 {
			t.Fatalf("reply %#x", rep)
		}
		c.Write([]byte("open tunnel"))
		clients = append(clients, c)
	}
	stalled := dialProxy(t, p.addr)
	stalled.Write([]byte{5, 1})
	denied := dialProxy(t, p.addr)
	if rep := connect(t, denied, connectName("denied.test", 80)); rep != 2 {
		t.Fatalf("reply %#x", rep)
	}
	clients = append(clients, stalled, denied)

	slow := dialProxy(t, p.addr)
	slow.Write(append(greeting(), connectName("slow.test", 80)...))
	clients = append(clients, slow)
	for i := 0; !p.res.wasAsked("slow.test"); i++ {
		if i == 1000 {
			t.Fatal("the slow lookup never started")
		}
		time.Sleep(5 * time.Millisecond)
	}

	closed := make(chan struct{})
	go func() {
		p.close(t)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	for _, c := range clients {
		if _, ok := closedByPeer(c); !ok {
			t.Fatal("a client connection survived Close")
		}
		c.Close()
	}

	var g, f int
	for range 200 {
		g, f = runtime.NumGoroutine(), testnet.OpenFDs(t)
		if g <= goroutines && f <= fds {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("after Close: %d goroutines (was %d), %d descriptors (was %d)\n%s",
		g, goroutines, f, fds, buf[:runtime.Stack(buf, true)])
}

// TestDialErrors: allowed destinations that cannot be reached get the RFC
// 1928 code for the failure.
func TestDialErrors(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := uint16(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	su := allowedSetup()
	su.cfg.AllowDomains = append(su.cfg.AllowDomains, "nxdomain.test")
	p := startProxy(t, su)
	tests := []struct {
		name string
		req  []byte
		want byte
	}{
		{"connection refused", connectAddr(loopback4, closedPort), 5},
		{"name does not resolve", connectName("nxdomain.test", 80), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, p.addr)
			if rep := connect(t, c, tt.req); rep != tt.want {
				t.Fatalf("reply %#x, want %#x", rep, tt.want)
			}
		})
	}
}

func TestReplyCode(t *testing.T) {
	op := func(errno error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	tests := []struct {
		err  error
		want byte
	}{
		{&policy.DeniedError{}, 2},
		{fmt.Errorf("wrapped: %w", &policy.DeniedError{}), 2},
		{op(syscall.ECONNREFUSED), 5},
		{op(syscall.ENETUNREACH), 3},
		{op(syscall.EHOSTUNREACH), 4},
		{op(syscall.ETIMEDOUT), 6},
		{context.DeadlineExceeded, 6},
		{context.Canceled, 1},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, 4},
		{errors.New("anything else"), 4},
	}
	for _, tt := range tests {
		if got := replyCode(tt.err); got != tt.want {
			t.Errorf("replyCode(%v) = %#x, want %#x", tt.err, got, tt.want)
		}
	}
}

// TestConcurrentTunnels: many tunnels at once keep their bytes apart.
func TestConcurrentTunnels(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	p := startProxy(t, allowedSetup())
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(wait))
			if _, err := c.Write(append(greeting(), connectName("allowed.test", b.port)...)); err != nil {
				errs <- err
				return
			}
			if rep, err := readReply(c); err != nil || rep != 0 {
				errs <- fmt.Errorf("reply %#x, %v", rep, err)
				return
			}
			msg := bytes.Repeat([]byte{byte(i)}, 256<<10+i)
			go func() {
				c.Write(msg)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err == nil && !bytes.Equal(got, msg) {
				err = fmt.Errorf("tunnel %d: got %d bytes back, want %d of %#x", i, len(got), len(msg), i)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
