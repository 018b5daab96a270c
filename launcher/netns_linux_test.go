package launcher

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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

// netnsHelperEnv turns the test binary into a probe that reports what it
// can reach from inside the namespace.
const netnsHelperEnv = "HERMETIC_NETNS_TEST_HELPER"

// netnsAsUserEnv marks a re-run of the test binary as an unprivileged user.
const netnsAsUserEnv = "HERMETIC_NETNS_TEST_AS_USER"

// init runs before TestMain: the test binary is also the probe target. (It
// is the namespace's init too, when the launcher re-executes it: that
// happens in internal/nsinit's init, before this one.)
func init() {
	if mode := os.Getenv(netnsHelperEnv); mode != "" {
		os.Exit(netnsHelper(mode, os.Args[1:]))
	}
}

// netnsHelper is the probe: one line per thing it tried.
func netnsHelper(mode string, args []string) int {
	switch mode {
	case "probe":
		// Descriptors first, before this probe opens any: every one
		// above stderr would be a way out.
		ents, _ := os.ReadDir("/proc/self/fd")
		var fds []string
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			// The Go runtime's own (epoll, cgroup files) are not counted.
			if n, _ := strconv.Atoi(e.Name()); n > 2 && (strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "pipe:")) {
				fds = append(fds, e.Name()+"->"+l)
			}
		}
		fmt.Printf("extra-fds=%s\n", strings.Join(fds, ","))
		status, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "Cap") && !strings.HasPrefix(l, "CapBnd") {
				k, v, _ := strings.Cut(l, ":")
				fmt.Printf("%s=%s\n", k, strings.TrimSpace(v))
			}
		}
		fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid())
		rc, _ := os.ReadFile("/etc/resolv.conf")
		for _, l := range strings.Split(string(rc), "\n") {
			if strings.HasPrefix(l, "nameserver") {
				fmt.Printf("resolv=%s\n", l)
			}
		}
		if ifc, err := net.InterfaceByName("lo"); err == nil {
			fmt.Printf("lo-up=%v\n", ifc.Flags&net.FlagUp != 0)
		}
		// Interfaces that can carry traffic: only lo.
		ifs, _ := net.Interfaces()
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		fmt.Printf("interfaces=%s\n", strings.Join(names, ","))
		for _, a := range args {
			kind, addr, _ := strings.Cut(a, "=")
			fmt.Printf("probe %s %s\n", a, probe(kind, addr))
		}
		return 0
	}
	return 97
}

// probe tries one destination and says what happened: the first line the
// server sent, or the error class.
func probe(kind, addr string) string {
	switch kind {
	case "tcp":
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return errClass(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return errClass(err)
		}
		return strings.TrimSpace(line)
	case "udp":
		c, err := net.Dial("udp", addr)
		if err != nil {
			return errClass(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			return errClass(err)
		}
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			return errClass(err)
		}
		return string(buf[:n])
	}
	return "bad probe"
}

func errClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error " + err.Error()
}

// hostServers runs a TCP and a UDP server on the host's loopback that
// answer "host"; nothing in the namespace must reach them.
func hostServers(t *testing.T) (tcp, udp string) {
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
			io.WriteString(c, "host\n")
			c.Close()
		}
	}()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte("host"), from)
		}
	}()
	return l.Addr().String(), pc.LocalAddr().String()
}

// serveLine answers every connection on l with one line.
func serveLine(l net.Listener, line string) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, line+"\n")
			c.Close()
		}
	}()
}

// runInNetns starts the probe in the namespace with the mechanism alone
// (no proxies, no policy), serves the sockets it hands back with canned
// answers, and returns the probe's key=value lines and its probe lines.
func runInNetns(t *testing.T, expose []uint16, probes ...string) (map[string]string, []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(netnsResolvConf), 0o644); err != nil {
		t.Fatal(err)
	}
	httpPort, socksPort := pickNetnsPorts(expose)
	spec := netnsSpec{HTTPPort: httpPort, SOCKSPort: socksPort, Expose: expose, ResolvConf: resolv}
	for i, p := range probes {
		p = strings.ReplaceAll(p, "HTTP", strconv.Itoa(int(httpPort)))
		probes[i] = strings.ReplaceAll(p, "SOCKS", strconv.Itoa(int(socksPort)))
	}
	var out strings.Builder
	cmd := exec.Command(exe, probes...)
	cmd.Env = append(os.Environ(), netnsHelperEnv+"=probe")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = sysProcAttr()
	ns, err := netnsCommand(cmd, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	if err := cmd.Start(); err != nil {
		t.Fatalf("creating the namespaces: %v", err)
	}
	socks, err := ns.sockets()
	if err != nil {
		cmd.Wait()
		t.Fatalf("%v\n%s", err, out.String())
	}
	defer socks.Close()
	serveLine(socks.HTTP, "http-proxy")
	serveLine(socks.SOCKS, "socks-proxy")
	serveLine(socks.DNSTCP, "dns-tcp")
	for i, l := range socks.Expose {
		serveLine(l, fmt.Sprintf("exposed-%d", expose[i]))
	}
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := socks.DNSUDP.ReadFrom(buf)
			if err != nil {
				return
			}
			socks.DNSUDP.WriteTo([]byte("dns-udp"), from)
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe: %v\n%s", err, out.String())
	}
	t.Logf("probe output:\n%s", out.String())
	kv := map[string]string{}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(l, "probe "); ok {
			lines = append(lines, p)
		} else if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	return kv, lines
}

