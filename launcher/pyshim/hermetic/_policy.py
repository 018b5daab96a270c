"""Host normalisation, rules and network decisions (SPEC §3).

This is the Python twin of Go's policy package: the same normalisation, rule
syntax, decision order and reasons, checked by the shared vectors in
policy/testdata/vectors.json. It is pure: no I/O, no resolution.

This file runs in two ways: imported normally (tests, the library API's rule
checks), and executed in the guard's private namespace, where _PRIVATE is set
and _to_ascii is injected. It must not call anything a program could replace.
"""

if not globals().get("_PRIVATE"):

    def _to_ascii(name):
        from hermetic._idna import to_ascii

        return to_ascii(name)


INVALID_HOST = "invalid-host"
CLOUD_METADATA = "cloud-metadata"
LINK_LOCAL = "link-local"
UNSPECIFIED = "unspecified"
DENYLISTED = "denylisted"
NO_NETWORK = "no-network"
NOT_ALLOWLISTED = "not-allowlisted"
PRIVATE_ADDRESS = "private-address"
ALLOWLISTED = "allowlisted"
LOCALHOST = "localhost"
OPEN = "open"

BLOCKED, ALLOWLIST, OPEN_POSTURE = "blocked", "allowlist", "open"

_MAX_NAME, _MAX_LABEL = 253, 63
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_HEX = "0123456789abcdef"
_FULL_STOPS = ("\u3002", "\uff0e", "\uff61")
_ALL_V6 = (1 << 128) - 1


class InvalidHost(ValueError):
    pass


# A normalised host is a pair: ("name", "example.com"), (4, int) or (6, int).


def normalize(s):
    """Normalise a destination host as SPEC §3.3 and §3.4 say.

    Returns ("name", str), (4, int) or (6, int); raises InvalidHost."""
    if type(s) is not str:
        raise InvalidHost("host is not text")
    if s == "":
        raise InvalidHost("empty host")
    if s[0] == "[":
        if len(s) < 2 or s[-1] != "]":
            raise InvalidHost("unbalanced '[' in host")
        return _ipv6_host(s[1:-1])
    if ":" in s:
        return _ipv6_host(s)
    name = s
    ascii = s.isascii()
    if not ascii:
        for f in _FULL_STOPS:
            name = name.replace(f, ".")
    if name.endswith("."):
        name = name[:-1]
        if name.endswith("."):
            raise InvalidHost("host ends in two dots")
    _check_labels(name, False)
    if ascii:
        name = name.lower()
    if not ascii or name.startswith("xn--") or ".xn--" in name:
        try:
            name = _to_ascii(name)
        except ValueError as e:
            raise InvalidHost("invalid international name: %s" % e) from None
    _check_labels(name, True)
    for c in name:
        if c not in _NAME_CHARS:
            raise InvalidHost("host contains %r, which a host name cannot hold" % c)
    if len(name) > _MAX_NAME:
        raise InvalidHost("host name is %d bytes, over the limit of %d" % (len(name), _MAX_NAME))
    if _ends_in_number(name):
        v = _inet_aton(name)
        if v is None:
            raise InvalidHost("host ends in a number but is not an IPv4 address")
        return (4, v)
    return ("name", name)


def host_text(h):
    """The normalised host as text: the name, or the address without brackets."""
    if h[0] == "name":
        return h[1]
    return addr_text(h)


