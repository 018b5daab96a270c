package proxy

import (
	"bufio"
	"fmt"
	"github.com/hermetic-dev/hermetic/internal/testnet"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHostileRequests(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{MaxHeaderBytes: 4 << 10})
	up := newHTTPUpstream(t)
	echo := echoServer(t)
	_, proxyPort, _ := net.SplitHostPort(e.addr)
	upPort := up.port()

	tests := []struct {
		name string
		req  string
		// want is the status line's prefix; decision, when set, is the
		// X-Hermetic-Decision the response must carry.
		want, decision string
		// reach is how many connections the upstreams may get.
		reach int
	}{
		{name: "connect empty host", req: "CONNECT :443 HTTP/1.1\r\nHost: :443\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect empty brackets", req: "CONNECT []:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect no port", req: "CONNECT allowed.test HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect empty port", req: "CONNECT allowed.test: HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect port zero", req: "CONNECT allowed.test:0 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect leading zero port", req: "CONNECT allowed.test:0443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect big port", req: "CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect path", req: "CONNECT /x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "connect url", req: fmt.Sprintf("CONNECT http://allowed.test:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 400"},
		{name: "connect mapped metadata", req: "CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect metadata", req: "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect decimal metadata", req: "CONNECT 2852039166:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect metadata name", req: "CONNECT metadata.google.internal:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect name to metadata", req: "CONNECT meta.test:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect nat64 metadata", req: "CONNECT [64:ff9b::a9fe:a9fe]:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "connect ipv6 unspecified", req: "CONNECT [::]:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "unspecified"},
		{name: "connect ipv6 link-local", req: "CONNECT [fe80::1]:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "link-local"},
		{name: "connect ipv6 zone", req: "CONNECT [fe80::1%25lo]:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "invalid-host"},
		{name: "connect ipv6 ula", req: "CONNECT [fd00::1]:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "connect unspecified v4", req: fmt.Sprintf("CONNECT 0.0.0.0:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 403", decision: "unspecified"},
		{name: "connect self", req: "CONNECT 127.0.0.1:" + proxyPort + " HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "self"},
		{name: "connect denied", req: fmt.Sprintf("CONNECT denied.test:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "connect denylisted", req: fmt.Sprintf("CONNECT blocked.test:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 403", decision: "denylisted"},
		{name: "connect host header ignored", req: fmt.Sprintf("CONNECT denied.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", echo.port(), echo.port()), want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "connect bad name", req: fmt.Sprintf("CONNECT a..test:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 403", decision: "invalid-host"},
		{name: "connect userinfo", req: fmt.Sprintf("CONNECT x@allowed.test:%d HTTP/1.1\r\n\r\n", echo.port()), want: "HTTP/1.1 403", decision: "invalid-host"},
		{name: "connect unknown name", req: "CONNECT nowhere.test:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "connect allowed http/1.0", req: fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.0\r\n\r\n", echo.port()), want: "HTTP/1.0 200", reach: 1},

		{name: "origin form", req: "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "origin form path", req: fmt.Sprintf("GET /x HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", upPort), want: "HTTP/1.1 400"},
		{name: "asterisk form", req: "OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "https absolute form", req: fmt.Sprintf("GET https://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", upPort), want: "HTTP/1.1 400"},
		{name: "ftp absolute form", req: "GET ftp://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "userinfo", req: fmt.Sprintf("GET http://allowed.test:%d@denied.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", upPort, upPort), want: "HTTP/1.1 400"},
		{name: "empty authority", req: "GET http:///x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "bad url port", req: "GET http://allowed.test:08/ HTTP/1.1\r\nHost: x\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "garbage", req: "\x00\x01\x02 garbage\r\n\r\n", want: "HTTP/1.1 400"},
		{name: "oversized header", req: "GET http://allowed.test/ HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", want: "HTTP/1.1 431"},
		{name: "plain denied with allowed host header", req: fmt.Sprintf("GET http://denied.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\nConnection: close\r\n\r\n", upPort, upPort), want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "plain mapped metadata", req: "GET http://[::ffff:169.254.169.254]/latest HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "plain name to metadata", req: "GET http://meta.test/latest HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n", want: "HTTP/1.1 403", decision: "cloud-metadata"},
		{name: "plain ipv6 ula", req: "GET http://[fd00::1]/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n", want: "HTTP/1.1 403", decision: "not-allowlisted"},
		{name: "plain self", req: "GET http://127.0.0.1:" + proxyPort + "/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n", want: "HTTP/1.1 403", decision: "self"},
		{name: "plain allowed", req: fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n", upPort), want: "HTTP/1.1 200", reach: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.count() + echo.count()
			var out string
			if strings.HasPrefix(tt.req, "CONNECT") {
				out = rawExchange(t, e.addr, tt.req, true)
			} else {
				out = rawExchange(t, e.addr, tt.req, false)
			}
			if !strings.HasPrefix(out, tt.want) {
				t.Fatalf("response %q, want %q", out, tt.want)
			}
			if tt.decision != "" {
				if !strings.Contains(out, "\r\nX-Hermetic-Decision: "+tt.decision+"\r\n") {
					t.Errorf("response lacks decision %q: %q", tt.decision, out)
				}
				_, body, _ := strings.Cut(out, "\r\n\r\n")
				if !strings.HasPrefix(body, "hermetic refused ") || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
					t.Errorf("body is not one refusal line: %q", body)
				}
			}
			if got := up.count() + echo.count() - before; got != tt.reach {
				t.Errorf("upstreams got %d connections, want %d", got, tt.reach)
			}
		})
	}
	e.checkResolved(t, "allowed.test", "meta.test")
}

// TestForwardRewritesHeaders: the upstream sees Host as the request-target's
// authority and none of the hop-by-hop headers.
func TestForwardRewritesHeaders(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	up := newHTTPUpstream(t)
	req := fmt.Sprintf("POST http://allowed.test:%d/h HTTP/1.1\r\n"+
		"Host: denied.test\r\n"+
		"Connection: X-Secret, close\r\n"+
		"X-Secret: 1\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"+
		"TE: trailers\r\n"+
		"Upgrade: websocket\r\n"+
		"Accept-Encoding: identity\r\n"+
		"X-Kept: yes\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n0\r\n\r\n", up.port())
	out := rawExchange(t, e.addr, req, false)
	if !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Fatalf("response %q", out)
	}
	got := up.requests()
	if len(got) != 1 {
		t.Fatalf("upstream got %d requests", len(got))
	}
	r := got[0]
	if want := fmt.Sprintf("allowed.test:%d", up.port()); r.Host != want {
		t.Errorf("upstream Host %q, want %q", r.Host, want)
	}
	for _, h := range []string{"X-Secret", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Upgrade"} {
		if v := r.Header.Values(h); len(v) > 0 {
			t.Errorf("upstream got hop-by-hop %s: %q", h, v)
		}
	}
	if r.Header.Get("X-Kept") != "yes" || r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("end-to-end headers lost: %v", r.Header)
	}
}

// TestRefusedConnectDropsPipelinedBytes: what a client sends behind a
// refused CONNECT is never forwarded, neither as tunnel bytes nor as a
// request.
func TestRefusedConnectDropsPipelinedBytes(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	up := newHTTPUpstream(t)
	echo := echoServer(t)
	pipelined := fmt.Sprintf("GET http://allowed.test:%d/smuggled HTTP/1.1\r\nHost: allowed.test\r\n\r\n", up.port())
	for _, target := range []string{
		fmt.Sprintf("denied.test:%d", echo.port()),
		"169.254.169.254:80",
		"[::ffff:169.254.169.254]:80",
		fmt.Sprintf("rebind.test:%d", echo.port()) + "x", // malformed port: 400
		":80",
	} {
		out := rawExchange(t, e.addr, "CONNECT "+target+" HTTP/1.1\r\n\r\n"+pipelined+"\x16\x03\x01tls bytes", true)
		if !strings.HasPrefix(out, "HTTP/1.1 403") && !strings.HasPrefix(out, "HTTP/1.1 400") {
			t.Errorf("CONNECT %s: %q", target, out)
		}
		if strings.Count(out, "HTTP/1.1") != 1 {
			t.Errorf("CONNECT %s: the pipelined request was answered: %q", target, out)
		}
	}
	if up.count() != 0 || echo.count() != 0 {
		t.Errorf("upstreams got %d and %d connections", up.count(), echo.count())
	}
	e.checkResolved(t)
}

// TestConnectKeepsEarlyBytes: bytes sent in the same write as the CONNECT
// (as eager TLS clients do) reach the upstream once the tunnel is up.
func TestConnectKeepsEarlyBytes(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	echo := echoServer(t)
	out := rawExchange(t, e.addr, fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\nHost: x\r\n\r\nearly bytes", echo.port()), true)
	if want := "HTTP/1.1 200 Connection established\r\n\r\nearly bytes"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestIPv6Tunnel(t *testing.T) {
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	e := startProxy(t, testPolicy(), Options{})
	l := tcpServer(t, "tcp6", "[::1]:0", func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
	out := rawExchange(t, e.addr, fmt.Sprintf("CONNECT [::1]:%d HTTP/1.1\r\n\r\nsix", l.port()), true)
	if want := "HTTP/1.1 200 Connection established\r\n\r\nsix"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	// The same address spelled with an IPv4-mapped prefix is 127.0.0.1.
	out = rawExchange(t, e.addr, fmt.Sprintf("CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1\r\n\r\n", l.port()), true)
	if !strings.HasPrefix(out, "HTTP/1.1 502") {
		t.Errorf("mapped loopback: %q, want a 502 (allowed, but nothing listens on 127.0.0.1 there)", out)
	}
}

// TestDNSRebinding: the second lookup of rebind.test answers an internal
// address; it is refused, and only the checked address is ever dialled.
func TestDNSRebinding(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	echo := echoServer(t)
	req := fmt.Sprintf("CONNECT rebind.test:%d HTTP/1.1\r\n\r\nfirst", echo.port())
	if out := rawExchange(t, e.addr, req, true); out != "HTTP/1.1 200 Connection established\r\n\r\nfirst" {
		t.Fatalf("first: %q", out)
	}
	out := rawExchange(t, e.addr, req, true)
	// The refusal names the reason but not the address the name resolved to.
	if !strings.HasPrefix(out, "HTTP/1.1 403") || !strings.Contains(out, "X-Hermetic-Decision: cloud-metadata") ||
		strings.Contains(out, "169.254.169.254") {
		t.Fatalf("second: %q", out)
	}
	if echo.count() != 1 {
		t.Errorf("echo got %d connections, want 1", echo.count())
	}
}

// TestHalfClose: each direction of a tunnel ends on its own.
func TestHalfClose(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	got := make(chan string, 1)
	// The upstream greets, half-closes, and still reads what the client
	// sends afterwards.
	up := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		io.WriteString(c, "greeting")
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", up.port())
	br := bufio.NewReader(c)
	if resp, _ := readResponse(t, br, "CONNECT"); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	b, err := io.ReadAll(br)
	if err != nil || string(b) != "greeting" {
		t.Fatalf("read %q, %v; want the greeting, then EOF", b, err)
	}
	// The client's direction is still open.
	io.WriteString(c, "after upstream EOF")
	c.(*net.TCPConn).CloseWrite()
	select {
	case s := <-got:
		if s != "after upstream EOF" {
			t.Errorf("upstream read %q", s)
		}
	case <-time.After(ioWait):
		t.Fatal("upstream never saw the client's bytes and EOF")
	}
}

// TestSlowHeaderClosed: a client that never finishes its header is
// disconnected by the handshake deadline.
func TestSlowHeaderClosed(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{HandshakeTimeout: 100 * time.Millisecond})
	for _, partial := range []string{"", "CONNECT allowed.test:443 HTTP/1.1\r\n", "GET http://allowed.test/ HTTP/1.1\r\nHost: a"} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(ioWait))
		io.WriteString(c, partial)
		_, err = io.ReadAll(c)
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%q: the proxy kept the connection open", partial)
		}
	}
	e.checkResolved(t)
}

// TestIdleTunnelClosed: a tunnel with no traffic is closed.
func TestIdleTunnelClosed(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{IdleTimeout: 100 * time.Millisecond})
	echo := echoServer(t)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", echo.port())
	br := bufio.NewReader(c)
	if resp, _ := readResponse(t, br, "CONNECT"); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	_, err = io.ReadAll(br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the idle tunnel was not closed")
	}
}

// TestMaxConns: a connection beyond the limit waits for a slot.
func TestMaxConns(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{MaxConns: 2})
	echo := echoServer(t)
	open := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(ioWait))
		fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", echo.port())
		return c, bufio.NewReader(c)
	}
	c1, br1 := open()
	readResponse(t, br1, "CONNECT")
	_, br2 := open()
	readResponse(t, br2, "CONNECT")

	c3, br3 := open()
	c3.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := br3.Peek(1); err == nil {
		t.Fatal("a third connection was served beyond MaxConns=2")
	}
	c3.SetReadDeadline(time.Now().Add(ioWait))
	c1.Close()
	if resp, _ := readResponse(t, br3, "CONNECT"); resp.StatusCode != 200 {
		t.Fatalf("third CONNECT after a slot freed: %s", resp.Status)
	}
}

// TestCloseReleasesEverything: Close ends tunnels, forwarded requests and
// half-read headers, and leaves no goroutine or descriptor behind.
func TestCloseReleasesEverything(t *testing.T) {
	testnet.LeakCheck(t)
	// A hanging upstream for a forwarded request in flight.
	hang := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { io.Copy(io.Discard, c) })
	echo := echoServer(t)
	e := startProxy(t, testPolicy(), Options{})

	var clients []net.Conn
	dial := func(req string) net.Conn {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(ioWait))
		clients = append(clients, c)
		io.WriteString(c, req)
		return c
	}
	for range 3 {
		c := dial(fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", echo.port()))
		readResponse(t, bufio.NewReader(c), "CONNECT")
	}
	dial(fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", hang.port()))
	dial("GET http://allowed.test/ HTTP/1.1\r\nHost: ")
	dial("")
	// Wait until the forwarded request has reached the hanging upstream.
	for i := 0; hang.count() == 0; i++ {
		if i == 400 {
			t.Fatal("the forwarded request never reached the upstream")
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		_, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("client %d still open after Close", i)
		}
		c.Close()
	}
	e.srv.mu.Lock()
	nc, nu := len(e.srv.clients), len(e.srv.upstreams)
	e.srv.mu.Unlock()
	if nc != 0 || nu != 0 {
		t.Errorf("after Close: %d clients and %d upstreams tracked", nc, nu)
	}
}

// TestHostileUpstream: upstream responses cannot turn a forwarded request
// into a raw relay or pass hop-by-hop headers to the client.
func TestHostileUpstream(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	tests := []struct {
		name, resp, want string
		absent           []string
	}{
		{
			name:   "unasked switch",
			resp:   "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nraw relay bytes",
			want:   "HTTP/1.1 502",
			absent: []string{"raw relay bytes", "Upgrade"},
		},
		{
			name:   "upgrade headers on 200",
			resp:   "HTTP/1.1 200 OK\r\nConnection: Upgrade, X-Hop\r\nUpgrade: websocket\r\nX-Hop: 1\r\nKeep-Alive: timeout=1\r\nProxy-Authenticate: Basic\r\nContent-Length: 2\r\n\r\nok",
			want:   "HTTP/1.1 200 OK",
			absent: []string{"Upgrade", "X-Hop", "Keep-Alive", "Proxy-Authenticate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				io.WriteString(c, tt.resp)
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
			})
			out := rawExchange(t, e.addr, fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", up.port()), false)
			if !strings.HasPrefix(out, tt.want) {
				t.Fatalf("got %q, want %q", out, tt.want)
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("response carries %q: %q", a, out)
				}
			}
		})
	}
}

// TestForwardIdle: a forwarded exchange where nothing moves for the idle
// timeout ends, whichever side stalls.
func TestForwardIdle(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{IdleTimeout: 100 * time.Millisecond})
	silent := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { io.Copy(io.Discard, c) })
	stalls := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
		io.Copy(io.Discard, c)
	})
	up := newHTTPUpstream(t)
	tests := []struct{ name, req string }{
		{"upstream never answers", fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", silent.port())},
		{"upstream stalls in the body", fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", stalls.port())},
		{"client stalls in the body", fmt.Sprintf("POST http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab", up.port())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(ioWait))
			io.WriteString(c, tt.req)
			out, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the exchange never ended; got %q", out)
			}
		})
	}
}

// TestForwardSteadyOutlivesIdle: an exchange that keeps moving outlives the
// idle timeout many times over, request body included.
func TestForwardSteadyOutlivesIdle(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{IdleTimeout: 100 * time.Millisecond})
	up := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n")
		for range 20 {
			time.Sleep(25 * time.Millisecond)
			io.WriteString(c, "x")
		}
	})
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	fmt.Fprintf(c, "POST http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody", up.port())
	out, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(out), "HTTP/1.1 200") || !strings.HasSuffix(string(out), strings.Repeat("x", 20)) {
		t.Errorf("got %q", out)
	}
}
