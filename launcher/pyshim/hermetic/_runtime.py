"""Process set-up: builds the guard engine once, adds the audit hook, and
puts around it what the hook alone cannot do (patches for better errors and
routing, the exit status of uncaught violations).

Nothing here decides: the engine (_core.py, run in a private namespace)
does, and this module talks to it only through audit events. Rebinding
anything in this module can lose a patch's nicety, never a guard.
"""

import sys

# Bound once: a program that empties sys.modules of hermetic must not
# change which class the exit handling recognises.
from hermetic import PolicyViolation as _PV

_audit = sys.audit
_here = __file__.rpartition("/")[0] or "."

_OUTER = """
def hook(event, args, _get=None, _run=None):
    h = _get(event)
    if h is None:
        return
    err = _run(h, event, args)
    if err is None:
        return
    del _get, _run, h
    raise err
"""

# Process-wide set-up state of the public side. It holds no guard state:
# losing it re-runs set-up steps, which only add.
_done = {"core": False, "exit": False, "finder": None, "patched": set()}
_saved = {}  # originals replaced by stubs, kept only while not sealed
_net = None  # hermetic._net, bound while the package is intact


def _read(name):
    path = _here + "/" + name
    with open(path, "rb") as f:
        return f.read().decode("utf-8"), path


def _pycache_code(path, raw=False):
    """Compiled code for one of the engine's sources, kept beside the
    package like importlib's own bytecode (library use). None when there is
    no cache to use: the engine then compiles on first use."""
    import _imp
    import marshal
    import os

    d = _here + "/__pycache__"
    try:
        st = os.stat(d)
    except OSError:
        try:
            os.mkdir(d, 0o755)
            st = os.stat(d)
        except OSError:
            return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    with open(path, "rb") as f:
        src = f.read()
    magic = sys.modules["_frozen_importlib_external"]._RAW_MAGIC_NUMBER
    name = "%s/%s.%d.%s" % (d, path.rpartition("/")[2], magic, _imp.source_hash(magic, src).hex())
    try:
        with open(name, "rb") as f:
            return marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = compile(src, path, "exec", dont_inherit=True)
    if not sys.dont_write_bytecode:
        tmp = "%s.%d.tmp" % (name, os.getpid())
        try:
            with open(tmp, "wb") as f:
                f.write(marshal.dumps(code))
            os.replace(tmp, name)
        except OSError:
            pass
    return code


# types.SimpleNamespace without importing types: a C type whose attributes
# are plain instance data.
_Namespace = type(sys.implementation)


