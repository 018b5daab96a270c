package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The kernel-isolation matrix (SPEC §5): clients that ignore or defeat the
// proxy variables, run inside the network namespace as root and as an
// unprivileged user, against servers on the host's loopback. None of them
// reaches the servers directly; the same server is reachable through the
// proxies when it is allowlisted. The same probes under --isolate=none show
// that the probes would notice a way out.

// netnsProbePy is the Python client: it uses _socket directly and runs with
// -I, so that neither the proxy variables nor hermetic's shim apply.
const netnsProbePy = `
import _socket, socket, sys
tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])

def report(name, fn):
    try:
        r = fn()
        print("LEAK" if r else "blocked", name, r)
    except OSError as e:
        print("blocked", name, type(e).__name__)

def tcp():
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(("127.0.0.1", tcp_port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    return s.recv(100)

def udp(addr):
    def f():
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        s.settimeout(3)
        # A DNS query for example.test, A record.
        q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x04test\x00\x00\x01\x00\x01"
        s.sendto(q, addr)
        return s.recv(512)
    return f

report("python-_socket", tcp)
report("python-udp", udp(("127.0.0.1", udp_port)))
report("raw-dns-outside", udp(("192.0.2.1", 53)))

def resolve(name):
    try:
        return ",".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)}))
    except OSError as e:
        return "error"

for n in ("svc.test", "denied.test", "meta.test", "localhost"):
    print("resolve", n, resolve(n))
`

// netnsGoDial is a Go client that dials directly, ignoring the proxy
// variables.
const netnsGoDial = `package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	c, err := net.DialTimeout("tcp", os.Args[1], 5*time.Second)
	if err != nil {
		fmt.Println("blocked go-dial")
		return
	}
	c.Close()
	fmt.Println("LEAK go-dial")
}
`

// netnsScript runs every client and prints one line each.
const netnsScript = `
P=$1; U=$2; DIR=$3
curl -s -m 5 --noproxy '*' http://127.0.0.1:$P/ >/dev/null && echo "LEAK curl-noproxy" || echo "blocked curl-noproxy"
env -i /usr/bin/curl -s -m 5 http://127.0.0.1:$P/ >/dev/null && echo "LEAK env-i-curl" || echo "blocked env-i-curl"
/usr/bin/python3 -I $DIR/probe.py $P $U
$DIR/godial 127.0.0.1:$P
echo "proxied-http $(curl -s -m 10 http://svc.test:$P/)"
SOCKS=$(echo "$ALL_PROXY" | sed 's/^socks5h:/socks5:/')
echo "proxied-socks-local-dns $(curl -s -m 10 --proxy "$SOCKS" http://svc.test:$P/)"
`

// netnsDir holds the binaries and scripts every user can read.
func netnsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hermetic-netns-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin, err := os.ReadFile(hermeticBin)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("hermetic", string(bin), 0o755)
	write("probe.py", netnsProbePy, 0o644)
	write("probe.sh", netnsScript, 0o755)
	write("godial.go", netnsGoDial, 0o644)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "godial"), filepath.Join(dir, "godial.go"))
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Go client: %v\n%s", err, out)
	}
	return dir
}

// udpEcho answers every datagram on the host's loopback.
func udpEcho(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	return port
}

// runNetns runs the copied hermetic as uid (0 or an unprivileged one).
func runNetns(t *testing.T, dir string, uid int, env []string, args ...string) result {
	t.Helper()
	home := filepath.Join(dir, fmt.Sprintf("home-%d", uid))
	os.MkdirAll(home, 0o755)
	os.Chown(home, uid, uid)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "hermetic"), args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, "LANG=C"}, env...)
	cmd.Dir = home
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running hermetic: %v", err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestNetnsMatrix(t *testing.T) {
	need(t, "curl", "/usr/bin/python3", "go")
	if os.Getuid() != 0 {
		t.Skip("the matrix switches to an unprivileged uid, which needs root")
	}
	dir := netnsDir(t)
	port := server(t, hello())
	uport := udpEcho(t)
	policyFlags := []string{
		"--allow-domain", "svc.test", "--allow-domain", "meta.test",
		"--allow-cidr", "127.0.0.1",
		"--resolve", "svc.test=127.0.0.1", "--resolve", "meta.test=169.254.169.254",
		"--resolve", "denied.test=127.0.0.1",
	}
	target := []string{"--", "/bin/sh", filepath.Join(dir, "probe.sh"), port, uport, dir}
	blocked := []string{"curl-noproxy", "env-i-curl", "python-_socket", "python-udp", "raw-dns-outside", "go-dial"}

	for _, u := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(u.name, func(t *testing.T) {
			r := runNetns(t, dir, u.uid, nil, args("--isolate=netns", policyFlags, target)...)
			if r.code != 0 {
				t.Fatalf("hermetic failed:\n%s", r)
			}
			for _, c := range blocked {
				if !strings.Contains(r.stdout, "blocked "+c) {
					t.Errorf("%s was not blocked", c)
				}
			}
			if strings.Contains(r.stdout, "LEAK") {
				t.Errorf("a client got out:\n%s", r)
			}
			mustContain(t, r,
				"proxied-http hello svc.test:"+port,
				"proxied-socks-local-dns hello svc.test:"+port,
				"resolve svc.test 127.0.0.1",
				"resolve denied.test error",
				"resolve meta.test error",
				"resolve localhost 127.0.0.1",
			)
			t.Logf("%s", r)
		})
	}

	// The same probes without the namespace: the direct clients get out,
	// so the probes above would have seen a leak.
	t.Run("none", func(t *testing.T) {
		r := runNetns(t, dir, 0, nil, args("--isolate=none", policyFlags, target)...)
		for _, c := range []string{"curl-noproxy", "env-i-curl", "python-_socket", "python-udp", "go-dial"} {
			if !strings.Contains(r.stdout, "LEAK "+c) {
				t.Errorf("%s did not get out without the namespace:\n%s", c, r)
			}
		}
	})
}

