package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
)

// The test binary doubles as the target: with helperEnv set it acts as a
// small client instead of running tests.
const helperEnv = "HERMETIC_LAUNCHER_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helper(mode string, args []string) int {
	switch mode {
	case "get":
		// net/http honours HTTP_PROXY and friends from the environment.
		c := &http.Client{Timeout: 10 * time.Second}
		code := 0
		for _, u := range args {
			resp, err := c.Get(u)
			if err != nil {
				fmt.Printf("%s error %v\n", u, err)
				code = 3
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("%s %d %s\n", u, resp.StatusCode, strings.TrimSpace(string(body)))
			if resp.StatusCode != 200 {
				code = 3
			}
		}
		return code
	case "socks", "socks-noauth":
		// A raw SOCKS5 CONNECT to ALL_PROXY with the domain name as given,
		// authenticated (RFC 1929) with the userinfo of ALL_PROXY, unless
		// socks-noauth, which offers no authentication only.
		u, err := url.Parse(os.Getenv("ALL_PROXY"))
		if err != nil {
			fmt.Println("bad ALL_PROXY", err)
			return 3
		}
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			fmt.Println("dial", err)
			return 3
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		name := args[0]
		req := append([]byte{5, 1, 0, 3, byte(len(name))}, name...)
		reply := make([]byte, 2)
		if mode == "socks-noauth" || u.User == nil {
			c.Write([]byte{5, 1, 0})
		} else {
			c.Write([]byte{5, 1, 2})
		}
		if _, err := io.ReadFull(c, reply); err != nil {
			fmt.Println("greeting", err)
			return 3
		}
		fmt.Println("socks method", reply[1])
		if reply[1] == 2 {
			user := u.User.Username()
			pass, _ := u.User.Password()
			fmt.Println("socks password", pass)
			msg := append([]byte{1, byte(len(user))}, user...)
			c.Write(append(append(msg, byte(len(pass))), pass...))
			if _, err := io.ReadFull(c, reply); err != nil {
				fmt.Println("auth", err)
				return 3
			}
			fmt.Println("socks auth", reply[0], reply[1])
		} else if reply[1] != 0 {
			return 0
		}
		c.Write(append(req, 1, 187)) // port 443
		if _, err := io.ReadFull(c, reply); err != nil {
			fmt.Println("reply", err)
			return 3
		}
		fmt.Println("socks reply", reply[1])
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[0])
		return n
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	case "fds":
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			fmt.Println(e.Name(), l)
		}
		return 0
	case "signal":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		fmt.Println("ready")
		select {
		case s := <-ch:
			fmt.Println("got", s)
			return 40 + int(s.(syscall.Signal))
		case <-time.After(20 * time.Second):
			return 99
		}
	case "selfkill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(10 * time.Second)
		return 98
	case "sleep":
		fmt.Println("pid", os.Getpid())
		time.Sleep(60 * time.Second)
		return 0
	}
	return 97
}

// runHelper runs the test binary as the target in mode under s.
func runHelper(t *testing.T, s Settings, o RunOptions, mode string, args ...string) (*Result, string, string, error) {
	t.Helper()
	sess, err := NewSession(s)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if o.Stdout == nil {
		o.Stdout = &stdout
	}
	if o.Stderr == nil {
		o.Stderr = &stderr
	}
	if o.Stdin == nil {
		o.Stdin = strings.NewReader("")
	}
	o.Env = append(os.Environ(), helperEnv+"="+mode)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sess.Run(ctx, append([]string{exe}, args...), o)
	return res, stdout.String(), stderr.String(), err
}

