// Command hermetic runs a program with its network egress held to an
// allowlist, and answers what its policy would do (`hermetic check`).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const mainUsage = `hermetic runs a program with its network egress held to an allowlist.

Usage:
  hermetic [FLAGS] -- TARGET [ARGS...]     run TARGET under the policy
  hermetic check [POLICY FLAGS] HOST[:PORT]...
                                           print how the policy decides each destination
  hermetic version                         print the version

Examples:
  hermetic check --allow-domain example.com example.com.evil.test:443 169.254.169.254 sub.example.com
  hermetic --allow-domain pypi.org --allow-domain files.pythonhosted.org -- pip install requests
  hermetic --no-network --allow-localhost -- pytest tests/

Run 'hermetic check --help' for the policy flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runCheck(args[1:], stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, versionString())
			return 0
		case "help", "-h", "--help":
			fmt.Fprint(stdout, mainUsage)
			return 0
		}
	}
	return runTarget(args, stdin, stdout, stderr)
}

func versionString() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("hermetic %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
