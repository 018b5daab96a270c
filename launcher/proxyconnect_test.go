package launcher

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/socks"
)

// startSOCKS serves hermetic's SOCKS5 proxy on loopback under cfg, with
// test names mapped to 127.0.0.1.
func startSOCKS(t *testing.T, cfg policy.Config, names ...string) string {
	t.Helper()
	return startSOCKSAuth(t, socks.Credentials{}, cfg, names...)
}

// startSOCKSAuth is startSOCKS with a proxy that requires creds.
func startSOCKSAuth(t *testing.T, creds socks.Credentials, cfg policy.Config, names ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Self = []netip.AddrPort{l.Addr().(*net.TCPAddr).AddrPort()}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := map[string][]netip.Addr{}
	for _, n := range names {
		table[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	s, err := socks.New(socks.Options{Credentials: creds, Dialer: &policy.Dialer{Policy: p, Resolver: staticResolver{table: table, next: failResolver{}}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return l.Addr().String()
}

type failResolver struct{}

func (failResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "tests never use DNS", IsNotFound: true}
}

// untilEOFServer reads everything until the client half-closes, then
// answers with what it read and closes: it only works if proxy-connect
// passes on the end of its input.
func untilEOFServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				b, _ := io.ReadAll(c)
				c.Write(append([]byte("got:"), b...))
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestProxyConnect(t *testing.T) {
	port := untilEOFServer(t)
	addr := startSOCKS(t, policy.Config{AllowDomains: []string{"ok.test"}, AllowCIDRs: []string{"127.0.0.1"}}, "ok.test", "no.test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var out bytes.Buffer
	if err := ProxyConnect(ctx, addr, nil, "ok.test", port, strings.NewReader("ping"), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "got:ping" {
		t.Errorf("got %q, want %q", out.String(), "got:ping")
	}

	out.Reset()
	err := ProxyConnect(ctx, addr, nil, "no.test", port, strings.NewReader("ping"), &out)
	if err == nil || !strings.Contains(err.Error(), "hermetic's policy refused no.test:"+port) {
		t.Errorf("denied host: %v", err)
	}
	// An address goes as an address; 127.0.0.1 is allowed by the CIDR rule.
	if err := ProxyConnect(ctx, addr, nil, "127.0.0.1", port, strings.NewReader("x"), &out); err != nil {
		t.Errorf("address destination: %v", err)
	}
	// The proxy's own address is always refused.
	_, selfPort, _ := net.SplitHostPort(addr)
	if err := ProxyConnect(ctx, addr, nil, "127.0.0.1", selfPort, strings.NewReader("x"), io.Discard); err == nil {
		t.Error("the proxy reached itself")
	}
}

func TestProxyConnectBadInput(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct{ host, port string }{
		{"ok.test", "0"}, {"ok.test", "65536"}, {"ok.test", "-1"}, {"ok.test", "x"}, {"", "22"},
		{strings.Repeat("a", 256), "22"},
	} {
		// Nothing listens on port 1: these must fail before any dial.
		if err := ProxyConnect(ctx, "127.0.0.1:1", nil, tt.host, tt.port, strings.NewReader(""), io.Discard); err == nil ||
			strings.Contains(err.Error(), "connection refused") {
			t.Errorf("ProxyConnect(%q, %q) = %v, want a refusal before dialling", tt.host, tt.port, err)
		}
	}
}

func TestProxyConnectCredentials(t *testing.T) {
	port := untilEOFServer(t)
	creds, err := socks.NewCredentials()
	if err != nil {
		t.Fatal(err)
	}
	addr := startSOCKSAuth(t, creds, policy.Config{AllowDomains: []string{"ok.test"}, AllowCIDRs: []string{"127.0.0.1"}}, "ok.test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := ProxyConnect(ctx, addr, creds.Userinfo(), "ok.test", port, strings.NewReader("ping"), &out); err != nil || out.String() != "got:ping" {
		t.Errorf("with the run's credentials: %q, %v", out.String(), err)
	}
	if err := ProxyConnect(ctx, addr, url.UserPassword(creds.User, "wrong"), "ok.test", port, strings.NewReader("ping"), io.Discard); err == nil || !strings.Contains(err.Error(), "refused the run's credentials") {
		t.Errorf("wrong password: %v", err)
	}
	if err := ProxyConnect(ctx, addr, nil, "ok.test", port, strings.NewReader("ping"), io.Discard); err == nil || !strings.Contains(err.Error(), "authentication method") {
		t.Errorf("no credentials: %v", err)
	}
}
