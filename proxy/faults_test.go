//go:build linux

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/internal/testnet"
	"github.com/hermetic-dev/hermetic/policy"
)

// Fault tests: what a client sees when the upstream, DNS or the client
// itself misbehaves. Each ends with the proxy holding nothing: LeakCheck
// runs after the proxy's own cleanup. The short timeouts make the tests
// fast; the pass criteria are only what happens, within bounded waits.

// blockingResolver answers nothing until the lookup's context ends: a DNS
// server that never replies.
type blockingResolver struct{ asked chan string }

func (r blockingResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	select {
	case r.asked <- host:
	default:
	}
	<-ctx.Done()
	return nil, &net.DNSError{Err: ctx.Err().Error(), Name: host, IsTimeout: true}
}

// TestUpstreamResetMidTransfer: an upstream that sends part of its data and
// then resets the connection ends the client's connection too, promptly,
// and nothing is left behind.
func TestUpstreamResetMidTransfer(t *testing.T) {
	testnet.LeakCheck(t)
	reset := func(resp string) *countingListener {
		return tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
			// Wait for the client's first bytes (the forwarded request, or
			// the tunnel's "go"), answer in part, then reset.
			c.Read(make([]byte, 4096))
			io.WriteString(c, resp)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		})
	}
	e := startProxy(t, testPolicy(), Options{})
	tests := []struct {
		name, req string
		up        *countingListener
		check     func(t *testing.T, out string)
	}{
		{
			name: "CONNECT tunnel",
			up:   reset("partial"),
			req:  "CONNECT allowed.test:%d HTTP/1.1\r\n\r\ngo",
			check: func(t *testing.T, out string) {
				if !strings.HasPrefix(out, "HTTP/1.1 200") {
					t.Errorf("got %q, want the tunnel's 200", out)
				}
			},
		},
		{
			name: "forwarded body",
			up:   reset("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial"),
			req:  "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n",
			check: func(t *testing.T, out string) {
				// Either the header got through before the reset and the
				// body is cut short (the client sees fewer bytes than
				// Content-Length announced), or it did not and the client
				// gets a 502; never a complete-looking response.
				switch {
				case strings.HasPrefix(out, "HTTP/1.1 200"):
					_, body, _ := strings.Cut(out, "\r\n\r\n")
					if len(body) >= 100000 {
						t.Errorf("the whole body arrived: %d bytes", len(body))
					}
				case strings.HasPrefix(out, "HTTP/1.1 502"):
				default:
					t.Errorf("got %q", out)
				}
			},
		},
		{
			name: "forwarded header",
			up:   reset("HTTP/1.1 200 OK\r\nContent-"),
			// The 502 leaves a kept-alive connection open for the next
			// request; this client has none.
			req: "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			check: func(t *testing.T, out string) {
				if !strings.HasPrefix(out, "HTTP/1.1 502") || !strings.Contains(out, "cannot reach allowed.test:") {
					t.Errorf("got %q, want a 502 naming the upstream", out)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(ioWait))
			fmt.Fprintf(c, tt.req, tt.up.port())
			out, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the client's connection outlived the upstream's reset; got %q", out)
			}
			tt.check(t, string(out))
		})
	}
}

