package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermetic-dev/hermetic/policy"
	"github.com/spf13/pflag"
)

// entry is one setting from one source.
type entry struct {
	key   string
	b     bool
	s     string
	list  []string
	where string // "HERMETIC.toml:12 allow", "HERMETIC_FLAGS --trace", ...
}

// check validates an entry's values and makes its paths absolute against dir.
func (e *entry) check(dir string) error {
	k, ok := lookupKey(e.key)
	if !ok {
		return fmt.Errorf("%s: unknown setting", e.where)
	}
	switch {
	case k.isRule:
		for _, r := range e.list {
			if _, err := policy.ParseRule(r, k.rules, k.allowRule); err != nil {
				var re *policy.RuleError
				if errors.As(err, &re) {
					re.Source = e.where
					return re
				}
				return fmt.Errorf("%s %q: %v", e.where, r, err)
			}
		}
	case k.name == "network":
		switch e.s {
		case "blocked", "allowlist", "open":
		default:
			return fmt.Errorf("%s=%q: want blocked, allowlist or open", e.where, e.s)
		}
	case k.name == "isolate":
		switch e.s {
		case "auto", "netns", "none":
		default:
			return fmt.Errorf("%s=%q: want auto, netns or none", e.where, e.s)
		}
	case k.name == "profile":
		for _, p := range e.list {
			if p == "" || strings.ContainsAny(p, " ,\t") {
				return fmt.Errorf("%s %q: not a profile name", e.where, p)
			}
		}
	case k.name == "expose-host-port":
		for _, p := range e.list {
			if n, err := policy.ParsePort(p); err != nil || n == 53 {
				return fmt.Errorf("%s %q: want a port from 1 to 65535 other than 53, which the DNS filter holds", e.where, p)
			}
		}
	case k.name == "resolve":
		if _, err := parseResolveAt(e.where, e.list); err != nil {
			return err
		}
	case k.path:
		if e.s == "" {
			return fmt.Errorf("%s: empty path", e.where)
		}
		if !filepath.IsAbs(e.s) && dir != "" {
			e.s = filepath.Join(dir, e.s)
		}
	}
	return nil
}

// Sources are where Load reads settings from.
type Sources struct {
	// Dir is the working directory: the config search starts there and
	// relative paths on the command line and in the environment resolve
	// against it.
	Dir string
	// Getenv reads the environment (HERMETIC_FLAGS, HERMETIC_PROFILE,
	// HERMETIC_FS_ROOT); nil means os.Getenv.
	Getenv func(string) string
	// Flags is the parsed command line, defined with AddFlags; may be nil.
	Flags *pflag.FlagSet
	// NoConfig skips the config file search (an explicit --config is still
	// read).
	NoConfig bool
}

