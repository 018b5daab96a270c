"""The network guard, exercised in child interpreters against loopback
servers. No test sends anything off loopback: names map to loopback through
the shim's static resolver (network.resolve) or go to a loopback SOCKS5
server."""

import json
import os
import unittest

from .support import Server, Socks5, run, tempdir

BLOCKED = {"network": {"posture": "blocked"}}
LOCAL = {"network": {"posture": "blocked", "allow_localhost": True}}


class BlockedTest(unittest.TestCase):
    def setUp(self):
        self.srv = Server()
        self.addCleanup(self.srv.close)

    def assertBlocked(self, r, guard, target=None):
        self.assertEqual(r.returncode, 2, r.stderr)
        line = "hermetic: blocked %s: " % guard
        self.assertIn(line + (target or ""), r.stderr)

    def test_connect_blocked_exits_2(self):
        r = run("import socket; socket.create_connection(('127.0.0.1', %d))" % self.srv.port, BLOCKED)
        self.assertBlocked(r, "socket.connect", "127.0.0.1:%d" % self.srv.port)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertEqual(self.srv.accepted, 0)

    def test_raw_socket_connect_blocked(self):
        r = run("import _socket; s = _socket.socket(); s.connect(('127.0.0.1', %d))" % self.srv.port, BLOCKED)
        self.assertBlocked(r, "socket.connect")

    def test_connect_ex_and_captured_method_blocked(self):
        code = """
        import _socket, socket
        s = socket.socket()
        for f in (s.connect_ex, lambda a: _socket.socket.connect(s, a)):
            try:
                f(('127.0.0.1', %d))
            except Exception as e:
                print(type(e).__name__, e.guard)
        """
        r = run(code % self.srv.port, BLOCKED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n")[:2], ["PolicyViolation socket.connect"] * 2)

    def test_alternate_spellings_of_loopback_blocked(self):
        for host in ("127.1", "0x7f.0.0.1", "2130706433", "::ffff:127.0.0.1"):
            with self.subTest(host=host):
                fam = "AF_INET6" if ":" in host else "AF_INET"
                r = run(
                    "import socket; s = socket.socket(socket.%s); s.connect((%r, %d))" % (fam, host, self.srv.port),
                    BLOCKED,
                )
                self.assertBlocked(r, "socket.connect")

    def test_dns_blocked_before_lookup(self):
        r = run("import socket; socket.getaddrinfo('denied.test', 443)", BLOCKED)
        self.assertBlocked(r, "socket.getaddrinfo", "denied.test:443")
        r = run("import _socket; _socket.getaddrinfo('denied.test', 443)", BLOCKED)
        self.assertBlocked(r, "socket.getaddrinfo", "denied.test")
        r = run("import _socket; _socket.gethostbyname('denied.test')", BLOCKED)
        self.assertBlocked(r, "socket.gethostbyname", "denied.test")

    def test_urllib_blocked(self):
        r = run("import urllib.request; urllib.request.urlopen('http://denied.test/')", BLOCKED)
        self.assertBlocked(r, "socket.getaddrinfo", "denied.test:80")

    def test_adopting_internet_descriptors_blocked(self):
        # Whatever family the caller claims, the kernel's is judged.
        # (socket.socket(fileno=) is left alone: accept, dup and ssl adopt
        # the guard's own descriptors through it.)
        code = """
        import socket, _socket
        from hermetic import PolicyViolation
        s = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        u = socket.socket(socket.AF_UNIX)
        for name, f in (
            ("fromfd claiming unix", lambda: socket.fromfd(s.fileno(), socket.AF_UNIX, socket.SOCK_STREAM)),
            ("unix fromfd", lambda: socket.fromfd(u.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) and None),
        ):
            try:
                print(name, f())
            except PolicyViolation as e:
                print(name, "refused", e.guard)
        """
        r = run(code, BLOCKED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "fromfd claiming unix refused socket.fromfd",
            "unix fromfd None",
        ])

    def test_fromfd_blocked(self):
        code = """
        import socket, _socket
        s = _socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        socket.fromfd(s.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        """
        r = run(code, BLOCKED)
        self.assertBlocked(r, "socket.fromfd")

    def test_sendto_and_sendmsg_blocked(self):
        for call, guard in (
            ("u.sendto(b'x', ('127.0.0.1', 9))", "socket.sendto"),
            ("u.sendmsg([b'x'], [], 0, ('127.0.0.1', 9))", "socket.sendmsg"),
            ("_socket.socket.sendto(u, b'x', ('127.0.0.1', 9))", "socket.sendto"),
            ("_socket.socket.sendmsg(u, [b'x'], [], 0, ('127.0.0.1', 9))", "socket.sendmsg"),
        ):
            with self.subTest(call=call):
                r = run("import socket, _socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); " + call, BLOCKED)
                self.assertBlocked(r, guard, "127.0.0.1:9")

    def test_bind_non_loopback_blocked(self):
        for host in ("0.0.0.0", "", "::"):
            with self.subTest(host=host):
                fam = "AF_INET6" if ":" in host else "AF_INET"
                r = run("import socket; socket.socket(socket.%s).bind((%r, 0))" % (fam, host), BLOCKED)
                self.assertBlocked(r, "socket.bind")

    def test_raw_families_blocked(self):
        r = run("import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)", BLOCKED)
        self.assertBlocked(r, "socket.socket")

    def test_tls_wrapping_blocked(self):
        code = """
        import socket, ssl
        a, b = socket.socketpair()
        ssl.create_default_context().wrap_socket(a, server_hostname='x.test', do_handshake_on_connect=False)
        """
        r = run(code, BLOCKED)
        self.assertBlocked(r, "ssl.wrap_socket")

    def test_unix_sockets_and_asyncio_still_work(self):
        code = """
        import asyncio, socket
        a, b = socket.socketpair()
        a.sendall(b'hi'); print(b.recv(2).decode())
        async def main():
            await asyncio.sleep(0)
            return 'loop'
        print(asyncio.run(main()))
        """
        r = run(code, BLOCKED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["hi", "loop"])

    def test_loopback_bind_works(self):
        r = run("import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('ok')", BLOCKED)
        self.assertEqual(r.stdout.strip(), "ok", r.stderr)

    def test_caught_violation_keeps_exit_code(self):
        code = """
        import socket
        from hermetic import PolicyViolation
        try:
            socket.create_connection(('127.0.0.1', %d))
        except PolicyViolation as e:
            print(e.guard, e.target, e.reason)
        """
        r = run(code % self.srv.port, BLOCKED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "socket.connect 127.0.0.1:%d no-network" % self.srv.port)

    def test_violation_in_thread_exits_2(self):
        code = """
        import socket, threading, time
        def f():
            socket.create_connection(('127.0.0.1', %d))
        t = threading.Thread(target=f); t.start(); t.join()
        time.sleep(5)
        print('not reached')
        """
        r = run(code % self.srv.port, BLOCKED)
        self.assertBlocked(r, "socket.connect")
        self.assertNotIn("not reached", r.stdout)

    def test_violation_in_asyncio_task_exits_2(self):
        code = """
        import asyncio
        async def bad():
            await asyncio.open_connection('127.0.0.1', %d)
        async def main():
            asyncio.get_running_loop().create_task(bad())
            await asyncio.sleep(2)
        asyncio.run(main())
        print('not reached')
        """
        r = run(code % self.srv.port, BLOCKED)
        self.assertBlocked(r, "socket.connect")
        self.assertNotIn("not reached", r.stdout)

    def test_awaited_violation_in_task_group_exits_2(self):
        code = """
        import asyncio, sys
        async def main():
            await asyncio.open_connection('127.0.0.1', %d)
        asyncio.run(main())
        """
        r = run(code % self.srv.port, BLOCKED)
        self.assertBlocked(r, "socket.connect")

    def test_trace_and_report(self):
        d = tempdir(self)
        report = os.path.join(d, "report.jsonl")
        code = """
        import socket
        for host in ('denied.test', 'other.test'):
            try:
                socket.getaddrinfo(host, 443)
            except Exception:
                pass
        """
        r = run(code, dict(BLOCKED, trace=True, report_file=report))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("[hermetic] blocked socket.getaddrinfo host=denied.test port=443 reason=no-network\n", r.stderr)
        with open(report) as f:
            recs = [json.loads(x) for x in f]
        self.assertEqual([(x["guard"], x["target"], x["reason"]) for x in recs], [
            ("socket.getaddrinfo", "denied.test:443", "no-network"),
            ("socket.getaddrinfo", "other.test:443", "no-network"),
        ])


