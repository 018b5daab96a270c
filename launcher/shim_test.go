package launcher

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/proxy"
)

func TestShimConfig(t *testing.T) {
	s := Settings{
		Net: policy.Config{AllowDomains: []string{"a.test"}, AllowCIDRs: []string{"10.0.0.0/8"}, Allow: []string{"b.test"},
			DenyDomains: []string{"x.a.test"}, AllowLocalhost: true},
		Guards:  Guards{NoSubprocess: true, FSReadonly: true, Seal: true},
		Trace:   true,
		Resolve: []string{"a.test=127.0.0.1,::1"},
	}
	p, err := policy.New(s.Net)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{s: s, pol: p, tmp: "/tmp/h", dir: "/work",
		httpAddr: netip.MustParseAddrPort("127.0.0.1:1000"), sockAddr: netip.MustParseAddrPort("127.0.0.1:2000"),
		target: target{Kind: TargetExecutable, Path: "/usr/bin/python3", Argv: []string{"python3", "-u", "run.py", "x"}, Python: []string{"/usr/bin/python3"}}}
	b, err := json.Marshal(r.shimConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"network":{"posture":"allowlist","allow":["a.test","10.0.0.0/8","b.test"],"deny":["x.a.test"],"allow_localhost":true,` +
		`"socks":"127.0.0.1:2000","http":"127.0.0.1:1000","resolve":{"a.test":["127.0.0.1","::1"]}},` +
		`"no_subprocess":true,"seal":true,"trace":true,"fs_readonly":true,"fs_root":"/work","target_script":"/work/run.py","report_file":"/tmp/h/violations.jsonl"}`
	if string(b) != want {
		t.Errorf("shim settings\n got %s\nwant %s", b, want)
	}
	// The run's proxy credentials go to the shim's SOCKS5 client.
	r.creds = proxy.Credentials{User: "hUSER", Password: "PASS"}
	if n := r.shimConfig(true).Network; n.SOCKSUser != "hUSER" || n.SOCKSPassword != "PASS" {
		t.Errorf("shim SOCKS credentials: %+v", n)
	}
	b, _ = json.Marshal(r.shimConfig(true).Network)
	if !strings.Contains(string(b), `"socks_user":"hUSER","socks_password":"PASS"`) {
		t.Errorf("shim network settings: %s", b)
	}
	// Without the network posture the shim gets no network guard.
	if c := r.shimConfig(false); c.Network != nil {
		t.Errorf("network settings without network control: %+v", c.Network)
	}
}

func TestTargetScript(t *testing.T) {
	tests := []struct {
		t    target
		want string
	}{
		{target{Kind: TargetExecutable, Path: "/v/bin/tool", Argv: []string{"tool"}, Python: []string{"/v/bin/python"}}, "/v/bin/tool"},
		{target{Kind: TargetExecutable, Path: "/bin/python3", Argv: []string{"python3", "-X", "utf8", "s.py"}, Python: []string{"/bin/python3"}}, "/d/s.py"},
		{target{Kind: TargetExecutable, Path: "/bin/python3", Argv: []string{"python3", "-c", "s.py"}, Python: []string{"/bin/python3"}}, ""},
		{target{Kind: TargetExecutable, Path: "/bin/python3", Argv: []string{"python3", "-m", "pip"}, Python: []string{"/bin/python3"}}, ""},
		{target{Kind: TargetModule, Path: "/bin/python3", Argv: []string{"python3", "-c", "x", "m"}, Python: []string{"/bin/python3"}}, ""},
		{target{Kind: TargetExecutable, Path: "/bin/sh", Argv: []string{"sh", "x.py"}}, ""},
	}
	for _, tt := range tests {
		r := &runner{target: tt.t, dir: "/d"}
		if got := r.targetScript(); got != tt.want {
			t.Errorf("targetScript(%q) = %q, want %q", tt.t.Argv, got, tt.want)
		}
	}
}

func TestReadViolations(t *testing.T) {
	dir := t.TempDir()
	body := `{"guard":"subprocess.Popen","target":"true","reason":"no-subprocess","pid":1,"time":1.5}
not json
{"guard":"open","target":"/etc/x","reason":"fs-readonly","pid":1,"time":2}
`
	os.WriteFile(filepath.Join(dir, reportName), []byte(body), 0o600)
	vs := readViolations(dir)
	if len(vs) != 2 || vs[0].Guard != "subprocess.Popen" || vs[1].Reason != "fs-readonly" {
		t.Errorf("readViolations = %+v", vs)
	}
	if readViolations(t.TempDir()) != nil || readViolations("") != nil {
		t.Error("violations without a report file")
	}
}

func TestInstallShim(t *testing.T) {
	dir := t.TempDir()
	name, value, err := installShim(dir, shimSettings{Seal: true, CacheDir: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	if name != "HERMETIC_SHIM" || value != `{"seal":true,"cache_dir":"/c"}` {
		t.Errorf("installShim = %s=%s", name, value)
	}
	for _, f := range []string{"sitecustomize.py", "hermetic/__init__.py", "hermetic/_core.py"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tests")); err == nil {
		t.Error("the shim's tests were written")
	}
	if _, _, err := installShim("", shimSettings{}); err == nil {
		t.Error("installShim without a directory succeeded")
	}
}
