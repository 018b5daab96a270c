"""The shared policy vectors (policy/testdata/vectors.json): the Python
twin must agree with Go's policy package on every one."""

import json
import os
import unittest

from hermetic import _policy as P

from .support import VECTORS


def load():
    if not os.path.exists(VECTORS):
        raise unittest.SkipTest("%s not found" % VECTORS)
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)


class VectorsTest(unittest.TestCase):
    def test_normalize(self):
        v = load()
        self.assertGreaterEqual(len(v["normalize"]), 100)
        for c in v["normalize"]:
            with self.subTest(input=c["input"]):
                try:
                    got = P.host_text(P.normalize(c["input"]))
                except P.InvalidHost as e:
                    self.assertTrue(c.get("invalid"), "refused %r (%s), want %r" % (c["input"], e, c.get("want")))
                    continue
                self.assertFalse(c.get("invalid"), "accepted %r as %r, want invalid" % (c["input"], got))
                self.assertEqual(got, c["want"])

    def test_decide(self):
        v = load()
        self.assertGreaterEqual(len(v["decide"]), 250)
        for c in v["decide"]:
            with self.subTest(name=c["name"]):
                pol = c["policy"]
                p = P.Policy(
                    network=pol.get("network", ""),
                    no_network=pol.get("no_network", False),
                    allow=pol.get("allow", ()),
                    deny=pol.get("deny", ()),
                    allow_localhost=pol.get("allow_localhost", False),
                )
                d = p.decide(c["host"], c["port"])
                if c.get("resolved") and d.allowed:
                    d = p.check_addr(d, P.parse_addr(c["resolved"]))
                self.assertEqual("allow" if d.allowed else "deny", c["verdict"], repr(d))
                self.assertEqual(d.reason, c["reason"], repr(d))
                if c.get("rule"):
                    self.assertEqual(d.rule, c["rule"], repr(d))


if __name__ == "__main__":
    unittest.main()
