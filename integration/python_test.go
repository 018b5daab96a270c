package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Python targets under the guard shim (SPEC §7), through the real binary.

// pyScript writes a Python script into a fresh directory and returns its path.
func pyScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "target.py")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// blockedLine checks that the run ended with status 2 and exactly one
// "hermetic: blocked" line, the one given.
func blockedLine(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit %d, want 2\n%s", r.code, r)
	}
	var lines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "hermetic: blocked ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("blocked lines %q, want [%q]\n%s", lines, want, r)
	}
}

func TestPythonVenvConsoleScript(t *testing.T) {
	need(t, "python3")
	venv := filepath.Join(t.TempDir(), "v")
	if out, err := exec.Command("python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("python3 -m venv: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").Output()
	if err != nil {
		t.Fatal(err)
	}
	site := strings.TrimSpace(string(out))
	// A package installed in the venv, and a console script the way
	// installers write one: the venv's interpreter in the shebang.
	os.MkdirAll(filepath.Join(site, "tinytool"), 0o700)
	os.WriteFile(filepath.Join(site, "tinytool", "__init__.py"), []byte(`import socket, sys
def main():
    print("prefix", sys.prefix)
    if sys.argv[1:] == ["net"]:
        socket.getaddrinfo("denied.test", 443)
    if sys.argv[1:] == ["write"]:
        open(sys.argv[0] + ".new", "w")
    print("done")
`), 0o600)
	tool := filepath.Join(venv, "bin", "tinytool")
	os.WriteFile(tool, []byte("#!"+filepath.Join(venv, "bin", "python")+"\nimport sys\nfrom tinytool import main\nsys.exit(main())\n"), 0o700)

	r := hermetic(t, runOpts{}, "--no-network", "--trace", "--", tool, "net")
	blockedLine(t, r, "hermetic: blocked socket.getaddrinfo: denied.test:443")
	mustContain(t, r, "prefix "+venv, "[hermetic] blocked socket.getaddrinfo host=denied.test port=443 reason=no-network")

	// The venv's own site-packages and the script stay readable under a
	// read-only root elsewhere, and native-import blocking leaves the
	// standard library alone.
	root := t.TempDir()
	r = hermetic(t, runOpts{dir: root}, "--fs-readonly="+root, "--block-native", "--seal", "--no-subprocess", "--", tool)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Errorf("the console script did not run under the guards\n%s", r)
	}
	r = hermetic(t, runOpts{dir: root}, "--fs-readonly="+root, "--", tool, "write")
	blockedLine(t, r, "hermetic: blocked open: "+tool+".new")
}

func TestPythonDirectSocketsThroughSOCKS(t *testing.T) {
	need(t, "python3")
	port := server(t, hello())
	logFile := filepath.Join(t.TempDir(), "log.jsonl")
	// No proxy variables: http.client and socket.create_connection go
	// straight for the host, and the shim carries them through the SOCKS5
	// proxy with the name, authenticating with the run's credentials
	// (RFC 1929), whose password must show in no trace, log or message.
	script := pyScript(t, `import http.client, os, socket, sys, urllib.parse
print("run password:", urllib.parse.urlsplit(os.environ["ALL_PROXY"]).password)
for k in [k for k in os.environ if k.lower().endswith("_proxy")]:
    del os.environ[k]
port = int(sys.argv[1])
c = http.client.HTTPConnection("app.test", port, timeout=20)
c.request("GET", "/")
print(c.getresponse().read().decode().strip())
s = socket.create_connection(("app.test", port), timeout=20)
s.sendall(b"GET / HTTP/1.0\r\nHost: raw.app.test\r\n\r\n")
print(s.recv(4096).decode().splitlines()[-1])
socket.create_connection(("other.test", port), timeout=20)
print("not reached")
`)
	r := hermetic(t, runOpts{}, args("--allow-domain", "app.test", loopbackNames("app.test", "other.test"), "--log-file", logFile, "--trace", "--",
		"python3", script, port)...)
	mustContain(t, r, "hello app.test:"+port, "hello raw.app.test")
	blockedLine(t, r, "hermetic: blocked socket.getaddrinfo: other.test:"+port)
	if strings.Contains(r.stdout, "not reached") {
		t.Errorf("the denied connection went ahead\n%s", r)
	}
	_, pass, _ := strings.Cut(r.stdout, "run password: ")
	pass, _, _ = strings.Cut(pass, "\n")
	if len(pass) < 16 {
		t.Fatalf("no run password in ALL_PROXY\n%s", r)
	}
	// The proxy saw the name, not an address: it decided (and resolved)
	// app.test itself.
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	socksByName := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d struct {
			Host, Component, Verdict string
		}
		if json.Unmarshal([]byte(line), &d) == nil && d.Component == "socks" {
			if d.Host != "app.test" {
				t.Errorf("the SOCKS proxy was asked for %q, want the name app.test", d.Host)
			}
			socksByName++
		}
		if strings.Contains(line, "other.test") {
			t.Errorf("the denied name reached a proxy: %s", line)
		}
	}
	if strings.Contains(r.stderr, pass) || strings.Contains(string(b), pass) {
		t.Errorf("the run's proxy password shows in stderr or the log\n%s\n%s", r, b)
	}
	if socksByName != 2 {
		t.Errorf("%d SOCKS decisions, want 2 (http.client, create_connection)\n%s", socksByName, b)
	}
}

