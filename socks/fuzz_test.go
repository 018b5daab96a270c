package socks

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/things-go/go-socks5/statute"

	"github.com/hermetic-dev/hermetic/policy"
)

// FuzzHandshake feeds arbitrary bytes to the server as a client. Whatever
// the bytes, the server must not panic, must resolve only names the policy
// allows, and must connect only where the policy allows: here, nowhere but
// the backend at 127.0.0.1:port. With auth set, the server requires
// credentials, and unless the bytes carry their RFC 1929 request nothing at
// all is decided, resolved or dialled.
func FuzzHandshake(f *testing.F) {
	b := startBackend(f, "tcp4", "127.0.0.1:0")
	port := b.port
	pol, err := policy.New(policy.Config{
		AllowDomains: []string{"allowed.test"},
		AllowCIDRs:   []string{"127.0.0.1:" + strconv.Itoa(int(port))},
	})
	if err != nil {
		f.Fatal(err)
	}
	backend := netip.AddrPortFrom(loopback4, port)

	hello := greeting()
	cat := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	for _, seed := range [][]byte{
		nil,
		{5},
		{5, 0},
		{5, 1, 2},
		{4, 1, 0, 80, 127, 0, 0, 1, 0},
		cat(hello, connectName("allowed.test", port), []byte("payload")),
		cat(hello, connectName("ALLOWED.TEST.", port)),
		cat(hello, connectAddr(loopback4, port), []byte("x")),
		cat(hello, connectAddr(netip.IPv6Loopback(), port)),
		cat(hello, connectName("0x7f000001", port)),
		cat(hello, connectName("allowed.test", 22)),
		cat(hello, connectName("denied.test", port)),
		cat(hello, connectName("", port)),
		cat(hello, connectName("allowed.test\x00", port)),
		cat(hello, connectName("169.254.169.254", 80)),
		cat(hello, connectAddr(netip.MustParseAddr("169.254.169.254"), 80)),
		cat(hello, request(2, 1, loopback4.AsSlice(), port)),
		cat(hello, request(3, 1, loopback4.AsSlice(), port)),
		cat(hello, []byte{5, 1, 0, 3, 255}),
		cat(hello, []byte{5, 1, 0, 9}),
		cat([]byte{5, 255}, bytes.Repeat([]byte{0}, 255), connectName("allowed.test", port)),
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	creds := Credentials{User: "fuzz", Password: "s3cret"}
	good := userPass(creds.User, creds.Password)
	for _, seed := range [][]byte{
		cat([]byte{5, 1, 2}, good, connectName("allowed.test", port), []byte("payload")),
		cat([]byte{5, 2, 0, 2}, good, connectName("denied.test", port)),
		cat([]byte{5, 1, 2}, good, connectAddr(loopback4, port)),
		cat([]byte{5, 1, 2}, userPass("fuzz", "s3cre"), connectName("allowed.test", port)),
		cat([]byte{5, 1, 2}, []byte{1, 4}, []byte("fuzz"), []byte{200}, []byte("s3cret")),
		cat([]byte{5, 1, 2}, []byte{2}, good[1:], connectName("allowed.test", port)),
		cat([]byte{5, 1, 0}, good, connectName("allowed.test", port)),
	} {
		f.Add(seed, true)
	}

	var allowedTotal int64
	f.Fuzz(func(t *testing.T, data []byte, auth bool) {
		// A policy bug must not turn this test into traffic off loopback:
		// check the destination these bytes name before sending them.
		if hp, ok := destinationOf(data, auth); ok {
			host, ps, err := net.SplitHostPort(hp)
			if p, perr := policy.ParsePort(ps); err == nil && perr == nil {
				if d := pol.Decide(host, p); d.Allowed() && d.Addr.IsValid() && netip.AddrPortFrom(d.Addr, p) != backend {
					t.Fatalf("policy allows %s; not sending it", d)
				}
			}
		}

		res := &resolver{answer: func(context.Context, string, int) []netip.Addr {
			// Everything resolves to loopback, so even a name resolved by
			// mistake cannot lead off the machine; the check below catches it.
			return []netip.Addr{loopback4}
		}}
		rec := &recorder{}
		opts := Options{
			Dialer:           &policy.Dialer{Policy: pol, Resolver: res, Recorder: rec, Timeout: wait},
			HandshakeTimeout: wait,
			IdleTimeout:      wait,
		}
		if auth {
			opts.Credentials = creds
		}
		srv, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		client, server := unixPair(t)
		srv.slots <- struct{}{}
		if !srv.track(server, true) {
			t.Fatal("new server refused a connection")
		}
		served := make(chan struct{})
		go func() {
			srv.serveConn(server)
			close(served)
		}()
		// Send everything, then half-close so that the server sees the end
		// of the input but can still answer.
		client.SetDeadline(time.Now().Add(wait))
		client.Write(data)
		client.CloseWrite()
		io.Copy(io.Discard, client)
		client.Close()
		select {
		case <-served:
		case <-time.After(wait):
			t.Fatal("server still busy after the client left")
		}
		srv.Close()

		// Decisions and lookups are made on the dial path before any
		// connection, so none means nothing was dialled; the backend's
		// accept count may still be catching up with an earlier input.
		if auth && !bytes.Contains(data, good) {
			if n, m := len(rec.all()), len(res.calls()); n+m != 0 {
				t.Fatalf("without credentials: %d decisions, %d lookups", n, m)
			}
		}
		for _, name := range res.calls() {
			if d := pol.Decide(name, port); !d.Allowed() {
				t.Fatalf("resolved %q, which the policy denies (%s)", name, d)
			}
		}
		for _, d := range rec.all() {
			if d.Component != policy.ComponentSOCKS {
				t.Fatalf("decision from component %q", d.Component)
			}
			if d.Allowed() {
				allowedTotal++
				if netip.AddrPortFrom(d.Addr, d.Port) != backend {
					t.Fatalf("allowed a connection to %s", d)
				}
			}
		}
		if n := b.accepted.Load(); n > allowedTotal {
			t.Fatalf("backend accepted %d connections, only %d were allowed", n, allowedTotal)
		}
	})
}

// unixPair returns a connected pair of Unix stream sockets: like loopback TCP
// (half-close included) but without using up ports at fuzzing rates.
func unixPair(t *testing.T) (client, server *net.UnixConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

// destinationOf reads a CONNECT request from data the way the server does
// (with auth, past a username/password exchange) and returns where it
// points.
func destinationOf(data []byte, auth bool) (string, bool) {
	r := bufio.NewReader(bytes.NewReader(data))
	mr, err := statute.ParseMethodRequest(r)
	method := byte(statute.MethodNoAuth)
	if auth {
		method = statute.MethodUserPassAuth
	}
	if err != nil || mr.Ver != statute.VersionSocks5 || !bytes.Contains(mr.Methods, []byte{method}) {
		return "", false
	}
	if auth {
		if _, err := statute.ParseUserPassRequest(r); err != nil {
			return "", false
		}
	}
	req, err := statute.ParseRequest(r)
	if err != nil || req.Command != statute.CommandConnect {
		return "", false
	}
	return destination(&req.DstAddr), true
}
