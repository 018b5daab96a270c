package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermetic-dev/hermetic/policy"
)

// Session is a policy ceiling for any number of runs (SPEC §8). Each Run
// may narrow the session's network policy and add guards; anything that
// would widen it is an error. A Session is safe for concurrent use: it holds
// no run state, and every Run starts its own proxies.
type Session struct {
	settings Settings
	ceiling  *policy.Policy
}

// NewSession validates s (rules, flag combinations, proxy URLs) and returns
// a session whose ceiling it is.
func NewSession(s Settings) (*Session, error) {
	s.EnvKeep = slices.Clone(s.EnvKeep)
	s.Resolve = slices.Clone(s.Resolve)
	s.ExposeHostPorts = slices.Clone(s.ExposeHostPorts)
	s.Net = cloneNet(s.Net)
	p, err := s.validate()
	if err != nil {
		return nil, err
	}
	return &Session{settings: s, ceiling: p}, nil
}

// Settings returns the session's settings.
func (s *Session) Settings() Settings {
	out := s.settings
	out.Net = cloneNet(out.Net)
	return out
}

// Warnings are the lines to show at start: allow rules that can never take
// effect.
func (s *Session) Warnings() []string { return s.ceiling.Warnings() }

// RunOptions narrow a session for one run and say how to start the target.
type RunOptions struct {
	// Net, when set, is this run's network policy instead of the session's.
	// It must be within the session's: blocked ⊂ allowlist ⊂ open ⊂ none
	// (network left alone), and in an allowlist each allow rule must be
	// covered by one of the session's. The session's deny rules always
	// apply as well.
	Net *policy.Config
	// Guards are added to the session's guards; a run cannot remove one.
	Guards Guards

	// Dir is the target's working directory; empty means the current one.
	Dir string
	// Env is the environment the target's is built from; nil means
	// os.Environ().
	Env []string
	// Stdin, Stdout and Stderr are the target's standard streams; nil
	// means hermetic's own. hermetic's reports go to Stderr too.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Signals, if set, are forwarded to the target while it runs.
	Signals <-chan os.Signal
	// OSSignals says that Signals carries the process's own signals
	// (signal.Notify). Then a SIGINT that arrives while this process is in
	// its terminal's foreground process group is not forwarded: the
	// terminal sent it to the target as well, and a second one would
	// interrupt the target's own clean-up.
	OSSignals bool
	// Executable is a hermetic binary whose proxy-connect subcommand serves
	// ssh's ProxyCommand (GIT_SSH_COMMAND) and git's GIT_PROXY_COMMAND.
	// When empty, those variables are not set and inherited ones dropped.
	Executable string
}

// narrow returns the settings of one run: the session's, narrowed by o.
func (s *Session) narrow(o RunOptions) (Settings, error) {
	run := s.Settings()
	if o.Net != nil {
		if s.settings.byoProxy() {
			return Settings{}, fmt.Errorf("this session uses your own proxy (%s); a run cannot set a network policy", byoFlag(&s.settings))
		}
		n := cloneNet(*o.Net)
		n.Self, n.Learned = nil, nil
		if err := checkWithin(s.settings.netConfig(nil), n); err != nil {
			return Settings{}, err
		}
		c := s.settings.Net
		n.DenyDomains = append(slices.Clone(c.DenyDomains), n.DenyDomains...)
		n.DenyCIDRs = append(slices.Clone(c.DenyCIDRs), n.DenyCIDRs...)
		n.Deny = append(slices.Clone(c.Deny), n.Deny...)
		run.Net = n
	}
	g, err := addGuards(s.settings.Guards, o.Guards, o.Dir)
	if err != nil {
		return Settings{}, err
	}
	run.Guards = g
	return run, nil
}

// WideningError says how a run's options would widen its session.
type WideningError struct{ What string }

func (e *WideningError) Error() string {
	return "run options may only narrow the session's policy: " + e.What
}

func widening(format string, args ...any) error {
	return &WideningError{What: fmt.Sprintf(format, args...)}
}

// postureRank orders postures from narrowest to widest.
func postureRank(p policy.Posture) int {
	switch p {
	case policy.PostureBlocked:
		return 0
	case policy.PostureAllowlist:
		return 1
	case policy.PostureOpen:
		return 2
	}
	return 3 // none: the network is left alone
}

