// Package integration builds the hermetic binary once and drives it with
// real clients (curl, wget, git, pip, Python urllib, a Go client) against
// real servers on loopback. Test host names map to 127.0.0.1 through
// --resolve, never through DNS.
package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hermeticBin is the binary TestMain builds.
var hermeticBin string

// helperEnv turns the test binary into a small target program (see
// helper_test.go).
const helperEnv = "HERMETIC_INTEGRATION_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hermetic-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	hermeticBin = filepath.Join(dir, "hermetic")
	cmd := exec.Command("go", "build", "-o", hermeticBin, "github.com/hermetic-dev/hermetic/cmd/hermetic")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building hermetic:", err)
		return 1
	}
	return m.Run()
}

// result is what one hermetic run produced.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// runOpts configure a hermetic run.
type runOpts struct {
	env []string // added to a clean environment
	dir string
	tmp string // TMPDIR for hermetic; a fresh one when empty
}

// hermetic runs the built binary with args and waits at most a minute.
func hermetic(t *testing.T, o runOpts, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermeticBin, args...)
	cmd.Env = baseEnv(t, o)
	cmd.Dir = o.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running hermetic: %v", err)
		}
		code = ee.ExitCode()
		if code < 0 {
			t.Fatalf("hermetic was killed: %v\n%s", err, stderr.String())
		}
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// baseEnv is a clean environment: PATH, HOME and a private TMPDIR, with no
// proxy variables or HERMETIC_* settings from the test's own environment.
func baseEnv(t *testing.T, o runOpts) []string {
	t.Helper()
	tmp := o.tmp
	if tmp == "" {
		tmp = t.TempDir()
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp, "LANG=C"}
	for _, k := range []string{"PYENV_ROOT", "PYENV_VERSION", "GOCACHE", "GOPATH"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, o.env...)
}

// need skips the test, naming the program, when a client it drives is not
// on PATH; nothing else is a reason to skip.
func need(t *testing.T, bins ...string) {
	t.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("skipped: %s is not installed (not found on PATH)", b)
		}
	}
}

// server starts an HTTP server on loopback and returns its port.
func server(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// hello answers every request with the host it was sent to.
func hello() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s\n", r.Host)
	})
}

// loopbackNames are the flags that map the test names to 127.0.0.1 and
// let that address pass step 5.
func loopbackNames(names ...string) []string {
	args := []string{"--allow-cidr", "127.0.0.1"}
	for _, n := range names {
		args = append(args, "--resolve", n+"=127.0.0.1")
	}
	return args
}

func args(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}

func mustContain(t *testing.T, r result, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("output lacks %q\n%s", s, r)
		}
	}
}

// selfExe is the test binary, used as a target in helper mode.
func selfExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
