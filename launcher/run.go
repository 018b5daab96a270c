package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/hermetic-dev/hermetic/proxy"
)

// Result is the outcome of a run.
type Result struct {
	// ExitCode is the code hermetic exits with (SPEC §4.5): the target's,
	// 128+N when a signal killed it, or 2 under --fail-on-block when
	// anything was blocked.
	ExitCode int
	// Signal is the signal that killed the target, if one did.
	Signal syscall.Signal
	// Denials lists each denied (or --audit: would-be denied) destination
	// once.
	Denials []Denial
	// Violations counts the blocked actions the Python shim reported.
	Violations int
	// Audit is what --audit learned; nil without --audit.
	Audit *Audit
}

// killGrace is how long a target has to exit after SIGTERM when the run's
// context is cancelled, before it is killed.
const killGrace = 5 * time.Second

// Run starts the target argv (everything after `--`) under the session's
// policy narrowed by o, waits for it, and reports. The error is non-nil
// only when hermetic itself failed or the target could not be started; use
// ExitCode to turn it into an exit code (1, or 126/127).
func (s *Session) Run(ctx context.Context, argv []string, o RunOptions) (*Result, error) {
	settings, err := s.narrow(o)
	if err != nil {
		return nil, err
	}
	r := &runner{s: settings, o: o, stdin: o.Stdin, stdout: o.Stdout, stderr: o.Stderr, env: o.Env}
	if r.stdin == nil {
		r.stdin = os.Stdin
	}
	if r.stdout == nil {
		r.stdout = os.Stdout
	}
	if r.stderr == nil {
		r.stderr = os.Stderr
	}
	if _, ok := r.stderr.(*os.File); !ok {
		// The target's stderr is copied into this writer by os/exec while
		// hermetic writes its own lines to it.
		r.stderr = &lockedWriter{w: r.stderr}
		if o.Stdout == o.Stderr {
			r.stdout = r.stderr
		}
	}
	if r.env == nil {
		r.env = os.Environ()
	}
	r.dir = o.Dir
	if r.dir == "" {
		if r.dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	r.target, err = resolveTarget(argv, envValue(r.env, "PATH"), r.dir)
	if err != nil {
		return nil, err
	}
	defer r.cleanup()
	return r.run(ctx)
}

// runner is the state of one run.
type runner struct {
	s              Settings
	o              RunOptions
	stdin          io.Reader
	stdout, stderr io.Writer
	env            []string
	dir            string
	target         target

	pol      *policy.Policy
	rep      *reporter
	rec      policy.Recorder
	log      *policy.JSONWriter
	servers  []proxyServer
	ns       *netnsRun // the network namespace, when the run uses one
	serveErr chan error
	httpAddr netip.AddrPort
	// creds are what both proxies require of this run's clients.
	creds    proxy.Credentials
	sockAddr netip.AddrPort
	tmp      string
	logFile  *os.File
	closers  sync.Once
}

func (r *runner) warnf(format string, args ...any) {
	if !r.s.Quiet {
		fmt.Fprintf(r.stderr, "hermetic: warning: "+format+"\n", args...)
	}
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	netOn := !r.s.byoProxy() && networkFlagSet(r.s.netConfig(nil)) != ""
	shimOn := netOn || r.s.Guards != (Guards{})

	if r.s.LogFile != "" {
		f, err := os.OpenFile(r.s.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--log-file: %w", err)
		}
		r.logFile = f
	}
	var trace io.Writer
	if r.s.Trace {
		trace = r.stderr
	}
	if r.logFile != nil {
		r.log = policy.NewJSONWriter(r.logFile, func(err error) {
			fmt.Fprintf(r.stderr, "hermetic: --log-file %s: %v; decisions are still enforced, but from now on some may be missing from the log\n", r.s.LogFile, err)
		})
	}
	r.rep = newReporter()
	r.rec = recorder(r.rep, trace, r.log)

	if err := r.chooseIsolation(netOn); err != nil {
		return nil, err
	}
	if netOn || shimOn {
		tmp, err := os.MkdirTemp("", "hermetic-")
		if err != nil {
			return nil, err
		}
		r.tmp = tmp
	}
	if netOn {
		if err := r.startProxies(); err != nil {
			return nil, err
		}
		for _, w := range r.pol.Warnings() {
			if !r.s.Quiet {
				fmt.Fprintln(r.stderr, "hermetic: "+w)
			}
		}
	}
	r.warnShimBypass(netOn)

	spec := envSpec{Base: r.env, Scrub: r.s.EnvScrub, Keep: r.s.EnvKeep}
	switch {
	case netOn:
		pe := &proxyEnv{
			HTTP:  (&url.URL{Scheme: "http", User: r.creds.Userinfo(), Host: r.httpAddr.String()}).String(),
			SOCKS: (&url.URL{Scheme: "socks5h", User: r.creds.Userinfo(), Host: r.sockAddr.String()}).String(),
		}
		if err := r.gitCommands(pe, r.sockAddr.String()); err != nil {
			return nil, err
		}
		spec.Proxy = pe
	case r.s.byoProxy():
		pe := &proxyEnv{HTTP: r.s.ProxyURL, SOCKS: r.s.SOCKSURL}
		if hp, ok := socksHostPort(r.s.SOCKSURL); ok {
			if err := r.gitCommands(pe, hp); err != nil {
				return nil, err
			}
		}
		spec.Proxy = pe
	}
	if shimOn {
		name, value, err := installShim(r.tmp, r.shimConfig(netOn))
		if err != nil {
			return nil, fmt.Errorf("installing the Python shim: %w", err)
		}
		spec.ShimDir, spec.ShimVar, spec.ShimValue = r.tmp, name, value
	}
	env, scrubbed := buildEnv(spec)
	if len(scrubbed) > 0 {
		// Names only: the values are the secrets.
		r.warnf("--env-scrub removed %s from the target's environment; keep one with --env-keep NAME", strings.Join(scrubbed, ", "))
	}

	res, err := r.spawn(ctx, env)
	if err != nil {
		return nil, err
	}
	r.shutdown()
	r.finish(res)
	return res, nil
}

// startProxies listens on two loopback ports first, so that the policy
// can deny the proxies' own addresses, then serves both proxies through
// one guarded dialer.
func (r *runner) startProxies() error {
	var ls []net.Listener
	// Plain TCP on IPv4 loopback: "tcp4" skips the IPv6 capability probe
	// and MPTCP (Go's default for listeners) is of no use on loopback;
	// both cost start-up time on every run.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	for range 2 {
		l, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("starting the proxies: %w", err)
		}
		ls = append(ls, l)
	}
	r.httpAddr = ls[0].Addr().(*net.TCPAddr).AddrPort()
	r.sockAddr = ls[1].Addr().(*net.TCPAddr).AddrPort()
	closeAll := func() {
		for _, l := range ls {
			l.Close()
		}
	}
	pol, err := r.newPolicy([]netip.AddrPort{r.httpAddr, r.sockAddr})
	if err != nil {
		closeAll()
		return err
	}
	r.pol = pol
	table, err := parseResolve(r.s.Resolve)
	if err != nil {
		closeAll()
		return err
	}
	d := &policy.Dialer{
		Policy:   pol,
		Resolver: staticResolver{table: table, next: net.DefaultResolver},
		Recorder: r.rec,
	}
	// Per-run credentials keep other local users and processes from using
	// this run's proxies (and its allowlist). Both proxies take the same
	// pair: in the proxy URLs' userinfo, and for the Python shim's SOCKS5
	// client (RFC 1929) in its settings variable.
	creds, err := proxy.NewCredentials()
	if err != nil {
		closeAll()
		return err
	}
	r.creds = creds
	hs, err := newHTTPServer(d, creds)
	if err != nil {
		closeAll()
		return err
	}
	ss, err := newSOCKSServer(d, creds)
	if err != nil {
		hs.Close()
		closeAll()
		return err
	}
	r.servers = []proxyServer{hs, ss}
	r.serveErr = make(chan error, 2)
	for i, s := range r.servers {
		go func() { r.serveErr <- s.Serve(ls[i]) }()
	}
	return nil
}