func loopbackServer(t *testing.T) (port string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

func TestRunAllowAndDeny(t *testing.T) {
	port := loopbackServer(t)
	logPath := filepath.Join(t.TempDir(), "log.jsonl")
	s := Settings{
		Net: policy.Config{
			AllowDomains: []string{"allowed.test"},
			AllowCIDRs:   []string{"127.0.0.1"},
		},
		Resolve: []string{"allowed.test=127.0.0.1", "denied.test=127.0.0.1"},
		Trace:   true,
		LogFile: logPath,
	}
	allowed := "http://allowed.test:" + port + "/"
	denied := "http://denied.test:" + port + "/"
	res, out, errOut, err := runHelper(t, s, RunOptions{}, "get", allowed, denied)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, allowed+" 200 hello from allowed.test:"+port) {
		t.Errorf("allowed request: %q", out)
	}
	if !strings.Contains(out, denied+" 403") {
		t.Errorf("denied request: %q", out)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want the target's 3", res.ExitCode)
	}
	wantTrace := "[hermetic] blocked http.connect host=denied.test port=" + port + " reason=not-allowlisted"
	if !strings.Contains(errOut, wantTrace) {
		t.Errorf("stderr lacks the trace line %q:\n%s", wantTrace, errOut)
	}
	if !strings.Contains(errOut, "denied.test:"+port+" reason=not-allowlisted") || len(res.Denials) != 1 {
		t.Errorf("summary: %q, denials %+v", errOut, res.Denials)
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log has %d lines, want 2 (one allowed, one denied):\n%s", len(lines), log)
	}
	for i, want := range []string{"allow", "deny"} {
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatal(err)
		}
		if m["verdict"] != want {
			t.Errorf("log line %d: %s", i, lines[i])
		}
	}
}

func TestRunFailOnBlock(t *testing.T) {
	port := loopbackServer(t)
	s := Settings{Net: policy.Config{NoNetwork: true}, FailOnBlock: true, Quiet: true,
		Resolve: []string{"a.test=127.0.0.1"}}
	res, _, errOut, err := runHelper(t, s, RunOptions{}, "get", "http://a.test:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 2 {
		t.Errorf("exit code %d, want 2", res.ExitCode)
	}
	if errOut != "" {
		t.Errorf("--quiet run wrote %q", errOut)
	}
}