// TestUpstreamNeverAnswers: an upstream that accepts and stays silent, or
// never completes the TCP handshake, gives the client a timeout it can read.
func TestUpstreamNeverAnswers(t *testing.T) {
	testnet.LeakCheck(t)
	silent := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { io.Copy(io.Discard, c) })
	hole := testnet.Blackhole(t)
	e := startProxy(t, testPolicy(), Options{IdleTimeout: 200 * time.Millisecond, Dialer: &policy.Dialer{Timeout: 300 * time.Millisecond}})
	tests := []struct {
		name, req, want string
	}{
		{"plain: no response header", fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", silent.port()),
			fmt.Sprintf("HTTP/1.1 504 Gateway Timeout|cannot reach allowed.test:%d|timed out", silent.port())},
		{"plain: no TCP handshake", fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", hole),
			fmt.Sprintf("HTTP/1.1 504 Gateway Timeout|cannot reach allowed.test:%d|timed out", hole)},
		{"CONNECT: no TCP handshake", fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", hole),
			fmt.Sprintf("HTTP/1.1 504 Gateway Timeout|cannot reach allowed.test:%d|timed out", hole)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := rawExchange(t, e.addr, tt.req, strings.HasPrefix(tt.req, "CONNECT"))
			for _, w := range strings.Split(tt.want, "|") {
				if !strings.Contains(out, w) {
					t.Errorf("response lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestDNSTimeout: an allowed name whose lookup never returns ends with a
// 504 that says the name did not resolve; the decision is still recorded.
func TestDNSTimeout(t *testing.T) {
	testnet.LeakCheck(t)
	cfg := testPolicy()
	cfg.AllowDomains = append(cfg.AllowDomains, "slow.test")
	e := startProxy(t, cfg, Options{Dialer: &policy.Dialer{Resolver: blockingResolver{asked: make(chan string, 1)}, Timeout: 200 * time.Millisecond}})
	for _, req := range []string{
		"CONNECT slow.test:443 HTTP/1.1\r\n\r\n",
		"GET http://slow.test/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	} {
		out := rawExchange(t, e.addr, req, strings.HasPrefix(req, "CONNECT"))
		for _, w := range []string{"HTTP/1.1 504 Gateway Timeout", "cannot reach slow.test:", "resolving slow.test", "timed out"} {
			if !strings.Contains(out, w) {
				t.Errorf("%q: response lacks %q:\n%s", req, w, out)
			}
		}
	}
	var n int
	for _, d := range e.rec.all() {
		if d.Host == "slow.test" && d.Allowed() {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d decisions for slow.test recorded, want 2: %v", n, e.rec.all())
	}
}

// TestSlowloris: a client that sends its request one byte at a time, slower
// than the header deadline allows, is disconnected before the request is
// complete; the deadline is for the whole header, so trickling does not
// extend it. Nothing is decided or dialled for it.
func TestSlowloris(t *testing.T) {
	testnet.LeakCheck(t)
	echo := echoServer(t)
	e := startProxy(t, testPolicy(), Options{HandshakeTimeout: 300 * time.Millisecond})
	for _, req := range []string{
		fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\n\r\n", echo.port()),
		fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\n\r\n", echo.port()),
	} {
		sent, closed := trickle(t, e.addr, req, 50*time.Millisecond)
		if !closed {
			t.Errorf("%q: the proxy kept a trickling client past its header deadline", req)
		}
		if sent >= len(req) {
			t.Errorf("%q: the whole request went out before the proxy closed it", req)
		}
	}
	if n := len(e.rec.all()); n != 0 || echo.count() != 0 {
		t.Errorf("slow clients reached the dialer: %d decisions, %d connections", n, echo.count())
	}
}

// trickle sends req to addr one byte per interval until the peer closes the
// connection or req is sent, and then waits (bounded) for the close. It
// returns how many bytes went out and whether the peer closed.
func trickle(t *testing.T, addr, req string, interval time.Duration) (sent int, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, c)
		close(done)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for sent < len(req) {
		select {
		case <-done:
			return sent, true
		case <-tick.C:
		}
		if _, err := c.Write([]byte{req[sent]}); err != nil {
			break
		}
		sent++
	}
	select {
	case <-done:
		return sent, true
	case <-time.After(ioWait):
		return sent, false
	}
}

// TestFaultsKeepServing: after each fault above, the same proxy still
// serves a normal tunnel: no fault takes the proxy down with it.
func TestFaultsKeepServing(t *testing.T) {
	echo := echoServer(t)
	cfg := testPolicy()
	cfg.AllowDomains = append(cfg.AllowDomains, "slow.test")
	e := startProxy(t, cfg, Options{HandshakeTimeout: 300 * time.Millisecond, IdleTimeout: 200 * time.Millisecond,
		Dialer: &policy.Dialer{Timeout: 200 * time.Millisecond}})
	trickle(t, e.addr, "GET http://allowed.test/ HTTP/1.1\r\nHost: x\r\n\r\n", 50*time.Millisecond)
	rawExchange(t, e.addr, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n", true)
	rawExchange(t, e.addr, fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", testnet.Blackhole(t)), true)

	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\nstill here", echo.port())
	br := bufio.NewReader(c)
	if resp, _ := readResponse(t, br, http.MethodConnect); resp.StatusCode != 200 {
		t.Fatalf("CONNECT after the faults: %s", resp.Status)
	}
	c.(*net.TCPConn).CloseWrite()
	if b, _ := io.ReadAll(br); string(b) != "still here" {
		t.Fatalf("tunnel after the faults echoed %q", b)
	}
}
