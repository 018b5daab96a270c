package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Posture is the network posture of a run (SPEC §3.2).
type Posture uint8

const (
	// PostureNone leaves the network alone: no network flag was given.
	PostureNone Posture = iota
	// PostureBlocked lets nothing out (loopback only with AllowLocalhost).
	PostureBlocked
	// PostureAllowlist is deny-then-allow.
	PostureAllowlist
	// PostureOpen lets everything out except the deny list and the
	// always-denied set.
	PostureOpen
)

func (p Posture) String() string {
	switch p {
	case PostureBlocked:
		return "blocked"
	case PostureAllowlist:
		return "allowlist"
	case PostureOpen:
		return "open"
	}
	return "none"
}

// Config is what a policy is built from. Rules are given as the user spelled
// them; New parses, validates and indexes them.
type Config struct {
	// NoNetwork is --no-network.
	NoNetwork bool
	// Network is --network: "", "blocked", "allowlist" or "open".
	Network string
	// AllowDomains and DenyDomains take name rules only (--allow-domain,
	// --deny-domain); AllowCIDRs and DenyCIDRs take address and range rules
	// only (--allow-cidr, --deny-cidr). Allow and Deny take any kind of
	// rule (config files, the Python API).
	AllowDomains, AllowCIDRs, Allow []string
	DenyDomains, DenyCIDRs, Deny    []string
	// AllowLocalhost is --allow-localhost.
	AllowLocalhost bool
	// Profile is set when a network profile (such as pypi) contributed
	// allow rules; it engages the allowlist posture even with no rule.
	Profile bool
	// Audit is --audit: decisions are kept but only what is always denied
	// is enforced.
	Audit bool
	// Self are the proxies' own listening addresses, always denied.
	Self []netip.AddrPort
	// Learned, if set, supplies addresses the DNS filter returned for
	// allowed names (SPEC §3.2 step 6).
	Learned Learned
}

// Learned is the set of addresses the DNS filter handed out for allowed
// names, each valid until its TTL runs out.
type Learned interface {
	// Lookup returns the allowed name addr was returned for, if it is
	// still within its TTL at now.
	Lookup(addr netip.Addr, now time.Time) (name string, ok bool)
}

// Policy is an immutable, validated policy. It is safe for concurrent use.
type Policy struct {
	posture        Posture
	allow, deny    ruleSet
	allowLocalhost bool
	audit          bool
	self           map[netip.AddrPort]struct{}
	learned        Learned
	norm           *Normalizer
	warnings       []string
}

