package integration

import (
	"bufio"
	"context"
	"fmt"
	"github.com/hermetic-dev/hermetic/internal/testnet"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bareRepo makes root/repo.git with one commit of README = "hermetic\n".
func bareRepo(t *testing.T) string { return testnet.BareRepo(t, os.Environ()) }

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestGitDaemonThroughProxyCommand clones over git:// , which git sends
// through GIT_PROXY_COMMAND: `hermetic proxy-connect` and the SOCKS5 proxy.
func TestGitDaemonThroughProxyCommand(t *testing.T) {
	need(t, "git")
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skip("skipped: git --exec-path failed")
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "git-daemon")); err != nil {
		t.Skip("skipped: git-daemon is not installed (it comes with git)")
	}
	root := bareRepo(t)
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	daemon := exec.CommandContext(ctx, "git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1", "--port="+port, "--base-path="+root, root)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); daemon.Wait() })
	// Wait (bounded) until the daemon listens.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatal("git daemon did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	env := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	dest := filepath.Join(t.TempDir(), "clone")
	r := hermetic(t, runOpts{env: env}, args("--allow-domain", "git.test", loopbackNames("git.test", "other.test"), "--trace", "--",
		"git", "clone", "-q", "git://git.test:"+port+"/repo.git", dest)...)
	if r.code != 0 {
		t.Fatalf("git clone over git:// failed\n%s", r)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "README")); err != nil || string(b) != "hermetic\n" {
		t.Errorf("cloned README: %q, %v", b, err)
	}
	r = hermetic(t, runOpts{env: env}, args("--allow-domain", "git.test", loopbackNames("git.test", "other.test"), "--trace", "--",
		"git", "clone", "-q", "git://other.test:"+port+"/repo.git", filepath.Join(t.TempDir(), "c2"))...)
	if r.code == 0 {
		t.Errorf("clone from a denied host succeeded\n%s", r)
	}
	mustContain(t, r, "[hermetic] blocked socks.connect host=other.test port="+port+" reason=not-allowlisted",
		"proxy-connect: hermetic's policy refused other.test:"+port)
}

// TestSSHThroughProxyCommand runs git over ssh to a fake SSH server: the
// server only has to see the connection arrive through GIT_SSH_COMMAND's
// ProxyCommand (the key exchange then fails). It needs the ssh client, never
// an sshd.
func TestSSHThroughProxyCommand(t *testing.T) {
	need(t, "git", "ssh")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprint(c, "SSH-2.0-hermetic_test\r\n")
			bufio.NewReader(c).ReadString('\n') // the client's banner
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	home := t.TempDir()
	env := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "HOME=" + home}
	clone := func(host string) result {
		return hermetic(t, runOpts{env: env}, args("--allow-domain", "ssh.test", loopbackNames("ssh.test", "other.test"), "--trace", "--",
			"git", "clone", "-q", "ssh://git@"+host+":"+port+"/repo.git", filepath.Join(t.TempDir(), "c"))...)
	}
	r := clone("ssh.test")
	if conns.Load() != 1 {
		t.Fatalf("the fake SSH server saw %d connections, want 1\n%s", conns.Load(), r)
	}
	r = clone("other.test")
	if conns.Load() != 1 {
		t.Errorf("a denied host was reached\n%s", r)
	}
	mustContain(t, r, "[hermetic] blocked socks.connect host=other.test port="+port+" reason=not-allowlisted")
}
