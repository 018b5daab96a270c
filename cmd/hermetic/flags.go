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
}

func (f *policyFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	launcher.AddPolicyFlags(fs)
}

// engaged reports whether any network flag was given on the command line
// (SPEC §3.2: without one the network is left alone).
func (f *policyFlags) engaged() bool {
	p, err := policy.New(f.config())
	return err != nil || p.Posture() != policy.PostureNone
}

// config is the policy the command-line flags alone describe; policy.New
// validates its rules.
func (f *policyFlags) config() policy.Config {
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

// load is the policy from every configuration source (SPEC §6): the config
// file (pyproject.toml [tool.hermetic] or HERMETIC.toml, or --config),
// HERMETIC_FLAGS, HERMETIC_PROFILE, the command line, then the profiles.
// `check` calls it so that users can check their project's policy.
func (f *policyFlags) load() (policy.Config, error) {
	s, err := launcher.Load(launcher.Sources{Flags: f.fs})
	if err != nil {
		return policy.Config{}, err
	}
	return s.Net, nil
}
