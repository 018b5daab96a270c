package proxy

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzRequest writes arbitrary bytes to the proxy as a client. Whatever they
// are, nothing the policy denies is ever dialled: no name outside the allow
// rules is resolved; the canaries, destinations that deny rules cover (port
// {canary} on 127.0.0.1, and all of 127.0.0.2, where the denied names and
// half of mixed.test resolve), never get a connection; every allowed
// decision is one the policy itself makes; and the proxy never panics.
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
	e := startProxy(f, cfg, Options{
		HandshakeTimeout: time.Second,
		IdleTimeout:      time.Second,
		MaxHeaderBytes:   8 << 10,
		Logf: func(format string, args ...any) {
			logMu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			logMu.Unlock()
		},
	})
	canaryAddr := netip.MustParseAddr("127.0.0.2")
	e.res.mu.Lock()
	e.res.static["denied.test"] = []netip.Addr{canaryAddr}
	e.res.static["blocked.test"] = []netip.Addr{canaryAddr}
	e.res.static["mixed.test"] = []netip.Addr{canaryAddr, loopback}
	e.res.mu.Unlock()
	pol := e.srv.opts.Dialer.Policy
	_, self, _ := net.SplitHostPort(e.addr)
	ports := strings.NewReplacer(
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
		f.Add(s)
	}

	// checked counts the decisions already judged (the recorder only grows).
	checked := 0
	f.Fuzz(func(t *testing.T, input string) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, ports.Replace(input))
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		c.Close()

		// Let the proxy finish with this connection before judging it.
		for i := 0; ; i++ {
			e.srv.mu.Lock()
			busy := len(e.srv.clients) + len(e.srv.upstreams)
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
		for _, d := range decs[checked:] {
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
		checked = len(decs)
		logMu.Lock()
		defer logMu.Unlock()
		for _, l := range logs {
			if strings.Contains(l, "panic") {
				t.Fatalf("the proxy panicked: %s", l)
			}
		}
	})
}
