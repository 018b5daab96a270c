"""hermetic's bootstrap: installs the Python guards a hermetic launcher asked
for (HERMETIC_SHIM), then runs the sitecustomize this one shadows.

Compiling the guards costs more than the rest of start-up, so when the
settings name a cache_dir (owned by this user, writable by no one else) the
compiled code is kept there between runs, keyed by the interpreter's magic
number and a hash of the source: a changed source is never run from a stale
cache.
"""

import os as _os
import sys as _sys


def _shadowed():
    """The spec of the next sitecustomize on sys.path after this one's
    directory, or None. Another hermetic shim (this directory listed twice,
    or a hermetic run inside another) is passed over: chaining to it would
    run the guards' set-up again, or this file forever."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = []
    seen = False
    for p in _sys.path:
        if seen:
            rest.append(p)
        elif _os.path.abspath(p or ".") == here:
            seen = True
    finder = None
    for f in _sys.meta_path:
        if getattr(f, "__name__", "") == "PathFinder":
            finder = f
    if finder is None:
        return None
    for _ in range(len(rest)):
        try:
            spec = finder.find_spec("sitecustomize", rest)
        except Exception:
            return None
        if spec is None or not spec.origin:
            return spec
        d = _os.path.dirname(spec.origin)
        if not _os.path.isfile(_os.path.join(d, "hermetic", "_core.py")):
            return spec
        # Search again past the directory of that shim.
        while rest and _os.path.abspath(rest[0] or ".") != d:
            rest.pop(0)
        if not rest:
            return None
        rest.pop(0)
    return None


def _json_string(raw, key):
    """The string value of a top-level key of the settings. They are written
    by encoding/json, which escapes every quote inside a string, so '"key"'
    followed by ':' can only be a key."""
    i = raw.find('"%s"' % key)
    while i >= 0:
        j = i + len(key) + 2
        rest = raw[j:].lstrip()
        if rest.startswith(":"):
            break
        i = raw.find('"%s"' % key, j)
    if i < 0:
        return None
    rest = rest[1:].lstrip()
    if not rest.startswith('"'):
        return None
    out = []
    i = 1
    while i < len(rest):
        c = rest[i]
        if c == '"':
            return "".join(out)
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = rest[i + 1 : i + 2]
        if e == "u":
            cp = int(rest[i + 2 : i + 6], 16)
            i += 6
            if 0xD800 <= cp < 0xDC00 and rest[i : i + 2] == "\\u":
                cp = 0x10000 + ((cp - 0xD800) << 10) + (int(rest[i + 2 : i + 6], 16) - 0xDC00)
                i += 6
            out.append(chr(cp))
            continue
        out.append({"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(e, e))
        i += 2
    return None


def _cache_dir(raw):
    d = _json_string(raw, "cache_dir")
    if not d:
        return None
    try:
        _os.makedirs(d, 0o700, exist_ok=True)
        st = _os.stat(d)
    except OSError:
        return None
    if st.st_uid != _os.geteuid() or st.st_mode & 0o022:
        return None
    return d


def _code(cache, write, path, raw=False):
    """The code object of the source at path, from the cache when it holds
    one for this exact source and interpreter; raw: marshalled."""
    import _imp
    import marshal

    with open(path, "rb") as f:
        src = f.read()
    magic = _sys.modules["_frozen_importlib_external"]._RAW_MAGIC_NUMBER
    name = "%s/%s.%d.%s" % (cache, path.rpartition("/")[2], magic, _imp.source_hash(magic, src).hex())
    try:
        with open(name, "rb") as f:
            data = f.read()
        return data if raw else marshal.loads(data)
    except Exception:
        # Missing, damaged, or refused by a guard already on: compile.
        pass
    code = compile(src, path, "exec", dont_inherit=True)
    data = marshal.dumps(code)
    if write:
        tmp = "%s.%d.tmp" % (name, _os.getpid())
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            _os.replace(tmp, name)
        except Exception:
            pass
    return data if raw else code


def _finder(here, cache, write):
    ext = _sys.modules["_frozen_importlib_external"]

    class Loader(ext.SourceFileLoader):
        def get_code(self, fullname):
            return _code(cache, write, self.path)

    class Finder:
        """Loads the hermetic package from the shim, through the cache."""

        def find_spec(self, name, path=None, target=None):
            if name != "hermetic" and not name.startswith("hermetic."):
                return None
            base = here + "/" + name.replace(".", "/")
            if name == "hermetic":
                p = base + "/__init__.py"
                return ext.spec_from_file_location(name, p, loader=Loader(name, p), submodule_search_locations=[base])
            p = base + ".py"
            if not _os.path.isfile(p):
                return None
            return ext.spec_from_file_location(name, p, loader=Loader(name, p))

        def invalidate_caches(self):
            pass

    return Finder()


def _main():
    spec = _shadowed()
    raw = _os.environ.get("HERMETIC_SHIM")
    if raw:
        try:
            here = _os.path.dirname(_os.path.abspath(__file__))
            cache = _cache_dir(raw)
            code = None
            if cache:
                # The cache is hermetic's own state, written before any
                # guard is on, so --fs-readonly runs fill it too: the
                # program's own bytecode is what that flag keeps unwritten.
                write = True
                _sys.meta_path.insert(0, _finder(here, cache, write))

                def code(path, raw=False):
                    return _code(cache, write, path, raw)

            from hermetic import _runtime

            # Readable under --fs-readonly=ROOT, as hermetic's own: the
            # sitecustomize this one chains to, and the code cache.
            extra = []
            if spec is not None and spec.origin:
                extra.append(_os.path.dirname(_os.path.realpath(spec.origin)))
            if cache:
                extra.append(cache)
            protect = [here]
            if cache:
                protect.append(cache)
            _runtime.boot(raw, extra, code, protect)
        except BaseException as e:
            # Fail closed: a program must not run without the guards it
            # was promised.
            _os.write(2, ("hermetic: could not install the Python guards: %s\n" % (e,)).encode("utf-8", "replace"))
            _os._exit(1)
    if spec is not None and spec.loader is not None:
        mod = _sys.modules["_frozen_importlib"].module_from_spec(spec)
        _sys.modules["sitecustomize"] = mod
        spec.loader.exec_module(mod)


_main()
del _main
