package launcher

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hermetic-dev/hermetic/dnsfilter"
	"github.com/hermetic-dev/hermetic/internal/tunnel"
	"github.com/hermetic-dev/hermetic/policy"
)

// Isolation modes (--isolate, SPEC §5.1).
const (
	IsolateAuto  = "auto"
	IsolateNetns = "netns"
	IsolateNone  = "none"
)

// netnsRun is the namespace side of one run: chosen before the proxies
// start, used when the target is spawned, closed at shutdown.
type netnsRun struct {
	mode    string // IsolateNetns or IsolateAuto; the run uses a namespace
	expose  []uint16
	learned *dnsfilter.Learned
	// filterPol is the DNS filter's policy: the run's own, in which
	// --allow-localhost covers the namespace's loopback. The proxies'
	// policy leaves it out, because what they dial is the host's.
	filterPol *policy.Policy
	upstreams []string
	// netID is the namespace's id once the target runs in it: whatever
	// is still in it when the target ends is killed.
	netID string

	mu      sync.Mutex
	active  bool // the target runs in the namespace
	filter  *dnsfilter.Filter
	sockets *netnsSockets
	relays  sync.WaitGroup
	conns   map[net.Conn]struct{}
	closed  bool
}

// chooseIsolation settles --isolate before anything starts: netns for the
// blocked and allowlist postures where namespaces work (auto), none
// otherwise, with one warning line when auto had to fall back and a clear
// error when netns was asked for and cannot be had.
func (r *runner) chooseIsolation(netOn bool) error {
	mode := r.s.Isolate
	if mode == "" {
		mode = IsolateAuto
	}
	switch mode {
	case IsolateAuto, IsolateNetns, IsolateNone:
	default:
		return fmt.Errorf("--isolate=%s: want auto, netns or none", mode)
	}
	expose := r.s.ExposeHostPorts
	if mode == IsolateNone {
		if len(expose) > 0 {
			return errors.New("--expose-host-port brings a host port into the network namespace, and --isolate=none has none")
		}
		return nil
	}
	if !netOn {
		switch {
		case mode == IsolateNetns && r.s.byoProxy():
			return fmt.Errorf("--isolate=netns needs hermetic's own proxies, and %s replaces them", byoFlag(&r.s))
		case mode == IsolateNetns:
			return errors.New("--isolate=netns needs a network policy to enforce: add --no-network, --allow-domain or another network flag")
		case len(expose) > 0:
			return errors.New("--expose-host-port needs the network namespace, which only a network policy sets up")
		}
		return nil
	}
	if mode == IsolateAuto {
		pol, err := policy.New(r.s.netConfig(nil))
		if err != nil {
			return err
		}
		if p := pol.Posture(); p != policy.PostureBlocked && p != policy.PostureAllowlist {
			if len(expose) > 0 {
				return fmt.Errorf("--expose-host-port needs the network namespace, which --isolate=auto uses only for the blocked and allowlist postures (this run's is %s); add --isolate=netns", p)
			}
			return nil
		}
	}
	if err := netnsAvailable(); err != nil {
		if mode == IsolateNetns {
			return fmt.Errorf("--isolate=netns: %v; use --isolate=none to run without kernel isolation", err)
		}
		if len(expose) > 0 {
			return fmt.Errorf("--expose-host-port: %v", err)
		}
		r.warnNoIsolation(err)
		return nil
	}
	for _, p := range expose {
		if p == 0 || p == 53 {
			return fmt.Errorf("--expose-host-port %d: want a port from 1 to 65535 other than 53, which the DNS filter holds", p)
		}
	}
	upstreams, err := dnsfilter.HostUpstreams("/etc/resolv.conf")
	if err != nil {
		// No resolv.conf: the C library's default, a resolver on the
		// host's loopback.
		upstreams = []string{"127.0.0.1:53"}
	}
	r.ns = &netnsRun{mode: mode, expose: expose, learned: dnsfilter.NewLearned(0), upstreams: upstreams}
	return nil
}

// warnNoIsolation is printed even under --quiet: a run that silently lost
// its namespace would hold far less than its user believes.
func (r *runner) warnNoIsolation(err error) {
	fmt.Fprintf(r.stderr, "hermetic: warning: running without kernel isolation (%v): only clients that use the proxy settings are filtered; --isolate=none silences this warning\n", err)
}

// newPolicy builds the proxies' policy for a run whose proxies listen on
// self. With a namespace it learns from the DNS filter (SPEC §3.2 step 6),
// and --allow-localhost no longer reaches the host's loopback through the
// proxies: inside, it means the namespace's own loopback, which the target
// reaches directly. Address rules that name loopback still go through, as
// the user asked.
func (r *runner) newPolicy(self []netip.AddrPort) (*policy.Policy, error) {
	cfg := r.s.netConfig(self)
	if r.ns == nil {
		return policy.New(cfg)
	}
	cfg.Learned = r.ns.learned
	fp, err := policy.New(cfg)
	if err != nil {
		return nil, err
	}
	r.ns.filterPol = fp
	if !cfg.AllowLocalhost {
		return fp, nil
	}
	pc := cfg
	pc.AllowLocalhost = false
	// Keep the posture that --allow-localhost may have selected.
	pc.Network = fp.Posture().String()
	return policy.New(pc)
}

