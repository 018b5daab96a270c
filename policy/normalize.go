package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Host is a normalised destination host: exactly one of Name and Addr is set.
type Host struct {
	// Name is a lower-case ASCII host name (IDNA A-labels), with no
	// trailing dot.
	Name string
	// Addr is an IP address; an IPv4-mapped IPv6 address is stored as the
	// IPv4 address it maps.
	Addr netip.Addr
}

// IsAddr reports whether the host is an IP address.
func (h Host) IsAddr() bool { return h.Addr.IsValid() }

// String is the name, or the address without brackets.
func (h Host) String() string {
	if h.Addr.IsValid() {
		return h.Addr.String()
	}
	return h.Name
}

// Limits from RFC 1035 §2.3.4, applied after IDNA.
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// idnaProfile is UTS #46 non-transitional lookup processing without the
// STD3 character rules: `_` must survive (real names carry it), and our own
// character check runs after mapping so that fullwidth `／` and `＠` are
// still refused once they become `/` and `@`.
func idnaProfile() *idna.Profile {
	return idna.New(
		idna.MapForLookup(),
		idna.Transitional(false),
		idna.BidiRule(),
		idna.ValidateLabels(true),
		idna.StrictDomainName(false),
	)
}

// Normalizer normalises hosts; it holds the immutable IDNA profile so that
// it is built once per policy rather than per call.
type Normalizer struct {
	idna *idna.Profile
}

// NewNormalizer returns a Normalizer.
func NewNormalizer() *Normalizer { return &Normalizer{idna: idnaProfile()} }

// NormalizeHost normalises a host as SPEC §3.3 and §3.4 say, with a fresh
// IDNA profile. Hot paths should keep a Normalizer.
func NormalizeHost(s string) (Host, error) { return NewNormalizer().Normalize(s) }

// Normalize normalises a destination host (a name, an IPv4 address in any
// inet_aton spelling, or an IPv6 address with or without brackets).
// The error says why the host is invalid.
func (n *Normalizer) Normalize(s string) (Host, error) {
	if s == "" {
		return Host{}, errors.New("empty host")
	}
	if !utf8.ValidString(s) {
		return Host{}, errors.New("host is not valid UTF-8")
	}
	if s[0] == '[' {
		if len(s) < 2 || s[len(s)-1] != ']' {
			return Host{}, errors.New("unbalanced '[' in host")
		}
		return parseIPv6Host(s[1 : len(s)-1])
	}
	if strings.IndexByte(s, ':') >= 0 {
		// An unbracketed IPv6 address is always a whole address.
		return parseIPv6Host(s)
	}
	name, ascii := s, true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		// The full stops that IDNA maps to '.' count as dots from the
		// start, so that a trailing or doubled one is seen as such.
		name = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".").Replace(name)
	}
	if strings.HasSuffix(name, ".") {
		name = name[:len(name)-1]
		if strings.HasSuffix(name, ".") {
			return Host{}, errors.New("host ends in two dots")
		}
	}
	// Lengths are judged after IDNA, on the A-labels that go on the wire.
	if err := checkLabels(name, false); err != nil {
		return Host{}, err
	}
	if ascii && hasUpper(name) {
		// ASCII labels are folded here rather than by IDNA, whose label
		// checks would otherwise treat "-FOO" and "-foo" differently.
		name = strings.ToLower(name)
	}
	if !ascii || hasALabel(name) {
		a, err := n.idna.ToASCII(name)
		if err != nil {
			return Host{}, fmt.Errorf("invalid international name: %v", err)
		}
		name = a
	}
	if err := checkLabels(name, true); err != nil {
		return Host{}, err
	}
	if err := checkNameChars(name); err != nil {
		return Host{}, err
	}
	if len(name) > maxNameLen {
		return Host{}, fmt.Errorf("host name is %d bytes, over the limit of %d", len(name), maxNameLen)
	}
	if endsInNumber(name) {
		a, ok := parseIPv4(name)
		if !ok {
			return Host{}, errors.New("host ends in a number but is not an IPv4 address")
		}
		return Host{Addr: a}, nil
	}
	return Host{Name: name}, nil
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return true
		}
	}
	return false
}

// hasALabel reports whether an ASCII name holds an IDNA A-label, which must
// be checked to decode.
func hasALabel(name string) bool {
	return strings.HasPrefix(name, "xn--") || strings.Contains(name, ".xn--")
}

func checkLabels(name string, lengths bool) error {
	if name == "" {
		return errors.New("empty host")
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			switch l := i - start; {
			case l == 0:
				return errors.New("host has an empty label")
			case lengths && l > maxLabelLen:
				return fmt.Errorf("host has a label of %d bytes, over the limit of %d", l, maxLabelLen)
			}
			start = i + 1
		}
	}
	return nil
}

// checkNameChars enforces letters, digits, '-', '_' and '.' after IDNA.
func checkNameChars(name string) error {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("host contains %q, which a host name cannot hold", rune(c))
		}
	}
	return nil
}

func parseIPv6Host(s string) (Host, error) {
	if strings.IndexByte(s, '%') >= 0 {
		return Host{}, errors.New("IPv6 zones are not accepted")
	}
	if strings.IndexByte(s, ':') < 0 {
		return Host{}, errors.New("brackets hold only IPv6 addresses")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return Host{}, errors.New("invalid IPv6 address")
	}
	return Host{Addr: a.Unmap()}, nil
}

// endsInNumber is the WHATWG URL standard's test: a host whose last label is
// numeric (decimal, 0x hex or octal digits) must be an IPv4 address or
// nothing. It looks at the spelling only, so an overflowing number such as
// 0x100000000 is still numeric, and then invalid.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if len(last) >= 2 && last[0] == '0' && last[1] == 'x' {
		last = last[2:]
		for i := 0; i < len(last); i++ {
			if c := last[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return last != ""
}

// parseIPv4Number reads one part of an inet_aton spelling: 0x hex (at least
// one digit, as inet_aton wants), a leading 0 for octal, otherwise decimal.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
		if s == "" {
			return 0, false
		}
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		n = n*base + d
		if n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}

// parseIPv4 reads every inet_aton spelling: a.b.c.d, a.b.c, a.b, a, each
// part decimal, octal or hex, the last part filling the remaining bytes.
func parseIPv4(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		i := strings.IndexByte(s, '.')
		part := s
		if i >= 0 {
			part = s[:i]
		}
		if n == 4 {
			return netip.Addr{}, false
		}
		v, ok := parseIPv4Number(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	var ip uint64
	for i := 0; i < n-1; i++ {
		if parts[i] > 255 {
			return netip.Addr{}, false
		}
		ip |= parts[i] << (8 * (3 - i))
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}
