package proxy

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FuzzRequest writes arbitrary bytes to the proxy as a client, over an
// in-memory connection (a Unix socket pair handed to the real Serve loop).
// Whatever they are, nothing the policy denies is ever dialled: no name
// outside the allow rules is resolved; the canaries, destinations that deny
// rules cover (port {canary} on 127.0.0.1, and all of 127.0.0.2, where the
// denied names and half of mixed.test resolve), never get a connection;
// every allowed decision is one the policy itself makes; and the proxy never
// panics. With auth set, the input goes to a proxy that requires
// credentials, and unless the input carries them ({auth} is the right
// Proxy-Authorization line) nothing at all is decided, resolved or dialled.
// In the input, {echo}, {up}, {canary}, {canary2} and {self} stand for the
// ports of the echo server, the HTTP upstream, the canaries and the proxy.
//
// Connections to the allowed upstreams are not counted against recorded
// decisions: a dial whose context is cancelled just after the TCP handshake
// (the client went away) connects without being recorded.
func FuzzRequest(f *testing.F) {
	canary := tcpServer(f, "tcp", "127.0.0.1:0", func(c net.Conn) {})
	canary2 := tcpServer(f, "tcp", "127.0.0.2:0", func(c net.Conn) {})
	echo := echoServer(f)
	up := newHTTPUpstream(f)

	cfg := testPolicy()
	cfg.AllowDomains = append(cfg.AllowDomains, "mixed.test")
	cfg.DenyCIDRs = []string{fmt.Sprintf("127.0.0.1:%d", canary.port()), "127.0.0.2"}
	var logMu sync.Mutex
	var logs []string
	creds := Credentials{User: "fuzz", Password: "s3cret"}
	canaryAddr := netip.MustParseAddr("127.0.0.2")
	start := func(creds Credentials) (*env, *pipeListener) {
		e := startProxy(f, cfg, Options{
			HandshakeTimeout: time.Second,
			IdleTimeout:      time.Second,
			MaxHeaderBytes:   8 << 10,
			Credentials:      creds,
			Logf: func(format string, args ...any) {
				logMu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				logMu.Unlock()
			},
		})
		e.res.mu.Lock()
		e.res.static["denied.test"] = []netip.Addr{canaryAddr}
		e.res.static["blocked.test"] = []netip.Addr{canaryAddr}
		e.res.static["mixed.test"] = []netip.Addr{canaryAddr, loopback}
		e.res.mu.Unlock()
		// The TCP listener stays (its address is the policy's Self, the
		// {self} canary); fuzz inputs arrive on an in-memory one.
		pl := newPipeListener()
		go e.srv.Serve(pl)
		return e, pl
	}
	open, openL := start(Credentials{})
	authed, authedL := start(creds)
	pol := open.srv.opts.Dialer.Policy
	_, self, _ := net.SplitHostPort(open.addr)
	authLine := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(creds.User+":"+creds.Password)) + "\r\n"
	ports := strings.NewReplacer(
		"{auth}", authLine,
		"{echo}", strconv.Itoa(echo.port()),
		"{up}", strconv.Itoa(up.port()),
		"{canary}", strconv.Itoa(canary.port()),
		"{canary2}", strconv.Itoa(canary2.port()),
		"{self}", self,
	)

	for _, s := range []string{
		"CONNECT allowed.test:{echo} HTTP/1.1\r\n\r\nhello",
		"CONNECT ALLOWED.TEST.:{echo} HTTP/1.1\r\nHost: denied.test\r\n\r\n",
		"CONNECT allowed.test:{canary} HTTP/1.1\r\n\r\n",
		"CONNECT 127.0.0.1:{canary} HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:{canary} HTTP/1.1\r\n\r\n",
		"CONNECT 0x7f.1:{canary} HTTP/1.1\r\n\r\n",
		"CONNECT 127.0.0.2:{canary2} HTTP/1.1\r\n\r\n",
		"CONNECT denied.test:{canary2} HTTP/1.1\r\n\r\n",
		"CONNECT mixed.test:{canary2} HTTP/1.1\r\n\r\n",
		"CONNECT mixed.test:{echo} HTTP/1.1\r\n\r\nmixed",
		"GET http://mixed.test:{up}/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://127.0.0.2:{canary2}/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT 127.0.0.1:{self} HTTP/1.1\r\n\r\n",
		"CONNECT denied.test:{echo} HTTP/1.1\r\n\r\nGET http://allowed.test:{up}/ HTTP/1.1\r\nHost: a\r\n\r\n",
		"CONNECT :443 HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\n\r\n",
		"CONNECT meta.test:80 HTTP/1.1\r\n\r\n",
		"CONNECT rebind.test:{echo} HTTP/1.1\r\n\r\n",
		"GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: denied.test\r\n\r\nGET http://denied.test:{up}/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://blocked.test:{up}/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test:{canary}/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST http://other.test:{up}/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: Host\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: allowed.test:{up}\r\n\r\n",
		"GET http://user@allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET https://allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
		"",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	for _, s := range []string{
		"CONNECT allowed.test:{echo} HTTP/1.1\r\n{auth}\r\nhello",
		"CONNECT denied.test:{canary2} HTTP/1.1\r\n{auth}\r\n",
		"CONNECT allowed.test:{echo} HTTP/1.1\r\nProxy-Authorization: Basic ZnV6ejpzM2NyZXQ=\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
		"CONNECT allowed.test:{echo} HTTP/1.1\r\nProxy-Authorization: basic ZnV6ejpzM2NyZXQ=\r\n\r\n",
		"GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
		"GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\n\r\nGET http://allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
		"GET http://blocked.test:{up}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
		"GET http://allowed.test:{up}/ HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic ZnV6ejpzM2NyZXQ\r\n\r\n",
	} {
		f.Add(s, true)
	}

	// checked counts the decisions already judged (the recorders only grow).
	checked := map[*env]int{}
	f.Fuzz(func(t *testing.T, input string, auth bool) {
		e, l := open, openL
		if auth {
			e, l = authed, authedL
		}
		input = ports.Replace(input)
		resolved := len(e.res.names())
		c, err := l.dial()
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, input)
		c.CloseWrite()
		out, _ := io.ReadAll(c)
		c.Close()

		// Let the proxy finish with this connection before judging it.
		for i := 0; ; i++ {
			e.srv.mu.Lock()
			busy := len(e.srv.clients) + len(e.srv.upstreams) + int(e.srv.dialing.Load())
			e.srv.mu.Unlock()
			if busy == 0 {
				break
			}
			if i == 500 {
				t.Fatalf("the proxy still holds %d connections", busy)
			}
			time.Sleep(10 * time.Millisecond)
		}

		e.checkResolved(t, "allowed.test", "other.test", "rebind.test", "meta.test", "mixed.test")
		if n, n2 := canary.count(), canary2.count(); n+n2 != 0 {
			t.Fatalf("the denied canaries got %d and %d connections", n, n2)
		}
		decs := e.rec.all()
		// Without the credentials (the only Basic token that decodes to
		// them is the one {auth} writes), nothing may reach the dialer.
		if auth && !strings.Contains(input, strings.TrimSuffix(authLine, "\r\n")[len("Proxy-Authorization: Basic "):]) {
			// Decisions and lookups are recorded on the dial path itself,
			// before any connection is made, so they prove nothing was
			// dialled; the upstream servers' accept counts are not used
			// here, since they can still be catching up with an earlier
			// input's connection.
			if len(decs) != checked[e] || len(e.res.names()) != resolved {
				t.Fatalf("without credentials: %v; %d decisions, %d lookups", decs[checked[e]:],
					len(decs)-checked[e], len(e.res.names())-resolved)
			}
		}
		if strings.Contains(string(out), creds.Password) && !strings.Contains(input, creds.Password) {
			t.Fatalf("the response shows the password: %q", out)
		}
		for _, d := range decs[checked[e]:] {
			if !d.Allowed() {
				continue
			}
			again := pol.Decide(d.Host, d.Port)
			if again.Allowed() && d.Addr.IsValid() {
				again = pol.CheckAddr(again, d.Addr)
			}
			if !again.Allowed() {
				t.Fatalf("dialled %s, which the policy denies: %s", d, again)
			}
			if d.Addr == canaryAddr {
				t.Fatalf("allowed a canary address: %s", d)
			}
		}
		checked[e] = len(decs)
		logMu.Lock()
		defer logMu.Unlock()
		for _, l := range logs {
			if strings.Contains(l, "panic") {
				t.Fatalf("the proxy panicked: %s", l)
			}
		}
	})
}

// pipeListener is an in-memory listener: dial hands one end of a Unix
// socket pair (half-close works as on TCP) to Accept. Fuzzing over it uses
// no ports, so millions of inputs cannot exhaust the ephemeral range.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fuzz", Net: "unix"} }

// dial returns the client end of a new connection once the server has
// accepted the other, or an error when the listener is closed.
func (l *pipeListener) dial() (*net.UnixConn, error) {
	client, server, err := socketPair()
	if err != nil {
		return nil, err
	}
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		client.Close()
		server.Close()
		return nil, net.ErrClosed
	case <-time.After(ioWait):
		// Every slot is held: the connection limit, not a hang, would be
		// the bug, and the caller reports it.
		client.Close()
		server.Close()
		return nil, fmt.Errorf("the proxy accepted no connection in %v", ioWait)
	}
}

// socketPair returns a connected pair of Unix stream sockets.
func socketPair() (a, b *net.UnixConn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			syscall.Close(fds[1])
			return nil, nil, err
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1], nil
}
