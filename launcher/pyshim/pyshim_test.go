package pyshim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFiles(t *testing.T) {
	got := Files()
	for _, want := range []string{"sitecustomize.py", "hermetic/__init__.py", "hermetic/_core.py", "hermetic/_policy.py",
		"hermetic/_idna.py", "hermetic/_net.py", "hermetic/_runtime.py", "hermetic/_api.py"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s is not embedded (have %q)", want, got)
		}
	}
	for _, f := range got {
		if strings.Contains(f, "__pycache__") || strings.HasPrefix(f, "tests/") || !strings.HasSuffix(f, ".py") {
			t.Errorf("%s should not be embedded", f)
		}
	}
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	if err := Install(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range Files() {
		want, _ := files.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: written %d bytes, err %v; want %d bytes", f, len(got), err, len(want))
		}
	}
	// A second install into the same place must fail rather than follow
	// or overwrite what is there.
	if err := Install(dir); err == nil {
		t.Error("Install over an existing shim succeeded")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("the installed shim cannot be removed: %v", err)
	}
}
