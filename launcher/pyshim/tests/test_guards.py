"""The subprocess, filesystem, native-import and seal guards, the exit
status of uncaught violations, the library API and the bootstrap, each in a
fresh child interpreter (an audit hook cannot be removed, so the test runner
itself is never guarded). Bypass attempts must fail."""

import json
import os
import sys
import unittest

from .support import PYSHIM, run, tempdir

NOPROC = {"no_subprocess": True}
NATIVE = {"block_native": True}
RO = {"fs_readonly": True}


def blocked(r):
    """The one line an uncaught violation leaves, or None."""
    lines = [x for x in r.stderr.splitlines() if x.startswith("hermetic: blocked ")]
    return lines[0] if len(lines) == 1 else None


class SubprocessTest(unittest.TestCase):
    def test_entry_points_refused(self):
        # Each attempt is caught, so one child tries them all; the
        # uncaught case is test_uncaught_exits_2.
        code = """
        import os, sys, subprocess, pty, asyncio, multiprocessing, _posixsubprocess
        from hermetic import PolicyViolation
        attempts = {
            "subprocess.run": lambda: subprocess.run(["true"]),
            "os.system": lambda: os.system("true"),
            "os.popen": lambda: os.popen("true").read(),
            "os.execv": lambda: os.execv("/bin/true", ["true"]),
            "os.spawnv": lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"]),
            "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
            "os.posix_spawnp": lambda: os.posix_spawnp("true", ["true"], {}),
            "os.fork": lambda: os.fork(),
            "pty.fork": lambda: pty.fork(),
            "fork_exec": lambda: _posixsubprocess.fork_exec(*([None] * 23)),
            "asyncio": lambda: asyncio.run(asyncio.create_subprocess_exec("true")),
            "multiprocessing": lambda: multiprocessing.get_context("fork").Process(target=print).start(),
        }
        for name, f in attempts.items():
            try:
                f()
                print(name, "RAN")
            except PolicyViolation as e:
                print(name, "refused", e.reason)
            except BaseException as e:
                print(name, "ERROR", type(e).__name__, e)
        """
        r = run(code, NOPROC)
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in r.stdout.splitlines():
            self.assertTrue(line.endswith("refused no-subprocess"), r.stdout)
        self.assertEqual(len(r.stdout.splitlines()), 12, r.stdout)

    def test_fork_exec_captured_before_install_is_refused(self):
        # Reloading _posixsubprocess or using a reference taken from the
        # original module object does not get the C function back.
        code = """
        import sys, importlib
        from hermetic import PolicyViolation
        for how in ("reload", "spec", "subprocess"):
            try:
                if how == "reload":
                    sys.modules.pop("_posixsubprocess")
                    m = importlib.import_module("_posixsubprocess")
                elif how == "spec":
                    import importlib.util, importlib.machinery
                    spec = importlib.util.find_spec("_posixsubprocess")
                    loader = importlib.machinery.ExtensionFileLoader("_posixsubprocess", spec.origin)
                    m = importlib.util.module_from_spec(importlib.util.spec_from_loader("_posixsubprocess", loader))
                else:
                    import subprocess
                    m = type("m", (), {"fork_exec": staticmethod(subprocess._fork_exec)})
                m.fork_exec(*([None] * 23))
                print(how, "RAN")
            except PolicyViolation as e:
                print(how, "refused")
            except BaseException as e:
                print(how, "ERROR", type(e).__name__, e)
        """
        r = run(code, NOPROC)
        self.assertEqual(r.stdout.split(), ["reload", "refused", "spec", "refused", "subprocess", "refused"], r.stderr)

    def test_uncaught_exits_2(self):
        r = run("import subprocess; subprocess.run(['echo', 'hi'])", dict(NOPROC, trace=True))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked subprocess.Popen: echo", r.stderr)
        self.assertIn("[hermetic] blocked subprocess.Popen exe=echo reason=no-subprocess", r.stderr)
        self.assertNotIn("hi", r.stdout)

    def test_off_without_the_flag(self):
        r = run("import subprocess; print(subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout)", {"trace": True})
        self.assertEqual(r.stdout.strip(), "hi", r.stderr)


