"""Measure what the guard shim adds to Python runs.

    python3 bench.py [--python PATH] [--runs N] [--settings JSON]

Compares, in the same run, a bare interpreter with one that loads the shim
the way the launcher does (a fresh copy of the shim per run, settings in
HERMETIC_SHIM, compiled code cached in a cache_dir), for three workloads:
start-up (-c pass), an import-heavy run and a file-heavy run. Prints the
median time of each, the ratio and the milliseconds added. Every loop is
bounded; nothing touches the network.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

IMPORT_HEAVY = (
    "import json, csv, decimal, fractions, email.message, http.client, urllib.parse, "
    "xml.dom.minidom, logging, argparse, dataclasses, typing, pathlib, tempfile, "
    "unittest, asyncio, collections, statistics"
)

FILE_HEAVY = """
import os
root = os.environ["BENCH_DIR"]
n = 0
for _ in range(20):
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name)
        os.stat(p)
        with open(p, "rb") as f:
            n += len(f.read())
print(n)
"""

DEFAULT_SETTINGS = {
    "network": {"posture": "allowlist", "allow": ["pypi.org", "*.pythonhosted.org"], "allow_localhost": True},
    "no_subprocess": True,
    "block_native": True,
    "seal": True,
}


def fresh_shim(base):
    d = tempfile.mkdtemp(prefix="shim-", dir=base)
    shutil.copy(os.path.join(HERE, "sitecustomize.py"), d)
    os.mkdir(os.path.join(d, "hermetic"))
    for name in os.listdir(os.path.join(HERE, "hermetic")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(HERE, "hermetic", name), os.path.join(d, "hermetic"))
    return d


def timed(cmd, env):
    """Wall-clock and CPU (user + system) seconds of one run. CPU time is
    the steadier figure on a machine other work shares."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--settings", help="HERMETIC_SHIM settings as JSON (default: network allowlist, no subprocess, block native, sealed)")
    ap.add_argument("--fs-root", action="store_true", help="add fs_readonly with the file-heavy directory as root")
    args = ap.parse_args()
    runs = max(3, min(args.runs, 200))

    work = tempfile.mkdtemp(prefix="hermetic-bench-")
    try:
        data = os.path.join(work, "data")
        os.mkdir(data)
        for i in range(300):
            with open(os.path.join(data, "f%03d.txt" % i), "wb") as f:
                f.write(os.urandom(2048))
        cache = os.path.join(work, "cache")
        settings = json.loads(args.settings) if args.settings else dict(DEFAULT_SETTINGS)
        settings["cache_dir"] = cache
        if args.fs_root:
            settings["fs_readonly"] = True
            settings["fs_root"] = work
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HERMETIC"))}
        base_env["BENCH_DIR"] = data
        workloads = [
            ("start-up (-c pass)", [args.python, "-c", "pass"]),
            ("import-heavy", [args.python, "-c", IMPORT_HEAVY]),
            ("file-heavy (6000 reads)", [args.python, "-c", FILE_HEAVY]),
        ]
        print("python: %s" % args.python)
        print("settings: %s" % json.dumps(settings))
        print("minimum of %d runs each, wall clock and CPU (user+system); median wall clock in brackets" % runs)
        print("%-26s %8s %8s %7s %8s | %8s %8s %7s %8s | %s" % (
            "workload", "bare ms", "shim ms", "ratio", "added", "bare cpu", "shim cpu", "ratio", "added", "median wall"))
        for label, cmd in workloads:
            bare, shim = [], []
            for i in range(runs + 1):
                d = fresh_shim(work)
                env = dict(base_env)
                env["PYTHONPATH"] = d
                env["HERMETIC_SHIM"] = json.dumps(settings)
                # Alternate the order, so that a slow spell of a shared
                # machine falls on both sides.
                if i % 2:
                    s_, b = timed(cmd, env), timed(cmd, base_env)
                else:
                    b, s_ = timed(cmd, base_env), timed(cmd, env)
                shutil.rmtree(d)
                if i:  # the first pair warms the OS and fills the cache
                    bare.append(b)
                    shim.append(s_)
            mb, ms = min(x[0] for x in bare) * 1000, min(x[0] for x in shim) * 1000
            cb, cs = min(x[1] for x in bare) * 1000, min(x[1] for x in shim) * 1000
            db, ds = statistics.median(x[0] for x in bare) * 1000, statistics.median(x[0] for x in shim) * 1000
            print(
                "%-26s %8.1f %8.1f %7.3f %8.1f | %8.1f %8.1f %7.3f %8.1f | %.1f / %.1f"
                % (label, mb, ms, ms / mb, ms - mb, cb, cs, cs / cb, cs - cb, db, ds)
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
