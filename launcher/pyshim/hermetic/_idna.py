"""IDNA ToASCII for host names, the twin of the profile in Go's policy package.

That profile is UTS #46 non-transitional lookup processing without the STD3
character rules, with CheckHyphens, CheckJoiners and the Bidi rule
(golang.org/x/net/idna: MapForLookup, Transitional(false), BidiRule,
ValidateLabels, StrictDomainName(false)). Python's own "idna" codec is
IDNA 2003 (it maps "ß" to "ss"), so this module does the work itself with
unicodedata and its own punycode.

The UTS #46 mapping table is not in the standard library. It is derived from
NFKC_Casefold, which this module approximates per code point with
NFKC(casefold(NFKC(c))), keeping the four deviation characters and dropping
the characters UTS #46 ignores. Where the two disagree the result is stricter
than Go (a name is refused that Go would map), never laxer, except in the
known cases listed in the package README. The one difference that matters in
practice is CheckJoiners: the joining types of Arabic letters are not in
unicodedata, so ZERO WIDTH NON-JOINER is accepted only right after a virama.

This file runs in two ways: imported normally (tests, tools), and executed in
the guard's private namespace, where _PRIVATE is set and _ud is injected.
It must not call anything a program could replace.
"""

if not globals().get("_PRIVATE"):
    import unicodedata as _ud

_nfc = _ud.normalize
_category = _ud.category
_bidirectional = _ud.bidirectional
_combining = _ud.combining

# Kept as themselves by non-transitional processing.
_DEVIATION = frozenset("\u00df\u03c2\u200c\u200d")

# Mapped to nothing by UTS #46 (status "ignored").
_IGNORED = frozenset(
    "\u00ad\u034f\u180b\u180c\u180d\u180f\u200b\u2060\u2064\ufeff"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0x1BCA0, 0x1BCA4))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)

# Disallowed by UTS #46 although NFKC_Casefold keeps or maps them: fillers,
# characters UTS #46 lists by hand, and the ones whose mapping would make a
# dot or that Unicode 15's table disallows (found by comparing every code
# point with golang.org/x/net/idna).
_DISALLOWED = frozenset(
    "\u04c0\u115f\u1160\u1680\u1806\u17b4\u17b5\u2024\u2132\u2183\u3164"
    "\u33c2\u33c7\u33d8\ufe12\ufe52\uffa0\ufffc\ufffd\U0001f100\U0002f868\U0002f874"
    "\U0002f91f\U0002f95f\U0002f9bf"
    + "".join(chr(c) for c in range(0x10A0, 0x10C6))
    + "".join(chr(c) for c in range(0x2488, 0x249C))
    + "".join(chr(c) for c in range(0x2FF0, 0x2FFC))
    # Assigned by Unicode 15.1 (Python 3.13), after the tables Go's idna
    # uses: refused until Go knows them. A Python whose Unicode database is
    # newer still (3.14: Unicode 16) accepts the characters that version
    # added; hermetic's proxies refuse such names (invalid-host).
    + "\u31ef\u2ffc\u2ffd\u2ffe\u2fff"
    + "".join(chr(c) for c in range(0x2EBF0, 0x2EE5E))
)

# General categories UTS #46 disallows: controls, formats, surrogates,
# private use, unassigned, line and paragraph separators. A code point that
# Python's Unicode database does not know yet is refused, so an older
# Python is stricter than Go, never laxer.
_BAD_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))

_RTL = frozenset(("R", "AL", "AN"))

_map_cache = {}


