package launcher

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TargetKind says how a target was resolved (SPEC §4.4).
type TargetKind uint8

const (
	// TargetExecutable is a path or a program found on PATH, run as is (a
	// Python console script runs through its own shebang interpreter).
	TargetExecutable TargetKind = iota
	// TargetCallable is pkg.module:callable, run with the first python3 on PATH.
	TargetCallable
	// TargetModule is a module name, run like `python3 -m`.
	TargetModule
)

// target is a resolved target: the program to execute and its argv.
type target struct {
	Kind TargetKind
	// Path is the file to execute.
	Path string
	// Argv is the full argument vector, Argv[0] included.
	Argv []string
	// Python is the interpreter command line that will run Python code, when
	// the target is known to be Python (nil otherwise); used for warnings.
	Python []string
}

// ExitError is an error that decides hermetic's exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func notFound(format string, args ...any) error {
	return &ExitError{Code: 127, Err: fmt.Errorf(format, args...)}
}

func notExecutable(format string, args ...any) error {
	return &ExitError{Code: 126, Err: fmt.Errorf(format, args...)}
}

// isDottedName reports whether s is a dotted Python name (pkg.module).
// Hand-written rather than a regexp: compiling one at package init costs
// every hermetic start, and start-up time is measured.
func isDottedName(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || part[0] >= '0' && part[0] <= '9' {
			return false
		}
		for _, c := range []byte(part) {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// isCallable reports whether s is pkg.module:callable.
func isCallable(s string) bool {
	mod, attr, ok := strings.Cut(s, ":")
	return ok && isDottedName(mod) && isDottedName(attr)
}

// pyBootstrap runs a callable or a module inside the interpreter the shim is
// loaded into (sitecustomize has run before this code). It exits 127 when
// the module cannot be found, so a mistyped command is reported as not found.
const pyBootstrap = `import sys, importlib.util, runpy
spec = sys.argv[1]
mod, _, attr = spec.partition(":")
try:
    found = importlib.util.find_spec(mod) is not None
except (ImportError, ValueError):
    found = False
if not found:
    sys.stderr.write("hermetic: %s: not found: not a program on PATH, a path, or an importable Python module\n" % spec)
    sys.exit(127)
sys.argv = [spec] + sys.argv[2:]
if attr:
    obj = importlib.import_module(mod)
    for name in attr.split("."):
        obj = getattr(obj, name)
    sys.exit(obj())
runpy.run_module(mod, run_name="__main__", alter_sys=True)
`

// resolveTarget finds what to execute for argv (everything after `--`),
// searching pathEnv (the target's PATH) and resolving relative paths
// against dir.
func resolveTarget(argv []string, pathEnv, dir string) (target, error) {
	if len(argv) == 0 || argv[0] == "" {
		return target{}, &ExitError{Code: 1, Err: errors.New("no target given after --")}
	}
	name := argv[0]
	if strings.ContainsRune(name, '/') {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		return executableTarget(p, argv)
	}
	if p, err := lookPath(name, pathEnv, dir); err == nil {
		return executableTarget(p, argv)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return target{}, err
	}

	kind := TargetModule
	switch {
	case isCallable(name):
		kind = TargetCallable
	case isDottedName(name):
	default:
		return target{}, notFound("%s: not found on PATH", name)
	}
	py, err := lookPath("python3", pathEnv, dir)
	if err != nil {
		return target{}, notFound("%s: not found on PATH, and no python3 on PATH to run it as a Python module", name)
	}
	full := append([]string{"python3", "-c", pyBootstrap, name}, argv[1:]...)
	return target{Kind: kind, Path: py, Argv: full, Python: []string{py}}, nil
}

// lookPath searches pathEnv for an executable regular file. It returns an
// error wrapping fs.ErrNotExist when there is none, or a 126 error when the
// only match is not executable, as a shell does.
func lookPath(name, pathEnv, dir string) (string, error) {
	var nonExec string
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 != 0 {
			return p, nil
		}
		if nonExec == "" {
			nonExec = p
		}
	}
	if nonExec != "" {
		return "", notExecutable("%s: permission denied", nonExec)
	}
	return "", fmt.Errorf("%s: %w", name, fs.ErrNotExist)
}

func executableTarget(p string, argv []string) (target, error) {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return target{}, notFound("%s: no such file", argv[0])
	case err != nil:
		return target{}, notExecutable("%s: %v", argv[0], err)
	case fi.IsDir():
		return target{}, notExecutable("%s: is a directory", argv[0])
	case fi.Mode()&0o111 == 0:
		return target{}, notExecutable("%s: permission denied", argv[0])
	}
	t := target{Kind: TargetExecutable, Path: p, Argv: argv}
	if isPythonName(p) {
		t.Python = []string{p}
	} else if interp, err := readShebang(p); err == nil && len(interp) > 0 {
		if py := shebangPython(interp); py != nil {
			t.Python = py
		} else if _, err := os.Stat(interp[0]); errors.Is(err, fs.ErrNotExist) {
			return target{}, notFound("%s: its interpreter %s does not exist", argv[0], interp[0])
		}
	}
	return t, nil
}

// readShebang returns the words of a script's #! line, or nil.
func readShebang(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 512).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		return nil, nil
	}
	s, ok := strings.CutPrefix(string(line), "#!")
	if !ok {
		return nil, nil
	}
	// The kernel passes everything after the interpreter as one argument;
	// splitting on blanks is what matters for recognising Python flags.
	return strings.Fields(s), nil
}

// shebangPython returns the interpreter words of a shebang that runs Python
// (directly or through env), or nil.
func shebangPython(words []string) []string {
	if len(words) == 0 {
		return nil
	}
	if filepath.Base(words[0]) == "env" {
		rest := words[1:]
		for len(rest) > 0 {
			w := rest[0]
			switch {
			case w == "-S" || w == "--split-string":
				rest = rest[1:]
			case strings.HasPrefix(w, "-S"):
				rest[0] = w[2:]
			case w == "-u" || w == "--unset" || w == "-C" || w == "--chdir":
				if len(rest) < 2 {
					return nil
				}
				rest = rest[2:]
			case strings.HasPrefix(w, "-"), strings.Contains(w, "="):
				rest = rest[1:]
			default:
				if isPythonName(w) {
					return rest
				}
				return nil
			}
		}
		return nil
	}
	if isPythonName(words[0]) {
		return words
	}
	return nil
}

// isPythonName reports whether p names a Python interpreter: python,
// pypy, or either followed by a version (python3, python3.12).
func isPythonName(p string) bool {
	b := filepath.Base(p)
	rest, ok := strings.CutPrefix(b, "python")
	if !ok {
		rest, ok = strings.CutPrefix(b, "pypy")
	}
	return ok && strings.Trim(rest, "0123456789.") == ""
}

// shimBypass returns the interpreter options in a Python command line that
// stop the shim from loading: -I and -E ignore PYTHONPATH, -S skips
// sitecustomize. args are the interpreter's arguments (without argv[0]).
func shimBypass(args []string) []string {
	var found []string
	add := func(f string) {
		for _, g := range found {
			if g == f {
				return
			}
		}
		found = append(found, f)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" || a == "--" || !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			break
		}
		for j := 1; j < len(a); j++ {
			switch c := a[j]; c {
			case 'I', 'E', 'S':
				add("-" + string(c))
			case 'c', 'm':
				return found
			case 'W', 'X':
				// The option's value is the rest of this word or the next one.
				if j == len(a)-1 {
					i++
				}
				j = len(a)
			}
		}
	}
	return found
}