func TestRunAudit(t *testing.T) {
	port := loopbackServer(t)
	s := Settings{Net: policy.Config{Audit: true}, Resolve: []string{"one.test=127.0.0.1", "two.test=127.0.0.1"}}
	urls := []string{"http://one.test:" + port + "/", "http://two.test:" + port + "/"}
	res, out, errOut, err := runHelper(t, s, RunOptions{}, "get", urls...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || strings.Count(out, " 200 ") != 2 {
		t.Fatalf("audit run should pass: exit %d\n%s\n%s", res.ExitCode, out, errOut)
	}
	a := res.Audit
	if a == nil || strings.Join(a.Names, ",") != "one.test,two.test" || strings.Join(a.Addrs, ",") != "127.0.0.1:"+port {
		t.Fatalf("audit = %+v\n%s", a, errOut)
	}
	if !strings.Contains(errOut, a.Flags()) || !strings.Contains(errOut, `allow = ["one.test", "two.test", "127.0.0.1:`+port+`"]`) {
		t.Errorf("audit output:\n%s", errOut)
	}
	// Fed back, the allowlist lets the same run pass with nothing denied.
	s2 := Settings{Net: policy.Config{AllowDomains: a.Names, AllowCIDRs: a.Addrs}, Resolve: s.Resolve, FailOnBlock: true}
	res, out, errOut, err = runHelper(t, s2, RunOptions{}, "get", urls...)
	if err != nil || res.ExitCode != 0 || len(res.Denials) != 0 {
		t.Fatalf("fed-back allowlist: exit %d, %v\n%s\n%s", res.ExitCode, err, out, errOut)
	}
}

func TestRunEnvironment(t *testing.T) {
	s := Settings{Net: policy.Config{NoNetwork: true}}
	res, out, _, err := runHelper(t, s, RunOptions{Executable: "/opt/my hermetic/hermetic"}, "env")
	if err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	// The HTTP proxy URL carries this run's credentials.
	// The HTTP and SOCKS5 proxy URLs carry this run's credentials, the same
	// pair; the ProxyCommand (argv, which others can read) does not.
	hu, err := url.Parse(m["HTTPS_PROXY"])
	if err != nil || hu.Scheme != "http" || hu.User == nil || !strings.HasPrefix(hu.Host, "127.0.0.1:") {
		t.Fatalf("HTTPS_PROXY = %q", m["HTTPS_PROXY"])
	}
	su, err := url.Parse(m["ALL_PROXY"])
	if err != nil || su.Scheme != "socks5h" || su.User.String() != hu.User.String() || !strings.HasPrefix(su.Host, "127.0.0.1:") || m["all_proxy"] != m["ALL_PROXY"] {
		t.Errorf("proxy variables: %q %q", m["HTTPS_PROXY"], m["ALL_PROXY"])
	}
	socksAddr := su.Host
	if pass, _ := su.User.Password(); pass == "" || strings.Contains(m["GIT_SSH_COMMAND"], pass) {
		t.Errorf("GIT_SSH_COMMAND shows the password, or there is none: %q", m["GIT_SSH_COMMAND"])
	}
	want := `ssh -o 'ProxyCommand='\''/opt/my hermetic/hermetic'\'' proxy-connect --socks ` + socksAddr + ` %h %p'`
	if m["GIT_SSH_COMMAND"] != want {
		t.Errorf("GIT_SSH_COMMAND = %s\nwant            %s", m["GIT_SSH_COMMAND"], want)
	}
	if !strings.Contains(m["PYTHONPATH"], "hermetic-") {
		t.Errorf("PYTHONPATH = %q", m["PYTHONPATH"])
	}
	// The temporary directory is gone after the run.
	dir := strings.Split(m["PYTHONPATH"], ":")[0]
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s left behind: %v", dir, err)
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, n := range []string{"0", "1", "7", "2"} {
		res, _, _, err := runHelper(t, Settings{}, RunOptions{}, "exit", n)
		if err != nil || strconv.Itoa(res.ExitCode) != n {
			t.Errorf("exit %s: got %+v, %v", n, res, err)
		}
	}
	res, _, _, err := runHelper(t, Settings{}, RunOptions{}, "selfkill")
	if err != nil || res.ExitCode != 128+9 || res.Signal != syscall.SIGKILL {
		t.Errorf("killed target: got %+v, %v", res, err)
	}
}

func TestRunNotFound(t *testing.T) {
	sess, _ := NewSession(Settings{})
	_, err := sess.Run(context.Background(), []string{"/nonexistent/prog"}, RunOptions{Stdout: io.Discard, Stderr: io.Discard})
	if ExitCode(err) != 127 {
		t.Errorf("missing target: %v (code %d)", err, ExitCode(err))
	}
	f := filepath.Join(t.TempDir(), "noexec")
	os.WriteFile(f, []byte("#!/bin/sh\n"), 0o644)
	_, err = sess.Run(context.Background(), []string{f}, RunOptions{Stdout: io.Discard, Stderr: io.Discard})
	if ExitCode(err) != 126 {
		t.Errorf("non-executable target: %v (code %d)", err, ExitCode(err))
	}
}

func TestRunForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		sigs := make(chan os.Signal, 1)
		pr, pw := io.Pipe()
		done := make(chan struct{})
		var res *Result
		var err error
		go func() {
			defer close(done)
			res, _, _, err = runHelper(t, Settings{}, RunOptions{Signals: sigs, Stdout: pw}, "signal")
			pw.Close()
		}()
		buf := make([]byte, 6)
		if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "ready\n" {
			t.Fatalf("helper did not start: %q %v", buf, err)
		}
		go io.Copy(io.Discard, pr)
		sigs <- sig
		<-done
		if err != nil || res.ExitCode != 40+int(sig) {
			t.Errorf("%v: got %+v, %v; want exit %d", sig, res, err, 40+int(sig))
		}
	}
}

func TestRunContextCancel(t *testing.T) {
	sess, _ := NewSession(Settings{})
	exe, _ := os.Executable()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan *Result, 1)
	go func() {
		res, _ := sess.Run(ctx, []string{exe}, RunOptions{Stdout: pw, Stderr: io.Discard, Stdin: strings.NewReader(""),
			Env: append(os.Environ(), helperEnv+"=signal")})
		pw.Close()
		done <- res
	}()
	buf := make([]byte, 6)
	io.ReadFull(pr, buf)
	go io.Copy(io.Discard, pr)
	cancel()
	res := <-done
	if res == nil || res.ExitCode != 40+int(syscall.SIGTERM) {
		t.Errorf("cancelled run: %+v", res)
	}
}

