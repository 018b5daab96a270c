package launcher

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strings"

	"github.com/hermetic-dev/hermetic/policy"
)

// Settings is everything a run is asked to do, merged from the configuration
// sources (Load) or filled in directly by a Go caller.
type Settings struct {
	// Net is the network policy. Self is filled in per run with the
	// proxies' addresses; leave it empty. Net.Audit is --audit.
	Net policy.Config
	// Guards are the Python guards.
	Guards Guards

	// FailOnBlock makes any denied (or, under --audit, would-be denied)
	// action end the run with exit code 2.
	FailOnBlock bool
	// Trace writes one line per blocked action to stderr.
	Trace bool
	// LogFile, if set, receives every decision as a JSON line.
	LogFile string
	// Quiet silences hermetic's own non-error lines (warnings and the exit
	// summary); --trace and --audit output are still written.
	Quiet bool

	// EnvScrub removes secret-looking variables from the target's
	// environment, except those EnvKeep names (exact names or patterns).
	EnvScrub bool
	EnvKeep  []string

	// Resolve holds static answers, "HOST=IP[,IP...]", used before DNS.
	Resolve []string

	// ProxyURL and SOCKSURL bring your own proxy: they are given to the
	// target, no proxy is started, and hermetic filters nothing.
	ProxyURL, SOCKSURL string

	// Isolate is --isolate (SPEC §5.1): auto (or empty), netns or none.
	// auto runs the blocked and allowlist postures in a network namespace
	// where the kernel allows one, and warns once when it cannot.
	Isolate string
	// ExposeHostPorts are host loopback ports brought into the network
	// namespace (--expose-host-port): 127.0.0.1:PORT inside reaches the
	// host's 127.0.0.1:PORT.
	ExposeHostPorts []uint16

	// Profiles are the profiles that were applied, in order (for reports).
	Profiles []string
	// ConfigFile is the configuration file that was read, if any.
	ConfigFile string
}

// Guards are the Python-level guards the shim installs (SPEC §7).
type Guards struct {
	NoSubprocess bool
	// FSReadonly denies every write; reads are confined to FSRoot (the
	// working directory when empty).
	FSReadonly  bool
	FSRoot      string
	BlockNative bool
	Seal        bool
}

// validate checks what policy.New does not: the proxy URLs, --resolve,
// --env-keep patterns and --isolate. It returns the network policy, built
// once here so that rule errors surface before anything starts.
func (s *Settings) validate() (*policy.Policy, error) {
	switch s.Isolate {
	case "", IsolateAuto, IsolateNetns, IsolateNone:
	default:
		return nil, fmt.Errorf("--isolate=%q: want auto, netns or none", s.Isolate)
	}
	// What can be judged without the run's posture is judged here, so that
	// a bad combination fails before anything starts; chooseIsolation
	// judges the rest per run.
	for _, p := range s.ExposeHostPorts {
		if p == 0 || p == 53 {
			return nil, fmt.Errorf("--expose-host-port %d: want a port from 1 to 65535 other than 53, which the DNS filter holds", p)
		}
	}
	if len(s.ExposeHostPorts) > 0 {
		switch {
		case s.Isolate == IsolateNone:
			return nil, errors.New("--expose-host-port brings a host port into the network namespace, and --isolate=none has none")
		case s.byoProxy():
			return nil, fmt.Errorf("--expose-host-port needs the network namespace, which %s rules out (hermetic's own proxies are the namespace's way out)", byoFlag(s))
		}
	}
	if s.Isolate == IsolateNetns && s.byoProxy() {
		return nil, fmt.Errorf("--isolate=netns needs hermetic's own proxies, and %s replaces them", byoFlag(s))
	}
	if s.ProxyURL != "" {
		if err := checkProxyURL("--proxy-url", s.ProxyURL, "http", "https"); err != nil {
			return nil, err
		}
	}
	if s.SOCKSURL != "" {
		if err := checkProxyURL("--socks-url", s.SOCKSURL, "socks5", "socks5h"); err != nil {
			return nil, err
		}
	}
	if s.byoProxy() {
		if flag := networkFlagSet(s.Net); flag != "" {
			return nil, fmt.Errorf("%s hands all filtering to your own proxy, so %s would not be applied; drop one of them", byoFlag(s), flag)
		}
	}
	if _, err := parseResolve(s.Resolve); err != nil {
		return nil, err
	}
	for _, k := range s.EnvKeep {
		if _, err := path.Match(k, ""); err != nil || k == "" || strings.ContainsRune(k, '=') {
			return nil, fmt.Errorf("--env-keep %q: want a variable name or a pattern such as 'MY_*'", k)
		}
	}
	return policy.New(s.netConfig(nil))
}