def ensure_core(code=None):
    """Build the engine and add the audit hook, once per process. code, if
    given, returns the compiled code of a source file (from a cache)."""
    if _done["core"]:
        return
    import builtins
    import marshal
    import posix
    import _socket
    import _thread
    import time
    import unicodedata
    from hermetic import PolicyViolation

    if code is None and _done.get("library"):
        code = _pycache_code
    sources = {}
    for k in ("core", "policy", "idna"):
        path = _here + "/_" + k + ".py"
        # The policy and IDNA code may stay marshalled until a network
        # decision needs them.
        c = code(path, k != "core") if code is not None else None
        if c is None:
            c = _read("_" + k + ".py")[0]
            if k == "core":
                c = compile(c, path, "exec", dont_inherit=True)
        sources[k] = c
        sources[k + "_file"] = path
    try:
        raise ValueError
    except ValueError:
        tb = sys.exc_info()[2]
    frame_type = type(sys._getframe())
    env = {
        "fsencoding": sys.getfilesystemencoding(),
        # Only os.DirEntry, whose __fspath__ is C code that no program
        # can replace, is turned into a path; pathlib's is Python code.
        "fspath": posix.fspath,
        "fspath_types": {id(posix.DirEntry)},
        "protected_ids": {id(PolicyViolation): "PolicyViolation"},
        "frame_globals": frame_type.f_globals.__get__,
        "tb_frame": type(tb).tb_frame.__get__,
        "gaierror": _socket.gaierror,
        "sock_family": _socket.socket.family.__get__,
        # Captured now: the engine never looks a module up in sys.modules,
        # where a program could have planted its own.
        "socket": _Namespace(
            getaddrinfo=_socket.getaddrinfo,
            getservbyname=_socket.getservbyname,
            gethostname=_socket.gethostname,
        ),
        "unicodedata": _Namespace(
            normalize=unicodedata.normalize,
            category=unicodedata.category,
            bidirectional=unicodedata.bidirectional,
            combining=unicodedata.combining,
        ),
        "marshal_loads": marshal.loads,
    }
    del tb
    # The engine fills in a violation through BaseException's own
    # descriptors: attributes a program added to PolicyViolation (a class
    # it can change without any audit event) would run its code inside
    # the hook.
    env["exc_args_set"] = BaseException.__dict__["args"].__set__
    env["exc_dict"] = BaseException.__dict__["__dict__"].__get__
    eg = getattr(builtins, "BaseExceptionGroup", None)
    if eg is not None:
        env["eg_type"] = eg
        env["eg_exceptions"] = eg.__dict__["exceptions"].__get__
    bcopy = dict(builtins.__dict__)
    ns = {
        "__builtins__": bcopy,
        "__name__": "hermetic._core[private]",
        "_builtins": bcopy,
        "_PV": PolicyViolation,
        "_exc_new": BaseException.__new__,
        "_oserror_new": OSError.__new__,
        "_posix": posix,
        "_get_ident": _thread.get_ident,
        "_time": time.time,
        "_modules": sys.modules,
        "_env": env,
        "_sources": sources,
    }
    exec(sources["core"], ns)
    ns["_private_ids"] = frozenset((id(ns), id(ns["_policy_ns"]), id(ns["_idna_ns"])))
    outer = {"__builtins__": {}}
    exec(compile(_OUTER, "<hermetic guard>", "exec"), outer)
    hook = outer.pop("hook")
    hook.__defaults__ = (ns["_table"].get, ns["_run"])
    del ns, outer
    sys.addaudithook(hook)
    _done["core"] = True


def _read_dirs():
    """Where reads stay allowed under --fs-readonly=ROOT: the interpreter's
    installation, the environment's site-packages and the shim itself."""
    dirs = [sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix]
    site = sys.modules.get("site")
    if site is not None:
        try:
            dirs.extend(site.getsitepackages())
        except Exception:
            pass
        try:
            if site.ENABLE_USER_SITE:
                dirs.append(site.getusersitepackages())
        except Exception:
            pass
    dirs.append(_here.rpartition("/")[0] or "/")
    out = []
    for d in dirs:
        if d and d not in out:
            out.append(d)
    return out


def _dynload_dirs():
    import os

    std = os.path.dirname(os.__file__)
    v = "python%d.%d" % sys.version_info[:2]
    cands = [
        os.path.join(std, "lib-dynload"),
        os.path.join(sys.base_exec_prefix, getattr(sys, "platlibdir", "lib"), v, "lib-dynload"),
        os.path.join(sys.base_exec_prefix, "lib", v, "lib-dynload"),
    ]
    out = []
    for c in cands:
        if c not in out:
            out.append(c)
    return out


def install(settings_json, code=None):
    """Add one layer of guards; returns its token."""
    ensure_core(code)
    # Facts about this interpreter that the guards trust are read here, by
    # the caller that installs them, and travel with the layer.
    if '"fs_root"' in settings_json:
        settings_json = _add_key(settings_json, "read_dirs", _read_dirs())
    if '"block_native"' in settings_json:
        settings_json = _add_key(settings_json, "dynload_dirs", _dynload_dirs())
    out = []
    _audit("hermetic.install", settings_json, out)
    if not out:
        raise RuntimeError("hermetic: the guard engine did not answer")
    _after_change()
    return out[0]


def uninstall(token=None):
    _audit("hermetic.uninstall", token) if token is not None else _audit("hermetic.uninstall")
    _after_change()


