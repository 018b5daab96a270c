//go:build linux

package socks

import (
	"context"
	"fmt"
	"github.com/hermetic-dev/hermetic/internal/testnet"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault tests: what a client sees when the upstream, DNS or the client
// itself misbehaves. Each ends with nothing held: LeakCheck runs after the
// proxy's own cleanup. Short timeouts make them fast; the pass criteria are
// only what happens, within bounded waits.

// resetter is a loopback server that reads the client's first bytes,
// answers "partial" and resets the connection.
func resetter(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				c.SetDeadline(time.Now().Add(wait))
				c.Read(make([]byte, 4096))
				io.WriteString(c, "partial")
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			})
		}
	})
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// TestUpstreamResetMidTransfer: the client's tunnel ends promptly when the
// upstream resets it, after what the upstream did send.
func TestUpstreamResetMidTransfer(t *testing.T) {
	testnet.LeakCheck(t)
	port := resetter(t)
	p := startProxy(t, allowedSetup())
	c := dialProxy(t, p.addr)
	if rep := connect(t, c, connectName("allowed.test", port)); rep != 0 {
		t.Fatalf("reply %#x", rep)
	}
	c.Write([]byte("go"))
	got, ok := closedByPeer(c)
	if !ok {
		t.Fatal("the client's tunnel outlived the upstream's reset")
	}
	if !strings.HasPrefix("partial", string(got)) {
		t.Errorf("client got %q", got)
	}
}

// blockingLookup answers nothing until the lookup's context ends: a DNS
// server that never replies.
func blockingLookup(ctx context.Context, _ string, _ int) []netip.Addr {
	<-ctx.Done()
	return nil
}

// TestUpstreamTimeouts: a name whose lookup never returns and an address
// that never completes the TCP handshake both end in reply 0x06 (the RFC's
// "TTL expired", the code SOCKS clients take for a timeout) once the
// dialer's deadline passes, and the log says what timed out.
func TestUpstreamTimeouts(t *testing.T) {
	testnet.LeakCheck(t)
	hole := uint16(testnet.Blackhole(t))
	su := allowedSetup()
	su.cfg.AllowDomains = append(su.cfg.AllowDomains, "slow.test")
	su.res.answer = func(ctx context.Context, host string, call int) []netip.Addr {
		if host == "slow.test" {
			return blockingLookup(ctx, host, call)
		}
		return []netip.Addr{loopback4}
	}
	var mu sync.Mutex
	var logs []string
	su.opts.Logf = func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	su.dialTimeout = 300 * time.Millisecond
	p := startProxy(t, su)
	tests := []struct {
		name, log string
		req       []byte
	}{
		{"DNS never answers", `connect "slow.test:80": hermetic: resolving slow.test`, connectName("slow.test", 80)},
		{"no TCP handshake", fmt.Sprintf(`connect "allowed.test:%d"`, hole), connectName("allowed.test", hole)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, p.addr)
			if rep := connect(t, c, tt.req); rep != 6 {
				t.Fatalf("reply %#x, want 0x06", rep)
			}
			if _, ok := closedByPeer(c); !ok {
				t.Fatal("the connection stayed open after the failure reply")
			}
			// The server logs once the connection is closed: poll, bounded.
			for i := 0; ; i++ {
				mu.Lock()
				got := slices.Clone(logs)
				mu.Unlock()
				if slices.ContainsFunc(got, func(l string) bool {
					return strings.Contains(l, tt.log) && (strings.Contains(l, "deadline exceeded") || strings.Contains(l, "timeout"))
				}) {
					return
				}
				if i == 400 {
					t.Fatalf("no log line with %q and the timeout: %q", tt.log, got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestSlowloris: a client that trickles its greeting, credentials and
// request one byte at a time, slower than the handshake deadline allows, is
// disconnected before it finishes; nothing is decided or dialled for it.
func TestSlowloris(t *testing.T) {
	testnet.LeakCheck(t)
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	for _, auth := range []bool{false, true} {
		t.Run(fmt.Sprintf("credentials=%v", auth), func(t *testing.T) {
			su := allowedSetup()
			su.opts.HandshakeTimeout = 300 * time.Millisecond
			req := append(greeting(), connectName("allowed.test", b.port)...)
			if auth {
				su.opts.Credentials = Credentials{User: "user", Password: "password"}
				req = append([]byte{5, 1, 2}, userPass("user", "password")...)
				req = append(req, connectName("allowed.test", b.port)...)
			}
			p := startProxy(t, su)
			c := dialProxy(t, p.addr)
			done := make(chan struct{})
			go func() {
				io.Copy(io.Discard, c)
				close(done)
			}()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			sent := 0
		trickle:
			for sent < len(req) {
				select {
				case <-done:
					break trickle
				case <-tick.C:
				}
				if _, err := c.Write(req[sent : sent+1]); err != nil {
					break
				}
				sent++
			}
			select {
			case <-done:
			case <-time.After(wait):
				t.Fatal("the proxy kept a trickling client past its handshake deadline")
			}
			if sent >= len(req) {
				t.Errorf("the whole handshake (%d bytes) went out before the proxy closed it", len(req))
			}
			if n := len(p.rec.all()); n != 0 || b.accepted.Load() != 0 {
				t.Errorf("a slow client reached the dialer: %d decisions, %d connections", n, b.accepted.Load())
			}
		})
	}
}
