package main

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestRunScripts runs the CLI scripts in testdata/run*.txtar.
func TestRunScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Files: globFiles(t, "testdata/run*.txtar")})
}

// TestSourcesScripts runs testdata/sources*.txtar: configuration files,
// HERMETIC_FLAGS and HERMETIC_PROFILE as `check` and runs see them.
func TestSourcesScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Files: globFiles(t, "testdata/sources*.txtar")})
}
