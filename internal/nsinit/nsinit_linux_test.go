package nsinit

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEnvAloneIsNotInit: the variable without the launcher's socket pair on
// descriptor 3 (set by a user, or inherited by mistake) makes the process
// refuse, not act as an init in its own namespaces.
func TestEnvAloneIsNotInit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), Env+"=1,2,,/nonexistent")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitSetup {
		t.Fatalf("exit %v, want %d\n%s", err, ExitSetup, out)
	}
	if !strings.Contains(string(out), "not a namespace init started by hermetic") {
		t.Errorf("output %q does not say why", out)
	}
}