// Load merges the configuration sources of SPEC §6, lowest to highest:
// built-in defaults, the config file, the environment (HERMETIC_FLAGS, then
// HERMETIC_PROFILE and HERMETIC_FS_ROOT), the command line. A scalar from a
// higher source replaces a lower one; lists (rules, --env-keep, --resolve,
// --profile) accumulate. Profiles are applied last, in the order they were
// named, and only add restrictions or allowlist entries.
func Load(src Sources) (Settings, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := src.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return Settings{}, err
		}
		dir = wd
	}

	envEntries, err := envFlagEntries(getenv("HERMETIC_FLAGS"), dir)
	if err != nil {
		return Settings{}, err
	}
	var cliEntries []entry
	if src.Flags != nil {
		if cliEntries, err = flagEntries(src.Flags, "", dir); err != nil {
			return Settings{}, err
		}
	}

	// The config file: --config on the command line, then in
	// HERMETIC_FLAGS, then the search upward from dir.
	var cfgPath string
	for _, list := range [][]entry{cliEntries, envEntries} {
		if cfgPath == "" {
			cfgPath = lastString(list, "config")
		}
	}
	if cfgPath == "" && !src.NoConfig {
		if cfgPath, err = findConfig(dir); err != nil {
			return Settings{}, err
		}
	}
	var cfg *configFile
	if cfgPath != "" {
		if cfg, err = loadConfig(cfgPath); err != nil {
			return Settings{}, err
		}
	}

	if p := strings.TrimSpace(getenv("HERMETIC_PROFILE")); p != "" {
		names := strings.FieldsFunc(p, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		envEntries = append(envEntries, entry{key: "profile", list: names, where: "HERMETIC_PROFILE"})
	}
	if r := getenv("HERMETIC_FS_ROOT"); r != "" {
		e := entry{key: "fs-root", s: r, where: "HERMETIC_FS_ROOT"}
		if err := e.check(dir); err != nil {
			return Settings{}, err
		}
		envEntries = append(envEntries, e)
	}

	var m merged
	var userProfiles map[string][]entry
	if cfg != nil {
		m.apply(cfg.entries)
		userProfiles = cfg.profiles
	}
	m.apply(envEntries)
	m.apply(cliEntries)

	var applied []string
	for _, name := range m.lists["profile"] {
		if slices.Contains(applied, name) {
			continue
		}
		es, ok := builtinProfile(name)
		if !ok {
			es, ok = userProfiles[name]
		}
		if !ok {
			return Settings{}, unknownProfile(name, m.profileWhere[name], userProfiles)
		}
		if err := m.applyProfile(es); err != nil {
			return Settings{}, err
		}
		applied = append(applied, name)
	}

	s := m.settings()
	s.Profiles = applied
	if cfg != nil {
		s.ConfigFile = cfg.path
	}
	if _, err := s.validate(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

func unknownProfile(name, where string, user map[string][]entry) error {
	avail := builtinProfileNames
	if len(user) > 0 {
		var names []string
		for n := range user {
			names = append(names, n)
		}
		slices.Sort(names)
		avail += ", and from the config file: " + strings.Join(names, ", ")
	}
	if where == "" {
		where = "--profile"
	}
	return fmt.Errorf("%s: unknown profile %q; the profiles are %s", where, name, avail)
}

// envFlagEntries parses HERMETIC_FLAGS like a command line, without any
// shell evaluation.
func envFlagEntries(v, dir string) ([]entry, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	words, err := SplitWords(v)
	if err != nil {
		return nil, fmt.Errorf("HERMETIC_FLAGS: %v", err)
	}
	fs := pflag.NewFlagSet("HERMETIC_FLAGS", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	AddFlags(fs)
	if err := fs.Parse(words); err != nil {
		return nil, fmt.Errorf("HERMETIC_FLAGS: %v", err)
	}
	if fs.NArg() > 0 || fs.ArgsLenAtDash() >= 0 {
		return nil, fmt.Errorf("HERMETIC_FLAGS holds hermetic flags only; found %q (put the target after -- on the command line)", strings.Join(fs.Args(), " "))
	}
	return flagEntries(fs, "HERMETIC_FLAGS", dir)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func lastString(es []entry, k string) string {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].key == k {
			return es[i].s
		}
	}
	return ""
}

// merged is the result of applying sources in order.
type merged struct {
	bools   map[string]bool
	strings map[string]string
	lists   map[string][]string
	where   map[string]string // where each key was last set
	// profileWhere is where each profile was first named.
	profileWhere map[string]string
	// netProfile is set when a profile touched the network.
	netProfile bool
}

func (m *merged) init() {
	if m.bools == nil {
		m.bools = map[string]bool{}
		m.strings = map[string]string{}
		m.lists = map[string][]string{}
		m.where = map[string]string{}
		m.profileWhere = map[string]string{}
	}
}

// apply sets scalars (a later entry wins) and appends lists.
func (m *merged) apply(es []entry) {
	m.init()
	for _, e := range es {
		k, _ := lookupKey(e.key)
		switch k.kind {
		case kindBool, kindFS:
			m.bools[k.name] = e.b
		case kindString:
			m.strings[k.name] = e.s
		case kindList:
			m.lists[k.name] = append(m.lists[k.name], e.list...)
		}
		m.where[k.name] = e.where
		if k.name == "profile" {
			for _, p := range e.list {
				if _, ok := m.profileWhere[p]; !ok {
					m.profileWhere[p] = e.where
				}
			}
		}
	}
}

// applyProfile adds a profile's settings: booleans only turn on, lists only
// grow. A profile that would turn a restriction off was refused when it was
// loaded.
func (m *merged) applyProfile(es []entry) error {
	m.init()
	for _, e := range es {
		k, _ := lookupKey(e.key)
		switch k.name {
		case "no-network", "allow-localhost", "allow-domain", "allow-cidr", "allow":
			m.netProfile = true
		case "network":
			// blocked is --no-network; allowlist engages the allowlist
			// posture. Neither ever widens a posture the user chose.
			m.netProfile = true
			if e.s == "blocked" {
				m.bools["no-network"] = true
			}
			continue
		}
		switch k.kind {
		case kindBool, kindFS:
			if e.b {
				m.bools[k.name] = true
			}
		case kindList:
			m.lists[k.name] = append(m.lists[k.name], e.list...)
		case kindString:
			return fmt.Errorf("%s: a profile cannot set %s", e.where, k.name)
		}
	}
	return nil
}

func (m *merged) settings() Settings {
	m.init()
	b, s, l := m.bools, m.strings, m.lists
	return Settings{
		Net: policy.Config{
			NoNetwork:      b["no-network"],
			Network:        s["network"],
			AllowDomains:   l["allow-domain"],
			AllowCIDRs:     l["allow-cidr"],
			Allow:          l["allow"],
			DenyDomains:    l["deny-domain"],
			DenyCIDRs:      l["deny-cidr"],
			Deny:           l["deny"],
			AllowLocalhost: b["allow-localhost"],
			Profile:        m.netProfile,
			Audit:          b["audit"],
		},
		Guards: Guards{
			NoSubprocess: b["no-subprocess"],
			FSReadonly:   b["fs-readonly"],
			FSRoot:       s["fs-root"],
			BlockNative:  b["block-native"],
			Seal:         b["seal"],
		},
		FailOnBlock:     b["fail-on-block"],
		Trace:           b["trace"],
		LogFile:         s["log-file"],
		Quiet:           b["quiet"],
		EnvScrub:        b["env-scrub"],
		EnvKeep:         l["env-keep"],
		Resolve:         l["resolve"],
		ProxyURL:        s["proxy-url"],
		SOCKSURL:        s["socks-url"],
		Isolate:         s["isolate"],
		ExposeHostPorts: ports(l["expose-host-port"]),
	}
}

// ports reads ports that check has already validated.
func ports(list []string) []uint16 {
	var out []uint16
	for _, s := range list {
		if p, err := policy.ParsePort(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}
