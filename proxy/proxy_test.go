package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/hermetic-dev/hermetic/policy"
)

func newTLSUpstream(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls host=%s", r.Host)
	}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	return ts, port
}

func runClient(t *testing.T, name string, args ...string) (string, string, error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ioWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestCurl(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	_, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	proxyURL := "http://" + e.addr

	t.Run("connect allowed", func(t *testing.T) {
		out, errOut, err := runClient(t, "curl", "-sS", "-k", "--proxy", proxyURL, "https://allowed.test:"+tlsPort+"/")
		if err != nil || out != "tls host=allowed.test:"+tlsPort {
			t.Fatalf("curl: %v, stdout %q, stderr %q", err, out, errOut)
		}
	})
	t.Run("connect denied", func(t *testing.T) {
		out, errOut, err := runClient(t, "curl", "-sS", "-k", "--proxy", proxyURL, "https://denied.test:"+tlsPort+"/")
		if err == nil || !strings.Contains(errOut, "403") {
			t.Fatalf("curl: %v, stdout %q, stderr %q; want the CONNECT's 403", err, out, errOut)
		}
	})
	t.Run("plain allowed", func(t *testing.T) {
		out, errOut, err := runClient(t, "curl", "-sS", "--proxy", proxyURL, fmt.Sprintf("http://allowed.test:%d/p", up.port()))
		if want := fmt.Sprintf("host=allowed.test:%d path=/p", up.port()); err != nil || out != want {
			t.Fatalf("curl: %v, stdout %q (want %q), stderr %q", err, out, want, errOut)
		}
	})
	t.Run("plain denied", func(t *testing.T) {
		n := up.count()
		out, errOut, err := runClient(t, "curl", "-sS", "-i", "--proxy", proxyURL, fmt.Sprintf("http://denied.test:%d/p", up.port()))
		if err != nil {
			t.Fatalf("curl: %v, stderr %q", err, errOut)
		}
		for _, want := range []string{"HTTP/1.1 403 Forbidden", "X-Hermetic-Decision: not-allowlisted", "denied.test", "not-allowlisted"} {
			if !strings.Contains(out, want) {
				t.Errorf("response lacks %q:\n%s", want, out)
			}
		}
		if up.count() != n {
			t.Errorf("upstream got a connection for a denied request")
		}
	})
	e.checkResolved(t, "allowed.test")
}

const pythonClient = `
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
    print("HTTP %d %s %s" % (e.code, e.headers.get("X-Hermetic-Decision"), e.read().decode().strip()), end="")
except urllib.error.URLError as e:
    print("URLError %s" % e.reason, end="")
`

func TestPythonURLLib(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	_, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	proxyURL := "http://" + e.addr

	tests := []struct {
		url, want string
	}{
		{"https://allowed.test:" + tlsPort + "/", "OK tls host=allowed.test:" + tlsPort},
		{"https://denied.test:" + tlsPort + "/", "URLError Tunnel connection failed: 403 Forbidden"},
		{fmt.Sprintf("http://allowed.test:%d/x", up.port()), fmt.Sprintf("OK host=allowed.test:%d path=/x", up.port())},
		{fmt.Sprintf("http://denied.test:%d/x", up.port()), fmt.Sprintf("HTTP 403 not-allowlisted hermetic refused denied.test:%d: not-allowlisted", up.port())},
		{"http://meta.test/latest/meta-data/", "HTTP 403 cloud-metadata hermetic refused meta.test:80: cloud-metadata; cloud metadata is always denied"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			out, errOut, err := runClient(t, "python3", "-c", pythonClient, proxyURL, tt.url)
			if err != nil {
				t.Fatalf("python3: %v\n%s", err, errOut)
			}
			if !strings.HasPrefix(out, tt.want) {
				t.Errorf("got %q, want prefix %q", out, tt.want)
			}
		})
	}
	e.checkResolved(t, "allowed.test", "meta.test")
}

