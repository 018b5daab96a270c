"""The guard engine: the audit hook's handlers and all guard state.

This file is never imported as a module. hermetic._runtime executes it once
per process in a private namespace that no module, function or frame a
program can reach holds, with a private copy of the builtins, and adds an
audit hook whose only references are into that namespace. The public package
talks to it only through audit events ("hermetic.install", ...), so
rebinding anything importable, replacing sys.modules entries or calling
uninstall_all() cannot reach the state that decides.

Rules for code here: call only builtins, methods of built-in types and the
C functions captured at build time; never call an object a program supplied
(no str(), hash, ==, isinstance or attribute access on foreign objects: a
program could run its own code inside the hook that way); return exceptions
instead of raising them, so that no frame of this namespace is ever in a
traceback a program can hold.

Injected before execution: _PV (PolicyViolation), _exc_new
(BaseException.__new__), _oserror_new (OSError.__new__), _posix,
_get_ident, _time, _modules (the interpreter's module dict), _env (facts
about the interpreter), _sources (the text of _policy.py and _idna.py),
_builtins (the builtins copy); _private_ids (ids of the private
namespaces) right after.
"""

_open = _posix.open
_close = _posix.close
_write = _posix.write
_readlink = _posix.readlink
_fstat = _posix.fstat
_getcwd = _posix.getcwd
_getpid = _posix.getpid

_O_WRONLY = 1
_O_RDWR = 2
_WRITE_FLAGS = 1 | 2 | 0o100 | 0o1000 | 0o2000  # WRONLY RDWR CREAT TRUNC APPEND (Linux values)
_O_PATH = 0o10000000
_O_CLOEXEC = 0o2000000
_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_proc_fd = False

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM = 1


# ---------------------------------------------------------------- state --

_table = {}  # event name -> handler; the hook reads it
_busy = set()  # ids of threads inside a handler (their nested events pass)
_layers = []  # installed layers, in order
_next_id = [1]
_sealed = [False]

# Aggregate of the layers, replaced as a whole so readers never see a mix.
_S = {
    "protect": (),
    "roots": (),
    "net": (),
    "fs": (),
    "subprocess": False,
    "native": False,
    "trace": False,
    "reports": (),
}

_learned = {}  # address pair -> names it resolved from (step 6)
_fake = {}  # fake address pair -> name (SOCKS mode)
_fake_by_name = {}  # (name, version) -> fake address pair
_path_cache = {}  # absolute path -> resolved path (fs root checks)
_policy_ns = {}
_idna_ns = {}


def _quiet(fn, *a):
    """Call fn with this thread marked busy: the audit events it raises are
    the guard's own and are not judged again. Only calls of this namespace
    or of captured C functions go through here, never a program's code."""
    tid = _get_ident()
    if tid in _busy:
        return fn(*a)
    _busy.add(tid)
    try:
        return fn(*a)
    finally:
        _busy.discard(tid)


def _private(extra):
    ns = {"__builtins__": _builtins, "_PRIVATE": True}
    ns.update(extra)
    return ns


def _policy():
    """The policy module, compiled on first use so that start-up does not
    pay for it."""
    if "Policy" not in _policy_ns:
        _policy_ns.update(_private({"__name__": "hermetic._policy[private]", "_to_ascii": _to_ascii}))
        _quiet(exec, _compiled("policy"), _policy_ns)
    return _policy_ns


def _compiled(name):
    src = _sources[name]
    if type(src) is str:
        return _quiet(compile, src, _sources[name + "_file"], "exec", 0, True)
    if type(src) is bytes:
        try:
            return _env["marshal_loads"](src)
        except (ValueError, EOFError, TypeError):
            # A damaged cache entry: compile the source instead.
            return _quiet(compile, _quiet(_read_file, _sources[name + "_file"]), _sources[name + "_file"], "exec", 0, True)
    return src


def _read_file(path):
    fd = _open(path, _O_CLOEXEC)
    try:
        chunks = []
        while True:
            b = _posix.read(fd, 1 << 16)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        _close(fd)


def _to_ascii(name):
    if "to_ascii" not in _idna_ns:
        _idna_ns.update(_private({"__name__": "hermetic._idna[private]", "_ud": _env["unicodedata"]}))
        _quiet(exec, _compiled("idna"), _idna_ns)
    return _idna_ns["to_ascii"](name)


def _socket_mod():
    """The C functions of _socket, captured when the engine was built:
    never looked up in sys.modules, where a program could plant its own."""
    return _env["socket"]


# ---------------------------------------------------------- violations --


def _quote(s):
    if s.isprintable():
        return s
    out = []
    for c in s:
        out.append(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256 else "\\u%04x" % ord(c))
    return "".join(out)


def _json_str(s):
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif o < 0x20 or 0xD800 <= o < 0xE000:
            out.append("\\u%04x" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


_TRACE_KEYS = {"open": "path", "os": "path", "shutil": "path", "sqlite3": "path", "subprocess": "exe", "import": "module"}


def _goquote(s):
    """s as Go's strconv.Quote writes it, near enough for a trace line: the
    Go side quotes an invalid host the same way."""
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif c.isprintable() and not 0xD800 <= o < 0xE000:
            out.append(c)
        elif o < 0x80:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c) or "\\x%02x" % o)
        elif o < 0x10000:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    out.append('"')
    return "".join(out)


def _violation(guard, target, reason, hint="", net=None):
    """Build, trace and report a PolicyViolation; the caller returns it.
    net, for a network destination, is (host, port, resolved address or
    None): the trace line then has the form of the Go side's."""
    target = _quote(target)
    msg = "hermetic blocked %s %s: %s" % (guard, target, reason)
    if hint:
        msg += "; " + hint
    e = _exc_new(_PV)
    _env["exc_args_set"](e, (msg,))
    d = _env["exc_dict"](e)
    d["guard"] = guard
    d["target"] = target
    d["reason"] = reason
    s = _S
    if s["trace"]:
        if net is not None:
            host, port, addr = net
            host = _goquote(host) if reason == "invalid-host" else _quote(host)
            line = "[hermetic] blocked %s host=%s port=%d reason=%s" % (guard, host, port or 0, reason)
            if addr and addr != net[0]:
                line += " addr=" + addr
        else:
            key = _TRACE_KEYS.get(guard.split(".")[0], "target")
            if guard in ("os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty", "_posixsubprocess.fork_exec"):
                key = "exe"
            line = "[hermetic] blocked %s %s=%s reason=%s" % (guard, key, target, reason)
        try:
            _write(2, (line + "\n").encode("utf-8", "backslashreplace"))
        except OSError:
            pass
    if s["reports"]:
        rec = '{"guard":%s,"target":%s,"reason":%s,"pid":%d,"time":%.6f}\n' % (
            _json_str(guard),
            _json_str(target),
            _json_str(reason),
            _getpid(),
            _time(),
        )
        _quiet(_append_reports, s["reports"], rec.encode("utf-8", "backslashreplace"))
    return e


