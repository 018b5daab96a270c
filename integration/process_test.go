package integration

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExitCodes(t *testing.T) {
	need(t, "sh")
	port := server(t, hello())
	noexec := t.TempDir() + "/noexec"
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"propagated", []string{"--no-network", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"zero", []string{"--", "true"}, 0, ""},
		{"signal", []string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{"sigkill", []string{"--", "sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"fail-on-block", args("--allow-domain", "allowed.test", loopbackNames("denied.test"), "--fail-on-block", "--",
			"curl", "-s", "-o", "/dev/null", "http://denied.test:"+port+"/"), 2, "denied.test:" + port + " reason=not-allowlisted"},
		{"fail-on-block nothing denied", []string{"--no-network", "--fail-on-block", "--", "true"}, 0, ""},
		{"usage: missing --", []string{"--no-network", "true"}, 1, "hermetic --no-network -- true"},
		{"usage: bad flag", []string{"--bogus", "--", "true"}, 1, "unknown flag: --bogus"},
		{"usage: no target", []string{"--no-network", "--"}, 1, "no target"},
		{"usage: bad rule", []string{"--allow-domain", "http://x.test/", "--", "true"}, 1, `give the host only, as "x.test"`},
		{"not found", []string{"--", "no-such-program-anywhere"}, 127, "not found"},
		{"not found path", []string{"--", "./no/such/file"}, 127, "no such file"},
		{"not executable", []string{"--", noexec}, 126, "permission denied"},
		{"directory", []string{"--", "/"}, 126, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "fail-on-block" {
				need(t, "curl")
			}
			r := hermetic(t, runOpts{}, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tt.code, r)
			}
			if tt.want != "" {
				mustContain(t, r, tt.want)
			}
		})
	}
}

// startHermetic starts hermetic with the test binary as its target in helper
// mode and returns once the target has printed its first line.
func startHermetic(t *testing.T, mode string, o runOpts, hargs ...string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	o.env = append(o.env, helperEnv+"="+mode)
	cmd := exec.Command(hermeticBin, append(hargs, "--", selfExe(t))...)
	cmd.Env = baseEnv(t, o)
	line, stderr := startFirstLine(t, cmd)
	return cmd, line, stderr
}

// startFirstLine starts cmd, kills it when the test ends, and returns the
// first line it prints (within a bounded wait) and its stderr so far.
func startFirstLine(t *testing.T, cmd *exec.Cmd) (string, *strings.Builder) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		l, _ := br.ReadString('\n')
		lines <- strings.TrimSpace(l)
		io.Copy(io.Discard, br)
	}()
	select {
	case l := <-lines:
		return l, &stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("the target did not start; stderr:\n%s", stderr.String())
	}
	return "", nil
}

func TestSignalsReachTarget(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, line, stderr := startHermetic(t, "signal", runOpts{}, "--no-network")
			if line != "ready" {
				t.Fatalf("target said %q", line)
			}
			cmd.Process.Signal(sig)
			err := waitTimeout(cmd, 30*time.Second)
			code := cmd.ProcessState.ExitCode()
			if code != 40+int(sig) {
				t.Errorf("exit %d (%v), want %d: the target should get %v\n%s", code, err, 40+int(sig), sig, stderr)
			}
		})
	}
}

func waitTimeout(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		return <-done
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// awaitGone waits, a bounded time, for pid to end; if it has not, it kills
// it (so a failing test leaves nothing behind) and reports false.
func awaitGone(pid int, within time.Duration) bool {
	for i := time.Duration(0); i < within; i += 50 * time.Millisecond {
		if !alive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !alive(pid) {
		return true
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return false
}

// TestKillingHermeticKillsTarget: whoever kills hermetic, the outside
// world or the target itself, the target does not outlive it unfiltered.
func TestKillingHermeticKillsTarget(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	for _, tc := range []struct {
		name, mode string
		kill       bool // the test kills hermetic; else the target does
	}{
		{"killed from outside", "sleep", true},
		{"killed by its target", "kill-parent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, line, _ := startHermetic(t, tc.mode, runOpts{tmp: t.TempDir()}, "--no-network", "--no-subprocess")
			pid, err := strconv.Atoi(line)
			if err != nil {
				t.Fatalf("target pid %q", line)
			}
			if tc.kill {
				cmd.Process.Kill()
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("hermetic is still running")
			}
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Errorf("hermetic ended with %v, want SIGKILL", cmd.ProcessState)
			}
			// Generous for a loaded machine: the kernel kills the target as
			// hermetic dies, so this normally ends on the first look.
			if !awaitGone(pid, 20*time.Second) {
				t.Fatalf("target %d outlived a killed hermetic", pid)
			}
		})
	}
}

func TestNothingLeftBehind(t *testing.T) {
	need(t, "sh")
	tmp := t.TempDir()
	// Every process of these runs (hermetic, the target, what it starts)
	// carries a marker in its environment, so stragglers can be found;
	// the shim directory and scripts live under TMPDIR.
	mark := fmt.Sprintf("HERMETIC_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	defer func() {
		if pids := marked(mark); len(pids) > 0 {
			t.Errorf("processes left behind: %v", pids)
		}
	}()
	r := hermetic(t, runOpts{tmp: tmp, env: []string{mark}}, "--no-network", "--no-subprocess", "--", "sh", "-c", `echo "$PYTHONPATH"; test -d "${PYTHONPATH%%:*}"`)
	if r.code != 0 {
		t.Fatalf("the shim directory was missing during the run\n%s", r)
	}
	shim := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(shim, tmp) {
		t.Errorf("shim directory %q is not under TMPDIR %s", shim, tmp)
	}
	ents, err := os.ReadDir(tmp)
	if err != nil || len(ents) != 0 {
		t.Errorf("left in TMPDIR after the run: %v %v", ents, err)
	}
	// After a signal-killed target and after a usage error, too.
	hermetic(t, runOpts{tmp: tmp, env: []string{mark}}, "--no-network", "--", "sh", "-c", "kill -TERM $$")
	hermetic(t, runOpts{tmp: tmp, env: []string{mark}}, "--no-network", "--allow-domain", "*", "--", "true")
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}

func TestTerminatedHermeticCleansUp(t *testing.T) {
	tmp := t.TempDir()
	cmd, line, _ := startHermetic(t, "signal", runOpts{tmp: tmp}, "--no-network")
	if line != "ready" {
		t.Fatalf("target said %q", line)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) == 0 {
		t.Fatal("no temporary directory during the run")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitTimeout(cmd, 30*time.Second)
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR after SIGTERM: %v", ents)
	}
}

// marked lists the live processes whose environment holds mark.
func marked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), mark) {
			out = append(out, pid)
		}
	}
	return out
}
