package launcher

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeExec(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

func TestResolveTarget(t *testing.T) {
	bin := t.TempDir()
	venv := filepath.Join(t.TempDir(), "venv", "bin")
	os.MkdirAll(venv, 0o755)
	writeExec(t, filepath.Join(bin, "tool"), "#!/bin/sh\necho hi\n", 0o755)
	writeExec(t, filepath.Join(bin, "noexec"), "#!/bin/sh\n", 0o644)
	writeExec(t, filepath.Join(bin, "python3"), "#!/bin/sh\n", 0o755)
	writeExec(t, filepath.Join(venv, "python"), "#!/bin/sh\n", 0o755)
	writeExec(t, filepath.Join(bin, "console"), "#!"+filepath.Join(venv, "python")+"\nimport sys\n", 0o755)
	writeExec(t, filepath.Join(bin, "isolated"), "#!/usr/bin/env -S python3 -I\n", 0o755)
	writeExec(t, filepath.Join(bin, "badinterp"), "#!/nonexistent/interp\n", 0o755)
	path := bin

	tests := []struct {
		argv   []string
		kind   TargetKind
		path   string
		python bool
		code   int // expected ExitCode of the error, 0 for success
	}{
		{argv: []string{"tool", "a"}, kind: TargetExecutable, path: filepath.Join(bin, "tool")},
		{argv: []string{filepath.Join(bin, "tool")}, kind: TargetExecutable, path: filepath.Join(bin, "tool")},
		{argv: []string{"console"}, kind: TargetExecutable, path: filepath.Join(bin, "console"), python: true},
		{argv: []string{"isolated"}, kind: TargetExecutable, path: filepath.Join(bin, "isolated"), python: true},
		{argv: []string{"python3", "-c", "1"}, kind: TargetExecutable, path: filepath.Join(bin, "python3"), python: true},
		{argv: []string{"pkg.mod:main", "x"}, kind: TargetCallable, path: filepath.Join(bin, "python3"), python: true},
		{argv: []string{"http.server"}, kind: TargetModule, path: filepath.Join(bin, "python3"), python: true},
		{argv: []string{"noexec"}, code: 126},
		{argv: []string{bin}, code: 126},
		{argv: []string{"./missing"}, code: 127},
		{argv: []string{"no-such-command"}, code: 127},
		{argv: []string{"badinterp"}, code: 127},
		{argv: []string{""}, code: 1},
		{argv: nil, code: 1},
	}
	for _, tt := range tests {
		got, err := resolveTarget(tt.argv, path, bin)
		if code := ExitCode(err); code != tt.code {
			t.Errorf("resolveTarget(%q): exit code %d (%v), want %d", tt.argv, code, err, tt.code)
			continue
		}
		if err != nil {
			continue
		}
		if got.Kind != tt.kind || got.Path != tt.path || (got.Python != nil) != tt.python {
			t.Errorf("resolveTarget(%q) = %+v", tt.argv, got)
		}
	}

	// Module forms need python3 on PATH.
	empty := t.TempDir()
	if _, err := resolveTarget([]string{"http.server"}, empty, empty); ExitCode(err) != 127 {
		t.Errorf("module without python3: %v", err)
	}
	// A module target's argv hands the name and arguments to the bootstrap.
	got, _ := resolveTarget([]string{"pkg.mod:main", "--flag", "--"}, path, bin)
	if !slices.Equal(got.Argv[3:], []string{"pkg.mod:main", "--flag", "--"}) {
		t.Errorf("callable argv = %q", got.Argv)
	}
}

func TestShebangPython(t *testing.T) {
	tests := []struct {
		words []string
		want  []string
	}{
		{[]string{"/usr/bin/python3"}, []string{"/usr/bin/python3"}},
		{[]string{"/venv/bin/python3.12", "-I"}, []string{"/venv/bin/python3.12", "-I"}},
		{[]string{"/usr/bin/env", "python3"}, []string{"python3"}},
		{[]string{"/usr/bin/env", "-S", "python3", "-E"}, []string{"python3", "-E"}},
		{[]string{"/usr/bin/env", "-u", "X", "A=b", "python"}, []string{"python"}},
		{[]string{"/bin/sh"}, nil},
		{[]string{"/usr/bin/env", "bash"}, nil},
		{[]string{"/usr/bin/env"}, nil},
	}
	for _, tt := range tests {
		if got := shebangPython(slices.Clone(tt.words)); !slices.Equal(got, tt.want) {
			t.Errorf("shebangPython(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}

func TestShimBypass(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, nil},
		{[]string{"script.py", "-I"}, nil},
		{[]string{"-I", "script.py"}, []string{"-I"}},
		{[]string{"-sE", "x"}, []string{"-E"}},
		{[]string{"-W", "ignore", "-S"}, []string{"-S"}},
		{[]string{"-Wignore", "-I"}, []string{"-I"}},
		{[]string{"-X", "utf8", "-E", "-I"}, []string{"-E", "-I"}},
		{[]string{"-c", "-I"}, nil},
		{[]string{"-m", "pip", "-E"}, nil},
		{[]string{"-uIc", "print()"}, []string{"-I"}},
		{[]string{"--version", "-I"}, nil},
	}
	for _, tt := range tests {
		if got := shimBypass(tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("shimBypass(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestPythonNames(t *testing.T) {
	for s, want := range map[string]bool{
		"pkg": true, "pkg.mod": true, "_a.b_c.D9": true, "": false, "pkg.": false, ".pkg": false,
		"9pkg": false, "pkg.9": false, "pkg-x": false, "pkg mod": false, "pkg:main": false,
	} {
		if got := isDottedName(s); got != want {
			t.Errorf("isDottedName(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{
		"pkg.mod:main": true, "pkg:obj.attr": true, "pkg:": false, ":main": false, "a:b:c": false, "pkg.mod": false,
	} {
		if got := isCallable(s); got != want {
			t.Errorf("isCallable(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{
		"python": true, "/usr/bin/python3": true, "python3.12": true, "pypy3": true,
		"pythonw": false, "python3-config": false, "ipython": false, "py": false,
	} {
		if got := isPythonName(s); got != want {
			t.Errorf("isPythonName(%q) = %v", s, got)
		}
	}
}