func TestRunWarnsShimBypass(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "python3")
	if err := os.WriteFile(py, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "tool")
	os.WriteFile(script, []byte("#!"+py+" -E\n"), 0o755)
	tests := []struct {
		argv  []string
		s     Settings
		warn  string
		quiet bool
	}{
		{[]string{py, "-I", "-c", "pass"}, Settings{Guards: Guards{NoSubprocess: true}}, "python3 runs Python with -I, which does not load hermetic's shim, so these guards do not apply: --no-subprocess", false},
		{[]string{script}, Settings{Guards: Guards{BlockNative: true}, Net: policy.Config{NoNetwork: true}}, "with -E, which does not load hermetic's shim, so these guards do not apply: the in-process network guard, --block-native", false},
		{[]string{script}, Settings{Guards: Guards{BlockNative: true}, Quiet: true}, "", true},
		{[]string{py, "-c", "pass"}, Settings{Guards: Guards{NoSubprocess: true}}, "", false},
		{[]string{py, "-I"}, Settings{}, "", false}, // no guards: nothing is lost
	}
	for _, tt := range tests {
		sess, err := NewSession(tt.s)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		_, err = sess.Run(context.Background(), tt.argv, RunOptions{Stdout: io.Discard, Stderr: &stderr, Stdin: strings.NewReader("")})
		if err != nil {
			t.Fatal(err)
		}
		got := stderr.String()
		if tt.warn == "" && strings.Contains(got, "warning") || tt.warn != "" && !strings.Contains(got, tt.warn) {
			t.Errorf("%q: stderr %q, want warning %q", tt.argv, got, tt.warn)
		}
	}
}

// TestRunRedactsCredentials sends a SOCKS5 CONNECT whose domain name
// carries credentials (user:password@host: an invalid host, reported as
// typed):
// the trace, the exit summary and the log must not show the password.
func TestRunRedactsCredentials(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "log.jsonl")
	s := Settings{Net: policy.Config{AllowDomains: []string{"allowed.test"}}, Trace: true, LogFile: logPath}
	res, out, errOut, err := runHelper(t, s, RunOptions{}, "socks", "alice:s3cret@allowed.test")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v\n%s\n%s", res, err, out, errOut)
	}
	if !strings.Contains(out, "socks auth 1 0") || !strings.Contains(out, "socks reply 2") {
		t.Errorf("the proxy did not refuse the authenticated CONNECT (reply 2): %q", out)
	}
	_, runPass, _ := strings.Cut(out, "socks password ")
	runPass, _, _ = strings.Cut(runPass, "\n")
	if runPass == "" {
		t.Fatalf("no run password in ALL_PROXY: %q", out)
	}
	log, _ := os.ReadFile(logPath)
	if len(res.Denials) != 1 || len(log) == 0 {
		t.Fatalf("denials %+v, log %q\n%s\n%s", res.Denials, log, out, errOut)
	}
	for what, text := range map[string]string{"stderr": errOut, "log": string(log), "denial": res.Denials[0].Decision.Host} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, runPass) {
			t.Errorf("%s shows a password:\n%s", what, text)
		}
	}
	if !strings.Contains(errOut, "REDACTED") {
		t.Errorf("stderr does not say what was redacted:\n%s", errOut)
	}
}

// TestRunSOCKSNeedsCredentials: the run's SOCKS5 proxy takes only RFC 1929
// with the run's credentials; a client that offers no authentication gets
// "no acceptable methods" (0xFF) and no decision is made for it.
func TestRunSOCKSNeedsCredentials(t *testing.T) {
	s := Settings{Net: policy.Config{AllowDomains: []string{"allowed.test"}}, Resolve: []string{"allowed.test=127.0.0.1"}}
	res, out, errOut, err := runHelper(t, s, RunOptions{}, "socks-noauth", "allowed.test")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v\n%s\n%s", res, err, out, errOut)
	}
	if !strings.Contains(out, "socks method 255") || strings.Contains(out, "socks reply") || len(res.Denials) != 0 {
		t.Errorf("a client without credentials was served: %q %+v", out, res.Denials)
	}
}

// TestRunNotExecutableInNetns: in the network namespace the init execs the
// target, and an exec that fails there is still the target's failure to
// start, worded and numbered (126) as without the namespace.
func TestRunNotExecutableInNetns(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "badelf")
	if err := os.WriteFile(bad, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{IsolateNetns, IsolateNone} {
		sess, err := NewSession(Settings{Net: policy.Config{NoNetwork: true}, Isolate: mode})
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		_, err = sess.Run(context.Background(), []string{bad}, RunOptions{Stdout: io.Discard, Stderr: &stderr, Stdin: strings.NewReader("")})
		if ExitCode(err) != 126 || !strings.Contains(fmt.Sprint(err), "badelf: cannot execute: exec format error") {
			t.Errorf("%s: %v (code %d)\n%s", mode, err, ExitCode(err), stderr.String())
		}
	}
}