def _append_reports(paths, data):
    for path in paths:
        try:
            fd = _open(path, 0o2000 | 1 | 0o100 | _O_CLOEXEC, 0o600)
            try:
                _write(fd, data)
            finally:
                _close(fd)
        except OSError:
            pass


def _error(msg):
    e = _exc_new(ValueError)
    e.args = (msg,)
    return e


# ----------------------------------------------------------- the hook --


def _run(h, event, args):
    """Run handler h for one event. Events raised by the guard's own work
    (inside _quiet: resolution, reports, path resolution) pass. Any failure
    of a handler refuses the action."""
    if _busy and _get_ident() in _busy:
        return None
    failed = None
    try:
        return h(event, args)
    except BaseException as e:  # fail closed
        failed = type(e)
    if failed is RecursionError or failed is MemoryError or failed is KeyboardInterrupt:
        return _exc_new(failed)
    guard = _PUBLIC_NAMES.get(event, event)
    return _violation(_quote(guard), "internal error (%s)" % failed.__name__, "guard-error")


# The guard's own events stand for these calls in messages.
_PUBLIC_NAMES = {
    "hermetic.resolve": "socket.getaddrinfo",
    "hermetic.route": "socket.connect",
    "hermetic.fromfd": "socket.fromfd",
    "hermetic.tls": "ssl.wrap_socket",
    "hermetic.fork_exec": "_posixsubprocess.fork_exec",
    "hermetic.mkfifo": "os.mkfifo",
}


# ---------------------------------------------------------- settings --


def _parse_json(s):
    """A small JSON parser: the json module is Python code a program could
    patch, and costs more to import than this costs to compile."""
    pos = [0]
    n = len(s)

    def ws():
        i = pos[0]
        while i < n and s[i] in " \t\r\n":
            i += 1
        pos[0] = i

    def value():
        ws()
        if pos[0] >= n:
            raise ValueError("unexpected end of settings")
        c = s[pos[0]]
        if c == "{":
            pos[0] += 1
            out = {}
            ws()
            if s[pos[0] : pos[0] + 1] == "}":
                pos[0] += 1
                return out
            while True:
                ws()
                if s[pos[0] : pos[0] + 1] != '"':
                    raise ValueError("want a key at %d" % pos[0])
                k = string()
                ws()
                if s[pos[0] : pos[0] + 1] != ":":
                    raise ValueError("want ':' at %d" % pos[0])
                pos[0] += 1
                out[k] = value()
                ws()
                c = s[pos[0] : pos[0] + 1]
                pos[0] += 1
                if c == "}":
                    return out
                if c != ",":
                    raise ValueError("want ',' or '}' at %d" % pos[0])
        if c == "[":
            pos[0] += 1
            out = []
            ws()
            if s[pos[0] : pos[0] + 1] == "]":
                pos[0] += 1
                return out
            while True:
                out.append(value())
                ws()
                c = s[pos[0] : pos[0] + 1]
                pos[0] += 1
                if c == "]":
                    return out
                if c != ",":
                    raise ValueError("want ',' or ']' at %d" % pos[0])
        if c == '"':
            return string()
        for word, v in (("true", True), ("false", False), ("null", None)):
            if s.startswith(word, pos[0]):
                pos[0] += len(word)
                return v
        i = pos[0]
        while i < n and s[i] in "-+0123456789.eE":
            i += 1
        if i == pos[0]:
            raise ValueError("unexpected %r at %d" % (c, pos[0]))
        t = s[pos[0] : i]
        pos[0] = i
        return float(t) if ("." in t or "e" in t or "E" in t) else int(t)

    def string():
        pos[0] += 1
        out = []
        i = pos[0]
        while True:
            j = i
            while j < n and s[j] != '"' and s[j] != "\\":
                j += 1
            if j >= n:
                raise ValueError("unterminated string")
            out.append(s[i:j])
            if s[j] == '"':
                pos[0] = j + 1
                return "".join(out)
            e = s[j + 1 : j + 2]
            if e == "u":
                cp = int(s[j + 2 : j + 6], 16)
                j += 6
                if 0xD800 <= cp < 0xDC00 and s[j : j + 2] == "\\u":
                    lo = int(s[j + 2 : j + 6], 16)
                    if 0xDC00 <= lo < 0xE000:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                        j += 6
                out.append(chr(cp))
                i = j
                continue
            m = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}.get(e)
            if m is None:
                raise ValueError("bad escape at %d" % j)
            out.append(m)
            i = j + 2

    v = value()
    ws()
    if pos[0] != n:
        raise ValueError("trailing data in settings")
    return v


def _strs(v, what):
    if v is None:
        return []
    if type(v) is not list or any(type(x) is not str for x in v):
        raise ValueError("%s: want a list of strings" % what)
    return v


def _str(v, what):
    if v is None:
        return ""
    if type(v) is not str:
        raise ValueError("%s: want a string" % what)
    return v


