package proxy

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"github.com/hermetic-dev/hermetic/internal/testnet"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// credsProxy starts a proxy that requires fresh random credentials and
// returns it with them.
func credsProxy(t *testing.T) (*env, Credentials) {
	t.Helper()
	creds, err := NewCredentials()
	if err != nil {
		t.Fatal(err)
	}
	return startProxy(t, testPolicy(), Options{Credentials: creds}), creds
}

func proxyURL(e *env, user *url.Userinfo) string {
	return (&url.URL{Scheme: "http", User: user, Host: e.addr}).String()
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestCredentialsRaw: without the right Proxy-Authorization nothing is
// decided, resolved or dialled, and the answer is a 407 with the Basic
// challenge; with it, requests work and the header never goes upstream.
func TestCredentialsRaw(t *testing.T) {
	e, creds := credsProxy(t)
	echo := echoServer(t)
	up := newHTTPUpstream(t)
	good := basicAuth(creds.User, creds.Password)
	connect := fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\nHost: x\r\n", echo.port())
	get := fmt.Sprintf("GET http://allowed.test:%d/p HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", up.port())

	refused := []struct{ name, req string }{
		{"connect without", connect + "\r\nearly"},
		{"connect wrong password", connect + "Proxy-Authorization: " + basicAuth(creds.User, creds.Password+"x") + "\r\n\r\n"},
		{"connect wrong user", connect + "Proxy-Authorization: " + basicAuth("x"+creds.User, creds.Password) + "\r\n\r\n"},
		{"connect twice, one right", connect + "Proxy-Authorization: " + basicAuth("a", "b") + "\r\nProxy-Authorization: " + good + "\r\n\r\n"},
		{"connect bearer", connect + "Proxy-Authorization: Bearer " + creds.Password + "\r\n\r\n"},
		{"connect in Authorization", connect + "Authorization: " + good + "\r\n\r\n"},
		{"plain without", get + "\r\n"},
		{"plain wrong", get + "Proxy-Authorization: " + basicAuth(creds.User, "") + "\r\n\r\n"},
		{"plain denied host without", "GET http://denied.test/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
		{"malformed without", "GET /origin-form HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"},
		{"connect empty host without", "CONNECT :443 HTTP/1.1\r\n\r\n"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			out := rawExchange(t, e.addr, tt.req, strings.HasPrefix(tt.req, "CONNECT"))
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
			if err != nil {
				t.Fatalf("reading %q: %v", out, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") != `Basic realm="hermetic"` {
				t.Fatalf("got %q, want 407 with the Basic challenge", out)
			}
			if !strings.Contains(string(body), "proxy authentication") || strings.Count(string(body), "\n") != 1 {
				t.Errorf("body %q does not say what failed on one line", body)
			}
			if strings.Contains(out, creds.Password) {
				t.Errorf("the response shows the password: %q", out)
			}
		})
	}
	if n := len(e.rec.all()); n != 0 {
		t.Errorf("%d decisions for unauthenticated requests", n)
	}
	e.checkResolved(t)
	if echo.count()+up.count() != 0 {
		t.Fatalf("upstreams got %d connections from unauthenticated requests", echo.count()+up.count())
	}

	t.Run("connect with", func(t *testing.T) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioWait))
		// Lower-case scheme and header name: both are case-insensitive.
		fmt.Fprintf(c, "%sproxy-authorization: basic %s\r\n\r\nping", connect, strings.TrimPrefix(good, "Basic "))
		br := bufio.NewReader(c)
		if resp, _ := readResponse(t, br, http.MethodConnect); resp.StatusCode != 200 {
			t.Fatalf("CONNECT with credentials: %s", resp.Status)
		}
		c.(*net.TCPConn).CloseWrite()
		if b, _ := io.ReadAll(br); string(b) != "ping" {
			t.Fatalf("tunnel echoed %q", b)
		}
	})
	t.Run("plain with, header not forwarded", func(t *testing.T) {
		out := rawExchange(t, e.addr, get+"Proxy-Authorization: "+good+"\r\n\r\n", false)
		if !strings.HasPrefix(out, "HTTP/1.1 200") {
			t.Fatalf("got %q", out)
		}
		reqs := up.requests()
		if len(reqs) != 1 {
			t.Fatalf("upstream got %d requests", len(reqs))
		}
		for k, v := range reqs[0].Header {
			if strings.Contains(strings.Join(v, ","), creds.Password) || strings.EqualFold(k, "Proxy-Authorization") {
				t.Errorf("upstream received %s: %q", k, v)
			}
		}
	})
	t.Run("keep-alive retry after 407", func(t *testing.T) {
		// What a client that waits for the challenge does: the same
		// connection carries the retry.
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioWait))
		br := bufio.NewReader(c)
		req := fmt.Sprintf("GET http://allowed.test:%d/k HTTP/1.1\r\nHost: x\r\n", up.port())
		io.WriteString(c, req+"\r\n")
		if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("first: %s", resp.Status)
		}
		io.WriteString(c, req+"Proxy-Authorization: "+good+"\r\n\r\n")
		if resp, body := readResponse(t, br, http.MethodGet); resp.StatusCode != 200 || !strings.Contains(body, "path=/k") {
			t.Fatalf("retry: %s %q", resp.Status, body)
		}
	})
}