def _map_char(c):
    """UTS #46 mapping of one non-ASCII code point: a string, or None when
    the code point is disallowed."""
    r = _map_cache.get(c)
    if r is not None or c in _map_cache:
        return r
    if c in _DEVIATION:
        r = c
    elif c in _IGNORED:
        r = ""
    elif c in _DISALLOWED or _category(c) in _BAD_CATEGORIES:
        r = None
    else:
        # U+3002 IDEOGRAPHIC FULL STOP is mapped to "." by UTS #46 but not
        # by NFKC; the other full stops decompose to it or to ".".
        r = _nfc("NFKC", _nfc("NFKC", c).casefold()).replace("\u3002", ".")
        for x in r:
            if x in _DISALLOWED or _category(x) in _BAD_CATEGORIES:
                if x not in _DEVIATION:
                    r = None
                    break
    if len(_map_cache) < 4096:
        _map_cache[c] = r
    return r


def _valid_char(c):
    """A code point that UTS #46 keeps as itself (valid or deviation)."""
    if c < "\x80":
        return not ("A" <= c <= "Z")
    return _map_char(c) == c


class IDNAError(ValueError):
    pass


def to_ascii(s):
    """Return the ASCII form of a host name, or raise IDNAError."""
    parts = []
    bidi = False
    for c in s:
        if c < "\x80":
            parts.append(c.lower())
            continue
        if not bidi and _bidirectional(c) in _RTL:
            bidi = True
        m = _map_char(c)
        if m is None:
            raise IDNAError("disallowed code point U+%04X" % ord(c))
        parts.append(m)
    mapped = _nfc("NFC", "".join(parts))

    labels = mapped.split(".")
    for i, label in enumerate(labels):
        if label == "":
            continue
        if label.startswith("xn--"):
            u = _puny_decode(label[4:])
            if u and u.isascii():
                raise IDNAError("punycode label decodes to ASCII")
            if not bidi and any(_bidirectional(c) in _RTL for c in u):
                bidi = True
            if _nfc("NFC", u) != u or not all(_valid_char(c) for c in u):
                raise IDNAError("punycode label holds code points that are not valid")
            _validate_label(u)
            labels[i] = u
        else:
            _validate_label(label)
    if bidi:
        for label in labels:
            if label and not _bidi_ok(label):
                raise IDNAError("label breaks the Bidi rule")
    for i, label in enumerate(labels):
        if not label.isascii():
            labels[i] = "xn--" + _puny_encode(label)
    return ".".join(labels)


def _validate_label(s):
    if s == "":
        return
    b = s.encode("utf-8", "surrogatepass")
    if len(b) > 4 and b[2:4] == b"--":
        raise IDNAError("label has '--' in the third and fourth places")
    if b[:1] == b"-" or b[-1:] == b"-":
        raise IDNAError("label starts or ends with '-'")
    if _category(s[0]).startswith("M"):
        raise IDNAError("label starts with a combining mark")
    if "\u200c" in s or "\u200d" in s:
        # ContextJ (RFC 5892 appendix A), the virama half only: the joining
        # types that would allow more are not in unicodedata.
        prev = ""
        for c in s:
            if c in "\u200c\u200d" and (prev == "" or _combining(prev) != 9):
                raise IDNAError("zero-width joiner out of context")
            prev = c


# The Bidi rule of RFC 5893, as golang.org/x/text/secure/bidirule runs it.
_LTR_BODY = frozenset(("ES", "CS", "ET", "ON", "BN", "NSM"))
_RTL_BODY = frozenset(("ES", "CS", "ET", "ON", "BN", "NSM"))


def _bidi_ok(label):
    state = "init"
    seen_en = seen_an = rtl = False
    for c in label:
        k = _bidirectional(c) or "L"
        if k == "EN":
            seen_en = True
        elif k == "AN":
            seen_an = True
        if k in _RTL:
            rtl = True
        if seen_en and seen_an:
            return False
        if state == "init":
            if k == "L":
                state = "ltr_final"
            elif k in ("R", "AL"):
                state = "rtl_final"
            else:
                state = "invalid"
        elif state in ("ltr", "ltr_final"):
            if k in ("L", "EN") or (state == "ltr_final" and k == "NSM"):
                state = "ltr_final"
            elif k in _LTR_BODY:
                state = "ltr"
            else:
                state = "invalid"
        elif state in ("rtl", "rtl_final"):
            if k in ("R", "AL", "EN", "AN") or (state == "rtl_final" and k == "NSM"):
                state = "rtl_final"
            elif k in _RTL_BODY:
                state = "rtl"
            else:
                state = "invalid"
        if state == "invalid" and rtl:
            return False
    return state in ("init", "ltr_final", "rtl_final")


