package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/hermetic-dev/hermetic/policy"
)

// listValue is a repeatable flag that appends every value. Unlike pflag's
// StringArray it can back two flag names (an alias) without the second
// name's first use discarding what the first collected.
type listValue struct{ list *[]string }

func (v listValue) Set(s string) error { *v.list = append(*v.list, s); return nil }
func (v listValue) Type() string       { return "rule" }
func (v listValue) String() string     { return strings.Join(*v.list, ",") }

// policyFlags are the network-policy flags shared by `check` and running a
// target.
type policyFlags struct {
	noNetwork      bool
	network        string
	allowDomains   []string
	allowCIDRs     []string
	denyDomains    []string
	denyCIDRs      []string
	allowLocalhost bool
	audit          bool
}

func (f *policyFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.noNetwork, "no-network", false, "let nothing out (loopback too, unless --allow-localhost)")
	fs.StringVar(&f.network, "network", "", "posture: blocked, allowlist or open")
	fs.Var(listValue{&f.allowDomains}, "allow-domain", "allow a domain and its subdomains (repeatable): example.com, *.example.com, api.example.com:443")
	fs.Var(listValue{&f.allowCIDRs}, "allow-cidr", "allow an address or range (repeatable): 10.0.0.0/8, 2001:db8::1, [fd00::/8]:443")
	fs.BoolVar(&f.allowLocalhost, "allow-localhost", false, "allow loopback: localhost, *.localhost, 127.0.0.0/8, ::1")
	fs.Var(listValue{&f.denyDomains}, "deny-domain", "deny a domain and its subdomains; deny wins (repeatable; * denies everything)")
	fs.Var(listValue{&f.denyDomains}, "deny-host", "alias of --deny-domain")
	fs.Var(listValue{&f.denyCIDRs}, "deny-cidr", "deny an address or range; deny wins (repeatable)")
	fs.Var(listValue{&f.denyCIDRs}, "deny-ip", "alias of --deny-cidr")
	fs.BoolVar(&f.audit, "audit", false, "log what would be denied instead of denying it (cloud metadata stays denied)")
}

// engaged reports whether any network flag was given (SPEC §3.2: without
// one the network is left alone).
func (f *policyFlags) engaged() bool {
	return f.noNetwork || f.network != "" || f.allowLocalhost ||
		len(f.allowDomains)+len(f.allowCIDRs)+len(f.denyDomains)+len(f.denyCIDRs) > 0
}

func (f *policyFlags) config() policy.Config {
	return policy.Config{
		NoNetwork:      f.noNetwork,
		Network:        f.network,
		AllowDomains:   f.allowDomains,
		AllowCIDRs:     f.allowCIDRs,
		DenyDomains:    f.denyDomains,
		DenyCIDRs:      f.denyCIDRs,
		AllowLocalhost: f.allowLocalhost,
		Audit:          f.audit,
	}
}