// UsageError is a combination of settings that would mean nothing or
// contradict itself.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// New validates cfg and builds the policy. Errors name the flag and the rule
// at fault and say how to fix it.
func New(cfg Config) (*Policy, error) {
	p := &Policy{
		allowLocalhost: cfg.AllowLocalhost,
		audit:          cfg.Audit,
		learned:        cfg.Learned,
		norm:           NewNormalizer(),
	}
	lists := []struct {
		flag  string
		rules []string
		kind  RuleKind
		allow bool
	}{
		{"--allow-domain", cfg.AllowDomains, NameRule, true},
		{"--allow-cidr", cfg.AllowCIDRs, AddrRule, true},
		{"allow", cfg.Allow, AnyRule, true},
		{"--deny-domain", cfg.DenyDomains, NameRule, false},
		{"--deny-cidr", cfg.DenyCIDRs, AddrRule, false},
		{"deny", cfg.Deny, AnyRule, false},
	}
	nAllow := 0
	for _, l := range lists {
		for _, s := range l.rules {
			r, err := parseRule(p.norm, s, l.kind, l.allow)
			if err != nil {
				if re, ok := err.(*RuleError); ok && re.Source == "" {
					re.Source = l.flag
				}
				return nil, err
			}
			if l.allow {
				nAllow++
				p.allow.add(r)
				if w := neverEffective(r); w != "" {
					p.warnings = append(p.warnings, fmt.Sprintf("warning: allow rule %q can never take effect: %s", r.Text, w))
				}
			} else {
				p.deny.add(r)
			}
		}
	}
	posture, err := derivePosture(cfg, nAllow)
	if err != nil {
		return nil, err
	}
	p.posture = posture
	if len(cfg.Self) > 0 {
		p.self = make(map[netip.AddrPort]struct{}, len(cfg.Self))
		for _, ap := range cfg.Self {
			p.self[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = struct{}{}
		}
	}
	return p, nil
}

func derivePosture(cfg Config, nAllow int) (Posture, error) {
	allowing := nAllow > 0 || cfg.Profile
	switch cfg.Network {
	case "open":
		var with []string
		if nAllow > 0 {
			with = append(with, "allow rules")
		}
		if cfg.Profile {
			with = append(with, "a network profile")
		}
		if cfg.NoNetwork {
			with = append(with, "--no-network")
		}
		if cfg.AllowLocalhost {
			with = append(with, "--allow-localhost")
		}
		if len(with) > 0 {
			return 0, &UsageError{fmt.Sprintf("--network=open lets everything out, so %s would mean nothing; drop them or use --network=allowlist", strings.Join(with, " and "))}
		}
		return PostureOpen, nil
	case "blocked":
		if allowing {
			return 0, &UsageError{"--network=blocked lets nothing out, so allow rules would mean nothing; use --network=allowlist"}
		}
		return PostureBlocked, nil
	case "allowlist":
		return PostureAllowlist, nil
	case "":
	default:
		return 0, &UsageError{fmt.Sprintf("--network=%q: want blocked, allowlist or open", cfg.Network)}
	}
	hasDeny := len(cfg.DenyDomains)+len(cfg.DenyCIDRs)+len(cfg.Deny) > 0
	switch {
	case allowing:
		return PostureAllowlist, nil
	case cfg.NoNetwork:
		return PostureBlocked, nil
	case cfg.AllowLocalhost:
		return PostureAllowlist, nil
	case hasDeny:
		return PostureOpen, nil
	}
	return PostureNone, nil
}

// neverEffective says why an allow rule names only always-denied
// destinations, or "" when it can take effect.
func neverEffective(r Rule) string {
	if r.IsName() {
		if _, ok := isMetadataName(r.Name); ok {
			return "cloud metadata names are always denied"
		}
		return ""
	}
	first := r.Prefix.Masked().Addr()
	last := lastAddr(r.Prefix)
	r1, _, ok1 := alwaysDenied(first)
	r2, _, ok2 := alwaysDenied(last)
	if ok1 && ok2 && (r1 == r2 || r.Prefix.IsSingleIP()) {
		return fmt.Sprintf("%s addresses are always denied", r1)
	}
	return ""
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Posture is the posture the configuration selected.
func (p *Policy) Posture() Posture { return p.posture }

// Audit reports whether --audit is on.
func (p *Policy) Audit() bool { return p.audit }

// Warnings are the lines to show the user at start: allow rules that can
// never take effect.
func (p *Policy) Warnings() []string { return slices.Clone(p.warnings) }

// Normalize normalises a host with the policy's normaliser.
func (p *Policy) Normalize(host string) (Host, error) { return p.norm.Normalize(host) }

// Decide runs steps 1-4 of SPEC §3.2 (and step 5 for an address) for a
// destination host as a client gave it.
func (p *Policy) Decide(host string, port uint16) Decision {
	h, err := p.norm.Normalize(host)
	if err != nil {
		return Decision{Verdict: Deny, Reason: ReasonInvalidHost, Host: host, Port: port,
			Hint: "invalid host: " + err.Error()}
	}
	return p.DecideHost(h, port)
}

// DecideHost is Decide for a host already normalised.
func (p *Policy) DecideHost(h Host, port uint16) Decision {
	if h.IsAddr() {
		return p.decideAddr(h.Addr, port)
	}
	return p.decideName(h.Name, port)
}

func (p *Policy) decideName(name string, port uint16) Decision {
	d := Decision{Host: name, Port: port}
	if m, ok := isMetadataName(name); ok {
		return deny(d, ReasonCloudMetadata, m, "cloud metadata is always denied; no flag allows it")
	}
	if r, ok := p.deny.matchName(name, port); ok {
		return deny(d, ReasonDenylisted, r.Text, denyHint(r))
	}
	localhost := p.allowLocalhost && isLocalhostName(name)
	switch p.posture {
	case PostureBlocked:
		if localhost {
			return allow(d, ReasonLocalhost, "")
		}
		return deny(d, ReasonNoNetwork, "", "allow it with --allow-domain "+name)
	case PostureAllowlist:
		if r, ok := p.allow.matchName(name, port); ok {
			return allow(d, ReasonAllowlisted, r.Text)
		}
		if localhost {
			return allow(d, ReasonLocalhost, "")
		}
		return deny(d, ReasonNotAllowlisted, "", "allow it with --allow-domain "+name)
	}
	return allow(d, ReasonOpen, "")
}

func (p *Policy) decideAddr(a netip.Addr, port uint16) Decision {
	d := Decision{Host: a.String(), Port: port, Addr: a}
	if out, denied := p.denyAddr(d, a, port); denied {
		return out
	}
	switch p.posture {
	case PostureBlocked:
		if p.allowLocalhost && a.IsLoopback() {
			return allow(d, ReasonLocalhost, "")
		}
		return deny(d, ReasonNoNetwork, "", addrHint(a))
	case PostureAllowlist:
		switch r, ok := p.allow.addrs.match(a, port); {
		case ok:
			d = allow(d, ReasonAllowlisted, r.Text)
		case p.allowLocalhost && a.IsLoopback():
			d = allow(d, ReasonLocalhost, "")
		default:
			r, ok := p.learnedRule(a, port)
			if !ok {
				return deny(d, ReasonNotAllowlisted, "", addrHint(a))
			}
			d = allow(d, ReasonAllowlisted, r.Text)
		}
		return p.internalCheck(d, a, port)
	}
	return allow(d, ReasonOpen, "")
}

// learnedRule is step 6: an address the DNS filter returned for an allowed
// name is allowed, for its TTL, by the rule that allowed the name.
func (p *Policy) learnedRule(a netip.Addr, port uint16) (Rule, bool) {
	if p.learned == nil {
		return Rule{}, false
	}
	name, ok := p.learned.Lookup(a, time.Now())
	if !ok {
		return Rule{}, false
	}
	if _, denied := p.deny.matchName(name, port); denied {
		return Rule{}, false
	}
	return p.allow.names.match(name, port)
}

// CheckAddr is step 5: it judges one address that the name in d resolved
// to. The result carries the address; a denial replaces d's verdict.
func (p *Policy) CheckAddr(d Decision, a netip.Addr) Decision {
	a = a.Unmap()
	d.Addr = a
	if out, denied := p.denyAddr(d, a, d.Port); denied {
		return out
	}
	if !d.Allowed() {
		return d
	}
	if d.Reason == ReasonLocalhost && !a.IsLoopback() {
		// --allow-localhost covers loopback, not whatever a localhost
		// name might be made to resolve to.
		r := ReasonNotAllowlisted
		if p.posture == PostureBlocked {
			r = ReasonNoNetwork
		}
		return deny(d, r, "", "--allow-localhost covers loopback addresses only")
	}
	switch p.posture {
	case PostureBlocked:
		// Only --allow-localhost lets a name through under blocked,
		// and then only to loopback.
		if !a.IsLoopback() {
			return deny(d, ReasonNoNetwork, "", "only loopback is allowed under --no-network")
		}
		return d
	case PostureAllowlist:
		return p.internalCheck(d, a, d.Port)
	}
	return d
}

// denyAddr runs steps 2 and 3 on an address and on the IPv4 address it
// embeds, if any.
func (p *Policy) denyAddr(d Decision, a netip.Addr, port uint16) (Decision, bool) {
	if _, ok := p.self[netip.AddrPortFrom(a, port)]; ok {
		return deny(d, ReasonSelf, "", "hermetic's own proxies cannot be reached through themselves"), true
	}
	e, embedded := embeddedIPv4(a)
	for _, x := range [2]netip.Addr{a, e} {
		if !x.IsValid() {
			continue
		}
		if r, rule, ok := alwaysDenied(x); ok {
			return deny(d, r, rule, alwaysHint(r)), true
		}
	}
	if r, ok := p.deny.matchAddr(a, port); ok {
		return deny(d, ReasonDenylisted, r.Text, denyHint(r)), true
	}
	if embedded {
		if r, ok := p.deny.addrs.match(e, port); ok {
			return deny(d, ReasonDenylisted, r.Text, denyHint(r)), true
		}
	}
	return d, false
}

// internalCheck keeps internal addresses out of an allowlist unless an
// address rule covers them (for an embedded address: covers the IPv4
// address it carries), or --allow-localhost covers real loopback.
func (p *Policy) internalCheck(d Decision, a netip.Addr, port uint16) Decision {
	if isInternal(a) {
		_, covered := p.allow.addrs.match(a, port)
		if !covered && !(p.allowLocalhost && a.IsLoopback()) {
			return deny(d, ReasonPrivateAddress, "", internalHint(a))
		}
	}
	if e, ok := embeddedIPv4(a); ok && isInternal(e) {
		if _, covered := p.allow.addrs.match(e, port); !covered {
			return deny(d, ReasonPrivateAddress, "", fmt.Sprintf("%s carries the internal address %s; allow it with --allow-cidr %s", a, e, e))
		}
	}
	return d
}

// permits reports whether a connection may go ahead: the decision allows
// it, or --audit lets through what is not always denied (marking it).
func (p *Policy) permits(d *Decision) bool {
	if d.Allowed() {
		return true
	}
	if p.audit && !d.Reason.AlwaysDenied() {
		d.Audited = true
		return true
	}
	return false
}

func isLocalhostName(name string) bool {
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

func allow(d Decision, r Reason, rule string) Decision {
	d.Verdict, d.Reason, d.Rule, d.Hint = Allow, r, rule, ""
	return d
}

func deny(d Decision, r Reason, rule, hint string) Decision {
	d.Verdict, d.Reason, d.Rule, d.Hint = Deny, r, rule, hint
	return d
}

func alwaysHint(r Reason) string {
	switch r {
	case ReasonCloudMetadata:
		return "cloud metadata is always denied; no flag allows it"
	case ReasonLinkLocal:
		return "link-local addresses are always denied; no flag allows them"
	}
	return "unspecified addresses are always denied; no flag allows them"
}

func denyHint(r Rule) string {
	return fmt.Sprintf("the deny rule %q matches; deny rules win over every allow rule", r.Text)
}

func addrHint(a netip.Addr) string {
	if a.IsLoopback() {
		return "allow loopback with --allow-localhost"
	}
	return "allow it with --allow-cidr " + a.String()
}

func internalHint(a netip.Addr) string {
	if a.IsLoopback() {
		return fmt.Sprintf("%s is loopback; allow it with --allow-localhost or --allow-cidr %s", a, a)
	}
	return fmt.Sprintf("%s is an internal address; allow it with --allow-cidr %s", a, a)
}