# Punycode (RFC 3492) with the bounds of golang.org/x/net/idna.
_BASE, _TMIN, _TMAX, _SKEW, _DAMP = 36, 1, 26, 38, 700
_INITIAL_BIAS, _INITIAL_N = 72, 128
_MAXINT32 = 0x7FFFFFFF


def _adapt(delta, numpoints, first):
    delta = delta // _DAMP if first else delta // 2
    delta += delta // numpoints
    k = 0
    while delta > ((_BASE - _TMIN) * _TMAX) // 2:
        delta //= _BASE - _TMIN
        k += _BASE
    return k + (_BASE - _TMIN + 1) * delta // (delta + _SKEW)


def _digit(c):
    if "0" <= c <= "9":
        return ord(c) - 22
    if "a" <= c <= "z":
        return ord(c) - 97
    if "A" <= c <= "Z":
        return ord(c) - 65
    return -1


def _puny_decode(enc):
    if enc == "":
        return ""
    pos = enc.rfind("-") + 1
    if pos == 1:
        raise IDNAError("bad punycode")
    if pos == len(enc):
        return enc[:-1]
    out = list(enc[: pos - 1]) if pos else []
    i, n, bias = 0, _INITIAL_N, _INITIAL_BIAS
    while pos < len(enc):
        oldi, w, k = i, 1, _BASE
        while True:
            if pos == len(enc):
                raise IDNAError("bad punycode")
            d = _digit(enc[pos])
            if d < 0:
                raise IDNAError("bad punycode")
            pos += 1
            if d * w > _MAXINT32 - i:
                raise IDNAError("bad punycode")
            i += d * w
            t = _TMIN if k <= bias else _TMAX if k >= bias + _TMAX else k - bias
            if d < t:
                break
            if w * (_BASE - t) > _MAXINT32:
                raise IDNAError("bad punycode")
            w *= _BASE - t
            k += _BASE
        if len(out) >= 1024:
            raise IDNAError("bad punycode")
        x = len(out) + 1
        bias = _adapt(i - oldi, x, oldi == 0)
        n += i // x
        i %= x
        if n > 0x10FFFF:
            raise IDNAError("bad punycode")
        out.insert(i, chr(n))
        i += 1
    return "".join(out)


def _puny_encode(s):
    out = [c for c in s if c < "\x80"]
    b = h = len(out)
    if b:
        out.append("-")
    delta, n, bias = 0, _INITIAL_N, _INITIAL_BIAS
    codes = [ord(c) for c in s]
    remaining = len(codes) - b
    while remaining:
        m = min(c for c in codes if c >= n)
        if (m - n) * (h + 1) > _MAXINT32 - delta:
            raise IDNAError("punycode overflow")
        delta += (m - n) * (h + 1)
        n = m
        for c in codes:
            if c < n:
                delta += 1
                if delta > _MAXINT32:
                    raise IDNAError("punycode overflow")
                continue
            if c > n:
                continue
            q, k = delta, _BASE
            while True:
                t = _TMIN if k <= bias else _TMAX if k >= bias + _TMAX else k - bias
                if q < t:
                    break
                v = t + (q - t) % (_BASE - t)
                out.append(chr(v + 97) if v < 26 else chr(v + 22))
                q = (q - t) // (_BASE - t)
                k += _BASE
            out.append(chr(q + 97) if q < 26 else chr(q + 22))
            bias = _adapt(delta, h + 1, h == b)
            delta = 0
            h += 1
            remaining -= 1
        delta += 1
        n += 1
    return "".join(out)