func TestCredentialsValidated(t *testing.T) {
	pol := startProxy(t, testPolicy(), Options{}).srv.opts.Dialer
	for _, c := range []Credentials{{User: "u"}, {Password: "p"}, {User: "a:b", Password: "p"}} {
		if _, err := New(Options{Dialer: pol, Credentials: c}); err == nil {
			t.Errorf("New accepted credentials %q/%q", c.User, c.Password)
		}
	}
}

// TestCredentialsCurl: curl with the credentials in the proxy URL, for
// CONNECT and plain HTTP; without them or with wrong ones, a 407.
func TestCredentialsCurl(t *testing.T) {
	e, creds := credsProxy(t)
	_, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	httpsURL := "https://allowed.test:" + tlsPort + "/"
	plainURL := fmt.Sprintf("http://allowed.test:%d/p", up.port())
	tests := []struct {
		name string
		user *url.Userinfo
		url  string
		ok   string // stdout on success; empty: want a 407
	}{
		{"connect", creds.Userinfo(), httpsURL, "tls host=allowed.test:" + tlsPort},
		{"plain", creds.Userinfo(), plainURL, fmt.Sprintf("host=allowed.test:%d path=/p", up.port())},
		{"connect without", nil, httpsURL, ""},
		{"plain without", nil, plainURL, ""},
		{"connect wrong", url.UserPassword(creds.User, "wrong"), httpsURL, ""},
		{"plain wrong", url.UserPassword(creds.User, "wrong"), plainURL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runClient(t, "curl", "-sS", "-k", "-i", "-x", proxyURL(e, tt.user), tt.url)
			if tt.ok != "" {
				if err != nil || !strings.HasSuffix(out, "\r\n\r\n"+tt.ok) {
					t.Fatalf("curl: %v, stdout %q, stderr %q", err, out, errOut)
				}
				return
			}
			if !strings.Contains(out+errOut, "407") {
				t.Fatalf("curl: %v, stdout %q, stderr %q; want a 407", err, out, errOut)
			}
		})
	}
}

const pythonCredsClient = `
import ssl, sys, urllib.request, urllib.error
proxy, url = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
    urllib.request.HTTPSHandler(context=ctx))
try:
    print("OK " + opener.open(url, timeout=15).read().decode(), end="")
except urllib.error.HTTPError as e:
    print("HTTP %d %s" % (e.code, e.headers.get("Proxy-Authenticate")), end="")
except (urllib.error.URLError, OSError) as e:
    print("ERR %s" % getattr(e, "reason", e), end="")
`