class AllowTest(unittest.TestCase):
    def setUp(self):
        self.srv = Server()
        self.addCleanup(self.srv.close)

    def test_localhost_allowed(self):
        code = "import socket; c = socket.create_connection(('127.0.0.1', %d)); c.sendall(b'ping'); print(c.recv(4).decode())"
        r = run(code % self.srv.port, LOCAL)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)

    def test_allowed_name_through_guarded_resolution(self):
        settings = {
            "network": {
                "posture": "allowlist",
                "allow": ["allowed.test"],
                "allow_localhost": True,
                "resolve": {"allowed.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"]},
            }
        }
        code = """
        import http.client, socket
        from hermetic import PolicyViolation
        c = http.client.HTTPConnection('allowed.test', %d, timeout=10)
        c.request('GET', '/'); print(c.sock.getpeername()[0])
        try:
            socket.create_connection(('denied.test', %d))
        except PolicyViolation as e:
            print(e.reason)
        """
        r = run(code % (self.srv.port, self.srv.port), settings)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["127.0.0.1", "not-allowlisted"])

    def test_resolved_private_address_needs_a_rule(self):
        # Step 5: a name that resolves to loopback needs --allow-localhost or
        # an address rule.
        settings = {"network": {"posture": "allowlist", "allow": ["allowed.test"], "resolve": {"allowed.test": ["127.0.0.1"]}}}
        r = run("import socket; socket.create_connection(('allowed.test', %d))" % self.srv.port, settings)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hermetic: blocked socket.getaddrinfo: allowed.test:%d" % self.srv.port, r.stderr)

    def test_learned_address_allowed_only_for_its_name(self):
        # Step 6: an address a guarded lookup returned for an allowed name
        # is allowed as that name, on the ports the name's rule allows. The
        # address is a documentation one, so the decision is asked of the
        # guard's router (hermetic.route) and nothing is sent to it.
        settings = {
            "network": {
                "posture": "allowlist",
                "allow": ["allowed.test:443"],
                "resolve": {"allowed.test": ["192.0.2.7"]},
            }
        }
        code = """
        import socket, sys
        from hermetic import PolicyViolation
        def route(port):
            out = []
            try:
                sys.audit("hermetic.route", socket.AF_INET, socket.SOCK_STREAM, ("192.0.2.7", port), out)
            except PolicyViolation as e:
                return e.reason
            return out[0][0]
        print(route(443))
        print(socket.getaddrinfo('allowed.test', 443, socket.AF_INET)[0][4][0])
        print(route(443), route(444))
        """
        r = run(code, settings)
        self.assertEqual(r.stdout.split(), ["not-allowlisted", "192.0.2.7", "direct", "not-allowlisted"], r.stderr)

    def test_ipv6_loopback(self):
        try:
            srv6 = Server(family=__import__("socket").AF_INET6, host="::1")
        except OSError:
            self.skipTest("no IPv6 loopback")
        self.addCleanup(srv6.close)
        code = "import socket; c = socket.create_connection(('::1', %d)); c.sendall(b'x'); print(c.recv(4).decode())"
        self.assertEqual(run(code % srv6.port, LOCAL).stdout.strip(), "pong")
        self.assertEqual(run(code % srv6.port, BLOCKED).returncode, 2)