class FilesystemTest(unittest.TestCase):
    def setUp(self):
        self.d = os.path.realpath(tempdir(self))
        self.f = os.path.join(self.d, "f.txt")
        with open(self.f, "w") as f:
            f.write("data")

    def test_writes_refused_on_every_surface(self):
        code = """
        import io, os, posix, shutil, pathlib, sys
        from hermetic import PolicyViolation
        d = sys.argv[1]
        f = os.path.join(d, "f.txt")
        attempts = {
            "open-w": lambda: open(os.path.join(d, "n"), "w"),
            "open-a": lambda: open(f, "a"),
            "open-r+": lambda: open(f, "r+"),
            "io.FileIO": lambda: io.FileIO(os.path.join(d, "n"), "w"),
            "os.open": lambda: os.open(os.path.join(d, "n"), os.O_WRONLY | os.O_CREAT),
            "posix.open": lambda: posix.open(f, posix.O_RDWR),
            "os.remove": lambda: os.remove(f),
            "os.rename": lambda: os.rename(f, f + "2"),
            "os.mkdir": lambda: os.mkdir(os.path.join(d, "x")),
            "os.chmod": lambda: os.chmod(f, 0o777),
            "os.symlink": lambda: os.symlink(f, os.path.join(d, "l")),
            "os.truncate": lambda: os.truncate(f, 0),
            "os.mkfifo": lambda: os.mkfifo(os.path.join(d, "p")),
            "shutil.rmtree": lambda: shutil.rmtree(d),
            "pathlib.touch": lambda: pathlib.Path(d, "t").touch(),
            "pathlib.write_text": lambda: pathlib.Path(f).write_text("x"),
        }
        for name, fn in attempts.items():
            try:
                fn()
                print(name, "RAN")
            except PolicyViolation as e:
                print(name, "refused", e.reason)
            except BaseException as e:
                print(name, "ERROR", type(e).__name__, e)
        print(open(f).read())
        """
        r = run(code, RO, args=[self.d])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[-1], "data", r.stdout)
        for line in lines[:-1]:
            self.assertTrue(line.endswith("refused fs-readonly"), r.stdout)
        self.assertEqual(len(lines), 17, r.stdout)
        self.assertEqual(sorted(os.listdir(self.d)), ["f.txt"])

    def test_writes_work_without_the_flag(self):
        code = "import sys, os; open(os.path.join(sys.argv[1], 'n'), 'w').write('ok'); print(open(os.path.join(sys.argv[1], 'n')).read())"
        r = run(code, {"no_subprocess": True}, args=[self.d])
        self.assertEqual(r.stdout.strip(), "ok", r.stderr)

    def test_root_confines_reads(self):
        outside = os.path.realpath(tempdir(self))
        secret = os.path.join(outside, "secret")
        with open(secret, "w") as f:
            f.write("s")
        os.symlink(secret, os.path.join(self.d, "link"))
        os.symlink(outside, os.path.join(self.d, "dirlink"))
        os.mkdir(os.path.join(self.d, "sub"))
        code = """
        import os, sys, io, posix, json
        from hermetic import PolicyViolation
        d, secret = sys.argv[1], sys.argv[2]
        os.chdir(os.path.join(d, "sub"))
        attempts = {
            "inside": lambda: open(os.path.join(d, "f.txt")).read(),
            "relative inside": lambda: open("../f.txt").read(),
            "absolute": lambda: open(secret).read(),
            "dotdot": lambda: open(os.path.join(d, "sub", "..", "..", os.path.basename(os.path.dirname(secret)), "secret")).read(),
            "relative dotdot": lambda: open(os.path.relpath(secret)).read(),
            "symlink": lambda: open(os.path.join(d, "link")).read(),
            "dir symlink": lambda: open(os.path.join(d, "dirlink", "secret")).read(),
            "io.FileIO": lambda: io.FileIO(secret).read(),
            "posix.open": lambda: posix.read(posix.open(secret, posix.O_RDONLY), 9),
            "etc": lambda: open("/etc/hostname").read(),
            "dirfd": lambda: (os.listdir(d), os.open(d, os.O_RDONLY)),
            "listdir": lambda: os.listdir(os.path.dirname(secret)),
            "scandir": lambda: list(os.scandir(os.path.dirname(secret))),
            "stdlib": lambda: len(open(json.__file__).read()) > 0,
            "import": lambda: __import__("csv") and True,
        }
        for name, fn in attempts.items():
            try:
                print(name, "->", fn())
            except PolicyViolation as e:
                print(name, "refused", e.reason)
            except BaseException as e:
                print(name, "ERROR", type(e).__name__, e)
        """
        r = run(code, dict(RO, fs_root=self.d), args=[self.d, secret])
        self.assertEqual(r.returncode, 0, r.stderr)
        got = dict(line.split(" ", 1) if " -> " not in line else line.split(" -> ") for line in r.stdout.splitlines())
        self.assertEqual(got.pop("inside"), "data", r.stdout)
        self.assertEqual(got.pop("relative inside"), "data", r.stdout)
        self.assertEqual(got.pop("stdlib"), "True", r.stdout)
        self.assertEqual(got.pop("import"), "True", r.stdout)
        # Listing is refused with an OSError, which the import system and
        # os.walk tolerate.
        for name in ("listdir", "scandir"):
            self.assertTrue(got.pop(name).startswith("ERROR PermissionError [Errno 13] hermetic: blocked os."), r.stdout)
        for name, res in got.items():
            self.assertTrue(res.endswith("refused outside-root"), "%s: %s\n%s" % (name, res, r.stdout))
        self.assertEqual(len(got), 9, r.stdout)

    def test_imports_with_sys_path_outside_root(self):
        d = tempdir(self)
        r = run("import unittest, json, tempfile; print('ok')", dict(RO, fs_root=self.d), cwd=d)
        self.assertEqual(r.stdout.strip(), "ok", r.stderr)

    def test_no_bytecode_written(self):
        mod = os.path.join(self.d, "mymod.py")
        with open(mod, "w") as f:
            f.write("X = 1\n")
        r = run("import mymod; print(mymod.X)", dict(RO, fs_root=self.d), env={"PYTHONPATH": PYSHIM + os.pathsep + self.d, "PYTHONDONTWRITEBYTECODE": ""})
        self.assertEqual(r.stdout.strip(), "1", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.d, "__pycache__")))

    def test_target_script_readable(self):
        other = os.path.realpath(tempdir(self))
        script = os.path.join(other, "tool.py")
        with open(script, "w") as f:
            f.write("print('tool ran')\n")
        settings = dict(RO, fs_root=self.d, target_script=script)
        r = run("import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')", settings, args=[script])
        self.assertEqual(r.stdout.strip(), "tool ran", r.stderr)
        r = run("import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')", dict(RO, fs_root=self.d), args=[script])
        self.assertEqual(r.returncode, 2, r.stderr)


    def test_sealed_process_memory(self):
        d = tempdir(self)
        code = """
        import os, sys
        from hermetic import PolicyViolation
        os.symlink("/proc/self/mem", os.path.join(sys.argv[1], "m"))
        for p in ("/proc/self/mem", "//proc/self/mem", os.path.join(sys.argv[1], "m")):
            try:
                open(p, "r+b")
                print("OPENED")
            except PolicyViolation as e:
                print(e.reason)
        """
        r = run(code, {"seal": True}, args=[d])
        self.assertEqual(r.stdout.split(), ["sealed"] * 3, r.stderr)


