package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/hermetic-dev/hermetic/internal/testnet"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tlsServer starts an HTTPS server on loopback and returns its port.
func tlsServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(hello())
	t.Cleanup(srv.Close)
	return srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
}

func TestCurlHTTPSProxy(t *testing.T) {
	need(t, "curl")
	port := tlsServer(t)
	ok := "https://allowed.test:" + port + "/"
	bad := "https://denied.test:" + port + "/"
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"), "--trace", "--",
		"sh", "-c", `curl -sS -k "$1"; echo "denied: $(curl -sS -k -o /dev/null -w '%{http_code}' "$2")"`, "sh", ok, bad)...)
	// The refusal says what, why and which flag would allow it: in the
	// trace line and in the exit summary.
	mustContain(t, r, "hello allowed.test:"+port, "denied: 000",
		"[hermetic] blocked http.connect host=denied.test port="+port+" reason=not-allowlisted",
		"[hermetic]   denied.test:"+port+" reason=not-allowlisted (allow it with --allow-domain denied.test)")
	if r.code != 0 {
		t.Errorf("exit code %d, want the target's 0\n%s", r.code, r)
	}
}

func TestCurlPlainHTTPRefusal(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("denied.test"), "--",
		"curl", "-sS", "-D", "-", "http://denied.test:"+port+"/")...)
	mustContain(t, r, "403", "X-Hermetic-Decision: not-allowlisted",
		"denied.test:"+port+": not-allowlisted; allow it with --allow-domain denied.test")
}

// TestProxyNeedsTheRunsCredentials: the HTTP proxy URL the target gets
// carries per-run credentials; without them the proxy answers 407, so
// other local processes cannot use a run's proxy.
func TestProxyNeedsTheRunsCredentials(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	script := `case $HTTP_PROXY in http://*:*@127.0.0.1:*) ;; *) echo "no credentials in $HTTP_PROXY"; exit 1 ;; esac
curl -sS "$1"
curl -sS -o /dev/null -w 'without credentials: %{http_code}\n' --noproxy '' -x "http://${HTTP_PROXY#http://*@}" "$1"`
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test"), "--", "sh", "-c", script, "sh", "http://allowed.test:"+port+"/")...)
	mustContain(t, r, "hello allowed.test:"+port, "without credentials: 407")
}

// TestPrivateAddressRefusal: an allowed name that resolves to an internal
// address is refused, and the refusal names the rule that would allow it.
func TestPrivateAddressRefusal(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	r := hermetic(t, runOpts{}, "--allow-domain", "internal.test", "--resolve", "internal.test=127.0.0.1", "--", "curl", "-sS", "http://internal.test:"+port+"/")
	mustContain(t, r, "internal.test:"+port+" reason=private-address", "--allow-cidr 127.0.0.1")
	r = hermetic(t, runOpts{}, "--allow-domain", "internal.test", "--allow-cidr", "127.0.0.1", "--resolve", "internal.test=127.0.0.1", "--", "curl", "-sS", "http://internal.test:"+port+"/")
	mustContain(t, r, "hello internal.test:"+port)
}

func TestCurlALLPROXY(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	// Without the HTTP proxy variables curl uses ALL_PROXY, the SOCKS5 proxy,
	// and sends the name unresolved (socks5h).
	script := `unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY
curl -sS "$1"
curl -sS "$2" || echo "denied exit $?"`
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"), "--trace", "--",
		"sh", "-c", script, "sh", "http://allowed.test:"+port+"/", "http://denied.test:"+port+"/")...)
	mustContain(t, r, "hello allowed.test:"+port, "denied exit 97",
		"[hermetic] blocked socks.connect host=denied.test port="+port+" reason=not-allowlisted")
}

func TestWget(t *testing.T) {
	need(t, "wget")
	port := server(t, hello())
	tport := tlsServer(t)
	script := `wget -q -O - "$1"
wget -q -O - --no-check-certificate "$2"
wget -q -O - "$3" || echo "denied exit $?"`
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"), "--",
		"sh", "-c", script, "sh", "http://allowed.test:"+port+"/", "https://allowed.test:"+tport+"/", "http://denied.test:"+port+"/")...)
	mustContain(t, r, "hello allowed.test:"+port, "hello allowed.test:"+tport, "denied exit 8")
}