class SocksTest(unittest.TestCase):
    """Under the launcher, direct connections to allowed hosts go through
    hermetic's SOCKS5 proxy with the name kept."""

    def setUp(self):
        self.srv = Server()
        self.addCleanup(self.srv.close)
        self.socks = Socks5(self.srv.port, refuse={"refused.test"})
        self.addCleanup(self.socks.close)
        self.settings = {
            "network": {
                "posture": "allowlist",
                "allow": ["allowed.test", "refused.test", "10.0.0.0/8"],
                "allow_localhost": True,
                "socks": "127.0.0.1:%d" % self.socks.port,
            }
        }

    def test_create_connection_keeps_the_name(self):
        code = "import socket; c = socket.create_connection(('allowed.test', 443)); c.sendall(b'x'); print(c.recv(4).decode())"
        r = run(code, self.settings)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.requests, [(3, "allowed.test", 443)])
        # Without credentials only "no authentication" is offered.
        self.assertEqual(self.socks.methods, [b"\x00"])

    def test_http_client(self):
        code = """
        import http.client
        c = http.client.HTTPConnection('allowed.test', 8080, timeout=10)
        c.connect(); c.sock.sendall(b'x'); print(c.sock.recv(4).decode())
        """
        r = run(code, self.settings)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.requests, [(3, "allowed.test", 8080)])

    def test_asyncio_open_connection(self):
        code = """
        import asyncio
        async def main():
            r, w = await asyncio.open_connection('allowed.test', 443)
            w.write(b'x'); await w.drain()
            print((await r.read(4)).decode())
            w.close()
        asyncio.run(main())
        """
        r = run(code, self.settings)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.requests, [(3, "allowed.test", 443)])

    def test_address_goes_through_proxy(self):
        code = "import socket; c = socket.create_connection(('10.1.2.3', 443)); c.sendall(b'x'); print(c.recv(4).decode())"
        r = run(code, self.settings)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.requests, [(1, "10.1.2.3", 443)])

    def test_denied_name_never_reaches_proxy(self):
        r = run("import socket; socket.create_connection(('denied.test', 443))", self.settings)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hermetic: blocked socket.getaddrinfo: denied.test:443", r.stderr)
        self.assertEqual(self.socks.requests, [])

    def test_refusal_by_proxy_is_a_violation(self):
        r = run("import socket; socket.create_connection(('refused.test', 443))", self.settings)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hermetic: blocked socket.connect: refused.test:443", r.stderr)

    def test_loopback_goes_direct(self):
        code = "import socket; c = socket.create_connection(('127.0.0.1', %d)); c.sendall(b'x'); print(c.recv(4).decode())"
        r = run(code % self.srv.port, self.settings)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.requests, [])

    def test_fake_address_is_useless_to_raw_sockets(self):
        code = """
        import socket, _socket
        addr = socket.getaddrinfo('allowed.test', 443, socket.AF_INET)[0][4]
        _socket.socket().connect(addr)
        """
        r = run(code, self.settings)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(self.socks.requests, [])

    def test_other_layer_cannot_add_a_proxy(self):
        # A proxy declared by a later layer is no exit for the first one.
        code = """
        import json, socket, sys
        from hermetic import _runtime
        _runtime.install(json.dumps({"network": {"posture": "open", "socks": "127.0.0.1:%d"}}))
        socket.create_connection(('127.0.0.1', %d))
        """
        settings = {"network": {"posture": "allowlist", "allow": ["allowed.test"]}}
        r = run(code % (self.srv.port, self.srv.port), settings)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(self.srv.accepted, 0)