def _addrport(s, what):
    if not s:
        return None
    i = s.rfind(":")
    host, port = s[:i], s[i + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    P = _policy()
    a = P["parse_addr"](host)
    p = P["parse_port"](port)
    if i < 0 or a is None or p is None:
        raise ValueError("%s: want IP:PORT, got %r" % (what, s))
    return a, p


class _Net:
    """One layer's network guard. The policy is built on first use."""

    __slots__ = ("cfg", "policy", "socks", "socks_auth", "http", "resolve", "blocked_tls")

    def __init__(self, cfg):
        self.cfg = cfg
        self.policy = None
        self.socks = None
        # Checked now, not on first use, so that bad credentials are a
        # settings error at install time.
        self.socks_auth = _socks_auth(cfg, bool(cfg.get("socks")))
        self.http = None
        self.resolve = None
        self.blocked_tls = cfg.get("posture") == "blocked" and not cfg.get("allow_localhost")

    def get(self):
        if self.policy is None:
            c = self.cfg
            P = _policy()
            pol = P["Policy"](
                network=_str(c.get("posture"), "network.posture"),
                allow=_strs(c.get("allow"), "network.allow"),
                deny=_strs(c.get("deny"), "network.deny"),
                allow_localhost=c.get("allow_localhost") is True,
            )
            pol.learned = _learned_names
            self.socks = _addrport(_str(c.get("socks"), "network.socks"), "network.socks")
            self.http = _addrport(_str(c.get("http"), "network.http"), "network.http")
            res = {}
            rv = c.get("resolve")
            if rv is not None:
                if type(rv) is not dict:
                    raise ValueError("network.resolve: want an object")
                for name, ips in rv.items():
                    h = P["normalize"](name)
                    addrs = []
                    for ip in _strs(ips, "network.resolve"):
                        a = P["parse_addr"](ip)
                        if a is None:
                            raise ValueError("network.resolve: %r is not an address" % ip)
                        addrs.append(a)
                    res[h[1]] = addrs
            self.resolve = res
            self.policy = pol
        return self.policy


def _socks_auth(c, have_socks):
    """The RFC 1929 username and password for the SOCKS5 proxy, as bytes,
    or None. Errors never quote the values: the password is a secret."""
    user = _str(c.get("socks_user"), "network.socks_user")
    password = _str(c.get("socks_password"), "network.socks_password")
    if not user:
        if password:
            raise ValueError("network.socks_password: needs network.socks_user")
        return None
    if not have_socks:
        raise ValueError("network.socks_user: needs network.socks")
    u, p = _utf8(user), _utf8(password)
    if u is None or len(u) > 255:
        raise ValueError("network.socks_user: want 1 to 255 bytes of UTF-8")
    if p is None or len(p) > 255:
        raise ValueError("network.socks_password: want at most 255 bytes of UTF-8")
    return (u, p)


def _utf8(s):
    try:
        return str.encode(s, "utf-8", "strict")
    except UnicodeError:
        return None


def _learned_names(a):
    return _learned.get(a, ())


class _Fs:
    __slots__ = ("root", "allowed", "files")

    def __init__(self, root, allowed, files):
        self.root = root
        self.allowed = allowed
        self.files = files


def _install(event, args):
    if len(args) != 2 or type(args[0]) is not str or type(args[1]) is not list:
        return _error("hermetic.install: bad arguments")
    try:
        cfg = _parse_json(args[0])
        if type(cfg) is not dict:
            raise ValueError("settings: want an object")
        layer = _make_layer(cfg)
    except (ValueError, KeyError, TypeError, OSError) as e:
        msg = "hermetic: bad guard settings: %s" % (e.args[0] if e.args and type(e.args[0]) is str else type(e).__name__)
        return _error(msg)
    _layers.append(layer)
    if layer["seal"]:
        _sealed[0] = True
    _rebuild()
    list.append(args[1], layer["id"])
    return None


def _make_layer(cfg):
    layer = {"id": _next_id[0], "seal": cfg.get("seal") is True}
    _next_id[0] += 1
    net = cfg.get("network")
    layer["net"] = None
    if net is not None:
        if type(net) is not dict:
            raise ValueError("network: want an object")
        n = _Net(net)
        if cfg.get("validate") is True or "Policy" in _policy_ns:
            n.get()
        layer["net"] = n
    layer["subprocess"] = cfg.get("no_subprocess") is True
    if layer["subprocess"] and "_posixsubprocess" in _modules:
        _env["psp_loaded"] = True
    layer["native"] = cfg.get("block_native") is True
    layer["dynload"] = tuple(_resolve(p)[0] for p in _strs(cfg.get("dynload_dirs"), "dynload_dirs"))
    layer["trace"] = cfg.get("trace") is True
    layer["report"] = _str(cfg.get("report_file"), "report_file")
    layer["protect"] = tuple(_resolve(p)[0] for p in _strs(cfg.get("protect"), "protect"))
    root = _str(cfg.get("fs_root"), "fs_root")
    layer["fs"] = None
    if cfg.get("fs_readonly") is True or root:
        allowed = []
        files = set(("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"))
        if root:
            r = _resolve(root)[0]
            allowed.append(r)
            for p in _strs(cfg.get("read_dirs"), "read_dirs") + _strs(cfg.get("extra_read"), "extra_read"):
                allowed.append(_resolve(p)[0])
            t = _str(cfg.get("target_script"), "target_script")
            if t:
                files.add(_resolve(t)[0])
            allowed = tuple(a for a in allowed if a)
            r = r or "/"
        layer["fs"] = _Fs(root and r, allowed, frozenset(files))
    return layer


def _uninstall(event, args):
    if _sealed[0]:
        return None
    token = args[0] if len(args) == 1 else None
    if token is None:
        del _layers[:]
    elif type(token) is int:
        for i in range(len(_layers)):
            if _layers[i]["id"] == token:
                del _layers[i]
                break
    _rebuild()
    return None


def _state(event, args):
    if len(args) != 1 or type(args[0]) is not list:
        return None
    s = _S
    list.append(
        args[0],
        {
            "network": bool(s["net"]),
            "socks": any(n.cfg.get("socks") for n in s["net"]),
            "fs_readonly": bool(s["fs"]),
            "fs_root": any(f.root for f in s["fs"]),
            "no_subprocess": s["subprocess"],
            "block_native": s["native"],
            "sealed": _sealed[0],
            "trace": s["trace"],
            "layers": len(_layers),
            "uncaught": _uncaught[0],
        },
    )
    return None


def _deny_event(event, args):
    # The SOCKS client reports a refusal by the proxy.
    if len(args) != 5 or any(type(a) is not str for a in args[:4]) or type(args[4]) is not int:
        return None
    return _violation(args[0], args[1], args[2], "", (args[3], args[4], None))


_uncaught = [False]


def _find_pv(x, depth):
    t = type(x)
    if t is _PV or issubclass(t, _PV):
        return x
    eg = _env.get("eg_type")
    if eg is not None and depth < 20 and issubclass(t, eg):
        for e in _env["eg_exceptions"](x):
            v = _find_pv(e, depth + 1)
            if v is not None:
                return v
    return None


def _h_excepthook(event, args):
    """Python is about to report an uncaught exception of the main thread
    (raised whatever sys.excepthook the program installed)."""
    if len(args) < 3 or _uncaught[0]:
        return None
    v = _find_pv(args[2], 0)
    if v is None:
        return None
    _uncaught[0] = True
    d = _env["exc_dict"](v)
    guard, target = d.get("guard"), d.get("target")
    if type(guard) is str and type(target) is str:
        try:
            _write(2, ("hermetic: blocked %s: %s\n" % (guard, target)).encode("utf-8", "backslashreplace"))
        except OSError:
            pass
    return None


def _rebuild():
    net = tuple(l["net"] for l in _layers if l["net"] is not None)
    fs = tuple(l["fs"] for l in _layers if l["fs"] is not None)
    reports = []
    for l in _layers:
        if l["report"] and l["report"] not in reports:
            reports.append(l["report"])
    global _S
    _path_cache.clear()
    protect = []
    for l in _layers:
        for p in l["protect"]:
            if p and p not in protect:
                protect.append(p)
    _S = {
        "protect": tuple(protect),
        "roots": tuple((f.files, (f.root,) + f.allowed, f.root) for f in fs if f.root),
        "net": net,
        "fs": fs,
        "subprocess": any(l["subprocess"] for l in _layers),
        "native": any(l["native"] for l in _layers),
        "trace": any(l["trace"] for l in _layers),
        "reports": tuple(reports),
    }
    t = {
        "hermetic.install": _install,
        "hermetic.uninstall": _uninstall,
        "hermetic.state": _state,
        "hermetic.deny": _deny_event,
        "sys.excepthook": _h_excepthook,
    }
    if net:
        for ev in (
            "socket.__new__",
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
            "socket.getaddrinfo",
            "socket.gethostbyname",
            "socket.gethostbyaddr",
            "socket.getnameinfo",
            "hermetic.resolve",
            "hermetic.route",
            "hermetic.fromfd",
            "hermetic.tls",
        ):
            t[ev] = _NET_HANDLERS[ev]
    if fs:
        t["open"] = _h_open
        t["os.listdir"] = _h_listdir
        t["os.scandir"] = _h_listdir
        for ev in _FS_WRITE_EVENTS:
            t[ev] = _h_fs_write
        t["sqlite3.connect"] = _h_sqlite
        t["hermetic.mkfifo"] = _h_fs_write
        t["socket.bind"] = _h_bind
        if any(f.root for f in fs):
            t["socket.connect"] = _h_connect
    if _S["subprocess"]:
        for ev in _PROC_EVENTS:
            t[ev] = _h_proc
        t["import"] = _h_import
    if _S["native"]:
        for ev in _CTYPES_EVENTS:
            t[ev] = _h_ctypes
        t["sqlite3.enable_load_extension"] = _h_ctypes
        t["import"] = _h_import
    if protect and not fs:
        t["open"] = _h_open
        for ev in _FS_WRITE_EVENTS:
            t[ev] = _h_fs_write
        t["hermetic.mkfifo"] = _h_fs_write
    if _sealed[0]:
        for ev in ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"):
            t[ev] = _h_seal
        t["sys._getframe"] = _h_getframe
        t["object.__getattr__"] = _h_getattr
        t["object.__setattr__"] = _h_setattr
        t["object.__delattr__"] = _h_setattr
        t.setdefault("open", _h_open)
    # Add before removing, one key at a time, so that a guard that stays
    # on is never missing from the table, even for an instant.
    for k, v in t.items():
        _table[k] = v
    for k in list(_table):
        if k not in t:
            del _table[k]


# ------------------------------------------------------- argument help --


def _as_str(x):
    """x as an exact str (copied from a subclass without calling it), or
    None."""
    t = type(x)
    if t is str:
        return x
    if issubclass(t, str):
        return str.__getitem__(x, slice(None))
    if t is bytes or issubclass(t, bytes):
        try:
            return bytes.__getitem__(x, slice(None)).decode(_env["fsencoding"], "surrogateescape")
        except (UnicodeDecodeError, LookupError):
            return None
    return None


def _as_int(x):
    t = type(x)
    if t is int:
        return x
    if issubclass(t, int):
        return int.__index__(x)
    return None


def _as_tuple(x):
    t = type(x)
    if t is tuple:
        return x
    if issubclass(t, tuple):
        return tuple.__getitem__(x, slice(None))
    return None


def _path_of(x):
    """A path argument as text; an int (a descriptor) as itself; None when
    the object is of a type whose conversion would run a program's code."""
    t = type(x)
    if t is int:
        return x
    s = _as_str(x)
    if s is not None:
        return s
    if id(t) in _env["fspath_types"]:
        try:
            r = _quiet(_env["fspath"], x)
        except Exception:
            return None
        return _as_str(r)
    return None


# ---------------------------------------------------------- network --


def _hostport(host, port):
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


def _deny_net(guard, d):
    hint = d.hint
    a = None
    if d.addr is not None and d.reason != "invalid-host":
        a = _policy()["addr_text"](d.addr)
        if a != d.host:
            hint = "resolved to %s; %s" % (a, hint) if hint else "resolved to %s" % a
    return _violation(guard, _hostport(d.host, d.port) if d.port else d.host, d.reason, hint, (d.host, d.port, a))


def _nets():
    return tuple(n.get() for n in _S["net"])


def _decide(h, port, proxies=False):
    """Decide a normalised host in every network layer: the first denial,
    else the first layer's decision. With proxies, a layer lets through the
    proxies it was given itself (never those of another layer); None means
    every layer did so."""
    first = None
    for n in _S["net"]:
        pol = n.get()
        if proxies and h[0] != "name" and ((h, port) == n.socks or (h, port) == n.http):
            continue
        d = pol.decide_host(h, port)
        if not d.allowed:
            return d
        if first is None:
            first = d
    return first


def _oserror(e):
    """A fresh copy of an OSError raised inside the guard, so that its
    traceback holds no frame of this namespace."""
    return _oserror_new(type(e), *e.args)


def _hostname():
    h = _env.get("hostname")
    if h is None:
        h = ""
        m = _socket_mod()
        if m is not None:
            try:
                h = _quiet(m.gethostname).lower().rstrip(".")
            except OSError:
                pass
        _env["hostname"] = h
    return h


def _decide_dns(name):
    """May a name be resolved at all, whatever the port? Port-specific
    deny rules do not forbid resolution; port-specific allow rules allow it."""
    first = None
    for pol in _nets():
        d = pol.decide_host(("name", name), 0)
        if not d.allowed and d.reason == "not-allowlisted":
            if pol.allow.names and _any_port_allows(pol, name):
                d = d.copy()
                d.allowed, d.reason = True, "allowlisted"
        if not d.allowed:
            return d
        if first is None:
            first = d
    return first


def _any_port_allows(pol, name):
    i = 0
    while True:
        for r in pol.allow.names.get(name[i:], ()):
            if i > 0 or not r.wildcard:
                return True
        j = name.find(".", i)
        if j < 0:
            return False
        i = j + 1


def _check_all(d, a):
    for pol in _nets():
        d2 = pol.check_addr(d, a)
        if not d2.allowed:
            return d2
    return d


def _socks_of():
    """The network layer whose SOCKS5 proxy carries connections, or None."""
    for n in _S["net"]:
        n.get()
        if n.socks:
            return n
    return None


def _normalize(host):
    P = _policy()
    try:
        return P["normalize"](host), None
    except ValueError as e:
        return None, e.args[0] if e.args else "invalid host"


def _invalid(guard, host, port, why):
    return _violation(guard, _hostport(host, port) if port else host, "invalid-host", why, (host, port, None))


def _sock_family(sock):
    get = _env["sock_family"]
    try:
        return get(sock)
    except Exception:
        return -1


def _sockaddr_host(addr):
    """(host text or None, port or None) of an AF_INET/AF_INET6 address
    argument, copied without calling program code."""
    t = _as_tuple(addr)
    if t is None or len(t) < 2:
        return None, None
    return _as_str(t[0]), _as_int(t[1])


def _h_new(event, args):
    fam = _as_int(args[1]) if len(args) > 1 else None
    if fam in (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, -1):
        return None
    return _violation("socket.socket", "family %s" % fam, "no-network", "only AF_UNIX, AF_INET and AF_INET6 sockets are allowed")


def _check_ip_dest(guard, host, port):
    """Judge an address a socket is about to reach directly."""
    h, why = _normalize(host)
    if h is None:
        return _invalid(guard, host, port, why)
    if h[0] == "name":
        d = _decide(h, port)
        if not d.allowed:
            return _deny_net(guard, d)
        return _violation(guard, _hostport(host, port), "direct-name", "a name given to a raw socket is resolved without hermetic's checks; connect through socket.socket", (host, port, None))
    if h in _fake:
        return _violation(guard, _hostport(host, port), "not-allowlisted", "this address stands for a name and only works through socket.socket", (host, port, None))
    d = _decide(h, port, proxies=True)
    if d is not None and not d.allowed:
        return _deny_net(guard, d)
    return None


def _unix_check(guard, addr, write):
    p = _path_of(addr)
    if p is None or type(p) is int or p.startswith("\0") or p == "":
        return None
    fs = _S["fs"]
    if write and fs:
        return _violation(guard, p, "fs-readonly", "binding a unix socket creates a file")
    return _read_check(guard, p)


def _h_connect(event, args):
    sock, addr = args[0], args[1]
    fam = _sock_family(sock)
    if fam == AF_UNIX:
        if _S["fs"]:
            return _unix_check("socket.connect", addr, False)
        return None
    if not _S["net"]:
        return None
    if fam in (AF_INET, AF_INET6):
        host, port = _sockaddr_host(addr)
        if host is None or port is None:
            return _violation("socket.connect", "unreadable address", "invalid-host")
        return _check_ip_dest("socket.connect", host, port)
    if fam == AF_NETLINK:
        return None
    return _violation("socket.connect", "family %d" % fam, "no-network")


def _h_send(event, args):
    if len(args) < 2 or args[1] is None:
        return None
    fam = _sock_family(args[0])
    if fam in (AF_INET, AF_INET6):
        host, port = _sockaddr_host(args[1])
        if host is None or port is None:
            return _violation(event, "unreadable address", "invalid-host")
        return _check_ip_dest(event, host, port)
    if fam in (AF_UNIX, AF_NETLINK):
        return None
    return _violation(event, "family %d" % fam, "no-network")


def _h_bind(event, args):
    sock, addr = args[0], args[1]
    fam = _sock_family(sock)
    if fam == AF_UNIX:
        return _unix_check("socket.bind", addr, True)
    if not _S["net"] or fam not in (AF_INET, AF_INET6):
        return None
    host, port = _sockaddr_host(addr)
    if host is None:
        return _violation("socket.bind", "unreadable address", "invalid-host")
    P = _policy()
    if host == "":
        return _violation("socket.bind", "0.0.0.0:%s" % port, "non-loopback-bind", "bind to 127.0.0.1 or ::1", ("0.0.0.0", _as_int(port), None))
    h, why = _normalize(host)
    if h is None:
        return _invalid("socket.bind", host, port or 0, why)
    if h[0] == "name":
        if P["is_localhost_name"](h[1]):
            return None
    elif P["is_loopback"](h):
        return None
    return _violation("socket.bind", _hostport(host, port or 0), "non-loopback-bind", "bind to 127.0.0.1 or ::1", (host, _as_int(port), None))


def _dns_check(guard, host):
    """A raw lookup of host (the C function, not through the patched
    module): a name must be one the policy could allow."""
    if host is None:
        return None
    h, why = _normalize(host)
    if h is None:
        return _invalid(guard, host, 0, why)
    if h[0] != "name":
        return None
    if h[1] == _hostname():
        return None
    d = _decide_dns(h[1])
    if not d.allowed:
        return _deny_net(guard, d)
    return None


def _raw_host(x):
    if x is None:
        return None
    s = _as_str(x)
    if s is None:
        return "\0unreadable"
    return s


def _h_getaddrinfo(event, args):
    host = args[0] if args else None
    if host is None:
        return None
    s = _raw_host(host)
    if not s.isascii():
        # The C function would encode this with Python's IDNA 2003 codec,
        # which is not the policy's normalisation.
        return _invalid("socket.getaddrinfo", s, 0, "give the ASCII (punycode) form of the name")
    return _dns_check("socket.getaddrinfo", s)


def _h_gethostbyname(event, args):
    s = _raw_host(args[0] if args else None)
    if s is not None and not s.isascii():
        return _invalid(event, s, 0, "give the ASCII (punycode) form of the name")
    return _dns_check(event, s)


def _h_gethostbyaddr(event, args):
    s = _raw_host(args[0] if args else None)
    if s is None:
        return None
    if not s.isascii():
        return _invalid(event, s, 0, "give the ASCII (punycode) form of the name")
    return _reverse_check(event, s)


def _reverse_check(guard, s):
    h, why = _normalize(s)
    if h is None:
        return _invalid(guard, s, 0, why)
    if h[0] == "name":
        if h[1] == _hostname() or h[1] == "localhost":
            return None
        return _dns_check(guard, s)
    P = _policy()
    if P["is_loopback"](h):
        return None
    d = _decide(h, 0)
    if not d.allowed:
        return _deny_net(guard, d)
    return None


def _h_getnameinfo(event, args):
    t = _as_tuple(args[0]) if args else None
    if t is None or not t:
        return None
    s = _as_str(t[0])
    if s is None:
        return _violation(event, "unreadable address", "invalid-host")
    return _reverse_check(event, s)


def _h_fromfd(event, args):
    fam = _as_int(args[0]) if args else None
    if fam in (AF_INET, AF_INET6):
        return _violation("socket.fromfd", "family %d" % fam, "no-network", "internet sockets cannot be adopted from descriptors under the network guard")
    return None


def _h_tls(event, args):
    for n in _S["net"]:
        if n.blocked_tls:
            return _violation("ssl.wrap_socket", "TLS", "no-network")
    return None


# Resolution and routing for the patched socket module.


def _resolve_name(name, port, family, stype, proto, flags):
    """Resolve an allowed name: static answers first, else the C resolver.
    Returns a list of getaddrinfo tuples."""
    P = _policy()
    static = None
    for n in _S["net"]:
        n.get()
        if name in n.resolve:
            static = n.resolve[name]
            break
    if static is not None:
        out = []
        for a in static:
            if family == AF_INET and a[0] != 4 or family == AF_INET6 and a[0] != 6:
                continue
            fam = AF_INET if a[0] == 4 else AF_INET6
            sa = (P["addr_text"](a), port or 0) if fam == AF_INET else (P["addr_text"](a), port or 0, 0, 0)
            for st, pr in _types(stype, proto):
                out.append((fam, st, pr, "", sa))
        return out
    m = _socket_mod()
    return list(_quiet(m.getaddrinfo, name, port, family, stype, proto, flags))


def _types(stype, proto):
    if stype:
        return ((stype, proto or (6 if stype == 1 else 17 if stype == 2 else 0)),)
    return ((1, 6), (2, 17), (3, 0))


def _fake_addr(name, version):
    k = (name, version)
    a = _fake_by_name.get(k)
    if a is None:
        n = len(_fake_by_name) + 1
        if n >= 0x1FFFF:
            raise ValueError("too many names")
        if version == 4:
            a = (4, 0xC6120000 + n)  # 198.18.0.0/15
        else:
            a = (6, (0x0100 << 112) | n)  # 100::/64, discard-only
        _fake_by_name[k] = a
        _fake[a] = name
    return a


def _h_resolve(event, args):
    """hermetic.resolve(host, port, family, type, proto, flags, out)."""
    if len(args) != 7 or type(args[6]) is not list:
        return None
    host = _raw_host(args[0])
    out = args[6]
    port = args[1]
    iport = _as_int(port)
    if port is None:
        sport = None
    elif iport is not None:
        sport = iport
    else:
        sport = _as_str(port)
        if sport is None:
            return _violation("socket.getaddrinfo", "unreadable port", "invalid-host")
    family = _as_int(args[2]) or 0
    stype = _as_int(args[3]) or 0
    proto = _as_int(args[4]) or 0
    flags = _as_int(args[5]) or 0
    m = _socket_mod()
    if host is None:
        try:
            list.append(out, list(_quiet(m.getaddrinfo, None, sport, family, stype, proto, flags)))
        except OSError as e:
            return _oserror(e)
        return None
    h, why = _normalize(host)
    if h is None:
        return _invalid("socket.getaddrinfo", host, 0, why)
    P = _policy()
    if h[0] != "name":
        try:
            list.append(out, list(_quiet(m.getaddrinfo, P["addr_text"](h), sport, family, stype, proto, flags)))
        except OSError as e:
            return _oserror(e)
        return None
    name = h[1]
    nport = sport if type(sport) is int else None
    if type(sport) is str:
        try:
            nport = int(sport) if sport.isdigit() else _quiet(m.getservbyname, sport)
        except (OSError, ValueError):
            nport = None
    d = _decide(h, nport) if nport else _decide_dns(name)
    if not d.allowed:
        return _deny_net("socket.getaddrinfo", d)
    socks = _socks_of()
    if socks is not None and not P["is_localhost_name"](name):
        res = []
        for version, fam in ((4, AF_INET), (6, AF_INET6)):
            if family not in (0, fam):
                continue
            a = _fake_addr(name, version)
            sa = (P["addr_text"](a), nport or 0) if version == 4 else (P["addr_text"](a), nport or 0, 0, 0)
            for st, pr in _types(stype, proto):
                res.append((fam, st, pr, name if flags & 2 else "", sa))
        list.append(out, res)
        return None
    try:
        res = _resolve_name(name, sport, family, stype, proto, flags)
    except OSError as e:
        return _oserror(e)
    kept = []
    first_denied = None
    for r in res:
        a = P["parse_addr"](_as_str(r[4][0]).split("%")[0])
        if a is None:
            continue
        d2 = _check_all(d, a)
        if not d2.allowed:
            if first_denied is None:
                first_denied = d2
            continue
        _learn(a, name)
        kept.append(r)
    if not kept:
        if first_denied is not None:
            return _deny_net("socket.getaddrinfo", first_denied)
        return None
    list.append(out, kept)
    return None


def _learn(a, name):
    names = _learned.get(a, ())
    if name in names:
        return
    if len(_learned) >= 4096:
        _learned.clear()
    _learned[a] = (names + (name,))[-4:]


def _h_route(event, args):
    """hermetic.route(family, type, address, out): how a connect or sendto
    of a patched socket must go. Appends ("direct", sockaddr) or
    ("socks", proxy_host, proxy_port, dest_host, dest_port, auth), auth
    being None or the (username, password) bytes for RFC 1929."""
    if len(args) not in (4, 5) or type(args[3]) is not list:
        return None
    fam, stype, addr, out = _as_int(args[0]), _as_int(args[1]), args[2], args[3]
    t = _as_tuple(addr)
    if t is None or len(t) < 2:
        return None
    host, port = _as_str(t[0]), _as_int(t[1])
    if host is None or port is None:
        return None
    guard = "socket.connect" if stype == SOCK_STREAM else "socket.sendto"
    if len(args) == 5 and args[4] == "socket.sendmsg":
        guard = "socket.sendmsg"
    h, why = _normalize(host)
    if h is None:
        return _invalid(guard, host, port, why)
    P = _policy()
    socks = _socks_of() if stype == SOCK_STREAM else None
    name = _fake.get(h)
    if name is not None:
        h = ("name", name)
    d = _decide(h, port, proxies=True)
    if d is not None and not d.allowed:
        return _deny_net(guard, d)
    if h[0] != "name":
        if d is None or socks is None or P["is_loopback"](h):
            list.append(out, ("direct", _sockaddr(fam, h, port, t)))
        else:
            list.append(out, ("socks", P["addr_text"](socks.socks[0]), socks.socks[1], P["addr_text"](h), port, socks.socks_auth))
        return None
    if socks is not None and not P["is_localhost_name"](h[1]):
        list.append(out, ("socks", P["addr_text"](socks.socks[0]), socks.socks[1], h[1], port, socks.socks_auth))
        return None
    try:
        res = _resolve_name(h[1], port, AF_INET if fam == AF_INET else 0, stype or SOCK_STREAM, 0, 0)
    except OSError as e:
        return _oserror(e)
    first_denied = None
    for r in res:
        a = P["parse_addr"](_as_str(r[4][0]).split("%")[0])
        if a is None or (fam == AF_INET and a[0] != 4):
            continue
        d2 = _check_all(d, a)
        if not d2.allowed:
            if first_denied is None:
                first_denied = d2
            continue
        _learn(a, h[1])
        list.append(out, ("direct", _sockaddr(fam, a, port, t)))
        return None
    if first_denied is not None:
        return _deny_net(guard, first_denied)
    return _oserror_new(_env["gaierror"] or OSError, -2, "Name or service not known")


def _sockaddr(fam, a, port, orig):
    P = _policy()
    if fam == AF_INET6:
        text = P["addr_text"](a) if a[0] == 6 else "::ffff:" + P["addr_text"](a)
        flow = _as_int(orig[2]) if len(orig) > 2 else 0
        scope = _as_int(orig[3]) if len(orig) > 3 else 0
        return (text, port, flow or 0, scope or 0)
    return (P["addr_text"](a), port)


_NET_HANDLERS = {
    "socket.__new__": _h_new,
    "socket.connect": _h_connect,
    "socket.bind": _h_bind,
    "socket.sendto": _h_send,
    "socket.sendmsg": _h_send,
    "socket.getaddrinfo": _h_getaddrinfo,
    "socket.gethostbyname": _h_gethostbyname,
    "socket.gethostbyaddr": _h_gethostbyaddr,
    "socket.getnameinfo": _h_getnameinfo,
    "hermetic.resolve": _h_resolve,
    "hermetic.route": _h_route,
    "hermetic.fromfd": _h_fromfd,
    "hermetic.tls": _h_tls,
}


# -------------------------------------------------------- filesystem --


def _init_proc_fd():
    global _proc_fd
    try:
        fd = _quiet(_open, "/", _O_PATH | _O_CLOEXEC)
        try:
            _proc_fd = _readlink("/proc/self/fd/%d" % fd) == "/"
        finally:
            _close(fd)
    except (OSError, ValueError, TypeError):
        _proc_fd = False


def _abspath(p):
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    parts = []
    for c in p.split("/"):
        if c == "" or c == ".":
            continue
        if c == "..":
            if parts:
                parts.pop()
            continue
        parts.append(c)
    return "/" + "/".join(parts)


def _resolve(p):
    """(real path, is a directory) of p, following every symlink. A path
    that does not exist resolves through its nearest existing parent."""
    if not p:
        return "", False
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    if _proc_fd:
        try:
            fd = _quiet(_open, p, _O_PATH | _O_CLOEXEC)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                real = _readlink("/proc/self/fd/%d" % fd)
                isdir = (_fstat(fd).st_mode & _S_IFMT) == _S_IFDIR
            finally:
                _close(fd)
            return real, isdir
        head, _, tail = p.rstrip("/").rpartition("/")
        if tail in ("", ".", ".."):
            return _abspath(p), False
        parent = _resolve(head or "/")[0]
        return (parent.rstrip("/") + "/" + tail), False
    return _walk_realpath(p)


def _walk_realpath(p):
    """realpath without /proc: resolve one component at a time."""
    lstat = _posix.lstat
    done = ""
    todo = [c for c in p.split("/") if c]
    seen = 0
    isdir = True
    while todo:
        c = todo.pop(0)
        if c == ".":
            continue
        if c == "..":
            done = done[: done.rfind("/")]
            continue
        nxt = done + "/" + c
        try:
            st = lstat(nxt)
        except OSError:
            return nxt + ("/" + "/".join(todo) if todo else ""), False
        mode = st.st_mode & _S_IFMT
        if mode == 0o120000:
            seen += 1
            if seen > 40:
                return nxt, False
            target = _readlink(nxt)
            if target.startswith("/"):
                done = ""
            todo = [x for x in target.split("/") if x] + todo
            continue
        isdir = mode == _S_IFDIR
        done = nxt
    return done or "/", isdir


def _inside(real, prefixes):
    for pre in prefixes:
        if real == pre or pre == "/" or real.startswith(pre + "/"):
            return True
    return False


def _read_check(guard, p, os_open=False):
    """Reads are confined to each layer's root (and the exceptions)."""
    if type(p) is int or p in _path_cache:
        return None
    roots = _S["roots"]
    if not roots:
        return None
    real, isdir = _resolve(p)
    if os_open and isdir:
        return _violation(guard, p, "outside-root", "directory descriptors are refused under --fs-readonly=ROOT")
    for files, prefixes, root in roots:
        if real in files or _inside(real, prefixes):
            continue
        return _violation(guard, p, "outside-root", "reads are confined to %s" % root)
    if p.startswith("/") and not isdir:
        # Absolute paths of files found inside every root; emptied whenever the
        # guards change. (A path is checked, then opened: a symlink that
        # another process swaps in between is a race no cache widens
        # much; --no-subprocess keeps the program from running one.)
        if len(_path_cache) >= 4096:
            _path_cache.clear()
        _path_cache[p] = real
    return None


def _is_write(mode, flags):
    if type(mode) is str:
        w = _MODE_WRITES.get(mode)
        if w is None:
            w = False
            for c in "wax+":
                if c in mode:
                    w = True
            if len(_MODE_WRITES) < 64:
                _MODE_WRITES[mode] = w
        if w:
            return True
    if type(flags) is int and flags & _WRITE_FLAGS:
        return True
    return False


_MODE_WRITES = {}


def _h_open(event, args):
    path = args[0] if args else None
    if type(path) is int:
        return None
    mode = args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    write = _is_write(mode, flags)
    fs = _S["fs"]
    if not write and not fs:
        return None
    p = _path_of(path)
    if write:
        if fs:
            if p == "/dev/null":
                return None
            if type(p) is str and p.endswith(".pyc") and "__pycache__" in p:
                # importlib tolerates OSError here, not other errors.
                return _oserror_new(PermissionError, 13, "hermetic: bytecode caches are not written under --fs-readonly")
            return _violation("open", p if p is not None else "<%s>" % type(path).__name__, "fs-readonly")
        v = _protected("open", p)
        if v is not None:
            return v
        if _sealed[0] and p is not None:
            # Through any spelling or link: process memory holds the guards.
            real = _resolve(p)[0]
            if real.startswith("/proc/") and real.endswith("/mem"):
                return _violation("open", p, "sealed", "process memory cannot be written once sealed")
        return None
    if p is None:
        return _violation("open", "<%s>" % type(path).__name__, "outside-root", "pass the path as str under --fs-readonly=ROOT")
    return _read_check("open", p, mode is None)


def _h_listdir(event, args):
    """A directory outside the root cannot be listed. The refusal is an
    OSError (still traced and reported): the import system lists every
    sys.path entry and tolerates only OSError from it, as do os.walk and
    glob."""
    p = _path_of(args[0]) if args and args[0] is not None else "."
    if p is None:
        return _violation(event, "<path>", "outside-root", "pass the path as str under --fs-readonly=ROOT")
    v = _read_check(event, p)
    if v is None:
        return None
    return _oserror_new(PermissionError, 13, "hermetic: " + v.args[0][len("hermetic "):], p)


_FS_WRITE_EVENTS = (
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.utime",
    "os.symlink",
    "os.link",
    "os.truncate",
    "os.setxattr",
    "os.removexattr",
    "os.chflags",
    "os.lchflags",
    "os.lchmod",
    "shutil.chown",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copytree",
    "shutil.make_archive",
    "shutil.unpack_archive",
)


def _h_fs_write(event, args):
    guard = event if event != "hermetic.mkfifo" else "os.mkfifo"
    if not _S["fs"]:
        # Only hermetic's own files are guarded (source and destination).
        for x in args[:2]:
            v = _protected(guard, _path_of(x))
            if v is not None:
                return v
        return None
    p = _path_of(args[0]) if args else None
    if p is None:
        p = "<path>"
    elif type(p) is int:
        p = "fd %d" % p
    return _violation(guard, p, "fs-readonly")


def _protected(guard, p):
    """Hermetic's own files (the shim, its report, its code cache) cannot
    be changed by the program, even when writes are allowed: a later
    Python of this run, or of a later run, loads them."""
    prot = _S["protect"]
    if not prot or type(p) is not str:
        return None
    real = _resolve(p)[0]
    if not _inside(real, prot):
        return None
    if p.endswith(".pyc") and "__pycache__" in p:
        # The import system's own bytecode write; it tolerates OSError.
        return _oserror_new(PermissionError, 13, "hermetic: bytecode is not written into hermetic's own directories")
    return _violation(guard, p, "protected", "hermetic's own files cannot be changed")


def _h_sqlite(event, args):
    db = _path_of(args[0]) if args else None
    if db in (":memory:", ""):
        return None
    if type(db) is str and db.startswith("file:") and ("mode=ro" in db or "mode=memory" in db or "immutable=1" in db):
        if "mode=memory" in db:
            return None
        return _read_check("sqlite3.connect", db[5:].split("?")[0])
    return _violation("sqlite3.connect", db if type(db) is str else "<database>", "fs-readonly", "open it read-only: sqlite3.connect('file:PATH?mode=ro', uri=True)")


# ---------------------------------------------- subprocess and imports --

_PROC_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "os.startfile",
    "_winapi.CreateProcess",
    "hermetic.fork_exec",
)