class NativeTest(unittest.TestCase):
    def test_ctypes_refused(self):
        for mod in ("ctypes", "_ctypes", "ctypes.util"):
            with self.subTest(mod=mod):
                r = run("import %s" % mod, dict(NATIVE, trace=True))
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(blocked(r), "hermetic: blocked import: %s" % mod, r.stderr)

    def test_ctypes_loaded_before_is_refused(self):
        # A program that had ctypes before the guards went on cannot use it.
        code = """
        import ctypes
        from hermetic import install_all, PolicyViolation
        install_all(block_native=True)
        try:
            ctypes.CDLL(None).getpid()
            print("RAN")
        except PolicyViolation as e:
            print("refused", e.reason)
        """
        r = run(code)
        self.assertEqual(r.stdout.strip(), "refused block-native", r.stderr)

    def test_stdlib_c_modules_load(self):
        code = """
        import _json, _csv, _decimal, _sqlite3, _ssl, _hashlib, zlib, _bz2, _lzma, select, mmap, array, _socket, _struct, math
        import sqlite3; print(sqlite3.connect(":memory:").execute("select 1").fetchone()[0])
        """
        r = run(code, NATIVE)
        self.assertEqual(r.stdout.strip(), "1", r.stderr)

    def test_foreign_extension_refused(self):
        # A copy of a standard extension module outside the installation
        # is "an extension module from outside the standard library".
        import _csv
        import shutil

        src = getattr(_csv, "__file__", None)
        if not src:
            self.skipTest("_csv is built in")
        d = tempdir(self)
        shutil.copy(src, os.path.join(d, os.path.basename(src)))
        r = run("import sys; sys.path.insert(0, sys.argv[1]); sys.modules.pop('_csv', None); import _csv", NATIVE, args=[d])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked import: _csv", r.stderr)


