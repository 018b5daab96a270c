// Package pyshim carries hermetic's Python guard shim (SPEC §7): the
// stdlib-only package "hermetic" and the sitecustomize.py that installs it,
// embedded in the binary and written out afresh for each run.
package pyshim

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The patterns name files, not directories, so the package's _-prefixed
// modules are embedded while __pycache__ and the tests are not.
//
//go:embed sitecustomize.py hermetic/*.py
var files embed.FS

// Files lists the shim's files, as slash-separated paths relative to the
// directory Install writes to.
func Files() []string {
	var out []string
	fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// Install writes the shim into dir, which must exist and should be private
// to the run: putting dir first on PYTHONPATH then makes every Python the
// target starts load the guards. Files are read-only; directories stay
// writable by the owner so that the run's clean-up can remove them.
func Install(dir string) error {
	return fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			if p == "." {
				return nil
			}
			if err := os.Mkdir(dst, 0o700); err != nil {
				return fmt.Errorf("python shim: %w", err)
			}
			return nil
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		// O_EXCL: a file already there (a symlink planted by someone
		// else) is an error, never followed.
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err != nil {
			return fmt.Errorf("python shim: %w", err)
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("python shim: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("python shim: %w", err)
		}
		return nil
	})
}