def _first_word(x):
    s = _as_str(x)
    if s is None:
        return None
    s = s.strip()
    return s.split()[0] if s else s


def _h_proc(event, args):
    exe = None
    if event == "subprocess.Popen" and args:
        exe = _path_of(args[0])
        if exe is None and len(args) > 1:
            a = args[1]
            lst = _as_tuple(a)
            if lst is None and type(a) is list:
                lst = a
            if lst:
                exe = _path_of(lst[0])
            else:
                exe = _first_word(a)
    elif event == "os.system" and args:
        exe = _first_word(args[0])
    elif event in ("os.exec", "os.posix_spawn", "os.spawn", "os.startfile") and args:
        exe = _path_of(args[0])
    elif event == "hermetic.fork_exec":
        event = "_posixsubprocess.fork_exec"
    if type(exe) is not str:
        exe = event.split(".")[-1]
    return _violation(event, exe, "no-subprocess")


def _h_import(event, args):
    if not args:
        return None
    name = _as_str(args[0])
    filename = args[1] if len(args) > 1 else None
    if name is None:
        return _violation("import", "<module>", "block-native")
    s = _S
    if s["subprocess"] and (name == "_posixsubprocess" or name.endswith("._posixsubprocess")) and _env.get("psp_loaded"):
        return _violation("import", name, "no-subprocess", "_posixsubprocess cannot be loaded again")
    if not s["native"]:
        return None
    top = name.split(".")[0]
    if top in ("ctypes", "_ctypes", "cffi", "_cffi_backend"):
        return _violation("import", name, "block-native")
    if filename is None:
        return None
    f = _as_str(filename)
    if f is None:
        return _violation("import", name, "block-native")
    real = _resolve(f)[0]
    for l in _layers:
        if l["native"] and not _inside(real, l["dynload"]):
            break
    else:
        return None
    return _violation("import", name, "block-native", "extension modules from outside the standard library are refused")


