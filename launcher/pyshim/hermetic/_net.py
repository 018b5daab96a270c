"""Patches to the socket and ssl modules.

The audit hook already refuses what the policy denies. These patches add
what a hook cannot: a name is resolved by the guard (which checks every
address it resolves to, and connects to one that passed, never to a second
lookup), and, under the launcher, a TCP connection to an allowed host goes
through hermetic's SOCKS5 proxy with the host name kept, so that it works
inside the network namespace and the proxy decides on the name.

A program that undoes these patches gets the bare C functions back, which
the hook still guards: it loses the routing, not the guard.
"""

import sys

import _socket

from hermetic import PolicyViolation

_audit = sys.audit
_base = _socket.socket
_connect = _base.connect
_connect_ex = _base.connect_ex
_sendto = _base.sendto
_sendmsg = _base.sendmsg
_recv = _base.recv
_sendall = _base.sendall
_gettimeout = _base.gettimeout
_settimeout = _base.settimeout
_family = _base.family.__get__
_type = _base.type.__get__

_SOCKS_TIMEOUT = 60.0
_INET = (_socket.AF_INET, _socket.AF_INET6)


def _route(sock, address, stype=None, guard=None):
    fam = _family(sock)
    if fam not in _INET:
        return None
    out = []
    _audit("hermetic.route", fam, _type(sock) if stype is None else stype, address, out, guard)
    return out[0] if out else None


def connect(self, address):
    r = _route(self, address)
    if r is None:
        return _connect(self, address)
    if r[0] == "direct":
        return _connect(self, r[1])
    return _socks(self, r[1], r[2], r[3], r[4], r[5])


def connect_ex(self, address):
    r = _route(self, address)
    if r is None:
        return _connect_ex(self, address)
    if r[0] == "direct":
        return _connect_ex(self, r[1])
    try:
        _socks(self, r[1], r[2], r[3], r[4], r[5])
    except OSError as e:
        return e.errno or 5
    return 0


def sendto(self, data, flags_or_addr, addr=None):
    if addr is None:
        r = _route(self, flags_or_addr, _socket.SOCK_DGRAM)
        return _sendto(self, data, r[1] if r else flags_or_addr)
    r = _route(self, addr, _socket.SOCK_DGRAM)
    return _sendto(self, data, flags_or_addr, r[1] if r else addr)


def sendmsg(self, buffers, ancdata=(), flags=0, address=None):
    if address is None:
        return _sendmsg(self, buffers, ancdata, flags)
    r = _route(self, address, _socket.SOCK_DGRAM, "socket.sendmsg")
    return _sendmsg(self, buffers, ancdata, flags, r[1] if r else address)


# SOCKS5 (RFC 1928), CONNECT only; no authentication, or RFC 1929
# username/password when the settings give credentials. Errors name the
# proxy, never the password.

_REPLIES = {
    1: (5, "general SOCKS server failure"),
    2: (13, "connection not allowed by ruleset"),
    3: (101, "network unreachable"),
    4: (113, "host unreachable"),
    5: (111, "connection refused"),
    6: (110, "TTL expired"),
    7: (95, "command not supported"),
    8: (97, "address type not supported"),
}


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = _recv(sock, n - len(buf))
        if not chunk:
            raise ConnectionError(104, "SOCKS5 proxy closed the connection")
        buf += chunk
    return buf


def _socks(sock, proxy_host, proxy_port, host, port, auth=None):
    fam = _family(sock)
    if fam == _socket.AF_INET6 and ":" not in proxy_host:
        proxy_host = "::ffff:" + proxy_host
    target = (proxy_host, proxy_port) if fam == _socket.AF_INET else (proxy_host, proxy_port, 0, 0)
    timeout = _gettimeout(sock)
    if not timeout:
        _settimeout(sock, _SOCKS_TIMEOUT)
    try:
        _connect(sock, target)
        _socks_greet(sock, auth, _proxy_name(proxy_host, proxy_port), _proxy_name(host, port))
        _sendall(sock, b"\x05\x01\x00" + _socks_addr(host) + port.to_bytes(2, "big"))
        head = _recv_exact(sock, 4)
        if head[0] != 5:
            raise ConnectionError(71, "SOCKS5 proxy sent a bad reply")
        atyp = head[3]
        if atyp == 1:
            _recv_exact(sock, 6)
        elif atyp == 4:
            _recv_exact(sock, 18)
        elif atyp == 3:
            _recv_exact(sock, _recv_exact(sock, 1)[0] + 2)
        else:
            raise ConnectionError(71, "SOCKS5 proxy sent a bad reply")
        rep = head[1]
        if rep == 2:
            hp = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
            _audit("hermetic.deny", "socket.connect", hp, "denied-by-proxy", host, port)
            raise PolicyViolation("hermetic blocked socket.connect %s: denied-by-proxy" % hp, "socket.connect", hp, "denied-by-proxy")
        if rep != 0:
            errno, msg = _REPLIES.get(rep, (5, "SOCKS5 error %d" % rep))
            raise OSError(errno, "%s (SOCKS5 proxy, connecting to %s:%d)" % (msg, host, port))
    finally:
        _settimeout(sock, timeout)