func TestPythonViolationsEndTheRun(t *testing.T) {
	need(t, "python3")
	port := server(t, hello())
	thread := `import socket, threading, time
def f():
    socket.create_connection(("127.0.0.1", ` + port + `), timeout=5)
threading.Thread(target=f).start()
time.sleep(10)
print("not reached")
`
	asyncTask := `import asyncio
async def bad():
    await asyncio.open_connection("127.0.0.1", ` + port + `)
async def main():
    asyncio.get_running_loop().create_task(bad())
    await asyncio.sleep(10)
asyncio.run(main())
print("not reached")
`
	caught := `import os
from hermetic import PolicyViolation
try:
    os.system("true")
except PolicyViolation as e:
    print("caught", e.guard, e.target)
`
	sealed := `import hermetic, sys, os
hermetic.uninstall_all()
for k in [k for k in sys.modules if k.startswith("hermetic")]:
    del sys.modules[k]
os.system("true")
`
	tests := []struct {
		name  string
		flags []string
		code  string
		exit  int
		want  string
	}{
		{"thread", []string{"--no-network"}, thread, 2, "hermetic: blocked socket.connect: 127.0.0.1:" + port},
		{"asyncio task", []string{"--no-network"}, asyncTask, 2, "hermetic: blocked socket.connect: 127.0.0.1:" + port},
		{"raw _socket", []string{"--no-network"}, "import _socket; _socket.socket().connect(('127.0.0.1', " + port + "))", 2, "hermetic: blocked socket.connect: 127.0.0.1:" + port},
		{"caught", []string{"--no-subprocess"}, caught, 0, ""},
		{"caught, --fail-on-block", []string{"--no-subprocess", "--fail-on-block"}, caught, 2, ""},
		{"sealed", []string{"--no-subprocess", "--seal"}, sealed, 2, "hermetic: blocked os.system: true"},
		{"posix_spawn", []string{"--no-subprocess"}, "import os; os.posix_spawn('/bin/true', ['true'], {})", 2, "hermetic: blocked os.posix_spawn: /bin/true"},
		{"ctypes", []string{"--block-native"}, "import json, _decimal, sqlite3, ssl, zlib, _socket\nimport ctypes", 2, "hermetic: blocked import: ctypes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := hermetic(t, runOpts{}, append(tt.flags, "--", "python3", "-c", tt.code)...)
			if tt.want != "" {
				blockedLine(t, r, tt.want)
			} else if r.code != tt.exit {
				t.Errorf("exit %d, want %d\n%s", r.code, tt.exit, r)
			}
			if strings.Contains(r.stdout, "not reached") {
				t.Errorf("the program went on after the violation\n%s", r)
			}
			if tt.name == "caught" {
				mustContain(t, r, "caught os.system true")
			}
		})
	}
}

func TestPythonFilesystem(t *testing.T) {
	need(t, "python3")
	root := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("s"), 0o600)
	os.WriteFile(filepath.Join(root, "in.txt"), []byte("inside"), 0o600)
	os.Symlink(secret, filepath.Join(root, "link"))
	tmp := t.TempDir()
	script := `import os, sys
print(open("in.txt").read())
print("shim", os.environ["PYTHONPATH"].split(os.pathsep)[0])
for p in sys.argv[1:]:
    try:
        open(p).read()
        print("READ", p)
    except Exception as e:
        print("refused", getattr(e, "reason", type(e).__name__))
open("new.txt", "w")
`
	r := hermetic(t, runOpts{dir: root, tmp: tmp}, "--fs-readonly", "--", "python3", "-c", script,
		"link", "../"+filepath.Base(outside)+"/secret", secret)
	blockedLine(t, r, "hermetic: blocked open: new.txt")
	mustContain(t, r, "inside")
	if strings.Count(r.stdout, "refused outside-root") != 3 || strings.Contains(r.stdout, "READ") {
		t.Errorf("reads outside the root\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(root, "new.txt")); err == nil {
		t.Error("a file was written under --fs-readonly")
	}
	// The shim lived in the run's private directory, which is gone.
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left behind in TMPDIR: %v", ents)
	}
	if !strings.Contains(r.stdout, "shim "+tmp) {
		t.Errorf("the shim was not first on PYTHONPATH under TMPDIR\n%s", r)
	}

	// Without --fs-readonly, writes under the directory work with the
	// other guards on.
	r = hermetic(t, runOpts{dir: root}, "--no-subprocess", "--no-network", "--", "python3", "-c",
		`open("new.txt", "w").write("ok"); print(open("new.txt").read())`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "ok" {
		t.Errorf("a write under the guards failed\n%s", r)
	}
}

func TestPythonShimBypassWarning(t *testing.T) {
	need(t, "python3")
	for _, opt := range []string{"-I", "-S", "-E"} {
		r := hermetic(t, runOpts{}, "--no-subprocess", "--", "python3", opt, "-c", "print('ran')")
		mustContain(t, r, "ran", "warning", opt, "--no-subprocess")
	}
}

func TestPipDownloadUnderGuards(t *testing.T) {
	need(t, "python3")
	if err := exec.Command("python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skip("pip is not installed")
	}
	port := simpleIndex(t, "guardedpkg")
	dest := t.TempDir()
	env := []string{"PIP_CONFIG_FILE=/dev/null", "PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1"}
	r := hermetic(t, runOpts{env: env}, args("--allow-domain", "index.test", loopbackNames("index.test"), "--block-native", "--seal", "--trace", "--",
		"python3", "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "20",
		"--index-url", "http://index.test:"+port+"/simple/", "--trusted-host", "index.test", "-d", dest, "guardedpkg")...)
	if r.code != 0 {
		t.Fatalf("pip download under the guards failed\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(dest, "guardedpkg-0.1-py3-none-any.whl")); err != nil {
		t.Errorf("wheel not downloaded: %v\n%s", err, r)
	}
}
