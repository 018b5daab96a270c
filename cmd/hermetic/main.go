// Command hermetic runs a program with its network egress held to an
// allowlist, and answers what its policy would do (`hermetic check`).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	// When hermetic is re-executed as the network namespace's init, this
	// package's init function sets the namespace up and execs the target,
	// before the other packages' initialisers and main (the launcher imports
	// it too; named here so that nobody wonders where the init went).
	_ "github.com/hermetic-dev/hermetic/internal/nsinit"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const mainUsage = `hermetic runs a program with its network egress held to an allowlist.

Usage:
  hermetic [FLAGS] -- TARGET [ARGS...]     run TARGET under the policy
  hermetic check [POLICY FLAGS] HOST[:PORT]...
                                           print how the policy decides each destination
  hermetic version                         print the version

TARGET is a program on PATH or a path (a Python console script keeps its own
interpreter), or a Python module or pkg.module:callable run with python3.
Everything after -- goes to the target unchanged.

Examples:
  hermetic --profile pypi -- pip install requests
  hermetic --allow-domain api.example.com --trace -- python agent.py
  hermetic --no-network --allow-localhost -- pytest tests/
  hermetic --audit -- ./build.sh         # learn the allowlist a run needs
  hermetic --no-network --no-subprocess --fs-readonly -- mytool --input data/
  hermetic check --allow-domain example.com example.com.evil.test:443 169.254.169.254

Settings also come from [tool.hermetic] in pyproject.toml or HERMETIC.toml
(searched upward from the working directory, or --config FILE), and from the
environment: HERMETIC_FLAGS (flags, as on a command line), HERMETIC_PROFILE,
HERMETIC_FS_ROOT. The command line wins over the environment, which wins over
the file; lists of rules add up.

Kernel isolation (Linux): with --no-network or an allowlist, the target runs
in its own network namespace where hermetic's proxies are the only way out, so
programs that ignore the proxy settings get nowhere (--isolate=auto, the
default; where user namespaces are unavailable it warns once and filters only
clients that use the proxy settings). --isolate=netns insists on the namespace
and --isolate=none never uses one. Inside, --allow-localhost means the
sandbox's own loopback; the host's is reachable only through the proxies (an
address rule such as --allow-cidr 127.0.0.1) or --expose-host-port PORT.

Exit status: the target's; 128+N when signal N killed it; 2 when a blocked
action ended the run (or anything was blocked, with --fail-on-block); 1 for
hermetic's own errors; 126/127 when the target cannot be run or is not found.

`

// printUsage prints the main usage with the run flags.
func printUsage(w io.Writer) {
	fmt.Fprint(w, mainUsage)
	fmt.Fprint(w, "Flags:\n"+runFlagSet().FlagUsages())
	fmt.Fprint(w, "\nRun 'hermetic check --help' for checking destinations against a policy.\n")
}

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
			printUsage(stdout)
			return 0
		case "proxy-connect":
			return runProxyConnect(args[1:], stdin, stdout, stderr)
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
