package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// RuleKind says which kinds of rule a source accepts.
type RuleKind uint8

const (
	// AnyRule accepts names, addresses and ranges (config files, the API).
	AnyRule RuleKind = iota
	// NameRule accepts host-name rules only (--allow-domain, --deny-domain).
	NameRule
	// AddrRule accepts addresses and ranges only (--allow-cidr, --deny-cidr).
	AddrRule
)

// Rule is one parsed allow or deny rule.
type Rule struct {
	// Text is the rule in canonical form, as reported in decisions.
	Text string
	// Any is the rule `*` (deny lists only).
	Any bool
	// Name is the normalised domain of a name rule; Wildcard restricts it
	// to subdomains (`*.example.com`).
	Name     string
	Wildcard bool
	// Prefix is the range of an address rule (a single address is /32 or
	// /128).
	Prefix netip.Prefix
	// Port restricts the rule to one port; 0 means every port.
	Port uint16
}

// IsName reports whether r matches host names.
func (r Rule) IsName() bool { return r.Name != "" }

// RuleError is an invalid rule: it names the rule and says how to fix it.
type RuleError struct {
	Rule string
	// Source names where the rule came from, such as "--allow-domain" or
	// "HERMETIC.toml:12"; empty when unknown.
	Source string
	Msg    string
}

func (e *RuleError) Error() string {
	q := strconv.Quote(e.Rule)
	if e.Source != "" {
		return fmt.Sprintf("%s %s: %s", e.Source, q, e.Msg)
	}
	return fmt.Sprintf("rule %s: %s", q, e.Msg)
}

func ruleErr(rule, format string, args ...any) *RuleError {
	return &RuleError{Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

// ParseRule parses one rule of SPEC §3.1. allow selects the stricter checks
// of allow lists (no `*`, no public suffixes).
func ParseRule(s string, kind RuleKind, allow bool) (Rule, error) {
	return parseRule(NewNormalizer(), s, kind, allow)
}

func parseRule(n *Normalizer, s string, kind RuleKind, allow bool) (Rule, error) {
	if s == "" {
		return Rule{}, ruleErr(s, "empty rule")
	}
	if i := strings.Index(s, "://"); i >= 0 {
		host := s[i+3:]
		if j := strings.IndexAny(host, "/?#"); j >= 0 {
			host = host[:j]
		}
		if j := strings.LastIndexByte(host, '@'); j >= 0 {
			host = host[j+1:]
		}
		return Rule{}, ruleErr(s, "this is a URL; give the host only, as %q", host)
	}
	if s == "*" {
		if allow {
			return Rule{}, ruleErr(s, "`*` is valid in deny lists only; name the hosts to allow")
		}
		return Rule{Text: "*", Any: true}, nil
	}

	hostPart, portPart, bracketed, err := splitRulePort(s)
	if err != nil {
		return Rule{}, err
	}
	var r Rule
	if portPart != "" {
		p, err := ParsePort(portPart)
		if err != nil {
			return Rule{}, ruleErr(s, "port %q is not a decimal number from 1 to 65535", portPart)
		}
		r.Port = p
	}

	switch {
	case strings.IndexByte(hostPart, '/') >= 0:
		pfx, err := parsePrefixRule(s, hostPart)
		if err != nil {
			return Rule{}, err
		}
		r.Prefix = pfx
	case bracketed || strings.IndexByte(hostPart, ':') >= 0:
		h, err := parseIPv6Host(hostPart)
		if err != nil {
			return Rule{}, ruleErr(s, "%v", err)
		}
		r.Prefix = netip.PrefixFrom(h.Addr, h.Addr.BitLen())
	default:
		if err := parseNameRule(n, s, hostPart, &r); err != nil {
			return Rule{}, err
		}
	}

	verb := "deny"
	if allow {
		verb = "allow"
	}
	switch {
	case r.IsName() && kind == AddrRule:
		return Rule{}, ruleErr(s, "is a host name, not an address; use --%s-domain %s", verb, hostPart)
	case !r.IsName() && kind == NameRule:
		addr := r.Prefix.String()
		if r.Prefix.IsSingleIP() {
			addr = r.Prefix.Addr().String()
		}
		return Rule{}, ruleErr(s, "is an address, not a name; use --%s-cidr %s", verb, addr)
	}
	if allow && r.IsName() {
		if ps, icann := publicsuffix.PublicSuffix(r.Name); icann && ps == r.Name {
			return Rule{}, ruleErr(s, "%q is a public suffix; allowing it would allow every site under it; name the sites instead", r.Name)
		}
	}
	r.Text = canonicalRule(r)
	return r, nil
}

// splitRulePort separates an optional :PORT. An unbracketed host with more
// than one colon is a whole IPv6 address or range.
func splitRulePort(s string) (host, port string, bracketed bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, ruleErr(s, "unbalanced '['; write [2001:db8::1] or [2001:db8::1]:443")
		}
		host, rest := s[1:end], s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			port = rest[1:]
			if port == "" {
				return "", "", false, ruleErr(s, "empty port after ':'")
			}
		default:
			return "", "", false, ruleErr(s, "unexpected %q after ']'", rest)
		}
		if strings.IndexByte(host, ':') < 0 {
			return "", "", false, ruleErr(s, "brackets hold only IPv6 addresses")
		}
		return host, port, true, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		i := strings.IndexByte(s, ':')
		if s[i+1:] == "" {
			return "", "", false, ruleErr(s, "empty port after ':'")
		}
		return s[:i], s[i+1:], false, nil
	}
	return s, "", false, nil
}

