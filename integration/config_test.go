package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigPrecedence(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	proj := t.TempDir()
	sub := filepath.Join(proj, "pkg")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(proj, "pyproject.toml"), []byte(`
[project]
name = "demo"

[tool.hermetic]
allow-domain = ["config.test"]
allow-cidr = ["127.0.0.1"]
resolve = ["config.test=127.0.0.1", "env.test=127.0.0.1", "cli.test=127.0.0.1", "profile.test=127.0.0.1", "other.test=127.0.0.1"]
fail-on-block = true
profile = ["mine"]

[tool.hermetic.profiles.mine]
allow = ["profile.test"]
`), 0o644)
	script := `for h in config env cli profile other; do
  printf '%s %s\n' $h "$(curl -s -o /dev/null -w '%{http_code}' http://$h.test:` + port + `/)"
done`
	env := []string{"HERMETIC_FLAGS=--allow-domain env.test --fail-on-block=true"}
	// Lists add up from every source; the command line's scalar wins.
	r := hermetic(t, runOpts{dir: sub, env: env}, "--allow-domain", "cli.test", "--fail-on-block=false", "--", "sh", "-c", script)
	for _, want := range []string{"config 200", "env 200", "cli 200", "profile 200", "other 403"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q\n%s", want, r)
		}
	}
	if r.code != 0 {
		t.Errorf("exit %d: --fail-on-block=false on the command line should win\n%s", r.code, r)
	}
	// Without the command line's override, HERMETIC_FLAGS's and the file's
	// --fail-on-block apply.
	r = hermetic(t, runOpts{dir: sub, env: env}, "--", "sh", "-c", script)
	if r.code != 2 {
		t.Errorf("exit %d, want 2 from the config's fail-on-block\n%s", r.code, r)
	}
	// HERMETIC_PROFILE adds a profile: net-hermetic turns on --no-network
	// and --allow-localhost; with allow rules present it stays an allowlist.
	// In the network namespace localhost is the sandbox's own loopback, and
	// curl goes there directly (NO_PROXY): the host's server is brought in
	// with --expose-host-port.
	r = hermetic(t, runOpts{dir: sub, env: []string{"HERMETIC_PROFILE=net-hermetic"}}, "--fail-on-block=false", "--expose-host-port", port, "--", "sh", "-c",
		`curl -s -o /dev/null -w '%{http_code}\n' http://localhost:`+port+`/`)
	if !strings.Contains(r.stdout, "200") {
		t.Errorf("net-hermetic should allow localhost\n%s", r)
	}
	// --config names a file; a bad value names file, key and line.
	bad := filepath.Join(t.TempDir(), "HERMETIC.toml")
	os.WriteFile(bad, []byte("trace = true\nallow-domain = [\"*.com\"]\n"), 0o644)
	r = hermetic(t, runOpts{}, "--config", bad, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, bad+":2: allow-domain") || !strings.Contains(r.stderr, "public suffix") {
		t.Errorf("bad config:\n%s", r)
	}
	r = hermetic(t, runOpts{env: []string{"HERMETIC_FLAGS=--no-network 'unterminated"}}, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "HERMETIC_FLAGS") {
		t.Errorf("bad HERMETIC_FLAGS:\n%s", r)
	}
}

func TestAuditRoundTrip(t *testing.T) {
	need(t, "curl")
	port := server(t, hello())
	resolve := []string{"--resolve", "one.test=127.0.0.1", "--resolve", "two.test=127.0.0.1"}
	script := `curl -sf http://one.test:` + port + `/ && curl -sf http://two.test:` + port + `/`
	r := hermetic(t, runOpts{}, args("--audit", resolve, "--", "sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("an --audit run should pass\n%s", r)
	}
	mustContain(t, r, "hello one.test", "hello two.test")
	// The line after the audit heading is the allowlist as flags.
	lines := strings.Split(r.stderr, "\n")
	var flags string
	for i, l := range lines {
		if strings.Contains(l, "audit: add this allowlist") && i+1 < len(lines) {
			flags = lines[i+1]
		}
	}
	if flags != "--allow-domain one.test --allow-domain two.test --allow-cidr 127.0.0.1:"+port {
		t.Fatalf("audit flags %q\n%s", flags, r)
	}
	mustContain(t, r, "[tool.hermetic]", `allow = ["one.test", "two.test", "127.0.0.1:`+port+`"]`)
	// Fed back, they let the same run pass with nothing denied.
	r = hermetic(t, runOpts{}, args(strings.Fields(flags), resolve, "--fail-on-block", "--", "sh", "-c", script)...)
	if r.code != 0 || strings.Contains(r.stderr, "denied") {
		t.Errorf("fed-back allowlist:\n%s", r)
	}
	// The config snippet, fed back as a project's pyproject.toml, does too.
	proj := t.TempDir()
	var snippet strings.Builder
	for _, l := range lines {
		if l == "[tool.hermetic]" || strings.HasPrefix(l, "allow = [") {
			snippet.WriteString(l + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(proj, "pyproject.toml"), []byte("[project]\nname = \"p\"\n\n"+snippet.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r = hermetic(t, runOpts{dir: proj}, args(resolve, "--fail-on-block", "--", "sh", "-c", script)...)
	if r.code != 0 || strings.Contains(r.stderr, "denied") {
		t.Errorf("fed-back config snippet %q:\n%s", snippet.String(), r)
	}
	// Without them the run fails.
	r = hermetic(t, runOpts{}, args("--no-network", resolve, "--", "sh", "-c", script)...)
	if r.code == 0 {
		t.Errorf("run passed under --no-network\n%s", r)
	}
}