// TestNetnsMechanism: inside the namespace the target has the user's ids,
// only loopback (up), the filter as its resolver and only its standard
// streams; the host's loopback servers and every outside address are out
// of reach; the sockets handed to the parent answer, and an exposed port
// reaches what the parent serves on it.
func TestNetnsMechanism(t *testing.T) {
	if os.Getenv(netnsAsUserEnv) == "" {
		t.Run("as-user", testNetnsAsUser)
	}
	hostTCP, hostUDP := hostServers(t)
	_, exposed, _ := net.SplitHostPort(hostTCP)
	// An exposed port that a host server also uses: inside, the
	// namespace's listener answers (here with a canned line; the launcher
	// relays it to the host).
	exposedPort, _ := strconv.Atoi(exposed)
	otherTCP, _ := hostServers(t)
	kv, lines := runInNetns(t, []uint16{uint16(exposedPort)},
		"tcp="+hostTCP,
		"tcp="+otherTCP,
		"udp="+hostUDP,
		"tcp=192.0.2.1:80",
		"udp=192.0.2.1:53",
		"tcp=[::1]:"+exposed,
		"udp=127.0.0.1:53",
		"tcp=127.0.0.1:53",
		"tcp=127.0.0.1:HTTP",
		"tcp=127.0.0.1:SOCKS",
	)
	want := map[string]string{
		"uid":        fmt.Sprintf("%d gid=%d", os.Getuid(), os.Getgid()),
		"resolv":     "nameserver 127.0.0.1",
		"lo-up":      "true",
		"interfaces": "lo",
		"extra-fds":  "",
	}
	if os.Getuid() != 0 {
		// Unprivileged: the target has no capability left, not even
		// inside its own namespaces.
		for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
			want[c] = "0000000000000000"
		}
	}
	for k, v := range want {
		if kv[k] != v {
			t.Errorf("%s = %q, want %q", k, kv[k], v)
		}
	}
	wantLines := []string{
		"tcp=" + hostTCP + " exposed-" + exposed,
		"tcp=" + otherTCP + " refused",
		"udp=" + hostUDP + " refused",
		"tcp=192.0.2.1:80 unreachable",
		"udp=192.0.2.1:53 unreachable",
		"tcp=[::1]:" + exposed + " refused",
		"udp=127.0.0.1:53 dns-udp",
		"tcp=127.0.0.1:53 dns-tcp",
		"tcp=127.0.0.1:" + strconv.Itoa(int(mustPort(t, lines, 8))) + " http-proxy",
		"tcp=127.0.0.1:" + strconv.Itoa(int(mustPort(t, lines, 9))) + " socks-proxy",
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("probes:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
}

// mustPort reads the port a probe line used.
func mustPort(t *testing.T, lines []string, i int) uint16 {
	t.Helper()
	if i >= len(lines) {
		return 0
	}
	hp, _, _ := strings.Cut(strings.TrimPrefix(lines[i], "tcp="), " ")
	_, p, _ := net.SplitHostPort(hp)
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// testNetnsAsUser runs TestNetnsMechanism again in a copy of the test
// binary as the unprivileged user nobody (65534), so that the namespace is
// created without privilege, as most users will run it.
func testNetnsAsUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("already unprivileged")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hermetic-netns-user-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "launcher.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd := exec.Command(bin, "-test.run=^TestNetnsMechanism$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), netnsAsUserEnv+"=1", "TMPDIR="+dir, "HOME="+dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Run(); err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "uid=65534 gid=65534") {
		t.Fatalf("did not run as 65534:\n%s", out.String())
	}
}

func TestNetnsUnavailableKnob(t *testing.T) {
	t.Setenv(netnsFailEnv, "1")
	_, err := netnsCommand(exec.Command("/bin/true"), netnsSpec{HTTPPort: 1, SOCKSPort: 2})
	if !errors.Is(err, errNetnsUnavailable) {
		t.Fatalf("err = %v, want errNetnsUnavailable", err)
	}
}

// TestNetnsInitError: a failure inside the init comes back as an error
// naming the step, and the target never runs.
func TestNetnsInitError(t *testing.T) {
	exe, _ := os.Executable()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("/bin/sh", "-c", "touch "+marker)
	http, socks := pickNetnsPorts(nil)
	ns, err := netnsCommand(cmd, netnsSpec{HTTPPort: http, SOCKSPort: socks, ResolvConf: "/nonexistent/resolv.conf"})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	if cmd.Path != exe {
		t.Fatalf("cmd.Path = %q, want the test binary", cmd.Path)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, err = ns.sockets()
	werr := cmd.Wait()
	if err == nil || !strings.Contains(err.Error(), "mounting resolv.conf") {
		t.Fatalf("sockets: %v", err)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("init exit: %v", werr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the target ran")
	}
}