// gitCommands sets GIT_SSH_COMMAND and GIT_PROXY_COMMAND to go through the
// SOCKS5 proxy at socks with `hermetic proxy-connect`.
func (r *runner) gitCommands(pe *proxyEnv, socks string) error {
	exe := r.o.Executable
	if exe == "" {
		return nil
	}
	connect := shellQuote(exe) + " proxy-connect --socks " + shellQuote(socks)
	pe.GitSSH = "ssh -o " + shellQuote("ProxyCommand="+connect+" %h %p")
	if r.tmp == "" {
		return nil
	}
	// git runs GIT_PROXY_COMMAND as a program with host and port as its
	// arguments, so it needs a file.
	script := filepath.Join(r.tmp, "git-proxy")
	body := "#!/bin/sh\nexec " + connect + " \"$1\" \"$2\"\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		return err
	}
	pe.GitProxy = script
	return nil
}

// socksHostPort is the HOST:PORT of a SOCKS proxy URL. Its credentials are
// left out: proxy-connect finds them in ALL_PROXY, which holds this same
// URL, so they stay off its command line, which other users can read.
func socksHostPort(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	return u.Host, true
}

// warnShimBypass warns when the target's Python will not load the shim.
func (r *runner) warnShimBypass(netOn bool) {
	py := r.target.Python
	if py == nil {
		return
	}
	var args []string
	if r.target.Kind == TargetExecutable && len(py) == 1 && py[0] == r.target.Path {
		args = r.target.Argv[1:] // `hermetic -- python3 -I ...`
	} else {
		args = py[1:] // the shebang's options
	}
	opts := shimBypass(args)
	if len(opts) == 0 {
		return
	}
	var guards []string
	if netOn {
		guards = append(guards, "the in-process network guard")
	}
	g := r.s.Guards
	for _, x := range []struct {
		on   bool
		name string
	}{{g.NoSubprocess, "--no-subprocess"}, {g.FSReadonly, "--fs-readonly"}, {g.BlockNative, "--block-native"}, {g.Seal, "--seal"}} {
		if x.on {
			guards = append(guards, x.name)
		}
	}
	if len(guards) == 0 {
		return
	}
	msg := fmt.Sprintf("%s runs Python with %s, which does not load hermetic's shim, so these guards do not apply: %s", r.target.Argv[0], strings.Join(opts, " "), strings.Join(guards, ", "))
	if netOn {
		msg += "; clients that use the proxy variables are still filtered"
	}
	r.warnf("%s", msg)
}

