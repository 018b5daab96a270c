package socks

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/proxy"
)

// credsSetup is allowedSetup with fresh random credentials required.
func credsSetup(t *testing.T) (setup, Credentials) {
	t.Helper()
	creds, err := NewCredentials()
	if err != nil {
		t.Fatal(err)
	}
	su := allowedSetup()
	su.opts.Credentials = creds
	return su, creds
}

// userPass encodes an RFC 1929 username/password request.
func userPass(user, pass string) []byte {
	b := append([]byte{1, byte(len(user))}, user...)
	b = append(b, byte(len(pass)))
	return append(b, pass...)
}

// TestCredentialsHandshake: with credentials set, username/password is the
// only method; a client that does not offer it, or fails it, gets the RFC
// answer and a closed connection, and nothing is decided, resolved or dialled.
func TestCredentialsHandshake(t *testing.T) {
	b := startBackend(t, "tcp4", "127.0.0.1:0")
	su, creds := credsSetup(t)
	p := startProxy(t, su)
	req := connectName("allowed.test", b.port)

	refused := []struct {
		name  string
		input []byte
		want  []byte // what the proxy answers before closing
	}{
		{"no-auth only", append([]byte{5, 1, 0}, req...), []byte{5, 0xff}},
		{"gssapi only", []byte{5, 1, 1}, []byte{5, 0xff}},
		{"wrong password", bytes.Join([][]byte{{5, 2, 0, 2}, userPass(creds.User, creds.Password+"x"), req}, nil), []byte{5, 2, 1, 1}},
		{"wrong user", bytes.Join([][]byte{{5, 1, 2}, userPass(strings.ToUpper(creds.User), creds.Password), req}, nil), []byte{5, 2, 1, 1}},
		{"empty", bytes.Join([][]byte{{5, 1, 2}, userPass("", ""), req}, nil), []byte{5, 2, 1, 1}},
		{"bad subnegotiation version", bytes.Join([][]byte{{5, 1, 2}, {5}, userPass(creds.User, creds.Password)[1:], req}, nil), []byte{5, 2}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, p.addr)
			c.Write(tt.input)
			got, ok := closedByPeer(c)
			if !ok {
				t.Fatal("the proxy kept the connection open")
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("answer % x, want % x", got, tt.want)
			}
		})
	}
	if n := len(p.rec.all()); n != 0 || len(p.res.calls()) != 0 || b.accepted.Load() != 0 {
		t.Fatalf("unauthenticated clients reached the dialer: %d decisions, lookups %q, %d connections",
			n, p.res.calls(), b.accepted.Load())
	}

	t.Run("right", func(t *testing.T) {
		c := dialProxy(t, p.addr)
		c.Write(bytes.Join([][]byte{{5, 2, 0, 2}, userPass(creds.User, creds.Password), req, []byte("ping")}, nil))
		sel := make([]byte, 4)
		if _, err := io.ReadFull(c, sel); err != nil || !bytes.Equal(sel, []byte{5, 2, 1, 0}) {
			t.Fatalf("method selection and auth status % x, %v", sel, err)
		}
		h := make([]byte, 10)
		if _, err := io.ReadFull(c, h); err != nil || h[1] != 0 {
			t.Fatalf("reply % x, %v", h, err)
		}
		c.CloseWrite()
		if got, _ := closedByPeer(c); string(got) != "ping" {
			t.Fatalf("tunnel echoed %q", got)
		}
	})
}

func TestCredentialsValidated(t *testing.T) {
	su := allowedSetup()
	pol := startProxy(t, su).srv.opts.Dialer
	for _, c := range []Credentials{{User: "u"}, {Password: "p"}, {User: strings.Repeat("u", 256), Password: "p"}} {
		if _, err := New(Options{Dialer: pol, Credentials: c}); err == nil {
			t.Errorf("New accepted credentials %q/%q", c.User, c.Password)
		}
	}
}