// TestNetnsExposeHostPort: an exposed host port is reachable inside at
// 127.0.0.1:PORT; another host port is not.
func TestNetnsExposeHostPort(t *testing.T) {
	need(t, "curl")
	exposed := server(t, hello())
	other := server(t, hello())
	r := hermetic(t, runOpts{}, "--no-network", "--isolate=netns", "--expose-host-port", exposed, "--",
		"/bin/sh", "-c", fmt.Sprintf(`curl -s -m 5 --noproxy '*' http://127.0.0.1:%s/; curl -s -m 5 --noproxy '*' http://127.0.0.1:%s/ || echo "other blocked"`, exposed, other))
	mustContain(t, r, "hello 127.0.0.1:"+exposed, "other blocked")
}

// TestNetnsAutoFallback: where namespaces cannot be created (simulated),
// auto runs without them after one warning line and still filters clients
// that use the proxies; netns refuses to run.
func TestNetnsAutoFallback(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	knob := []string{"HERMETIC_TEST_NETNS_UNAVAILABLE=1"}
	r := hermetic(t, runOpts{env: knob}, args("--allow-domain", "svc.test", loopbackNames("svc.test", "denied.test"), "--",
		"/bin/sh", "-c", fmt.Sprintf("curl -s -m 5 http://svc.test:%s/; curl -s -m 5 -o /dev/null -w '%%{http_code}\\n' http://denied.test:%s/", port, port))...)
	if n := strings.Count(r.stderr, "without kernel isolation"); n != 1 {
		t.Errorf("%d isolation warnings, want 1:\n%s", n, r)
	}
	mustContain(t, r, "hello svc.test:"+port, "403")

	r = hermetic(t, runOpts{env: knob}, "--no-network", "--isolate=netns", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "--isolate=netns") || !strings.Contains(r.stderr, "--isolate=none") {
		t.Errorf("--isolate=netns without namespaces:\n%s", r)
	}
}

// BenchmarkNetnsStartup times `hermetic --no-network --isolate=MODE -- true`
// for none and netns; the difference of the two is what the namespace adds
// to starting a target (the goal is under 15 ms).
//
//	go test -run '^$' -bench NetnsStartup -benchtime 200x ./integration/
func BenchmarkNetnsStartup(b *testing.B) {
	for _, mode := range []string{"none", "netns"} {
		b.Run(mode, func(b *testing.B) {
			tmp := b.TempDir()
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TMPDIR=" + tmp}
			for b.Loop() {
				cmd := exec.Command(hermeticBin, "--no-network", "--isolate="+mode, "--", "true")
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
			}
		})
	}
}