// spawn starts the target with only its standard streams, forwards
// signals, and waits for it.
func (r *runner) spawn(ctx context.Context, env []string) (*Result, error) {
	cmd := &exec.Cmd{
		Path:        r.target.Path,
		Args:        r.target.Argv,
		Env:         env,
		Dir:         r.dir,
		Stdin:       r.stdin,
		Stdout:      r.stdout,
		Stderr:      r.stderr,
		SysProcAttr: sysProcAttr(),
	}
	closeInheritedFDs()
	if err := r.startTarget(cmd); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var (
		waitErr error
		kill    <-chan time.Time
		ctxDone = ctx.Done()
	)
wait:
	for {
		select {
		case waitErr = <-done:
			break wait
		case sig := <-r.o.Signals:
			if r.o.OSSignals && sig == os.Interrupt && terminalSentSIGINT() {
				continue
			}
			cmd.Process.Signal(sig)
		case <-ctxDone:
			ctxDone = nil
			cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(killGrace)
		case <-kill:
			cmd.Process.Kill()
		}
	}

	if r.ns != nil {
		// The target's background processes go with it: in the namespace
		// they could reach nothing once the proxies close, and a run
		// leaves nothing behind.
		killNamespace(r.ns.netID)
	}
	res := &Result{}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
	default:
		return nil, fmt.Errorf("waiting for %s: %w", r.target.Argv[0], waitErr)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal()
		res.ExitCode = 128 + int(ws.Signal())
	} else {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	return res, nil
}

// startError maps a failure to start the target to 126 or 127.
func startError(name string, err error) error {
	var pe *fs.PathError
	errno := syscall.Errno(0)
	if errors.As(err, &pe) {
		errors.As(pe.Err, &errno)
	}
	switch errno {
	case syscall.ENOENT:
		return notFound("%s: not found", name)
	case syscall.EACCES, syscall.ENOEXEC, syscall.EISDIR, syscall.EPERM:
		return notExecutable("%s: cannot execute: %v", name, errno)
	}
	return &ExitError{Code: 126, Err: fmt.Errorf("%s: cannot execute: %w", name, err)}
}

// shutdownTimeout bounds how long stopping the proxies may take; a proxy
// that cannot finish closing must not keep hermetic from exiting.
const shutdownTimeout = 5 * time.Second

// shutdown stops the proxies; it is safe to call more than once.
func (r *runner) shutdown() {
	r.closers.Do(func() {
		r.ns.close()
		if len(r.servers) == 0 {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, s := range r.servers {
				s.Close()
			}
			for range r.servers {
				<-r.serveErr
			}
		}()
		select {
		case <-done:
		case <-time.After(shutdownTimeout):
			fmt.Fprintf(r.stderr, "hermetic: the proxies did not shut down within %v\n", shutdownTimeout)
		}
	})
}

// finish fills in the reports and prints them.
func (r *runner) finish(res *Result) {
	res.Denials = r.rep.Denials()
	vs := readViolations(r.tmp)
	res.Violations = len(vs)
	if !r.s.Quiet {
		writeSummary(r.stderr, res.Denials)
		writeViolations(r.stderr, vs)
	}
	if r.s.Net.Audit && r.pol != nil {
		a := buildAudit(r.s.netConfig(nil), r.rep.auditedDecisions())
		res.Audit = &a
		writeAudit(r.stderr, a)
	}
	if r.s.FailOnBlock && (r.rep.Blocked() > 0 || res.Violations > 0) {
		res.ExitCode = 2
	}
}

// cleanup releases everything the run created: proxies, the log file and
// the temporary directory (shim, scripts).
func (r *runner) cleanup() {
	r.shutdown()
	if r.logFile != nil {
		if err := r.logFile.Close(); err != nil {
			fmt.Fprintf(r.stderr, "hermetic: --log-file: %v\n", err)
		}
	}
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// lockedWriter serialises writes. It deliberately has no ReadFrom, so a
// copy into it never holds the underlying writer across a blocking read.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