class SealTest(unittest.TestCase):
    SETTINGS = {"network": {"posture": "blocked"}, "no_subprocess": True, "seal": True}

    def test_uninstall_all_after_seal(self):
        code = """
        import hermetic, subprocess
        hermetic.uninstall_all()
        with hermetic.hermetic_blocker():
            pass
        subprocess.run(["true"])
        """
        r = run(code, self.SETTINGS)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked subprocess.Popen: true", r.stderr)

    def test_tampering_does_not_remove_guards(self):
        code = """
        import sys, gc, importlib, os
        from hermetic import PolicyViolation
        import hermetic, hermetic._runtime as rt
        tries = []
        def attempt(name, f):
            try:
                f()
                tries.append(name + ":ran")
            except PolicyViolation:
                tries.append(name + ":refused")
            except Exception as e:
                tries.append(name + ":" + type(e).__name__)
        # Replace the package and its modules, rebind its functions.
        for k in [k for k in sys.modules if k.startswith("hermetic")]:
            sys.modules[k] = type(sys)("fake")
        rt.uninstall = rt.install = lambda *a, **k: None
        attempt("audit-uninstall", lambda: sys.audit("hermetic.uninstall"))
        attempt("gc", lambda: gc.get_objects())
        attempt("frames", lambda: sys._current_frames())
        # A descriptor added to PolicyViolation would run inside the hook
        # when a violation is built, if the engine used it.
        PolicyViolation.guard = property(lambda s: "x", lambda s, v: os.system("echo escaped"))
        PolicyViolation.args = property(lambda s: (), lambda s, v: os.system("echo escaped"))
        attempt("reimport", lambda: importlib.import_module("hermetic").uninstall_all())
        attempt("system", lambda: os.system("true"))
        print(" ".join(tries))
        """
        r = run(code, self.SETTINGS)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = r.stdout.split()
        self.assertIn("system:refused", got, r.stdout)
        self.assertIn("gc:refused", got, r.stdout)
        self.assertIn("frames:refused", got, r.stdout)
        self.assertNotIn("escaped", r.stdout)

    def test_planted_modules_never_run_inside_the_guard(self):
        # The guard resolves and normalises with functions captured when
        # it was built, never with what sys.modules holds later.
        code = """
        import sys, types, os, socket
        fake = types.ModuleType("_socket")
        def evil(*a, **k):
            os.system("echo escaped")
            return []
        fake.getaddrinfo = fake.gethostname = fake.getservbyname = evil
        ud = types.ModuleType("unicodedata")
        ud.normalize = ud.category = ud.bidirectional = ud.combining = evil
        sys.modules["_socket"], sys.modules["unicodedata"] = fake, ud
        for host in ("allowed.test", "b\u00fccher.test"):
            try:
                socket.getaddrinfo(host, "https")
            except Exception as e:
                print(type(e).__name__)
        """
        # Static answers: nothing is looked up outside the process.
        settings = {
            "network": {
                "posture": "allowlist",
                "allow": ["allowed.test", "xn--bcher-kva.test", "127.0.0.1"],
                "resolve": {"allowed.test": ["127.0.0.1"], "xn--bcher-kva.test": ["127.0.0.1"]},
            },
            "no_subprocess": True,
        }
        r = run(code, settings)
        self.assertNotIn("escaped", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_damaged_cache_is_recompiled(self):
        cache = tempdir(self)
        settings = {"network": {"posture": "blocked"}, "cache_dir": cache}
        code = "import socket\ntry:\n    socket.getaddrinfo('x.test', 1)\nexcept Exception as e:\n    print(e.reason)"
        r = run(code, settings)
        self.assertEqual(r.stdout.strip(), "no-network", r.stderr)
        for name in os.listdir(cache):
            with open(os.path.join(cache, name), "wb") as f:
                f.write(b"\xff garbage")
        r = run(code, settings)
        self.assertEqual(r.stdout.strip(), "no-network", r.stderr)

    def test_unsealed_uninstall_works(self):
        code = """
        import subprocess, hermetic
        hermetic.uninstall_all()
        print(subprocess.run(["echo", "free"], capture_output=True, text=True).stdout.strip())
        """
        r = run(code, {"no_subprocess": True})
        self.assertEqual(r.stdout.strip(), "free", r.stderr)


class ExitTest(unittest.TestCase):
    def test_violation_in_thread(self):
        code = """
        import threading, time, os
        def f():
            os.system("true")
        threading.Thread(target=f).start()
        time.sleep(5)
        print("not reached")
        """
        r = run(code, NOPROC)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked os.system: true", r.stderr)
        self.assertNotIn("not reached", r.stdout)

    def test_own_excepthook_and_emptied_modules(self):
        # The exit status does not depend on sys.excepthook or on the
        # package staying in sys.modules.
        code = """
        import sys, os
        sys.excepthook = lambda *a: print("own hook")
        for k in [k for k in sys.modules if k.startswith("hermetic")]:
            del sys.modules[k]
        os.system("true")
        """
        r = run(code, NOPROC)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked os.system: true", r.stderr)
        self.assertEqual(r.stdout.strip(), "own hook")

    def test_violation_caught_in_thread(self):
        code = """
        import threading, os
        from hermetic import PolicyViolation
        def f():
            try:
                os.system("true")
            except PolicyViolation:
                print("caught")
        t = threading.Thread(target=f); t.start(); t.join()
        """
        r = run(code, NOPROC)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "caught"), r.stderr)

    def test_violation_in_exception_group(self):
        if sys.version_info < (3, 11):
            self.skipTest("no TaskGroup")
        code = """
        import asyncio, os
        async def bad():
            os.system("true")
        async def main():
            async with asyncio.TaskGroup() as tg:
                tg.create_task(bad())
        asyncio.run(main())
        """
        r = run(code, NOPROC)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(blocked(r), "hermetic: blocked os.system: true", r.stderr)

    def test_report_file_counts_caught_violations(self):
        d = tempdir(self)
        report = os.path.join(d, "v.jsonl")
        code = """
        import os
        from hermetic import PolicyViolation
        for _ in range(2):
            try:
                os.system("true")
            except PolicyViolation:
                pass
        """
        r = run(code, dict(NOPROC, report_file=report))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(report) as f:
            recs = [json.loads(x) for x in f]
        self.assertEqual([(x["guard"], x["target"], x["reason"]) for x in recs], [("os.system", "true", "no-subprocess")] * 2)


