package policy

import (
	"net/netip"
	"slices"
	"strings"
)

// nameSet indexes name rules by their domain, so a lookup costs one map probe
// per label of the host, whatever the number of rules.
type nameSet struct {
	byDomain map[string][]Rule
}

func (s *nameSet) add(r Rule) {
	if s.byDomain == nil {
		s.byDomain = make(map[string][]Rule)
	}
	s.byDomain[r.Name] = append(s.byDomain[r.Name], r)
}

// match returns the most specific rule matching name at port. A rule for
// example.com matches it and every subdomain; *.example.com only subdomains.
func (s *nameSet) match(name string, port uint16) (Rule, bool) {
	if len(s.byDomain) == 0 {
		return Rule{}, false
	}
	for i := 0; ; {
		for _, r := range s.byDomain[name[i:]] {
			if (i > 0 || !r.Wildcard) && (r.Port == 0 || r.Port == port) {
				return r, true
			}
		}
		j := strings.IndexByte(name[i:], '.')
		if j < 0 {
			return Rule{}, false
		}
		i += j + 1
	}
}

// addrSet indexes address rules by masked prefix, probing once per distinct
// prefix length present: at most 33 probes for IPv4 and 129 for IPv6,
// whatever the number of rules.
type addrSet struct {
	byPrefix     map[netip.Prefix][]Rule
	bits4, bits6 []int // distinct prefix lengths, longest first
}

func (s *addrSet) add(r Rule) {
	if s.byPrefix == nil {
		s.byPrefix = make(map[netip.Prefix][]Rule)
	}
	s.byPrefix[r.Prefix] = append(s.byPrefix[r.Prefix], r)
	bits := &s.bits6
	if r.Prefix.Addr().Is4() {
		bits = &s.bits4
	}
	if !slices.Contains(*bits, r.Prefix.Bits()) {
		*bits = append(*bits, r.Prefix.Bits())
		slices.SortFunc(*bits, func(a, b int) int { return b - a })
	}
}

// match returns the most specific rule covering a at port.
func (s *addrSet) match(a netip.Addr, port uint16) (Rule, bool) {
	bits := s.bits6
	if a.Is4() {
		bits = s.bits4
	}
	for _, b := range bits {
		p, err := a.Prefix(b)
		if err != nil {
			continue
		}
		for _, r := range s.byPrefix[p] {
			if r.Port == 0 || r.Port == port {
				return r, true
			}
		}
	}
	return Rule{}, false
}

// ruleSet is one list of rules (allow or deny) of every kind.
type ruleSet struct {
	names nameSet
	addrs addrSet
	any   *Rule
}

func (s *ruleSet) add(r Rule) {
	switch {
	case r.Any:
		if s.any == nil {
			s.any = &r
		}
	case r.IsName():
		s.names.add(r)
	default:
		s.addrs.add(r)
	}
}

func (s *ruleSet) matchName(name string, port uint16) (Rule, bool) {
	if r, ok := s.names.match(name, port); ok {
		return r, true
	}
	if s.any != nil {
		return *s.any, true
	}
	return Rule{}, false
}

func (s *ruleSet) matchAddr(a netip.Addr, port uint16) (Rule, bool) {
	if r, ok := s.addrs.match(a, port); ok {
		return r, true
	}
	if s.any != nil {
		return *s.any, true
	}
	return Rule{}, false
}

func (s *ruleSet) empty() bool {
	return s.any == nil && len(s.names.byDomain) == 0 && len(s.addrs.byPrefix) == 0
}