// TestCredentialsPythonURLLib: urllib takes the credentials from the proxy
// URL, as pip's and most Python tools' HTTP stacks do.
func TestCredentialsPythonURLLib(t *testing.T) {
	e, creds := credsProxy(t)
	_, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	httpsURL := "https://allowed.test:" + tlsPort + "/"
	plainURL := fmt.Sprintf("http://allowed.test:%d/x", up.port())
	tests := []struct {
		name      string
		user      *url.Userinfo
		url, want string
	}{
		{"connect", creds.Userinfo(), httpsURL, "OK tls host=allowed.test:" + tlsPort},
		{"plain", creds.Userinfo(), plainURL, fmt.Sprintf("OK host=allowed.test:%d path=/x", up.port())},
		{"connect without", nil, httpsURL, "ERR Tunnel connection failed: 407"},
		{"plain without", nil, plainURL, `HTTP 407 Basic realm="hermetic"`},
		{"connect wrong", url.UserPassword("someone", "else"), httpsURL, "ERR Tunnel connection failed: 407"},
		{"plain wrong", url.UserPassword("someone", "else"), plainURL, `HTTP 407 Basic realm="hermetic"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runClient(t, "python3", "-c", pythonCredsClient, proxyURL(e, tt.user), tt.url)
			if err != nil {
				t.Fatalf("python3: %v\n%s", err, errOut)
			}
			if !strings.HasPrefix(out, tt.want) {
				t.Errorf("got %q, want prefix %q", out, tt.want)
			}
		})
	}
}

// TestCredentialsGoClient: net/http sends the Proxy URL's user as Basic
// Proxy-Authorization, on CONNECT and on plain requests.
func TestCredentialsGoClient(t *testing.T) {
	e, creds := credsProxy(t)
	_, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	for _, tt := range []struct {
		name   string
		user   *url.Userinfo
		wantOK bool
	}{
		{"with", creds.Userinfo(), true},
		{"without", nil, false},
		{"wrong", url.UserPassword(creds.User, creds.Password[1:]), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := &http.Transport{
				Proxy:           http.ProxyURL(&url.URL{Scheme: "http", User: tt.user, Host: e.addr}),
				TLSClientConfig: insecureTLS(),
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: ioWait}
			resp, err := client.Get(fmt.Sprintf("http://allowed.test:%d/g", up.port()))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode == 200; got != tt.wantOK {
				t.Errorf("plain: %s", resp.Status)
			}
			if !tt.wantOK && resp.Header.Get("Proxy-Authenticate") != `Basic realm="hermetic"` {
				t.Errorf("plain 407 without the challenge: %v", resp.Header)
			}
			resp, err = client.Get("https://allowed.test:" + tlsPort + "/")
			if tt.wantOK {
				if err != nil {
					t.Fatalf("https: %v", err)
				}
				resp.Body.Close()
			} else if err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
				t.Errorf("https without credentials: %v, want the 407", err)
			}
		})
	}
}

// gitRepo makes a bare repository holding one commit and returns the
// directory that holds it (as repo.git) and the environment git needs.
func gitRepo(t *testing.T) (root string, env []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	env = cleanEnv("GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	return testnet.BareRepo(t, env), env
}

// serveHTTP serves h on loopback until the test ends and returns its port.
func serveHTTP(t *testing.T, h http.Handler) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ioWait}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

// TestCredentialsGit: git (libcurl, which by default waits for the 407
// challenge before sending credentials) clones through the proxy with
// http.proxy holding the credentials, from git http-backend (smart HTTP)
// and from a plain file server (dumb HTTP); without them it fails.
func TestCredentialsGit(t *testing.T) {
	root, env := gitRepo(t)
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skip("git --exec-path failed")
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skip("git-http-backend is not installed")
	}
	// Dumb HTTP needs the info/refs file that update-server-info writes.
	cmd := exec.Command("git", "-C", filepath.Join(root, "repo.git"), "update-server-info")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-server-info: %v\n%s", err, out)
	}
	smart := serveHTTP(t, &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	dumb := serveHTTP(t, http.FileServer(http.Dir(root)))
	// Over https git tunnels with CONNECT, whose 407 closes the
	// connection: libcurl must reconnect to send the credentials.
	tlsSrv := httptest.NewTLSServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(tlsSrv.Close)
	smartTLS := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	e, creds := credsProxy(t)

	clone := func(t *testing.T, proxy, scheme string, port int) (string, error) {
		dest := filepath.Join(t.TempDir(), "clone")
		ctx := t.Context()
		cmd := exec.CommandContext(ctx, "git", "-c", "http.proxy="+proxy, "-c", "http.sslVerify=false", "clone", "-q",
			fmt.Sprintf("%s://allowed.test:%d/repo.git", scheme, port), dest)
		cmd.Env = env
		cmd.WaitDelay = ioWait
		out, err := cmd.CombinedOutput()
		if err == nil {
			b, rerr := os.ReadFile(filepath.Join(dest, "README"))
			if rerr != nil || string(b) != "hermetic\n" {
				t.Errorf("cloned README %q, %v", b, rerr)
			}
		}
		return string(out), err
	}
	for _, srv := range []struct {
		name, scheme string
		port         int
	}{{"smart", "http", smart}, {"dumb", "http", dumb}, {"smart https", "https", smartTLS}} {
		t.Run(srv.name, func(t *testing.T) {
			if out, err := clone(t, proxyURL(e, creds.Userinfo()), srv.scheme, srv.port); err != nil {
				t.Fatalf("clone with credentials: %v\n%s", err, out)
			}
			out, err := clone(t, proxyURL(e, nil), srv.scheme, srv.port)
			if err == nil || !strings.Contains(out, "407") {
				t.Fatalf("clone without credentials: %v\n%s", err, out)
			}
			out, err = clone(t, proxyURL(e, url.UserPassword(creds.User, "wrong")), srv.scheme, srv.port)
			if err == nil || !strings.Contains(out, "407") {
				t.Fatalf("clone with wrong credentials: %v\n%s", err, out)
			}
		})
	}
}

// TestCredentialsPip: pip download through the proxy with the credentials
// in --proxy, from a loopback PEP 503 index; without them pip fails.
func TestCredentialsPip(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("pip is not installed")
	}
	const name = "tinypkg"
	whl := testnet.Wheel(t, name)
	file := name + "-0.1-py3-none-any.whl"
	sum := sha256.Sum256(whl)
	var served atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, file, hex.EncodeToString(sum[:]), file)
	})
	mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) { w.Write(whl) })
	port := serveHTTP(t, mux)
	e, creds := credsProxy(t)

	pip := func(proxy, dest string) (string, error) {
		_, errOut, err := runClientEnv(t, []string{"PIP_CONFIG_FILE=/dev/null", "PIP_NO_INPUT=1",
			"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1"},
			"python3", "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "15",
			"--proxy", proxy, "--index-url", fmt.Sprintf("http://allowed.test:%d/simple/", port),
			"--trusted-host", "allowed.test", "-d", dest, name)
		return errOut, err
	}
	dest := t.TempDir()
	if out, err := pip(proxyURL(e, creds.Userinfo()), dest); err != nil {
		t.Fatalf("pip with credentials: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dest, file)); err != nil {
		t.Fatalf("wheel not downloaded: %v", err)
	}
	// pip reports a failed index fetch only as "no matching
	// distribution"; that the index saw nothing is the check.
	n := served.Load()
	dest2 := t.TempDir()
	out, err := pip(proxyURL(e, url.UserPassword(creds.User, "wrong")), dest2)
	if err == nil || served.Load() != n {
		t.Fatalf("pip with wrong credentials: %v, index requests %d -> %d\n%s", err, n, served.Load(), out)
	}
	if ents, _ := os.ReadDir(dest2); len(ents) != 0 {
		t.Errorf("downloaded without credentials: %v", ents)
	}
}

// runClientEnv is runClient with extra environment variables.
func runClientEnv(t *testing.T, extra []string, name string, args ...string) (string, string, error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Env = cleanEnv(extra...)
	cmd.WaitDelay = ioWait
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// insecureTLS is for the test upstream's self-signed certificate, which is
// not what these tests are about.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }

// TestUnauthenticatedConnectionsDoNotHoldSlots: a local process without the
// credentials cannot fill the connection limit with idle connections: a
// wrong Proxy-Authorization ends the connection, a missing one is answered
// once and the connection ends at the handshake timeout unless a request on
// it authenticates; the run's own client then still gets through.
func TestUnauthenticatedConnectionsDoNotHoldSlots(t *testing.T) {
	creds, err := NewCredentials()
	if err != nil {
		t.Fatal(err)
	}
	const limit = 3
	e := startProxy(t, testPolicy(), Options{Credentials: creds, MaxConns: limit, HandshakeTimeout: 300 * time.Millisecond})
	up := newHTTPUpstream(t)
	get := fmt.Sprintf("GET http://allowed.test:%d/x HTTP/1.1\r\nHost: x\r\n", up.port())

	ended := func(t *testing.T, c net.Conn, br *bufio.Reader) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(ioWait))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the proxy kept an unauthenticated connection open")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the proxy kept an unauthenticated connection open until the test gave up")
		}
	}
	for _, tc := range []struct {
		name, auth string
		second     bool // a second request without credentials
	}{
		{"wrong credentials", "Proxy-Authorization: " + basicAuth(creds.User, "nope") + "\r\n", false},
		{"no credentials, then silence", "", false},
		{"no credentials twice", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns []net.Conn
			for range limit {
				c, err := net.Dial("tcp", e.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(ioWait))
				br := bufio.NewReader(c)
				io.WriteString(c, get+tc.auth+"\r\n")
				if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != http.StatusProxyAuthRequired {
					t.Fatalf("got %s, want 407", resp.Status)
				}
				if tc.second {
					io.WriteString(c, get+"\r\n")
					if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != http.StatusProxyAuthRequired {
						t.Fatalf("second: got %s, want 407", resp.Status)
					}
				}
				ended(t, c, br)
				conns = append(conns, c)
			}
			// Every slot is free again: the run's client is served.
			out := rawExchange(t, e.addr, get+"Proxy-Authorization: "+basicAuth(creds.User, creds.Password)+"\r\nConnection: close\r\n\r\n", false)
			if !strings.HasPrefix(out, "HTTP/1.1 200") {
				t.Fatalf("authenticated client after %d unauthenticated ones: %q", len(conns), out)
			}
		})
	}
	t.Run("an authenticated connection stays", func(t *testing.T) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioWait))
		br := bufio.NewReader(c)
		io.WriteString(c, get+"\r\n")
		if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("got %s, want 407", resp.Status)
		}
		io.WriteString(c, get+"Proxy-Authorization: "+basicAuth(creds.User, creds.Password)+"\r\n\r\n")
		if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != 200 {
			t.Fatalf("retry: %s", resp.Status)
		}
		// Past the handshake timeout, the connection still carries requests.
		time.Sleep(500 * time.Millisecond)
		io.WriteString(c, get+"Proxy-Authorization: "+basicAuth(creds.User, creds.Password)+"\r\n\r\n")
		if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != 200 {
			t.Fatalf("later request: %s", resp.Status)
		}
	})
}
