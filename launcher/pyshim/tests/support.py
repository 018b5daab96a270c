"""Helpers for the shim's tests: run a Python child with the shim installed,
and small loopback servers. Guards are only ever installed in children, so
the test runner itself is never guarded. All traffic stays on loopback."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading

PYSHIM = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTORS = os.path.join(PYSHIM, "..", "..", "policy", "testdata", "vectors.json")
# Every wait in the tests is bounded by this many seconds.
TIMEOUT = 30


def _stop(sock, thread):
    """Close a listening socket and wait for its thread: shutdown wakes an
    accept() blocked in another thread on Linux, close alone does not."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
    thread.join(TIMEOUT)


def run(code, settings=None, env=None, cwd=None, args=()):
    """Run code in a child interpreter with the shim on PYTHONPATH and the
    given settings in HERMETIC_SHIM (none: library use only)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HERMETIC"))}
    e["PYTHONPATH"] = PYSHIM
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    if settings is not None:
        e["HERMETIC_SHIM"] = settings if isinstance(settings, str) else json.dumps(settings)
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)] + list(args),
        env=e,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


class Server:
    """A loopback TCP server that answers each connection with a fixed
    reply after reading one chunk, for a bounded number of connections."""

    def __init__(self, reply=b"pong", family=socket.AF_INET, host="127.0.0.1", limit=20):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(TIMEOUT)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.limit = limit
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.accepted < self.limit:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with c:
                c.settimeout(TIMEOUT)
                try:
                    c.recv(65536)
                    c.sendall(self.reply)
                except OSError:
                    pass

    def close(self):
        _stop(self.sock, self.thread)


class Socks5:
    """A minimal loopback SOCKS5 server (CONNECT only) that records each
    request and forwards it to upstream (host, port) on loopback, or refuses
    it with reply 0x02. Without creds it takes no authentication; with
    creds (user, password) it takes only RFC 1929 username/password, as
    hermetic's proxy does: a client that does not offer method 2 gets 0xFF,
    wrong credentials get {1, 1}, and the connection is closed. The methods
    each client offered and the credentials it sent are recorded."""

    def __init__(self, upstream_port, refuse=(), limit=20, creds=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(TIMEOUT)
        self.port = self.sock.getsockname()[1]
        self.upstream_port = upstream_port
        self.refuse = set(refuse)
        self.requests = []
        self.limit = limit
        self.creds = None if creds is None else (creds[0].encode(), creds[1].encode())
        self.methods = []
        self.logins = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _exact(c, n):
        b = b""
        while len(b) < n:
            x = c.recv(n - len(b))
            if not x:
                raise OSError("closed")
            b += x
        return b

    def _serve(self):
        for _ in range(self.limit):
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(TIMEOUT)
                try:
                    self._one(c)
                except OSError:
                    pass

    def _one(self, c):
        ver, n = self._exact(c, 2)
        methods = self._exact(c, n)
        self.methods.append(methods)
        if self.creds is None:
            c.sendall(b"\x05\x00")
        elif 2 not in methods:
            c.sendall(b"\x05\xff")
            return
        else:
            c.sendall(b"\x05\x02")
            ver, n = self._exact(c, 2)
            user = self._exact(c, n)
            password = self._exact(c, self._exact(c, 1)[0])
            self.logins.append((ver, user, password))
            if ver != 1 or (user, password) != self.creds:
                c.sendall(b"\x01\x01")
                return
            c.sendall(b"\x01\x00")
        _, cmd, _, atyp = self._exact(c, 4)
        if atyp == 3:
            host = self._exact(c, self._exact(c, 1)[0]).decode()
        elif atyp == 1:
            host = socket.inet_ntop(socket.AF_INET, self._exact(c, 4))
        else:
            host = socket.inet_ntop(socket.AF_INET6, self._exact(c, 16))
        port = int.from_bytes(self._exact(c, 2), "big")
        self.requests.append((atyp, host, port))
        if host in self.refuse:
            c.sendall(b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00")
            return
        up = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=TIMEOUT)
        with up:
            c.sendall(b"\x05\x00\x00\x01\x7f\x00\x00\x01" + up.getsockname()[1].to_bytes(2, "big"))
            data = c.recv(65536)
            up.sendall(data)
            c.sendall(up.recv(65536))

    def close(self):
        _stop(self.sock, self.thread)


def tempdir(testcase):
    d = tempfile.mkdtemp(prefix="hermetic-test-")
    testcase.addCleanup(_rmtree, d)
    return d


def _rmtree(d):
    import shutil

    shutil.rmtree(d, ignore_errors=True)