def _proxy_name(host, port):
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def _socks_greet(sock, auth, proxy, dest):
    """Method negotiation and, when the proxy asks for it, RFC 1929
    username/password authentication. Method 2 is offered only when
    credentials are configured."""
    _sendall(sock, b"\x05\x02\x00\x02" if auth else b"\x05\x01\x00")
    ver, method = _recv_exact(sock, 2)
    if ver != 5:
        raise ConnectionError(71, "SOCKS5 proxy %s sent a bad reply" % proxy)
    if method == 0:
        return
    if method == 2 and auth:
        user, password = auth
        _sendall(sock, b"\x01" + bytes((len(user),)) + user + bytes((len(password),)) + password)
        ver, status = _recv_exact(sock, 2)
        if ver != 1:
            raise ConnectionError(71, "SOCKS5 proxy %s sent a bad authentication reply" % proxy)
        if status != 0:
            raise PermissionError(13, "SOCKS5 proxy %s refused the username and password (connecting to %s)" % (proxy, dest))
        return
    if method == 0xFF and not auth:
        raise PermissionError(13, "SOCKS5 proxy %s requires authentication and no credentials are configured (connecting to %s)" % (proxy, dest))
    raise ConnectionError(71, "SOCKS5 proxy %s accepts none of the authentication methods offered" % proxy)


def _socks_addr(host):
    try:
        return b"\x01" + _socket.inet_pton(_socket.AF_INET, host)
    except OSError:
        pass
    try:
        return b"\x04" + _socket.inet_pton(_socket.AF_INET6, host)
    except OSError:
        pass
    name = host.encode("ascii")
    return b"\x03" + bytes((len(name),)) + name


# Resolution through the guard.


def _make_getaddrinfo(mod, orig):
    AddressFamily = getattr(mod, "AddressFamily", None)
    SocketKind = getattr(mod, "SocketKind", None)

    def _enum(v, cls):
        try:
            return cls(v) if cls is not None else v
        except ValueError:
            return v

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        out = []
        _audit("hermetic.resolve", host, port, family, type, proto, flags, out)
        if not out:
            return orig(host, port, family, type, proto, flags)
        return [(_enum(af, AddressFamily), _enum(st, SocketKind), pr, cn, sa) for af, st, pr, cn, sa in out[0]]

    getaddrinfo.__doc__ = orig.__doc__
    getaddrinfo.__wrapped__ = orig
    return getaddrinfo


def _make_gethostbyname(mod):
    def gethostbyname(hostname):
        for r in mod.getaddrinfo(hostname, None, _socket.AF_INET, _socket.SOCK_STREAM):
            return r[4][0]
        raise _socket.gaierror(-2, "Name or service not known")

    def gethostbyname_ex(hostname):
        addrs = []
        for r in mod.getaddrinfo(hostname, None, _socket.AF_INET, _socket.SOCK_STREAM):
            if r[4][0] not in addrs:
                addrs.append(r[4][0])
        if not addrs:
            raise _socket.gaierror(-2, "Name or service not known")
        return hostname, [], addrs

    return gethostbyname, gethostbyname_ex


def _real_family(fd):
    """The family of the socket behind a descriptor, whatever family the
    caller claims for it (the kernel's SO_DOMAIN), or None."""
    try:
        probe = _base(fileno=fd)
    except (OSError, ValueError, TypeError, OverflowError):
        return None
    try:
        return _family(probe)
    finally:
        probe.detach()


def _check_adopt(fd, family):
    real = _real_family(fd) if type(fd) is int or hasattr(fd, "__index__") else None
    for f in (family, real):
        if f in _INET:
            _audit("hermetic.fromfd", int(f))


def _make_fromfd(orig, what):
    def fromfd(fd, family, *args, **kwargs):
        _check_adopt(fd, family)
        return orig(fd, family, *args, **kwargs)

    fromfd.__doc__ = orig.__doc__
    fromfd.__name__ = what
    return fromfd


def patch_socket(mod):
    if getattr(mod, "_hermetic_patched", False):
        return
    cls = mod.socket
    cls.connect = connect
    cls.connect_ex = connect_ex
    cls.sendto = sendto
    cls.sendmsg = sendmsg
    mod.getaddrinfo = _make_getaddrinfo(mod, mod.getaddrinfo)
    mod.gethostbyname, mod.gethostbyname_ex = _make_gethostbyname(mod)
    if hasattr(mod, "fromfd"):
        mod.fromfd = _make_fromfd(mod.fromfd, "fromfd")
    if hasattr(mod, "fromshare"):

        def fromshare(info, _orig=mod.fromshare):
            _audit("hermetic.fromfd", int(_socket.AF_INET))
            return _orig(info)

        mod.fromshare = fromshare
    mod._hermetic_patched = True


def patch_ssl(mod):
    ctx = mod.SSLContext
    if getattr(ctx, "_hermetic_patched", False):
        return
    wrap_socket, wrap_bio = ctx.wrap_socket, ctx.wrap_bio

    def wrap_socket_(self, *args, **kwargs):
        _audit("hermetic.tls")
        return wrap_socket(self, *args, **kwargs)

    def wrap_bio_(self, *args, **kwargs):
        _audit("hermetic.tls")
        return wrap_bio(self, *args, **kwargs)

    ctx.wrap_socket = wrap_socket_
    ctx.wrap_bio = wrap_bio_
    ctx._hermetic_patched = True
