package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/hermetic-dev/hermetic/launcher"
)

const runSynopsis = "hermetic [FLAGS] -- TARGET [ARGS...]"

// runFlagSet is the flag set of `hermetic [FLAGS] -- TARGET`.
func runFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("hermetic", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	launcher.AddFlags(fs)
	return fs
}

// usageError prints a usage error with the correct form and returns 1.
func usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "hermetic: "+format+"\n", args...)
	fmt.Fprintf(stderr, "Usage: %s\nRun 'hermetic --help' for the flags and examples.\n", runSynopsis)
	return 1
}

// runTarget runs a target under the policy: `hermetic [FLAGS] -- TARGET`.
func runTarget(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flagArgs, target, dash := args, []string(nil), slices.Index(args, "--")
	if dash >= 0 {
		flagArgs, target = args[:dash], args[dash+1:]
	}
	fs := runFlagSet()
	if err := fs.Parse(flagArgs); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		return usageError(stderr, "%v", err)
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "%q is not a hermetic flag; hermetic's flags come first, then --, then the target:\n  hermetic %s-- %s", fs.Arg(0), flagsPrefix(flagArgs[:len(flagArgs)-fs.NArg()]), shellJoin(fs.Args()))
	}
	if dash < 0 {
		return usageError(stderr, "missing -- before the target")
	}
	if len(target) == 0 {
		return usageError(stderr, "no target after --")
	}

	settings, err := launcher.Load(launcher.Sources{Flags: fs})
	if err != nil {
		fmt.Fprintf(stderr, "hermetic: %v\n", err)
		return 1
	}
	sess, err := launcher.NewSession(settings)
	if err != nil {
		fmt.Fprintf(stderr, "hermetic: %v\n", err)
		return 1
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	exe, _ := os.Executable()

	res, err := sess.Run(context.Background(), target, launcher.RunOptions{
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
		Signals:    sigs,
		OSSignals:  true,
		Executable: exe,
	})
	if err != nil {
		fmt.Fprintf(stderr, "hermetic: %v\n", err)
		return launcher.ExitCode(err)
	}
	return res.ExitCode
}

// flagsPrefix is the flags the user gave, quoted, followed by a space.
func flagsPrefix(flags []string) string {
	if len(flags) == 0 {
		return ""
	}
	return shellJoin(flags) + " "
}

func shellJoin(words []string) string {
	out := ""
	for i, w := range words {
		if i > 0 {
			out += " "
		}
		out += launcher.ShellQuote(w)
	}
	return out
}

// runProxyConnect is the hidden `hermetic proxy-connect --socks ADDR HOST
// PORT` that GIT_SSH_COMMAND and GIT_PROXY_COMMAND name: it connects through
// the run's SOCKS5 proxy and pipes stdin and stdout.
func runProxyConnect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("hermetic proxy-connect", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socks := fs.String("socks", "", "SOCKS5 proxy `ADDR` (HOST:PORT)")
	if err := fs.Parse(args); err != nil || *socks == "" || fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: hermetic proxy-connect --socks HOST:PORT DEST_HOST DEST_PORT")
		return 1
	}
	// The run's SOCKS5 credentials come from ALL_PROXY in the environment,
	// never from the command line, which other users can read.
	var auth *url.Userinfo
	if u, err := url.Parse(os.Getenv("ALL_PROXY")); err == nil && u.User != nil && u.Host == *socks {
		auth = u.User
	}
	if err := launcher.ProxyConnect(context.Background(), *socks, auth, fs.Arg(0), fs.Arg(1), stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "hermetic: %v\n", err)
		return 1
	}
	return 0
}