func TestGoClient(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	ts, tlsPort := newTLSUpstream(t)
	up := newHTTPUpstream(t)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	var connectStatus []string
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
		// httptest's certificate names example.com.
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
			connectStatus = append(connectStatus, resp.Status+" "+resp.Header.Get("X-Hermetic-Decision"))
			return nil
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	get := func(u string) (*http.Response, string, error) {
		resp, err := client.Get(u)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}

	if _, body, err := get("https://allowed.test:" + tlsPort + "/"); err != nil || body != "tls host=allowed.test:"+tlsPort {
		t.Errorf("https allowed: %v %q", err, body)
	}
	if _, _, err := get("https://denied.test:" + tlsPort + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("https denied: err %v, want Forbidden", err)
	}
	if want := []string{"200 Connection established ", "403 Forbidden not-allowlisted"}; strings.Join(connectStatus, "|") != strings.Join(want, "|") {
		t.Errorf("CONNECT responses %q, want %q", connectStatus, want)
	}
	if _, body, err := get(fmt.Sprintf("http://allowed.test:%d/a", up.port())); err != nil || !strings.HasPrefix(body, "host=allowed.test:") {
		t.Errorf("http allowed: %v %q", err, body)
	}
	resp, body, err := get(fmt.Sprintf("http://blocked.test:%d/a", up.port()))
	if err != nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Hermetic-Decision") != "denylisted" ||
		!strings.Contains(body, "blocked.test") || strings.Count(body, "\n") != 1 {
		t.Errorf("http denied: %v %v %q", err, resp, body)
	}
	e.checkResolved(t, "allowed.test")

	var sawHTTP bool
	for _, d := range e.rec.all() {
		if d.Component != policy.ComponentHTTP {
			t.Errorf("decision with component %q", d.Component)
		}
		sawHTTP = true
	}
	if !sawHTTP {
		t.Error("the recorder saw no decision")
	}
}

// TestIgnoresProxyEnvironment: goproxy's defaults would send upstream
// traffic to HTTP(S)_PROXY; the proxy must dial directly, through the policy.
func TestIgnoresProxyEnvironment(t *testing.T) {
	trap := tcpServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {})
	trapURL := fmt.Sprintf("http://127.0.0.1:%d", trap.port())
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		t.Setenv(k, trapURL)
	}
	t.Setenv("NO_PROXY", "")
	e := startProxy(t, testPolicy(), Options{})
	up := newHTTPUpstream(t)
	echo := echoServer(t)

	out := rawExchange(t, e.addr, fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n", up.port()), false)
	if !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Errorf("plain request: %q", out)
	}
	out = rawExchange(t, e.addr, fmt.Sprintf("CONNECT allowed.test:%d HTTP/1.1\r\n\r\nping", echo.port()), true)
	if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.HasSuffix(out, "ping") {
		t.Errorf("CONNECT: %q", out)
	}
	if n := trap.count(); n != 0 {
		t.Errorf("the environment's proxy got %d connections", n)
	}
}

func TestKeepAliveDecidesEachRequest(t *testing.T) {
	e := startProxy(t, testPolicy(), Options{})
	up := newHTTPUpstream(t)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	steps := []struct {
		host string
		code int
	}{
		{"allowed.test", 200},
		{"denied.test", 403},
		{"other.test", 200},
		{"blocked.test", 403},
		{"allowed.test", 200},
	}
	for _, s := range steps {
		// The Host header always names the allowed host: only the
		// request-target counts.
		fmt.Fprintf(c, "GET http://%s:%d/k HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", s.host, up.port(), up.port())
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != s.code {
			t.Fatalf("%s: %d %q, want %d", s.host, resp.StatusCode, body, s.code)
		}
		if s.code == 200 && body != fmt.Sprintf("host=%s:%d path=/k", s.host, up.port()) {
			t.Errorf("%s: upstream saw %q", s.host, body)
		}
	}
	var hosts []string
	for _, d := range e.rec.all() {
		hosts = append(hosts, d.Verdict.String()+" "+d.Host)
	}
	want := "allow allowed.test,deny denied.test,allow other.test,deny blocked.test,allow allowed.test"
	if strings.Join(hosts, ",") != want {
		t.Errorf("decisions %q, want %q", hosts, want)
	}
	if len(up.requests()) != 3 {
		t.Errorf("upstream got %d requests, want 3", len(up.requests()))
	}
	e.checkResolved(t, "allowed.test", "other.test")
}
