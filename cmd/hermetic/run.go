package main

import (
	"fmt"
	"io"
)

// runTarget runs a target under the policy. The launcher issue fills it in.
func runTarget(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprint(stderr, "hermetic: running a target is not available yet; use 'hermetic check'\n\n"+mainUsage)
	return 1
}