// startTarget starts cmd, in the namespace when the run has one, and
// serves the sockets the namespace hands back. Under --isolate=auto a
// namespace that cannot be created is one warning, and the target starts
// without it.
func (r *runner) startTarget(cmd *exec.Cmd) error {
	if r.ns == nil {
		if err := cmd.Start(); err != nil {
			return startError(r.target.Argv[0], err)
		}
		return nil
	}
	orig := *cmd
	err := r.startInNetns(cmd)
	if err == nil {
		return nil
	}
	var se *startErr
	if errors.As(err, &se) {
		return se.err
	}
	if r.ns.mode == IsolateNetns || len(r.ns.expose) > 0 {
		return fmt.Errorf("--isolate=netns: %w", err)
	}
	r.warnNoIsolation(err)
	plain := orig
	*cmd = exec.Cmd{Path: plain.Path, Args: plain.Args, Env: plain.Env, Dir: plain.Dir,
		Stdin: plain.Stdin, Stdout: plain.Stdout, Stderr: plain.Stderr, SysProcAttr: sysProcAttr()}
	if err := cmd.Start(); err != nil {
		return startError(r.target.Argv[0], err)
	}
	return nil
}

// startErr is a failure to start the target itself, not the namespace.
type startErr struct{ err error }

func (e *startErr) Error() string { return e.err.Error() }

func (r *runner) startInNetns(cmd *exec.Cmd) error {
	if _, err := os.Stat(cmd.Path); err != nil {
		// Report a missing target as such, not as a namespace failure.
		return &startErr{startError(r.target.Argv[0], err)}
	}
	resolv := filepath.Join(r.tmp, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(netnsResolvConf), 0o644); err != nil {
		return err
	}
	target := cmd.Path // netnsCommand makes cmd start the init
	spec := netnsSpec{HTTPPort: r.httpAddr.Port(), SOCKSPort: r.sockAddr.Port(), Expose: r.ns.expose, ResolvConf: resolv}
	start, err := netnsCommand(cmd, spec)
	if err != nil {
		return err
	}
	defer start.close()
	if err := cmd.Start(); err != nil {
		return err
	}
	netID := netnsID(cmd.Process.Pid)
	socks, err := start.sockets()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	if err := r.serveNetns(socks); err != nil {
		socks.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	// The init execs the target after handing over the sockets. A failed
	// exec is the target's failure to start, reported and mapped to 126 or
	// 127 as without the namespace; the init has exited.
	if err := start.execResult(target); err != nil {
		cmd.Wait()
		return &startErr{startError(r.target.Argv[0], err)}
	}
	r.ns.netID = netID
	return nil
}

// serveNetns serves the namespace's sockets: the proxies with the run's
// servers, the DNS filter, and the exposed ports.
func (r *runner) serveNetns(s *netnsSockets) error {
	table, err := parseResolve(r.s.Resolve)
	if err != nil {
		return err
	}
	f, err := dnsfilter.New(dnsfilter.Config{
		Policy:   r.ns.filterPol,
		Upstream: &dnsfilter.Forwarder{Servers: r.ns.upstreams},
		Static:   table,
		Learned:  r.ns.learned,
		Recorder: r.rec,
		Ports:    dnsfilter.DecisionPorts(r.s.Net),
	})
	if err != nil {
		return err
	}
	n := r.ns
	n.mu.Lock()
	n.active, n.filter, n.sockets = true, f, s
	n.mu.Unlock()
	// The servers' Close closes these listeners; their Serve errors after
	// that carry nothing.
	go r.servers[0].Serve(s.HTTP)
	go r.servers[1].Serve(s.SOCKS)
	go f.ServePacket(s.DNSUDP)
	go f.Serve(s.DNSTCP)
	for i, l := range s.Expose {
		go n.relay(l, n.expose[i])
	}
	return nil
}

// relayIdle ends an exposed-port connection on which nothing moved.
const relayIdle = 10 * time.Minute

// maxRelayConns bounds the connections an exposed port carries at once.
const maxRelayConns = 128

// relay carries connections to an exposed port inside the namespace to the
// host's 127.0.0.1:port. The user asked for exactly this port, so it is not
// a policy decision.
func (n *netnsRun) relay(l net.Listener, port uint16) {
	sem := make(chan struct{}, maxRelayConns)
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		if !n.track(c) {
			c.Close()
			return
		}
		n.relays.Add(1)
		go func() {
			defer n.relays.Done()
			defer func() { <-sem }()
			defer n.untrack(c)
			up, err := net.DialTimeout("tcp", host, 10*time.Second)
			if err != nil {
				c.Close()
				return
			}
			if !n.track(up) {
				up.Close()
				c.Close()
				return
			}
			defer n.untrack(up)
			tunnel.Join(c, up, relayIdle)
		}()
	}
}

func (n *netnsRun) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	if n.conns == nil {
		n.conns = map[net.Conn]struct{}{}
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *netnsRun) untrack(c net.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.conns, c)
}

// close stops the DNS filter and the relays and releases the namespace's
// sockets. It is safe to call more than once, and on nil.
func (n *netnsRun) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	f, s := n.filter, n.sockets
	conns := n.conns
	n.conns = nil
	n.mu.Unlock()
	if f != nil {
		f.Close()
	}
	if s != nil {
		s.Close()
	}
	for c := range conns {
		c.Close()
	}
	n.relays.Wait()
}
