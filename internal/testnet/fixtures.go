package testnet

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Wheel builds a minimal valid wheel for package name at version 0.1, for a
// PEP 503 index served on loopback.
func Wheel(t testing.TB, name string) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	info := name + "-0.1.dist-info/"
	files := []struct{ name, body string }{
		{name + "/__init__.py", "VALUE = 1\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 0.1\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: hermetic-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		fmt.Fprintf(&record, "%s,,\n", f.name)
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, _ := z.Create(info + "RECORD")
	w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BareRepo makes root/repo.git holding one commit of README = "hermetic\n"
// in a new temporary root, running git with env, and returns root.
func BareRepo(t testing.TB, env []string) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "work")
	env = append(env[:len(env):len(env)], "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	for _, c := range [][]string{
		{"git", "init", "-q", "-b", "main", work},
		{"sh", "-c", "echo hermetic > " + filepath.Join(work, "README")},
		{"git", "-C", work, "add", "README"},
		{"git", "-C", work, "commit", "-q", "-m", "first"},
		{"git", "clone", "-q", "--bare", work, filepath.Join(root, "repo.git")},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	return root
}