USER, PASSWORD = "h0user", "pw-Zq81-not-in-any-output"
CONNECT = "import socket; c = socket.create_connection(('allowed.test', 443)); c.sendall(b'x'); print(c.recv(4).decode())"


class SocksAuthTest(unittest.TestCase):
    """RFC 1929 username/password with hermetic's SOCKS5 proxy: offered only
    when the settings give credentials; the password never shows in errors,
    traces or reports."""

    def setUp(self):
        self.srv = Server()
        self.addCleanup(self.srv.close)
        self.socks = Socks5(self.srv.port, refuse={"refused.test"}, creds=(USER, PASSWORD))
        self.addCleanup(self.socks.close)
        self.proxy = "127.0.0.1:%d" % self.socks.port

    def settings(self, user=USER, password=PASSWORD, **extra):
        net = {"posture": "allowlist", "allow": ["allowed.test", "refused.test"], "socks": self.proxy}
        if user is not None:
            net["socks_user"], net["socks_password"] = user, password
        return dict(extra, network=net)

    def assertNoPassword(self, *texts):
        for t in texts:
            self.assertNotIn(PASSWORD, t)
            self.assertNotIn("wrong-" + PASSWORD, t)

    def test_right_credentials(self):
        r = run(CONNECT, self.settings())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "pong", r.stderr)
        self.assertEqual(self.socks.methods, [b"\x00\x02"])
        self.assertEqual(self.socks.logins, [(1, USER.encode(), PASSWORD.encode())])
        self.assertEqual(self.socks.requests, [(3, "allowed.test", 443)])

    def test_http_client_and_asyncio(self):
        code = """
        import asyncio, http.client
        c = http.client.HTTPConnection('allowed.test', 8080, timeout=10)
        c.connect(); c.sock.sendall(b'x'); print(c.sock.recv(4).decode())
        async def main():
            r, w = await asyncio.open_connection('allowed.test', 443)
            w.write(b'x'); await w.drain()
            print((await r.read(4)).decode())
            w.close()
        asyncio.run(main())
        """
        r = run(code, self.settings())
        self.assertEqual(r.stdout.split(), ["pong", "pong"], r.stderr)
        self.assertEqual(self.socks.requests, [(3, "allowed.test", 8080), (3, "allowed.test", 443)])

    def test_wrong_credentials_fail_clearly(self):
        d = tempdir(self)
        report = os.path.join(d, "report.jsonl")
        settings = self.settings(password="wrong-" + PASSWORD, trace=True, report_file=report)
        r = run(CONNECT, settings)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PermissionError: [Errno 13] SOCKS5 proxy %s refused the username and password (connecting to allowed.test:443)" % self.proxy, r.stderr)
        self.assertNoPassword(r.stdout, r.stderr)
        # create_connection tries each address the (guarded) lookup gave.
        self.assertGreaterEqual(len(self.socks.logins), 1)
        self.assertEqual(set(self.socks.logins), {(1, USER.encode(), ("wrong-" + PASSWORD).encode())})
        self.assertEqual(self.socks.requests, [])
        self.assertFalse(os.path.exists(report))

    def test_wrong_credentials_connect_ex(self):
        code = "import socket; s = socket.socket(); s.settimeout(10); print(s.connect_ex(('allowed.test', 443)))"
        r = run(code, self.settings(user="someone-else"))
        self.assertEqual(r.stdout.strip(), "13", r.stderr)
        self.assertEqual(self.socks.requests, [])

    def test_caught_failure_is_an_oserror_not_a_violation(self):
        code = """
        import socket
        from hermetic import PolicyViolation
        try:
            socket.create_connection(('allowed.test', 443))
        except PolicyViolation:
            print('violation')
        except OSError as e:
            print(type(e).__name__, e.errno)
        """
        r = run(code, self.settings(password="wrong-" + PASSWORD))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "PermissionError 13")

    def test_no_credentials_configured(self):
        r = run(CONNECT, self.settings(user=None))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("SOCKS5 proxy %s requires authentication and no credentials are configured" % self.proxy, r.stderr)
        self.assertGreaterEqual(len(self.socks.methods), 1)
        self.assertEqual(set(self.socks.methods), {b"\x00"})
        self.assertEqual(self.socks.logins, [])

    def test_refusal_with_credentials_is_a_violation_without_password(self):
        d = tempdir(self)
        report = os.path.join(d, "report.jsonl")
        r = run("import socket; socket.create_connection(('refused.test', 443))", self.settings(trace=True, report_file=report))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("hermetic: blocked socket.connect: refused.test:443", r.stderr)
        self.assertIn("[hermetic] blocked socket.connect host=refused.test", r.stderr)
        with open(report) as f:
            rep = f.read()
        self.assertIn("denied-by-proxy", rep)
        self.assertNoPassword(r.stdout, r.stderr, rep)

    def test_bad_credential_settings_never_quote_the_password(self):
        cases = [
            ({"posture": "open", "socks_user": USER, "socks_password": PASSWORD}, "network.socks_user: needs network.socks"),
            ({"posture": "open", "socks": self.proxy, "socks_password": PASSWORD}, "network.socks_password: needs network.socks_user"),
            ({"posture": "open", "socks": self.proxy, "socks_user": USER, "socks_password": PASSWORD * 20}, "network.socks_password: want at most 255 bytes"),
            ({"posture": "open", "socks": self.proxy, "socks_user": USER, "socks_password": PASSWORD + "\ud800"}, "network.socks_password: want at most 255 bytes"),
            ({"posture": "open", "socks": self.proxy, "socks_user": "u" * 256, "socks_password": PASSWORD}, "network.socks_user: want 1 to 255 bytes"),
        ]
        for net, msg in cases:
            with self.subTest(msg=msg):
                r = run(CONNECT, {"network": net})
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(msg, r.stderr)
                self.assertNoPassword(r.stdout, r.stderr)
        self.assertEqual(self.socks.methods, [])

    def test_library_socks_auth(self):
        code = """
        import socket
        from hermetic import hermetic_blocker
        with hermetic_blocker(allow_domains=['allowed.test'], socks=%r, socks_auth=(%r, %r)):
            c = socket.create_connection(('allowed.test', 443)); c.sendall(b'x'); print(c.recv(4).decode())
        try:
            hermetic_blocker(allow_domains=['allowed.test'], socks=%r, socks_auth=%r)
        except TypeError as e:
            print(e)
        """
        r = run(code % (self.proxy, USER, PASSWORD, self.proxy, PASSWORD))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["pong", "socks_auth: want a (username, password) pair"])
        self.assertEqual(self.socks.logins, [(1, USER.encode(), PASSWORD.encode())])


if __name__ == "__main__":
    unittest.main()