_CTYPES_EVENTS = (
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.addressof",
    "ctypes.call_function",
    "ctypes.cdata",
    "ctypes.cdata/buffer",
    "ctypes.create_string_buffer",
    "ctypes.create_unicode_buffer",
    "ctypes.get_errno",
    "ctypes.set_errno",
    "ctypes.get_last_error",
    "ctypes.set_last_error",
    "ctypes.string_at",
    "ctypes.wstring_at",
    "ctypes.PyObj_FromPtr",
    "ctypes.set_exception",
    "ctypes.seh_exception",
)


def _h_ctypes(event, args):
    return _violation(event, event, "block-native")


# ------------------------------------------------------------- seal --


def _h_seal(event, args):
    return _violation(event, event, "sealed", "introspection that could reach the guards is refused once sealed")


def _h_getframe(event, args):
    if args:
        try:
            g = _env["frame_globals"](args[0])
        except Exception:
            return None
        if id(g) in _private_ids:
            return _violation("sys._getframe", "guard frame", "sealed")
    return None


def _h_getattr(event, args):
    if len(args) < 2 or _as_str(args[1]) != "tb_frame":
        return None
    try:
        frame = _quiet(_env["tb_frame"], args[0])
        g = _env["frame_globals"](frame)
    except Exception:
        return None
    if id(g) in _private_ids:
        return _violation("traceback.tb_frame", "guard frame", "sealed")
    return None


def _h_setattr(event, args):
    if args and id(args[0]) in _env["protected_ids"]:
        name = _as_str(args[1]) if len(args) > 1 else None
        return _violation(event, "%s.%s" % (_env["protected_ids"][id(args[0])], name), "sealed")
    return None


_init_proc_fd()
_rebuild()
