package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"

	"github.com/hermetic-dev/hermetic/policy"
)

func TestKeyLine(t *testing.T) {
	text := `# comment
[tool.black]
line-length = 88

[tool.hermetic]
trace = true
allow = [
  "a.test",
]
fs-readonly = "x"

[tool.hermetic.profiles.ci]
no-subprocess = true
[tool]
`
	tests := []struct {
		key  toml.Key
		want int
	}{
		{toml.Key{"tool", "hermetic", "trace"}, 6},
		{toml.Key{"tool", "hermetic", "allow"}, 7},
		{toml.Key{"tool", "hermetic", "fs-readonly"}, 10},
		{toml.Key{"tool", "hermetic", "profiles", "ci", "no-subprocess"}, 13},
		{toml.Key{"tool", "black", "line-length"}, 3},
		{toml.Key{"tool", "hermetic", "missing"}, 0},
		{toml.Key{"tool", "hermetic", `we"ird`}, 0},
	}
	for _, tt := range tests {
		if got := keyLine(text, tt.key); got != tt.want {
			t.Errorf("keyLine(%v) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, file, text string
		want             []string // substrings of the error
	}{
		{"unknown key", "HERMETIC.toml", "trace = true\nfrobnicate = 1\n",
			[]string{"HERMETIC.toml:2:", "frobnicate", "unknown key"}},
		{"underscore hint", "HERMETIC.toml", "allow_domain = [\"a.test\"]\n",
			[]string{":1:", "did you mean allow-domain?"}},
		{"bad bool", "HERMETIC.toml", "\n\ntrace = \"yes\"\n",
			[]string{":3:", "trace", "want true or false, not a string"}},
		{"bad rule", "pyproject.toml", "[project]\nname='x'\n[tool.hermetic]\nallow = [\n\"https://a.test/x\"]\n",
			[]string{"pyproject.toml:4:", "tool.hermetic.allow", "give the host only"}},
		{"public suffix", "HERMETIC.toml", "allow-domain = [\"co.uk\"]\n",
			[]string{":1:", "public suffix"}},
		{"address in domain list", "HERMETIC.toml", "allow-domain = \"10.0.0.1\"\n",
			[]string{":1:", "--allow-cidr"}},
		{"bad network", "HERMETIC.toml", "network = \"closed\"\n",
			[]string{":1:", "want blocked, allowlist or open"}},
		{"list item type", "HERMETIC.toml", "deny = [\"a.test\", 3]\n",
			[]string{":1:", "item 2: want a string, not an integer"}},
		{"syntax", "HERMETIC.toml", "trace = \n", []string{"HERMETIC.toml:1:"}},
		{"no table", "pyproject.toml", "[project]\nname = 'x'\n", []string{"no [tool.hermetic] table"}},
		{"profile widens", "HERMETIC.toml", "[profiles.p]\nnetwork = \"open\"\n",
			[]string{":2:", "would widen"}},
		{"profile turns off", "HERMETIC.toml", "[profiles.p]\nno-subprocess = false\n",
			[]string{":2:", "would remove one"}},
		{"profile non-restriction", "HERMETIC.toml", "[profiles.p]\naudit = true\n",
			[]string{":2:", "cannot be set in a profile"}},
		{"profile builtin name", "HERMETIC.toml", "[profiles.pypi]\nseal = true\n",
			[]string{":1:", "built-in profile"}},
		{"config key in file", "HERMETIC.toml", "config = \"x\"\n", []string{"unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tt.file)
			writeFile(t, p, tt.text)
			_, err := loadConfig(p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFindConfig(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	// A pyproject.toml without [tool.hermetic] does not stop the search.
	writeFile(t, filepath.Join(root, "a", "b", "pyproject.toml"), "[tool.black]\nx = 1\n")
	writeFile(t, filepath.Join(root, "a", "pyproject.toml"), "[tool.hermetic]\ntrace = true\n")
	got, err := findConfig(deep)
	if err != nil || got != filepath.Join(root, "a", "pyproject.toml") {
		t.Fatalf("findConfig = %q, %v", got, err)
	}
	// HERMETIC.toml wins over pyproject.toml in the same directory.
	writeFile(t, filepath.Join(root, "a", "HERMETIC.toml"), "trace = true\n")
	got, _ = findConfig(deep)
	if got != filepath.Join(root, "a", "HERMETIC.toml") {
		t.Fatalf("findConfig = %q", got)
	}
}

// loadWith runs Load with a command line, an environment and a config file.
func loadWith(t *testing.T, dir string, args []string, env map[string]string) (Settings, error) {
	t.Helper()
	fs := pflag.NewFlagSet("hermetic", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Load(Sources{Dir: dir, Flags: fs, Getenv: func(k string) string { return env[k] }})
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "pyproject.toml"), `
[tool.hermetic]
allow-domain = ["config.test"]
network = "allowlist"
trace = true
log-file = "logs/h.jsonl"
fs-readonly = "data"
profile = "ci"
env-keep = ["KEEP_ME"]

[tool.hermetic.profiles.ci]
no-subprocess = true
deny = ["bad.test"]
`)
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"HERMETIC_FLAGS":   `--allow-domain env.test --trace=false --log-file "env log.jsonl"`,
		"HERMETIC_PROFILE": "strict-imports,exec-deny",
		"HERMETIC_FS_ROOT": "/srv/env-root",
	}
	s, err := loadWith(t, sub, []string{"--allow-domain", "cli.test", "--trace", "--profile", "pypi", "--env-keep", "CLI"}, env)
	if err != nil {
		t.Fatal(err)
	}
	// Lists accumulate from every source, lowest first, then profiles.
	if want := []string{"config.test", "env.test", "cli.test"}; !slices.Equal(s.Net.AllowDomains, want) {
		t.Errorf("AllowDomains = %q, want %q", s.Net.AllowDomains, want)
	}
	if !slices.Contains(s.Net.Allow, policy.PyPIHosts[0]) || !slices.Equal(s.Net.Deny, []string{"bad.test"}) {
		t.Errorf("profile rules: Allow=%q Deny=%q", s.Net.Allow, s.Net.Deny)
	}
	if !slices.Equal(s.EnvKeep, []string{"KEEP_ME", "CLI"}) {
		t.Errorf("EnvKeep = %q", s.EnvKeep)
	}
	// Scalars: the command line beats HERMETIC_FLAGS beats the file.
	if !s.Trace {
		t.Error("Trace: the command line's --trace should win over HERMETIC_FLAGS --trace=false")
	}
	if want := filepath.Join(sub, "env log.jsonl"); s.LogFile != want {
		t.Errorf("LogFile = %q, want %q (relative to the working directory)", s.LogFile, want)
	}
	if s.Guards.FSRoot != "/srv/env-root" || !s.Guards.FSReadonly {
		t.Errorf("Guards = %+v: HERMETIC_FS_ROOT should override the file's root", s.Guards)
	}
	if !s.Guards.NoSubprocess || !s.Guards.BlockNative {
		t.Errorf("Guards = %+v: profiles should add guards", s.Guards)
	}
	if want := []string{"ci", "strict-imports", "exec-deny", "pypi"}; !slices.Equal(s.Profiles, want) {
		t.Errorf("Profiles = %q, want %q", s.Profiles, want)
	}
	if s.ConfigFile != filepath.Join(dir, "pyproject.toml") || s.Net.Network != "allowlist" {
		t.Errorf("ConfigFile = %q, Network = %q", s.ConfigFile, s.Net.Network)
	}
}

func TestLoadPathsRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "HERMETIC.toml"), "log-file = \"h.jsonl\"\nfs-readonly = \"data\"\n")
	sub := filepath.Join(dir, "x")
	os.MkdirAll(sub, 0o755)
	s, err := loadWith(t, sub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.LogFile != filepath.Join(dir, "h.jsonl") || s.Guards.FSRoot != filepath.Join(dir, "data") {
		t.Errorf("LogFile = %q, FSRoot = %q", s.LogFile, s.Guards.FSRoot)
	}
}

func TestLoadScalarOverride(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "HERMETIC.toml"), "[tool.hermetic]\nno-network = true\nfs-readonly = true\n")
	// An explicit false on a higher source turns a lower source's setting off.
	s, err := loadWith(t, dir, []string{"--no-network=false", "--fs-readonly=false"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Net.NoNetwork || s.Guards.FSReadonly {
		t.Errorf("Net.NoNetwork = %v, FSReadonly = %v; want both off", s.Net.NoNetwork, s.Guards.FSReadonly)
	}
	// ...but a profile only adds: net-hermetic turns it back on.
	s, err = loadWith(t, dir, []string{"--no-network=false", "--profile", "net-hermetic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Net.NoNetwork || !s.Net.AllowLocalhost || !s.Net.Profile {
		t.Errorf("net-hermetic: %+v", s.Net)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown profile", []string{"--profile", "nope"}, nil, `--profile: unknown profile "nope"`},
		{"unknown env profile", []string{"--profile", "pypi"}, map[string]string{"HERMETIC_PROFILE": "pypi, nope"}, `HERMETIC_PROFILE: unknown profile "nope"`},
		{"env positional", nil, map[string]string{"HERMETIC_FLAGS": "--trace -- curl"}, "hermetic flags only"},
		{"env unknown flag", nil, map[string]string{"HERMETIC_FLAGS": "--bogus"}, "HERMETIC_FLAGS: unknown flag: --bogus"},
		{"env bad quote", nil, map[string]string{"HERMETIC_FLAGS": "'x"}, "HERMETIC_FLAGS: unterminated"},
		{"env bad rule", nil, map[string]string{"HERMETIC_FLAGS": "--allow-domain *.com"}, "HERMETIC_FLAGS --allow-domain"},
		{"cli bad rule", []string{"--allow-cidr", "10.0.0.1/8"}, nil, "did you mean 10.0.0.0/8?"},
		{"open with allow", []string{"--network", "open", "--allow-domain", "a.test"}, nil, "--network=open"},
		{"open with profile", []string{"--network", "open", "--profile", "pypi"}, nil, "network profile"},
		{"missing config", []string{"--config", "nope.toml"}, nil, "nope.toml"},
		{"bad resolve", []string{"--resolve", "a.test"}, nil, "want HOST=IP"},
		{"bad resolve ip", []string{"--resolve", "a.test=1.2.3"}, nil, "not an IP address"},
		{"byo with rules", []string{"--proxy-url", "http://127.0.0.1:3128", "--allow-domain", "a.test"}, nil, "would not be applied"},
		{"byo bad scheme", []string{"--socks-url", "http://127.0.0.1:1080"}, nil, "socks5"},
		{"isolate", []string{"--isolate", "sideways"}, nil, "want auto, netns or none"},
		{"isolate none with expose", []string{"--isolate", "none", "--no-network", "--expose-host-port", "8080"}, nil, "--isolate=none has none"},
		{"isolate netns with byo", []string{"--isolate", "netns", "--proxy-url", "http://127.0.0.1:3128"}, nil, "needs hermetic's own proxies"},
		{"expose port 53", []string{"--expose-host-port", "53"}, nil, "other than 53"},
		{"expose not a port", []string{"--expose-host-port", "http"}, nil, "want a port from 1 to 65535"},
		{"env-keep pattern", []string{"--env-keep", "A[B"}, nil, "--env-keep"},
		{"fs empty", []string{"--fs-readonly="}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("hermetic", pflag.ContinueOnError)
			fs.SetOutput(discard{})
			AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				if tt.want == "" {
					return // refused by the flag parser, as wanted
				}
				t.Fatalf("parse: %v", err)
			}
			_, err := Load(Sources{Dir: dir, Flags: fs, Getenv: func(k string) string { return tt.env[k] }})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestFlagAliases(t *testing.T) {
	s, err := loadWith(t, t.TempDir(), []string{"--deny-host", "a.test", "--deny-ip", "10.0.0.0/8", "--strict-imports", "--fs-readonly"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Net.DenyDomains, []string{"a.test"}) || !slices.Equal(s.Net.DenyCIDRs, []string{"10.0.0.0/8"}) {
		t.Errorf("deny aliases: %+v", s.Net)
	}
	if !s.Guards.BlockNative || !s.Guards.FSReadonly || s.Guards.FSRoot != "" {
		t.Errorf("guards: %+v", s.Guards)
	}
}
