package main

import (
	"github.com/spf13/pflag"

	"github.com/hermetic-dev/hermetic/launcher"
	"github.com/hermetic-dev/hermetic/policy"
)

// policyFlags are the network-policy flags shared by `check` and running a
// target. The launcher defines them, so the command line, HERMETIC_FLAGS
// and config files accept exactly the same flags and aliases.
type policyFlags struct {
	fs *pflag.FlagSet
	// loaded is the policy from every configuration source, once load has
	// run; until then config and engaged see the command line alone.
	loaded *policy.Config
}

func (f *policyFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	launcher.AddPolicyFlags(fs)
}

// load merges every configuration source (SPEC §6): the config file
// (pyproject.toml [tool.hermetic] or HERMETIC.toml, searched upward from the
// working directory, or --config), HERMETIC_FLAGS, HERMETIC_PROFILE, the
// command line, then the profiles. After it, config and engaged describe
// that merged policy, so that `check` answers for the project's policy as a
// run would apply it. Its errors name the file, key and line, or the flag.
func (f *policyFlags) load() error {
	s, err := launcher.Load(launcher.Sources{Flags: f.fs})
	if err != nil {
		return err
	}
	f.loaded = &s.Net
	return nil
}

// engaged reports whether any network setting was given (SPEC §3.2:
// without one the network is left alone).
func (f *policyFlags) engaged() bool {
	p, err := policy.New(f.config())
	return err != nil || p.Posture() != policy.PostureNone
}

// config is the policy that load merged, or before load the one the
// command-line flags alone describe; policy.New validates its rules.
func (f *policyFlags) config() policy.Config {
	if f.loaded != nil {
		return *f.loaded
	}
	b := func(name string) bool { v, _ := f.fs.GetBool(name); return v }
	s := func(name string) string { v, _ := f.fs.GetString(name); return v }
	l := func(name string) []string { v, _ := f.fs.GetStringArray(name); return v }
	return policy.Config{
		NoNetwork:      b("no-network"),
		Network:        s("network"),
		AllowDomains:   l("allow-domain"),
		AllowCIDRs:     l("allow-cidr"),
		DenyDomains:    l("deny-domain"),
		DenyCIDRs:      l("deny-cidr"),
		AllowLocalhost: b("allow-localhost"),
		Audit:          b("audit"),
	}
}
