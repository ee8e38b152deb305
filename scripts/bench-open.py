#!/usr/bin/env python3
"""Serving bytes: every object through `open`, through `read`, and plainly.

Four ways of reading every cached object once, A/B interleaved per round
(the order rotates every round), medians in MiB/s:

  files  cached-bench read-all --mode files: each object file opened, read
         into a 128 KiB buffer and closed, in one process (the page-cache
         baseline `open` is measured against)
  open   cached-bench read-all --mode open: `open` over the socket (the
         daemon verifies the object and passes a descriptor), the descriptor
         read into a 128 KiB buffer and closed; 4 opens in flight
  read   cached-bench read-all --mode read: the verified bytes over the socket
  cat    cat of every object file to /dev/null (timed from outside)

A benchmark: it prints figures and asserts nothing.

  scripts/bench-open.py BIN_DIR [--runs N] [--quick]

Standalone it serves 1,000 files of 100 KiB and 100 of 2 MiB (the mix of
make bench) from Examples/origin-server.py, prefetches them into a fresh
store and measures. `measure_reads(bin_dir, store, sock, runs)` is what
scripts/bench.py can import, for a daemon it started itself.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import start_cached, start_origin, stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("files", "open", "read")
# Each cached-bench run reads every object this many times (one process).
ROUNDS_PER_RUN = 3


def _objects(store):
    objects = os.path.join(store, "objects")
    return [os.path.join(dp, f) for dp, _, fs in os.walk(objects) for f in fs]


def _cat(store):
    total = sum(os.path.getsize(p) for p in _objects(store))
    t = time.time()
    subprocess.run("cat %s/objects/*/* > /dev/null" % store, shell=True, check=True)
    return total / 1048576 / (time.time() - t)


def _bench(bin_dir, sock, mode):
    out = subprocess.run(["nice", os.path.join(bin_dir, "cached-bench"), "read-all", "--socket", sock, "--mode", mode,
                          "--rounds", str(ROUNDS_PER_RUN)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["mib_per_s"]


def measure_reads(bin_dir, store, sock, runs):
    """Medians over `runs` rounds, in MiB/s: {"files", "open", "read", "cat"}.

    Every round runs each of the four once, in an order rotated by one each
    round, so no way of reading always follows the same other one. The
    daemon on `sock` must serve the store at `store` with its objects cached.
    """
    kinds = list(MODES) + ["cat"]
    figures = {k: [] for k in kinds}
    # One untimed pass: every file in the page cache, the daemon warm.
    _bench(bin_dir, sock, "files")
    _bench(bin_dir, sock, "open")
    for r in range(runs):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
        for k in order:
            figures[k].append(_cat(store) if k == "cat" else _bench(bin_dir, sock, k))
    return {k: statistics.median(v) for k, v in figures.items()}




def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="100 + 10 files instead of 1,000 + 100")
    args = ap.parse_args()
    small, large = (100, 10) if args.quick else (1000, 100)
    tmp = tempfile.mkdtemp(prefix="cached-bench-open-")
    procs = []
    try:
        www = os.path.join(tmp, "www")
        os.makedirs(os.path.join(www, "img"))
        for i in range(small + large):
            n = 100 * 1024 if i < small else 2 * 1024 * 1024
            with open(os.path.join(www, "img", "%04d.png" % i), "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(n - 8))
        with open(os.path.join(www, "manifest.json"), "w") as f:
            json.dump([{"url": "img/%04d.png" % i} for i in range(small + large)], f)
        base = start_origin(procs, os.path.join(ROOT, "Examples", "origin-server.py"), www, tmp)
        store, sock = os.path.join(tmp, "store"), os.path.join(tmp, "cached.sock")
        cachectl = start_cached(procs, args.bin_dir, store, sock, "--images-url", base + "/manifest.json", "--concurrency", "16")
        subprocess.run([cachectl, "--socket", sock, "--timeout", "0", "prefetch", "images"], check=True, capture_output=True)
        total = sum(os.path.getsize(p) for p in _objects(store))
        print("serving bytes: %d objects, %.0f MiB, %d rounds (medians, MiB/s)" % (len(_objects(store)), total / 1048576, args.runs))
        m = measure_reads(args.bin_dir, store, sock, args.runs)
        for k in ("files", "open", "read", "cat"):
            print("  %-6s %8.0f   %.2fx files" % (k, m[k], m[k] / m["files"]))
        print(json.dumps(m))
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