// netConfig is the policy configuration of a run whose proxies listen on
// self. An --audit with no network flag audits the blocked posture, so
// that the run learns its whole allowlist.
func (s *Settings) netConfig(self []netip.AddrPort) policy.Config {
	c := s.Net
	c.Self = self
	if c.Audit && networkFlagSet(c) == "" {
		c.NoNetwork = true
	}
	return c
}

func (s *Settings) byoProxy() bool { return s.ProxyURL != "" || s.SOCKSURL != "" }

func byoFlag(s *Settings) string {
	if s.ProxyURL != "" {
		return "--proxy-url"
	}
	return "--socks-url"
}

// networkFlagSet names one network setting of c that engages hermetic's
// network control, or returns "".
func networkFlagSet(c policy.Config) string {
	switch {
	case c.NoNetwork:
		return "--no-network"
	case c.Network != "":
		return "--network"
	case len(c.AllowDomains) > 0:
		return "--allow-domain"
	case len(c.AllowCIDRs) > 0:
		return "--allow-cidr"
	case len(c.Allow) > 0:
		return "an allow rule"
	case len(c.DenyDomains) > 0:
		return "--deny-domain"
	case len(c.DenyCIDRs) > 0:
		return "--deny-cidr"
	case len(c.Deny) > 0:
		return "a deny rule"
	case c.AllowLocalhost:
		return "--allow-localhost"
	case c.Profile:
		return "a network profile"
	}
	return ""
}

func checkProxyURL(flag, raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s %q: %v", flag, redactURL(raw), err)
	}
	ok := false
	for _, s := range schemes {
		ok = ok || strings.EqualFold(u.Scheme, s)
	}
	if !ok {
		return fmt.Errorf("%s %q: want a %s:// URL", flag, redactURL(raw), strings.Join(schemes, ":// or "))
	}
	if u.Hostname() == "" || u.Port() == "" {
		return fmt.Errorf("%s %q: want scheme://HOST:PORT", flag, redactURL(raw))
	}
	return nil
}

// parseResolve reads --resolve HOST=IP[,IP...] entries into a map from the
// normalised host name to its addresses.
func parseResolve(entries []string) (map[string][]netip.Addr, error) {
	return parseResolveAt("--resolve", entries)
}

// parseResolveAt is parseResolve with errors that begin with where: the
// flag, or the config file, line and key.
func parseResolveAt(where string, entries []string) (map[string][]netip.Addr, error) {
	m := make(map[string][]netip.Addr)
	for _, e := range entries {
		host, ips, ok := strings.Cut(e, "=")
		if !ok || host == "" || ips == "" {
			return nil, fmt.Errorf("%s %q: want HOST=IP", where, e)
		}
		h, err := policy.NormalizeHost(host)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", where, e, err)
		}
		if h.IsAddr() {
			return nil, fmt.Errorf("%s %q: %s is already an address; give a host name", where, e, host)
		}
		for _, ip := range strings.Split(ips, ",") {
			a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(ip), "["), "]"))
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%s %q: %q is not an IP address", where, e, ip)
			}
			m[h.Name] = append(m[h.Name], a.Unmap())
		}
	}
	return m, nil
}