func parsePrefixRule(rule, s string) (netip.Prefix, error) {
	if strings.IndexByte(s, '%') >= 0 {
		return netip.Prefix{}, ruleErr(rule, "IPv6 zones are not accepted")
	}
	i := strings.IndexByte(s, '/')
	addrPart := s[:i]
	a, err := netip.ParseAddr(addrPart)
	if err != nil {
		// A slash after a host name is a path, not a range.
		if strings.IndexByte(addrPart, ':') < 0 && !looksNumeric(addrPart) {
			return netip.Prefix{}, ruleErr(rule, "a rule names a host, not a path; give the host only, as %q", addrPart)
		}
		return netip.Prefix{}, ruleErr(rule, "%q is not an IP address; write a range as 10.0.0.0/8 or fd00::/8", addrPart)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, ruleErr(rule, "invalid range: prefix length must be a number from 0 to %d", a.BitLen())
	}
	if p.Masked() != p {
		return netip.Prefix{}, ruleErr(rule, "range has host bits set; did you mean %s?", p.Masked())
	}
	if a.Is4In6() {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8: mapped addresses are
		// judged as IPv4.
		if p.Bits() < 96 {
			return netip.Prefix{}, ruleErr(rule, "range is wider than the IPv4-mapped block; write IPv4 ranges as 10.0.0.0/8")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

func looksNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return s != ""
}

func parseNameRule(n *Normalizer, rule, s string, r *Rule) error {
	if strings.HasPrefix(s, "*.") {
		r.Wildcard = true
		s = s[2:]
	} else if strings.HasPrefix(s, ".") {
		// `.example.com` is `example.com`: both are dot-anchored.
		s = s[1:]
	}
	if strings.IndexByte(s, '*') >= 0 {
		return ruleErr(rule, "`*` is allowed only as a whole leading label, as in *.example.com")
	}
	if s == "" {
		return ruleErr(rule, "empty host")
	}
	h, err := n.Normalize(s)
	if err != nil {
		return ruleErr(rule, "%v", err)
	}
	if h.IsAddr() {
		if r.Wildcard {
			return ruleErr(rule, "`*.` goes before a domain, not an address; write a range as 10.0.0.0/8")
		}
		r.Prefix = netip.PrefixFrom(h.Addr, h.Addr.BitLen())
		return nil
	}
	r.Name = h.Name
	return nil
}

func canonicalRule(r Rule) string {
	var host string
	switch {
	case r.IsName() && r.Wildcard:
		host = "*." + r.Name
	case r.IsName():
		host = r.Name
	case r.Prefix.IsSingleIP():
		host = r.Prefix.Addr().String()
	default:
		host = r.Prefix.String()
	}
	if r.Port == 0 {
		return host
	}
	if !r.IsName() && r.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(r.Port))
}