func TestPythonUrllib(t *testing.T) {
	need(t, "python3")
	port := server(t, hello())
	script := `import sys, urllib.request, urllib.error
print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode().strip())
try:
    urllib.request.urlopen(sys.argv[2], timeout=20)
except urllib.error.HTTPError as e:
    print("denied", e.code, e.headers.get("X-Hermetic-Decision"))
`
	r := hermetic(t, runOpts{}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"), "--",
		"python3", "-c", script, "http://allowed.test:"+port+"/", "http://denied.test:"+port+"/")...)
	mustContain(t, r, "hello allowed.test:"+port, "denied 403 not-allowlisted")
	if r.code != 0 {
		t.Errorf("exit %d\n%s", r.code, r)
	}
}

func TestGoClient(t *testing.T) {
	port := server(t, hello())
	tport := tlsServer(t)
	r := hermetic(t, runOpts{env: []string{helperEnv + "=get"}}, args("--allow-domain", "allowed.test", loopbackNames("allowed.test", "denied.test"), "--",
		selfExe(t), "http://allowed.test:"+port+"/", "http://denied.test:"+port+"/")...)
	mustContain(t, r, "hello allowed.test:"+port, "http://denied.test:"+port+"/ 403")
	if r.code != 3 {
		t.Errorf("exit %d, want the target's 3\n%s", r.code, r)
	}
	// HTTPS through CONNECT: the refusal surfaces as a proxy error.
	r = hermetic(t, runOpts{env: []string{helperEnv + "=get"}}, args("--allow-domain", "allowed.test", loopbackNames("denied.test"), "--",
		selfExe(t), "https://denied.test:"+tport+"/")...)
	mustContain(t, r, "error", "Forbidden")
}

func TestGitCloneHTTP(t *testing.T) {
	need(t, "git")
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skip("skipped: git --exec-path failed")
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skip("skipped: git-http-backend is not installed (it comes with git)")
	}
	root := bareRepo(t)
	port := server(t, &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	dest := filepath.Join(t.TempDir(), "clone")
	env := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	r := hermetic(t, runOpts{env: env}, args("--allow-domain", "git.test", loopbackNames("git.test", "other.test"), "--",
		"git", "clone", "-q", "http://git.test:"+port+"/repo.git", dest)...)
	if r.code != 0 {
		t.Fatalf("git clone failed\n%s", r)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "README")); err != nil || string(b) != "hermetic\n" {
		t.Errorf("cloned README: %q, %v", b, err)
	}
	r = hermetic(t, runOpts{env: env}, args("--allow-domain", "git.test", loopbackNames("git.test", "other.test"), "--",
		"git", "clone", "-q", "http://other.test:"+port+"/repo.git", filepath.Join(t.TempDir(), "c2"))...)
	if r.code == 0 {
		t.Errorf("clone from a denied host succeeded\n%s", r)
	}
	mustContain(t, r, "other.test:"+port+" reason=not-allowlisted")
}

// simpleIndex serves a PEP 503 simple index holding one wheel.
func simpleIndex(t *testing.T, name string) string {
	whl := testnet.Wheel(t, name)
	file := name + "-0.1-py3-none-any.whl"
	sum := sha256.Sum256(whl)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/simple/%s/">%s</a></body></html>`, name, name)
	})
	mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`, file, hex.EncodeToString(sum[:]), file)
	})
	mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) {
		w.Write(whl)
	})
	return server(t, mux)
}

func TestPipDownload(t *testing.T) {
	need(t, "python3")
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("skipped: pip is not installed for python3 (Debian/Ubuntu: python3-pip)")
	}
	port := simpleIndex(t, "tinypkg")
	env := []string{"PIP_CONFIG_FILE=/dev/null", "PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1"}
	pip := func(host, dest string) result {
		return hermetic(t, runOpts{env: env}, args("--allow-domain", "index.test", loopbackNames("index.test", "mirror.test"), "--trace", "--",
			"python3", "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "20",
			"--index-url", "http://"+host+":"+port+"/simple/", "--trusted-host", host, "-d", dest, "tinypkg")...)
	}
	dest := t.TempDir()
	r := pip("index.test", dest)
	if r.code != 0 {
		t.Fatalf("pip download from the allowed index failed\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(dest, "tinypkg-0.1-py3-none-any.whl")); err != nil {
		t.Errorf("wheel not downloaded: %v\n%s", err, r)
	}
	dest2 := t.TempDir()
	r = pip("mirror.test", dest2)
	if r.code == 0 {
		t.Errorf("pip download from a denied index succeeded\n%s", r)
	}
	mustContain(t, r, "[hermetic] blocked http.connect host=mirror.test port="+port+" reason=not-allowlisted")
	if ents, _ := os.ReadDir(dest2); len(ents) != 0 {
		t.Errorf("files downloaded from a denied index: %v", ents)
	}
}