class APITest(unittest.TestCase):
    def test_blocker_and_decorator(self):
        code = """
        import asyncio, socket, subprocess
        from hermetic import hermetic_blocker, with_hermetic, install_all, uninstall_all, PolicyViolation

        def connect():
            try:
                # localhost: answered from the hosts file when allowed.
                socket.getaddrinfo("localhost", 443)
            except PolicyViolation as e:
                return e.guard + "/" + e.reason
            except OSError:
                pass
            return "not blocked"

        with hermetic_blocker(block_network=True):
            print(connect())
            with hermetic_blocker(block_subprocess=True):
                print(connect())
        print(connect())

        @with_hermetic(block_network=True, allow_localhost=True)
        def f():
            return connect()
        print(f())

        async def main():
            async with hermetic_blocker(block_network=True):
                return connect()
        print(asyncio.run(main()))

        @with_hermetic(block_subprocess=True)
        async def g():
            try:
                subprocess.run(["true"])
            except PolicyViolation as e:
                return e.reason
        print(asyncio.run(g()))

        try:
            hermetic_blocker(allow_domains=["https://example.test/"])
        except ValueError as e:
            print("bad rule refused")
        """
        r = run(code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(
            r.stdout.splitlines(),
            [
                "socket.getaddrinfo/no-network",
                "socket.getaddrinfo/no-network",
                "not blocked",
                "not blocked",
                "socket.getaddrinfo/no-network",
                "no-subprocess",
                "bad rule refused",
            ],
        )

    def test_sealed_block_stays_on(self):
        code = """
        import subprocess
        from hermetic import hermetic_blocker, uninstall_all, is_sealed, PolicyViolation
        with hermetic_blocker(block_subprocess=True, sealed=True):
            pass
        uninstall_all()
        print(is_sealed())
        try:
            subprocess.run(["true"])
        except PolicyViolation as e:
            print(e.reason)
        """
        r = run(code)
        self.assertEqual(r.stdout.split(), ["True", "no-subprocess"], r.stderr)


class BootstrapTest(unittest.TestCase):
    def test_chains_to_shadowed_sitecustomize(self):
        d = tempdir(self)
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("import builtins; builtins.CHAINED = 'yes'\n")
        r = run("print(CHAINED)", NOPROC, env={"PYTHONPATH": PYSHIM + os.pathsep + d})
        self.assertEqual(r.stdout.strip(), "yes", r.stderr)

    def test_shim_listed_twice_or_nested(self):
        # The same shim twice on the path, or another copy of it (a
        # hermetic run inside another): set up once, chain past the copies
        # to the real sitecustomize.
        import shutil

        copy = os.path.join(tempdir(self), "shim")
        shutil.copytree(PYSHIM, copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.go"))
        d = tempdir(self)
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("import builtins; builtins.CHAINED = getattr(builtins, 'CHAINED', 0) + 1\n")
        path = os.pathsep.join([PYSHIM, PYSHIM, copy, d])
        r = run("import hermetic._runtime as rt; print(CHAINED, rt.state()['layers'])", NOPROC, env={"PYTHONPATH": path})
        self.assertEqual(r.stdout.split(), ["1", "1"], r.stderr)

    def test_own_files_protected(self):
        # The shim (here a copy, as the launcher writes one per run) and
        # the code cache cannot be changed by the program, even when writes
        # are allowed; other writes still work.
        import shutil

        shim = os.path.join(tempdir(self), "shim")
        shutil.copytree(PYSHIM, shim, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.go"))
        cache = tempdir(self)
        d = tempdir(self)
        code = """
        import os, sys
        from hermetic import PolicyViolation
        shim, cache, d = sys.argv[1:]
        entry = os.path.join(cache, sorted(os.listdir(cache))[0])
        for name, f in (
            ("sitecustomize", lambda: open(os.path.join(shim, "sitecustomize.py"), "a")),
            ("remove", lambda: os.remove(os.path.join(shim, "hermetic", "_core.py"))),
            ("rename", lambda: os.rename(os.path.join(d, "x"), os.path.join(shim, "hermetic", "_net.py"))),
            ("cache", lambda: open(entry, "wb")),
        ):
            try:
                f()
                print(name, "CHANGED")
            except PolicyViolation as e:
                print(name, e.reason)
        open(os.path.join(d, "y"), "w").write("ok")
        print(open(os.path.join(d, "y")).read())
        """
        open(os.path.join(d, "x"), "w").close()
        settings = {"no_subprocess": True, "cache_dir": cache}
        r = run(code, settings, env={"PYTHONPATH": shim}, args=[shim, cache, d])
        self.assertEqual(r.stdout.split(), ["sitecustomize", "protected", "remove", "protected", "rename", "protected", "cache", "protected", "ok"], r.stderr)

    def test_bad_settings_fail_closed(self):
        for bad in ("{not json", '{"network": 3}', '{"fs_root": 3}', '{"no_subprocess": true', '[]'):
            with self.subTest(settings=bad):
                r = run("print('ran')", bad)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertNotIn("ran", r.stdout)
                self.assertIn("hermetic: could not install the Python guards", r.stderr)

    def test_bad_rules_refuse_at_first_use(self):
        # Network rules are compiled on first use (the launcher has checked
        # them already); a bad one then refuses, never allows.
        r = run("import socket; socket.getaddrinfo('a.test', 443)", '{"network": {"posture": "allowlist", "allow": ["*"]}}')
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hermetic: blocked socket.getaddrinfo: internal error (RuleError)", r.stderr)

    def test_no_settings_no_guards(self):
        r = run("import sys, os; print('hermetic._runtime' in sys.modules)")
        self.assertEqual(r.stdout.strip(), "False", r.stderr)


if __name__ == "__main__":
    unittest.main()
