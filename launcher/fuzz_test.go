package launcher

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadConfig feeds hostile config files to the loader: it may refuse
// them, never panic.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"trace = true\n",
		"[tool.hermetic]\nallow = [\"a.test\", \"10.0.0.0/8\"]\n[tool.hermetic.profiles.x]\nno-network = true\n",
		"allow = 3\n",
		"[profiles]\nx = 1\n",
		"fs-readonly = \"\"\n",
		"\"we\\\"ird\" = 1\n",
		"a.b.c = [[1]]\n",
		"[[tool.hermetic]]\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "HERMETIC.toml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Skip()
		}
		loadConfig(p)
		keyLine(text, []string{"tool", "hermetic", "allow"})
	})
}

// FuzzEnvFlags feeds hostile HERMETIC_FLAGS values to the parser.
func FuzzEnvFlags(f *testing.F) {
	for _, s := range []string{"--no-network", "--allow-domain 'a b'", "--fs-readonly=", "--profile", "-- x", "--resolve a=1.2.3.4,::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		envFlagEntries(v, "/")
	})
}