def addr_text(a):
    if a[0] == 4:
        v = a[1]
        return "%d.%d.%d.%d" % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255)
    v = a[1]
    g = [(v >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    zs, ze = -1, -1
    for i in range(8):
        j = i
        while j < 8 and g[j] == 0:
            j += 1
        if j - i >= 2 and j - i > ze - zs:
            zs, ze = i, j
    out = []
    i = 0
    while i < 8:
        if i == zs:
            out.append("::")
            i = ze
            if i >= 8:
                break
        elif i > 0:
            out.append(":")
        out.append("%x" % g[i])
        i += 1
    return "".join(out)


def _check_labels(name, lengths):
    if name == "":
        raise InvalidHost("empty host")
    for label in name.split("."):
        if label == "":
            raise InvalidHost("host has an empty label")
        if lengths and len(label) > _MAX_LABEL:
            raise InvalidHost("host has a label of %d bytes, over the limit of %d" % (len(label), _MAX_LABEL))


def _ends_in_number(name):
    last = name[name.rfind(".") + 1 :]
    if len(last) >= 2 and last[0] == "0" and last[1] == "x":
        return all(c in _HEX for c in last[2:])
    return last != "" and all("0" <= c <= "9" for c in last)


def _aton_part(s):
    if s == "":
        return None
    base = 10
    if len(s) >= 2 and s[0] == "0" and s[1] in "xX":
        base, s = 16, s[2:]
        if s == "":
            return None
    elif len(s) >= 2 and s[0] == "0":
        base, s = 8, s[1:]
    n = 0
    for c in s:
        d = _HEX.find(c.lower()) if c.isascii() else -1
        if d < 0 or d >= base:
            return None
        n = n * base + d
        if n > 0xFFFFFFFF:
            return None
    return n


def _inet_aton(s):
    """Every inet_aton spelling of IPv4: a.b.c.d, a.b.c, a.b, a."""
    parts = s.split(".")
    if len(parts) > 4:
        return None
    vals = []
    for p in parts:
        v = _aton_part(p)
        if v is None:
            return None
        vals.append(v)
    ip = 0
    for i, v in enumerate(vals[:-1]):
        if v > 255:
            return None
        ip |= v << (8 * (3 - i))
    last = vals[-1]
    if last >= 1 << (8 * (5 - len(vals))):
        return None
    return ip | last


def _ipv6_host(s):
    if "%" in s:
        raise InvalidHost("IPv6 zones are not accepted")
    if ":" not in s:
        raise InvalidHost("brackets hold only IPv6 addresses")
    a = parse_addr(s)
    if a is None:
        raise InvalidHost("invalid IPv6 address")
    return a


def parse_addr(s):
    """Parse an IP address as Go's netip.ParseAddr does (no zones), unmapping
    IPv4-mapped IPv6. Returns (4, int), (6, int) or None."""
    for c in s:
        if c == ".":
            v = _ipv4_strict(s)
            return None if v is None else (4, v)
        if c == ":":
            v = _ipv6(s)
            if v is None:
                return None
            if v >> 32 == 0xFFFF:
                return (4, v & 0xFFFFFFFF)
            return (6, v)
        if c == "%":
            return None
    return None


def _ipv4_strict(s):
    parts = s.split(".")
    if len(parts) != 4:
        return None
    v = 0
    for p in parts:
        if not p or len(p) > 3 or not p.isascii() or not p.isdigit():
            return None
        if len(p) > 1 and p[0] == "0":
            return None
        n = int(p)
        if n > 255:
            return None
        v = v << 8 | n
    return v


def _ipv6(s):
    groups = []
    ellipsis = -1
    if s.startswith("::"):
        ellipsis = 0
        s = s[2:]
        if s == "":
            return 0
    while len(groups) < 8:
        off = 0
        acc = 0
        while off < len(s):
            d = _HEX.find(s[off].lower()) if s[off].isascii() else -1
            if d < 0:
                break
            acc = acc * 16 + d
            if off > 3:
                return None
            off += 1
        if off == 0:
            return None
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and len(groups) != 6:
                return None
            if len(groups) > 6:
                return None
            v4 = _ipv4_strict(s)
            if v4 is None:
                return None
            groups.append(v4 >> 16)
            groups.append(v4 & 0xFFFF)
            s = ""
            break
        groups.append(acc)
        s = s[off:]
        if s == "":
            break
        if s[0] != ":" or len(s) == 1:
            return None
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                return None
            ellipsis = len(groups)
            s = s[1:]
            if s == "":
                break
    if s != "":
        return None
    if len(groups) < 8:
        if ellipsis < 0:
            return None
        groups = groups[:ellipsis] + [0] * (8 - len(groups)) + groups[ellipsis:]
    elif ellipsis >= 0:
        return None
    v = 0
    for g in groups:
        v = v << 16 | g
    return v


# Address classes (SPEC §3.2 steps 2 and 5).

_METADATA_V4 = frozenset(
    (
        0xA9FEA9FE,  # 169.254.169.254
        0xA9FEAA02,  # 169.254.170.2
        0x646464C8,  # 100.100.100.200
        0xA83F8110,  # 168.63.129.16
    )
)
_METADATA_V6_LL = 0xFE80 << 112 | 0xA9FEA9FE  # fe80::a9fe:a9fe
_METADATA_NAMES = ("metadata.google.internal", "metadata")


def always_denied(a):
    """Step 2 for one address: (reason, rule) or None."""
    v = a[1]
    if a[0] == 4:
        if v in _METADATA_V4:
            return CLOUD_METADATA, addr_text(a)
        if v >> 16 == 0xA9FE:
            return LINK_LOCAL, "169.254.0.0/16"
        if v >> 24 == 0:
            return UNSPECIFIED, "0.0.0.0/8"
        return None
    if v == _METADATA_V6_LL:
        return CLOUD_METADATA, "fe80::a9fe:a9fe"
    if v >> 96 == 0xFD000EC2:
        return CLOUD_METADATA, "fd00:ec2::/32"
    if v >> 118 == 0xFE80 >> 6:
        return LINK_LOCAL, "fe80::/10"
    if v == 0:
        return UNSPECIFIED, "::"
    return None


def metadata_name(name):
    for m in _METADATA_NAMES:
        if name == m or name.endswith("." + m):
            return m
    return None


def embedded_ipv4(a):
    """The IPv4 address inside a NAT64, 6to4, Teredo (client) or
    IPv4-compatible IPv6 address, or None."""
    if a[0] != 6:
        return None
    v = a[1]
    if v >> 32 == 0x0064FF9B << 64:
        return (4, v & 0xFFFFFFFF)
    if v >> 112 == 0x2002:
        return (4, (v >> 80) & 0xFFFFFFFF)
    if v >> 96 == 0x20010000:
        return (4, (v & 0xFFFFFFFF) ^ 0xFFFFFFFF)
    if v >> 32 == 0 and v > 1:
        return (4, v & 0xFFFFFFFF)
    return None


def is_loopback(a):
    if a[0] == 4:
        return a[1] >> 24 == 127
    return a[1] == 1


def is_internal(a):
    v = a[1]
    if a[0] == 4:
        return (
            v >> 24 in (127, 10)
            or v >> 20 == 0xAC1  # 172.16.0.0/12
            or v >> 16 == 0xC0A8  # 192.168.0.0/16
            or v >> 22 == 0x191  # 100.64.0.0/10
        )
    return v == 1 or v >> 121 == 0x7E or v >> 118 == 0xFEC0 >> 6  # ::1, fc00::/7, fec0::/10


def is_localhost_name(name):
    return name == "localhost" or name.endswith(".localhost")


# Rules (SPEC §3.1).


class Rule:
    __slots__ = ("text", "any", "name", "wildcard", "version", "net", "bits", "port")

    def __init__(self):
        self.text = ""
        self.any = False
        self.name = ""
        self.wildcard = False
        self.version = 0
        self.net = 0
        self.bits = 0
        self.port = 0

    def __repr__(self):
        return "Rule(%r)" % self.text


class RuleError(ValueError):
    pass


def _rule_err(rule, msg):
    return RuleError("rule %r: %s" % (rule, msg))


def parse_port(s):
    if not s or len(s) > 5 or s[0] == "0" or not all("0" <= c <= "9" for c in s):
        return None
    n = int(s)
    return n if 1 <= n <= 65535 else None


def parse_rule(s, kind="any", allow=True):
    """Parse one rule. kind is "any", "name" or "addr"; allow selects the
    checks of allow lists (no `*`). The public-suffix check of Go's policy
    is not made here: the launcher has already made it, and the standard
    library has no public suffix list."""
    if type(s) is not str:
        raise RuleError("rule %r: not text" % (s,))
    if s == "":
        raise _rule_err(s, "empty rule")
    i = s.find("://")
    if i >= 0:
        host = s[i + 3 :]
        for sep in "/?#":
            j = host.find(sep)
            if j >= 0:
                host = host[:j]
        host = host[host.rfind("@") + 1 :]
        raise _rule_err(s, "this is a URL; give the host only, as %r" % host)
    if s == "*":
        if allow:
            raise _rule_err(s, "`*` is valid in deny lists only; name the hosts to allow")
        r = Rule()
        r.text, r.any = "*", True
        return r
    host, port, bracketed = _split_rule_port(s)
    r = Rule()
    if port != "":
        p = parse_port(port)
        if p is None:
            raise _rule_err(s, "port %r is not a decimal number from 1 to 65535" % port)
        r.port = p
    if "/" in host:
        _prefix_rule(s, host, r)
    elif bracketed or ":" in host:
        try:
            a = _ipv6_host(host)
        except InvalidHost as e:
            raise _rule_err(s, str(e)) from None
        r.version, r.net, r.bits = a[0], a[1], 32 if a[0] == 4 else 128
    else:
        _name_rule(s, host, r)
    verb = "allow" if allow else "deny"
    if r.name and kind == "addr":
        raise _rule_err(s, "is a host name, not an address; use --%s-domain %s" % (verb, host))
    if not r.name and kind == "name":
        raise _rule_err(s, "is an address, not a name; use --%s-cidr %s" % (verb, _prefix_text(r)))
    r.text = _canonical(r)
    return r


def _split_rule_port(s):
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise _rule_err(s, "unbalanced '['; write [2001:db8::1] or [2001:db8::1]:443")
        host, rest = s[1:end], s[end + 1 :]
        port = ""
        if rest:
            if rest[0] != ":":
                raise _rule_err(s, "unexpected %r after ']'" % rest)
            port = rest[1:]
            if port == "":
                raise _rule_err(s, "empty port after ':'")
        if ":" not in host:
            raise _rule_err(s, "brackets hold only IPv6 addresses")
        return host, port, True
    n = s.count(":")
    if n == 0:
        return s, "", False
    if n == 1:
        i = s.find(":")
        if s[i + 1 :] == "":
            raise _rule_err(s, "empty port after ':'")
        return s[:i], s[i + 1 :], False
    return s, "", False


def _prefix_rule(rule, s, r):
    if "%" in s:
        raise _rule_err(rule, "IPv6 zones are not accepted")
    i = s.find("/")
    addr_part, bits_part = s[:i], s[i + 1 :]
    a = _parse_addr_keep_mapped(addr_part)
    if a is None:
        if ":" not in addr_part and not (addr_part and all(c in "0123456789." for c in addr_part)):
            raise _rule_err(rule, "a rule names a host, not a path; give the host only, as %r" % addr_part)
        raise _rule_err(rule, "%r is not an IP address; write a range as 10.0.0.0/8 or fd00::/8" % addr_part)
    version, v, mapped = a
    width = 32 if version == 4 else 128
    if (
        not bits_part
        or len(bits_part) > 3
        or not bits_part.isascii()
        or not bits_part.isdigit()
        or (len(bits_part) > 1 and bits_part[0] == "0")
        or int(bits_part) > width
    ):
        raise _rule_err(rule, "invalid range: prefix length must be a number from 0 to %d" % width)
    bits = int(bits_part)
    mask = ((1 << bits) - 1) << (width - bits)
    if v & mask != v:
        masked = _prefix_text_of(version, v & mask, bits)
        raise _rule_err(rule, "range has host bits set; did you mean %s?" % masked)
    if mapped:
        if bits < 96:
            raise _rule_err(rule, "range is wider than the IPv4-mapped block; write IPv4 ranges as 10.0.0.0/8")
        version, v, bits = 4, v & 0xFFFFFFFF, bits - 96
    r.version, r.net, r.bits = version, v, bits


def _parse_addr_keep_mapped(s):
    for c in s:
        if c == ".":
            v = _ipv4_strict(s)
            return None if v is None else (4, v, False)
        if c == ":":
            v = _ipv6(s)
            return None if v is None else (6, v, v >> 32 == 0xFFFF)
        if c == "%":
            return None
    return None


def _name_rule(rule, s, r):
    if s.startswith("*."):
        r.wildcard = True
        s = s[2:]
    elif s.startswith("."):
        s = s[1:]
    if "*" in s:
        raise _rule_err(rule, "`*` is allowed only as a whole leading label, as in *.example.com")
    if s == "":
        raise _rule_err(rule, "empty host")
    try:
        h = normalize(s)
    except InvalidHost as e:
        raise _rule_err(rule, str(e)) from None
    if h[0] != "name":
        if r.wildcard:
            raise _rule_err(rule, "`*.` goes before a domain, not an address; write a range as 10.0.0.0/8")
        r.version, r.net, r.bits = h[0], h[1], 32 if h[0] == 4 else 128
        return
    r.name = h[1]


def _prefix_text_of(version, net, bits):
    return "%s/%d" % (addr_text((version, net)), bits)


def _prefix_text(r):
    width = 32 if r.version == 4 else 128
    if r.bits == width:
        return addr_text((r.version, r.net))
    return _prefix_text_of(r.version, r.net, r.bits)


def _canonical(r):
    if r.name:
        host = "*." + r.name if r.wildcard else r.name
    else:
        host = _prefix_text(r)
    if r.port == 0:
        return host
    if not r.name and r.version == 6:
        host = "[" + host + "]"
    return "%s:%d" % (host, r.port)


class RuleSet:
    """One list of rules (allow or deny), indexed like Go's: by domain for
    names, by masked prefix for addresses, most specific match first."""

    __slots__ = ("names", "addrs", "bits4", "bits6", "any")

    def __init__(self):
        self.names = {}
        self.addrs = {}
        self.bits4 = []
        self.bits6 = []
        self.any = None

    def add(self, r):
        if r.any:
            if self.any is None:
                self.any = r
        elif r.name:
            self.names.setdefault(r.name, []).append(r)
        else:
            self.addrs.setdefault((r.version, r.net, r.bits), []).append(r)
            bits = self.bits4 if r.version == 4 else self.bits6
            if r.bits not in bits:
                bits.append(r.bits)
                bits.sort(reverse=True)

    def empty(self):
        return self.any is None and not self.names and not self.addrs

    def match_name_rules(self, name, port):
        if not self.names:
            return None
        i = 0
        while True:
            for r in self.names.get(name[i:], ()):
                if (i > 0 or not r.wildcard) and (r.port == 0 or r.port == port):
                    return r
            j = name.find(".", i)
            if j < 0:
                return None
            i = j + 1

    def match_addr_rules(self, a, port):
        version, v = a
        width = 32 if version == 4 else 128
        for b in self.bits4 if version == 4 else self.bits6:
            mask = ((1 << b) - 1) << (width - b)
            for r in self.addrs.get((version, v & mask, b), ()):
                if r.port == 0 or r.port == port:
                    return r
        return None

    def match_name(self, name, port):
        r = self.match_name_rules(name, port)
        return r if r is not None else self.any

    def match_addr(self, a, port):
        r = self.match_addr_rules(a, port)
        return r if r is not None else self.any


class Decision:
    __slots__ = ("allowed", "reason", "rule", "host", "port", "addr", "hint")

    def __init__(self, allowed, reason, rule, host, port, addr=None, hint=""):
        self.allowed = allowed
        self.reason = reason
        self.rule = rule
        self.host = host
        self.port = port
        self.addr = addr
        self.hint = hint

    def copy(self):
        return Decision(self.allowed, self.reason, self.rule, self.host, self.port, self.addr, self.hint)

    def __repr__(self):
        return "%s %s:%d reason=%s rule=%s" % (
            "allow" if self.allowed else "deny",
            self.host,
            self.port,
            self.reason,
            self.rule or "-",
        )


class PolicyError(ValueError):
    pass


class Policy:
    """An immutable network policy: the posture, the allow and deny lists and
    --allow-localhost. learned, if given, is a function (addr, port) that
    returns a name the shim resolved to that address, for step 6."""

    __slots__ = ("posture", "allow", "deny", "allow_localhost", "learned")

    def __init__(
        self,
        network="",
        no_network=False,
        allow=(),
        deny=(),
        allow_localhost=False,
        allow_domains=(),
        allow_cidrs=(),
        deny_domains=(),
        deny_cidrs=(),
    ):
        self.allow = RuleSet()
        self.deny = RuleSet()
        self.allow_localhost = bool(allow_localhost)
        self.learned = None
        n_allow = 0
        for rules, kind, is_allow in (
            (allow_domains, "name", True),
            (allow_cidrs, "addr", True),
            (allow, "any", True),
            (deny_domains, "name", False),
            (deny_cidrs, "addr", False),
            (deny, "any", False),
        ):
            for s in rules:
                r = parse_rule(s, kind, is_allow)
                if is_allow:
                    n_allow += 1
                    self.allow.add(r)
                else:
                    self.deny.add(r)
        has_deny = bool(deny_domains or deny_cidrs or deny)
        self.posture = _derive_posture(network or "", bool(no_network), n_allow, self.allow_localhost, has_deny)

    def decide(self, host, port):
        """Steps 1-4 (and step 5 for an address) for a host as a client gave it."""
        try:
            h = normalize(host)
        except InvalidHost as e:
            return Decision(False, INVALID_HOST, "", host, port, hint="invalid host: %s" % e)
        return self.decide_host(h, port)

    def decide_host(self, h, port):
        if h[0] == "name":
            return self._decide_name(h[1], port)
        return self._decide_addr(h, port)

    def _decide_name(self, name, port):
        m = metadata_name(name)
        if m is not None:
            return Decision(False, CLOUD_METADATA, m, name, port, hint="cloud metadata is always denied")
        r = self.deny.match_name(name, port)
        if r is not None:
            return Decision(False, DENYLISTED, r.text, name, port, hint="the deny rule %r matches" % r.text)
        localhost = self.allow_localhost and is_localhost_name(name)
        if self.posture == BLOCKED:
            if localhost:
                return Decision(True, LOCALHOST, "", name, port)
            return Decision(False, NO_NETWORK, "", name, port, hint="allow it with --allow-domain " + name)
        if self.posture == ALLOWLIST:
            r = self.allow.match_name_rules(name, port)
            if r is not None:
                return Decision(True, ALLOWLISTED, r.text, name, port)
            if localhost:
                return Decision(True, LOCALHOST, "", name, port)
            return Decision(False, NOT_ALLOWLISTED, "", name, port, hint="allow it with --allow-domain " + name)
        return Decision(True, OPEN, "", name, port)

    def _decide_addr(self, a, port):
        d = Decision(False, "", "", addr_text(a), port, a)
        out = self._deny_addr(d, a, port)
        if out is not None:
            return out
        if self.posture == BLOCKED:
            if self.allow_localhost and is_loopback(a):
                return _set(d, True, LOCALHOST, "")
            return _set(d, False, NO_NETWORK, "", _addr_hint(a))
        if self.posture == ALLOWLIST:
            r = self.allow.match_addr_rules(a, port)
            if r is not None:
                d = _set(d, True, ALLOWLISTED, r.text)
            elif self.allow_localhost and is_loopback(a):
                d = _set(d, True, LOCALHOST, "")
            else:
                r = self._learned_rule(a, port)
                if r is None:
                    return _set(d, False, NOT_ALLOWLISTED, "", _addr_hint(a))
                d = _set(d, True, ALLOWLISTED, r.text)
            return self._internal_check(d, a, port)
        return _set(d, True, OPEN, "")

    def _learned_rule(self, a, port):
        if self.learned is None:
            return None
        for name in self.learned(a):
            if self.deny.match_name(name, port) is not None:
                continue
            r = self.allow.match_name_rules(name, port)
            if r is not None:
                return r
        return None

    def check_addr(self, d, a):
        """Step 5: judge one address the name in d resolved to."""
        if a[0] == 6 and a[1] >> 32 == 0xFFFF:
            a = (4, a[1] & 0xFFFFFFFF)
        d = d.copy()
        d.addr = a
        out = self._deny_addr(d, a, d.port)
        if out is not None:
            return out
        if not d.allowed:
            return d
        if self.posture == BLOCKED:
            if not is_loopback(a):
                return _set(d, False, NO_NETWORK, "", "only loopback is allowed under --no-network")
            return d
        if self.posture == ALLOWLIST:
            return self._internal_check(d, a, d.port)
        return d

    def _deny_addr(self, d, a, port):
        e = embedded_ipv4(a)
        for x in (a, e):
            if x is None:
                continue
            hit = always_denied(x)
            if hit is not None:
                return _set(d, False, hit[0], hit[1], "always denied")
        r = self.deny.match_addr(a, port)
        if r is not None:
            return _set(d, False, DENYLISTED, r.text, "the deny rule %r matches" % r.text)
        if e is not None:
            r = self.deny.match_addr_rules(e, port)
            if r is not None:
                return _set(d, False, DENYLISTED, r.text, "the deny rule %r matches" % r.text)
        return None

    def _internal_check(self, d, a, port):
        if is_internal(a):
            covered = self.allow.match_addr_rules(a, port) is not None
            if not covered and not (self.allow_localhost and is_loopback(a)):
                return _set(d, False, PRIVATE_ADDRESS, "", _internal_hint(a))
        e = embedded_ipv4(a)
        if e is not None and is_internal(e):
            if self.allow.match_addr_rules(e, port) is None:
                return _set(d, False, PRIVATE_ADDRESS, "", "%s carries the internal address %s" % (addr_text(a), addr_text(e)))
        return d


def _set(d, allowed, reason, rule, hint=""):
    d = d.copy()
    d.allowed, d.reason, d.rule, d.hint = allowed, reason, rule, hint
    return d


def _addr_hint(a):
    if is_loopback(a):
        return "allow loopback with --allow-localhost"
    return "allow it with --allow-cidr " + addr_text(a)


def _internal_hint(a):
    t = addr_text(a)
    if is_loopback(a):
        return "%s is loopback; allow it with --allow-localhost or --allow-cidr %s" % (t, t)
    return "%s is an internal address; allow it with --allow-cidr %s" % (t, t)


def _derive_posture(network, no_network, n_allow, allow_localhost, has_deny):
    if network == OPEN_POSTURE:
        bad = []
        if n_allow:
            bad.append("allow rules")
        if no_network:
            bad.append("no_network")
        if allow_localhost:
            bad.append("allow_localhost")
        if bad:
            raise PolicyError("network=open lets everything out, so %s would mean nothing" % " and ".join(bad))
        return OPEN_POSTURE
    if network == BLOCKED:
        if n_allow:
            raise PolicyError("network=blocked lets nothing out, so allow rules would mean nothing")
        return BLOCKED
    if network == ALLOWLIST:
        return ALLOWLIST
    if network != "":
        raise PolicyError("network=%r: want blocked, allowlist or open" % network)
    if n_allow:
        return ALLOWLIST
    if no_network:
        return BLOCKED
    if allow_localhost:
        return ALLOWLIST
    if has_deny:
        return OPEN_POSTURE
    return ""