// checkWithin reports how run would widen ceiling, or nil.
func checkWithin(ceiling, run policy.Config) error {
	cp, err := policy.New(ceiling)
	if err != nil {
		return err
	}
	if run.Audit && networkFlagSet(run) == "" {
		run.NoNetwork = true
	}
	rp, err := policy.New(run)
	if err != nil {
		return fmt.Errorf("run network policy: %w", err)
	}
	cpost, rpost := cp.Posture(), rp.Posture()
	if postureRank(rpost) > postureRank(cpost) {
		return widening("the run's %s posture is wider than the session's %s", rpost, cpost)
	}
	if run.Audit && !ceiling.Audit && cpost != policy.PostureNone {
		return widening("--audit lets denied connections through, and the session does not")
	}
	switch cpost {
	case policy.PostureNone, policy.PostureOpen:
		// Open allows every allow rule and loopback; its deny rules are
		// added to the run's.
		return nil
	}
	if run.AllowLocalhost && !ceiling.AllowLocalhost {
		return widening("--allow-localhost: the session does not allow loopback")
	}
	if rpost == policy.PostureBlocked {
		return nil
	}
	// Both are allowlists: every allow rule of the run needs a session
	// allow rule that covers all it matches.
	cRules, err := allowRules(ceiling)
	if err != nil {
		return err
	}
	rRules, err := allowRules(run)
	if err != nil {
		return fmt.Errorf("run network policy: %w", err)
	}
	var wide []string
	for _, r := range rRules {
		if !slices.ContainsFunc(cRules, func(c policy.Rule) bool { return ruleCovers(c, r) }) {
			wide = append(wide, r.Text)
		}
	}
	if len(wide) > 0 {
		return widening("the session's allowlist does not cover %s", strings.Join(wide, ", "))
	}
	return nil
}

func allowRules(c policy.Config) ([]policy.Rule, error) {
	var out []policy.Rule
	for _, l := range []struct {
		rules []string
		kind  policy.RuleKind
	}{{c.AllowDomains, policy.NameRule}, {c.AllowCIDRs, policy.AddrRule}, {c.Allow, policy.AnyRule}} {
		for _, s := range l.rules {
			r, err := policy.ParseRule(s, l.kind, true)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// ruleCovers reports whether allow rule c matches every destination that
// allow rule r matches. Name rules and address rules never cover each other:
// an address rule never allows a name, nor a name rule an address.
func ruleCovers(c, r policy.Rule) bool {
	if c.Port != 0 && c.Port != r.Port {
		return false
	}
	if c.IsName() != r.IsName() || c.Any || r.Any {
		return false
	}
	if c.IsName() {
		if r.Name == c.Name {
			// example.com covers itself and *.example.com; *.example.com
			// covers only *.example.com.
			return !c.Wildcard || r.Wildcard
		}
		return strings.HasSuffix(r.Name, "."+c.Name)
	}
	return c.Prefix.Bits() <= r.Prefix.Bits() && c.Prefix.Contains(r.Prefix.Addr())
}

// addGuards adds a run's guards to the session's. A run's fs-readonly root
// must lie inside the session's.
func addGuards(c, r Guards, dir string) (Guards, error) {
	g := Guards{
		NoSubprocess: c.NoSubprocess || r.NoSubprocess,
		FSReadonly:   c.FSReadonly || r.FSReadonly,
		BlockNative:  c.BlockNative || r.BlockNative,
		Seal:         c.Seal || r.Seal,
		FSRoot:       c.FSRoot,
	}
	if r.FSRoot == "" {
		return g, nil
	}
	if c.FSReadonly {
		outer := c.FSRoot
		if outer == "" {
			outer = dir
		}
		if outer == "" {
			wd, err := os.Getwd()
			if err != nil {
				return Guards{}, err
			}
			outer = wd
		}
		if !within(outer, r.FSRoot) {
			return Guards{}, widening("--fs-readonly root %s is outside the session's %s", r.FSRoot, outer)
		}
	}
	g.FSRoot = r.FSRoot
	return g, nil
}

// within reports whether path p is dir or inside it (lexically).
func within(dir, p string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

func cloneNet(c policy.Config) policy.Config {
	c.AllowDomains = slices.Clone(c.AllowDomains)
	c.AllowCIDRs = slices.Clone(c.AllowCIDRs)
	c.Allow = slices.Clone(c.Allow)
	c.DenyDomains = slices.Clone(c.DenyDomains)
	c.DenyCIDRs = slices.Clone(c.DenyCIDRs)
	c.Deny = slices.Clone(c.Deny)
	c.Self = slices.Clone(c.Self)
	return c
}

// ExitCode is the exit code hermetic uses for err (SPEC §4.5): 0 for nil,
// the code an *ExitError carries (126, 127), and 1 for every other error.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