// TestCredentialsCurl: curl with the credentials in a socks5h:// URL, and
// with --socks5-hostname and --proxy-user; without them, refused.
func TestCredentialsCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	port := httpBackend(t)
	su, creds := credsSetup(t)
	p := startProxy(t, su)
	target := "http://allowed.test:" + strconv.Itoa(int(port)) + "/"
	withURL := func(u *url.Userinfo) []string {
		return []string{"--proxy", (&url.URL{Scheme: "socks5h", User: u, Host: p.addr}).String()}
	}
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"socks5h URL", withURL(creds.Userinfo()), true},
		{"--socks5-hostname --proxy-user", []string{"--socks5-hostname", p.addr, "--proxy-user", creds.User + ":" + creds.Password}, true},
		{"without", withURL(nil), false},
		{"wrong", withURL(url.UserPassword(creds.User, "wrong")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, curl, append([]string{"-sS", "--max-time", "10"}, append(tt.args, target)...)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			out, err := cmd.CombinedOutput()
			if tt.ok {
				if err != nil || string(out) != "hello from allowed.test:"+strconv.Itoa(int(port)) {
					t.Fatalf("curl: %v\n%s", err, out)
				}
				return
			}
			if err == nil || strings.Contains(string(out), "hello") {
				t.Fatalf("curl without the right credentials succeeded: %s", out)
			}
			t.Logf("curl on refusal: %s", strings.TrimSpace(string(out)))
		})
	}
	if n := p.rec.allowed(); n != 2 {
		t.Errorf("%d allowed decisions, want the 2 of the authenticated runs", n)
	}
}

// TestCredentialsGoClient: golang.org/x/net/proxy's SOCKS5 dialer with Auth.
func TestCredentialsGoClient(t *testing.T) {
	port := httpBackend(t)
	su, creds := credsSetup(t)
	p := startProxy(t, su)
	get := func(auth *proxy.Auth) (string, error) {
		d, err := proxy.SOCKS5("tcp", p.addr, auth, proxy.Direct)
		if err != nil {
			return "", err
		}
		tr := &http.Transport{DialContext: d.(proxy.ContextDialer).DialContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get("http://allowed.test:" + strconv.Itoa(int(port)) + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(&proxy.Auth{User: creds.User, Password: creds.Password}); err != nil || !strings.HasPrefix(body, "hello from") {
		t.Fatalf("with credentials: %q, %v", body, err)
	}
	if _, err := get(nil); err == nil || !strings.Contains(err.Error(), "no acceptable authentication methods") {
		t.Errorf("without credentials: %v", err)
	}
	if _, err := get(&proxy.Auth{User: creds.User, Password: "wrong"}); err == nil || !strings.Contains(err.Error(), "username/password authentication failed") {
		t.Errorf("with wrong credentials: %v", err)
	}
}

// TestCredentialsGit: git (libcurl) clones over a socks5h:// http.proxy
// with the credentials in the URL.
func TestCredentialsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
	for _, c := range [][]string{
		{"git", "init", "-q", "-b", "main", work},
		{"sh", "-c", "echo hermetic > " + filepath.Join(work, "README")},
		{"git", "-C", work, "add", "README"},
		{"git", "-C", work, "commit", "-q", "-m", "first"},
		{"git", "clone", "-q", "--bare", work, filepath.Join(root, "repo.git")},
		{"git", "-C", filepath.Join(root, "repo.git"), "update-server-info"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	// Dumb HTTP from a file server: the transport is what is under test.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(root))}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	repoURL := "http://allowed.test:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port) + "/repo.git"

	su, creds := credsSetup(t)
	p := startProxy(t, su)
	clone := func(u *url.Userinfo) (string, error) {
		proxyURL := (&url.URL{Scheme: "socks5h", User: u, Host: p.addr}).String()
		dest := filepath.Join(t.TempDir(), "clone")
		cmd := exec.CommandContext(t.Context(), "git", "-c", "http.proxy="+proxyURL, "clone", "-q", repoURL, dest)
		cmd.Env = env
		cmd.WaitDelay = wait
		out, err := cmd.CombinedOutput()
		if err == nil {
			if b, err := os.ReadFile(filepath.Join(dest, "README")); err != nil || string(b) != "hermetic\n" {
				t.Errorf("cloned README %q, %v", b, err)
			}
		}
		return string(out), err
	}
	if out, err := clone(creds.Userinfo()); err != nil {
		t.Fatalf("clone with credentials: %v\n%s", err, out)
	}
	if out, err := clone(url.UserPassword(creds.User, "wrong")); err == nil {
		t.Fatalf("clone with wrong credentials succeeded\n%s", out)
	}
}