// startNetns starts the copied hermetic as uid with --no-network
// --isolate=netns and a shell target, and returns once the target has
// printed its first line.
func startNetns(t *testing.T, dir string, uid int, script string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	home := filepath.Join(dir, fmt.Sprintf("home-%d", uid))
	os.MkdirAll(home, 0o755)
	os.Chown(home, uid, uid)
	cmd := exec.Command(filepath.Join(dir, "hermetic"), "--no-network", "--isolate=netns", "--", "/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, "LANG=C"}
	cmd.Dir = home
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	line, stderr := startFirstLine(t, cmd)
	return cmd, line, stderr
}

// TestNetnsProcess: in the namespace, as root and as an unprivileged user,
// the target's exit code and signal death come back, 126 and 127 keep
// their meaning although the init execs the target, SIGTERM, SIGINT and
// SIGHUP reach the target, and killing hermetic kills the target (the
// parent-death signal survives the init's exec of the target).
func TestNetnsProcess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switches to an unprivileged uid, which needs root")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	dir := netnsDir(t)
	badelf := filepath.Join(dir, "badelf")
	if err := os.WriteFile(badelf, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(u.name, func(t *testing.T) {
			for _, c := range []struct {
				target []string
				code   int
				want   string
			}{
				{[]string{"/bin/sh", "-c", "exit 7"}, 7, ""},
				{[]string{"/bin/sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
				{[]string{"no-such-program-anywhere"}, 127, "no-such-program-anywhere: not found"},
				{[]string{badelf}, 126, "badelf: cannot execute: exec format error"},
			} {
				r := runNetns(t, dir, u.uid, nil, args("--no-network", "--isolate=netns", "--", c.target)...)
				if r.code != c.code || !strings.Contains(r.stderr, c.want) {
					t.Errorf("%q: exit %d, want %d and %q\n%s", c.target, r.code, c.code, c.want, r)
				}
			}
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
				// The shell runs its trap once the short sleep ends.
				script := fmt.Sprintf(`trap 'exit %d' %d; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 99`, 40+int(sig), int(sig))
				cmd, line, stderr := startNetns(t, dir, u.uid, script)
				if line != "ready" {
					t.Fatalf("target said %q\n%s", line, stderr)
				}
				cmd.Process.Signal(sig)
				waitTimeout(cmd, 30*time.Second)
				if code := cmd.ProcessState.ExitCode(); code != 40+int(sig) {
					t.Errorf("%v: exit %d, want %d\n%s", sig, code, 40+int(sig), stderr)
				}
			}
			cmd, line, stderr := startNetns(t, dir, u.uid, `echo $$; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`)
			pid, err := strconv.Atoi(line)
			if err != nil || !alive(pid) {
				t.Fatalf("target pid %q\n%s", line, stderr)
			}
			cmd.Process.Kill()
			waitTimeout(cmd, 10*time.Second)
			// The kernel kills the target as hermetic dies.
			if !awaitGone(pid, 20*time.Second) {
				t.Fatalf("target %d outlived a killed hermetic", pid)
			}
		})
	}
}

// tiocstiScript makes a pty its controlling terminal in a new session and
// pushes a byte into it with TIOCSTI: the way a target would type commands
// into the user's terminal. It prints "tiocsti 0" when the ioctl worked and
// "tiocsti 13" when it was refused with EPERM.
const tiocstiScript = `
import fcntl, os, pty, termios
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        m, s = pty.openpty()
        fcntl.ioctl(s, termios.TIOCSCTTY, 0)
        fcntl.ioctl(s, termios.TIOCSTI, b"x")
        os._exit(0)
    except PermissionError:
        os._exit(13)
    except BaseException as e:
        print("error", e, flush=True)
        os._exit(3)
_, st = os.waitpid(pid, 0)
print("tiocsti", os.waitstatus_to_exitcode(st), flush=True)
`

// TestNetnsRefusesTerminalInjection: in the namespace the target cannot push
// input into a terminal (which the user's shell would run outside the
// namespace), as root and as an unprivileged user.
func TestNetnsRefusesTerminalInjection(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switches to an unprivileged uid, which needs root")
	}
	// The system's python3: one under root's home is not readable by the
	// unprivileged uid.
	const py = "/usr/bin/python3"
	need(t, py)
	dir := netnsDir(t)
	for _, u := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(u.name, func(t *testing.T) {
			r := runNetns(t, dir, u.uid, nil, "--no-network", "--isolate=netns", "--", py, "-I", "-c", tiocstiScript)
			if !strings.Contains(r.stdout, "tiocsti 13") {
				t.Errorf("TIOCSTI in the namespace was not refused\n%s", r)
			}
		})
	}
	// The probe itself works: without the namespace the ioctl goes
	// through where the kernel allows it at all.
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "1" {
		r := runNetns(t, dir, 0, nil, "--no-network", "--isolate=none", "--", py, "-I", "-c", tiocstiScript)
		if !strings.Contains(r.stdout, "tiocsti 0") {
			t.Errorf("the probe does not work without the namespace either\n%s", r)
		}
	}
}

// TestNetnsLeavesNoProcess: what the target leaves running in the
// background dies with the run when it ran in the namespace, as root and as
// an unprivileged user.
func TestNetnsLeavesNoProcess(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switches to an unprivileged uid, which needs root")
	}
	dir := netnsDir(t)
	for _, u := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"nobody", 65534}} {
		t.Run(u.name, func(t *testing.T) {
			r := runNetns(t, dir, u.uid, nil, "--no-network", "--isolate=netns", "--",
				"/bin/sh", "-c", "sleep 30 </dev/null >/dev/null 2>&1 & echo $!")
			pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
			if err != nil || r.code != 0 {
				t.Fatalf("background pid %q\n%s", r.stdout, r)
			}
			if !awaitGone(pid, 10*time.Second) {
				t.Fatalf("the target's background process %d outlived the run", pid)
			}
		})
	}
}