def state():
    out = []
    if _done["core"]:
        _audit("hermetic.state", out)
    return out[0] if out else {}


def _after_change():
    """Bring the patches in line with the guards now on."""
    st = state()
    _exit_handling()
    if st.get("network"):
        global _net
        if _net is None:
            from hermetic import _net
        _on_import("socket", _patch_socket)
        _on_import("ssl", _patch_ssl)
    if st.get("no_subprocess"):
        _stub_fork_exec()
    else:
        _restore("fork_exec")
    if st.get("fs_readonly"):
        sys.dont_write_bytecode = True
        _stub_mkfifo()
    else:
        _restore("mkfifo")
    if st.get("sealed"):
        _saved.clear()
        _passthrough.clear()


# --------------------------------------------------- post-import hooks --


class _Loader:
    """Wraps a module's loader to patch the module right after it runs."""

    def __init__(self, loader, fn):
        self._loader = loader
        self._fn = fn

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._fn(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder:
    """A meta path finder that only watches for the modules hermetic patches."""

    def __init__(self):
        self.hooks = {}

    def find_spec(self, name, path=None, target=None):
        fn = self.hooks.get(name)
        if fn is None:
            return None
        for f in sys.meta_path:
            if f is self:
                continue
            find = getattr(f, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.hooks[name]
        spec.loader = _Loader(spec.loader, fn)
        return spec

    def invalidate_caches(self):
        pass


def _on_import(name, fn):
    key = (name, fn.__name__)
    if key in _done["patched"]:
        return
    _done["patched"].add(key)
    mod = sys.modules.get(name)
    if mod is not None:
        fn(mod)
        return
    f = _done["finder"]
    if f is None:
        f = _done["finder"] = _Finder()
        sys.meta_path.insert(0, f)
    f.hooks[name] = fn


def _patch_socket(mod):
    _net.patch_socket(mod)


def _patch_ssl(mod):
    _net.patch_ssl(mod)


# --------------------------------------------------------------- stubs --


def _violation(guard, target, reason):
    return _PV("hermetic blocked %s %s: %s" % (guard, target, reason), guard, target, reason)


# The real fork_exec, for stubs that outlive the guard (subprocess keeps
# its own reference); dropped once sealed, when the guard cannot go away.
_passthrough = {}


def _fork_exec_stub(*args, **kwargs):
    _audit("hermetic.fork_exec")
    f = _passthrough.get("fork_exec")
    if f is None:
        raise _violation("_posixsubprocess.fork_exec", "fork_exec", "no-subprocess")
    return f(*args, **kwargs)


def _stub_fork_exec():
    """_posixsubprocess.fork_exec raises no audit event of its own: the
    stub raises one. subprocess keeps a reference of its own (3.11+)."""
    import _posixsubprocess

    sealed = state().get("sealed")
    orig = _posixsubprocess.fork_exec
    if orig is not _fork_exec_stub:
        if not sealed:
            _saved["fork_exec"] = [(_posixsubprocess, "fork_exec", orig)]
            _passthrough["fork_exec"] = orig
        _posixsubprocess.fork_exec = _fork_exec_stub
    sp = sys.modules.get("subprocess")
    f = getattr(sp, "_fork_exec", None) if sp is not None else None
    if f is not None and f is not _fork_exec_stub and type(f) is type(len):
        if not sealed:
            _saved.setdefault("fork_exec", []).append((sp, "_fork_exec", f))
        sp._fork_exec = _fork_exec_stub


def _mkfifo_stub(path, *args, **kwargs):
    _audit("hermetic.mkfifo", path)
    raise _violation("os.mkfifo", str(path), "fs-readonly")


def _stub_mkfifo():
    import os
    import posix

    sealed = state().get("sealed")
    for mod in (os, posix):
        for name in ("mkfifo", "mknod"):
            f = getattr(mod, name, None)
            if f is None or f is _mkfifo_stub:
                continue
            if not sealed:
                _saved.setdefault("mkfifo", []).append((mod, name, f))
            setattr(mod, name, _mkfifo_stub)


def _restore(key):
    v = _saved.pop(key, None)
    if v is None:
        return
    for mod, name, f in v if type(v) is list else [v]:
        setattr(mod, name, f)


# -------------------------------------------------------- exit status --


def find_violation(exc, _depth=0):
    """The PolicyViolation an uncaught exception is, or holds in an
    exception group."""
    if isinstance(exc, _PV):
        return exc
    subs = getattr(exc, "exceptions", None) if _depth < 20 else None
    if isinstance(subs, tuple):
        for e in subs:
            v = find_violation(e, _depth + 1)
            if v is not None:
                return v
    return None


def _say(v):
    line = "hermetic: blocked %s: %s\n" % (v.guard, v.target)
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except Exception:
        import os

        os.write(2, line.encode("utf-8", "backslashreplace"))


def _flush():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


def _end_now(v):
    import os

    _say(v)
    _flush()
    os._exit(2)


def _exit_handling():
    """An uncaught violation in the main thread is seen by the engine
    through the sys.excepthook audit event, which Python raises whatever
    hook the program has put in place: the engine writes the one line and
    remembers it, and the exit handler below ends the process with status
    2. The hook here only keeps the default traceback out of the way."""
    if _done["exit"]:
        return
    _done["exit"] = True
    import atexit

    # Registered first, so it runs last: the process ends with status 2
    # after every other exit handler had its turn.
    atexit.register(_at_exit)
    prev = sys.excepthook

    def excepthook(t, v, tb, _prev=prev):
        if find_violation(v) is None or state().get("trace"):
            return _prev(t, v, tb)

    sys.excepthook = excepthook
    prev_unraisable = sys.unraisablehook

    def unraisablehook(u, _prev=prev_unraisable):
        pv = find_violation(u.exc_value)
        if pv is None:
            return _prev(u)
        _end_now(pv)

    sys.unraisablehook = unraisablehook
    _on_import("threading", _patch_threading)
    _on_import("asyncio.base_events", _patch_asyncio)


def _at_exit():
    if state().get("uncaught"):
        _flush()
        import os

        os._exit(2)


def _patch_threading(mod):
    prev = mod.excepthook

    def excepthook(args, _prev=prev):
        pv = find_violation(args.exc_value)
        if pv is None:
            return _prev(args)
        _end_now(pv)

    mod.excepthook = excepthook


def _patch_asyncio(mod):
    loop = mod.BaseEventLoop
    prev = loop.default_exception_handler

    def default_exception_handler(self, context, _prev=prev):
        pv = find_violation(context.get("exception"))
        if pv is None:
            return _prev(self, context)
        _end_now(pv)

    loop.default_exception_handler = default_exception_handler


# --------------------------------------------------------- launcher boot --


def boot(raw, extra_read=None, code=None, protect=None):
    """Install the guards a launcher asked for (the HERMETIC_SHIM value).
    code, if given, loads compiled code from the launcher's cache; protect
    lists hermetic's own directories, which the program may not change."""
    if extra_read:
        raw = _add_key(raw, "extra_read", extra_read)
    if protect:
        raw = _add_key(raw, "protect", protect)
    if '"network"' in raw:
        import _socket  # noqa: F401  (the engine resolves with it)
        import unicodedata  # noqa: F401  (and normalises names with it)

        # Loaded before any guard is on, so that its cached code can be
        # read (a root) and written (hermetic's files are protected).
        global _net
        from hermetic import _net
    if '"no_subprocess"' in raw:
        import _posixsubprocess  # noqa: F401
    install(raw, code)


def _json_str(s):
    out = ['"']
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _add_key(raw, key, paths):
    # The settings are a JSON object; adding a key needs no parser. A key
    # given twice is read last-wins by the engine, so the value added here
    # is the one that counts.
    body = raw.strip()
    if not body.startswith("{") or not body.endswith("}"):
        return raw
    items = ",".join(_json_str(p) for p in paths)
    inner = body[1:-1].strip()
    return "{" + inner + ("," if inner else "") + '"%s":[' % key + items + "]}"
