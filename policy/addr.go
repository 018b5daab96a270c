package policy

import "net/netip"

// alwaysDenied reports the step-2 reason for an address (SPEC §3.2), and
// the exact address or range that matched. Only these addresses and ranges
// are always denied; their neighbours are judged by the later steps.
func alwaysDenied(a netip.Addr) (Reason, string, bool) {
	if a.Is4() {
		b := a.As4()
		switch b {
		case [4]byte{169, 254, 169, 254}, [4]byte{169, 254, 170, 2},
			[4]byte{100, 100, 100, 200}, [4]byte{168, 63, 129, 16}:
			return ReasonCloudMetadata, a.String(), true
		}
		switch {
		case b[0] == 169 && b[1] == 254:
			return ReasonLinkLocal, "169.254.0.0/16", true
		case b[0] == 0:
			return ReasonUnspecified, "0.0.0.0/8", true
		}
		return "", "", false
	}
	b := a.As16()
	switch {
	case b == [16]byte{0xfe, 0x80, 10: 0, 11: 0, 12: 0xa9, 13: 0xfe, 14: 0xa9, 15: 0xfe}:
		return ReasonCloudMetadata, "fe80::a9fe:a9fe", true
	case b[0] == 0xfd && b[1] == 0x00 && b[2] == 0x0e && b[3] == 0xc2:
		return ReasonCloudMetadata, "fd00:ec2::/32", true
	case b[0] == 0xfe && b[1]&0xc0 == 0x80:
		return ReasonLinkLocal, "fe80::/10", true
	case a == netip.IPv6Unspecified():
		return ReasonUnspecified, "::", true
	}
	return "", "", false
}

// isMetadataName reports whether name is, or is under, a cloud metadata name.
func isMetadataName(name string) (string, bool) {
	for _, m := range [...]string{"metadata.google.internal", "metadata"} {
		if name == m || (len(name) > len(m) && name[len(name)-len(m)-1] == '.' && name[len(name)-len(m):] == m) {
			return m, true
		}
	}
	return "", false
}

// embeddedIPv4 returns the IPv4 address carried inside a NAT64, 6to4,
// Teredo (the client address) or IPv4-compatible IPv6 address. Such an
// address is judged for denial by what it carries, never allowed by it.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && isZero(b[4:12]): // 64:ff9b::/96
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1: // 64:ff9b:1::/48, RFC 8215 local use
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case isZero(b[0:8]) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0: // ::ffff:0:0/96, IPv4-translated
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case b[0] == 0x20 && b[1] == 0x02: // 2002::/16
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // 2001::/32
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	case isZero(b[0:12]) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback(): // ::/96
		return netip.AddrFrom4([4]byte(b[12:16])), true
	}
	return netip.Addr{}, false
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// isInternal reports the ranges that step 5 keeps out of an allowlist
// unless an address rule covers them: loopback, RFC 1918, CGNAT, ULA and
// site-local.
func isInternal(a netip.Addr) bool {
	if a.IsLoopback() || a.IsPrivate() {
		return true
	}
	if a.Is4() {
		b := a.As4()
		return b[0] == 100 && b[1]&0xc0 == 64 // 100.64.0.0/10
	}
	b := a.As16()
	return b[0] == 0xfe && b[1]&0xc0 == 0xc0 // fec0::/10
}
