#!/usr/bin/env python3
"""Serving bytes: every object through `open`, through `read`, and plainly.

Four ways of reading every cached object once, A/B interleaved per round
(the order rotates every round), medians in MiB/s:

  files  cached-bench read-all --mode files: each object file opened, read
         into a 128 KiB buffer and closed, in one process (the page-cache
         baseline `open` is measured against)
  open   cached-bench read-all --mode open --window 16: `open` over the
         socket (the daemon verifies the object, or under verify-reads
         on-change trusts it unchanged, and passes a descriptor), the
         descriptor read into a 128 KiB buffer and closed; 16 opens in flight
  open-batch
         cached-bench read-all --mode open --batch 64 --window 2: the same
         through `open` of many objects, 64 hashes a request (one answer
         line, 64 descriptors in one message), 2 requests in flight
  read   cached-bench read-all --mode read --window 16: the verified bytes
         over the socket, 16 reads in flight
  cat    cat of every object file to /dev/null (timed from outside)

A benchmark: it prints figures and asserts nothing.

  scripts/bench-open.py BIN_DIR [--runs N] [--quick] [--btrfs [--btrfs-only]]
                        [--small N] [--large N]

Standalone it serves 1,000 files of 100 KiB and 100 of 2 MiB (the mix of
make bench; --small and --large change the counts: the mixes of issue 34
are --small 200 --large 0 and --small 0 --large 20) from Examples/origin-server.py, prefetches them into a fresh
store in the tmp dir (and with --btrfs into a second one on a btrfs loop
mount, scripts/benchfs.py) and measures. `measure_reads(bin_dir, stores,
runs)` is what scripts/bench.py imports, for daemons it started itself.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchfs  # noqa: E402
from benchlib import interleave, start_cached, start_origin, stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("files", "open", "open-batch", "read", "cat")
# Each cached-bench run reads every object this many times (one process),
# and at least READ_PER_RUN bytes: a small mix read 3 times is a few
# milliseconds, which the machine's noise swamps.
ROUNDS_PER_RUN = 3
READ_PER_RUN = 256 << 20
# `open`s in flight (cached-bench read-all --window).
OPEN_WINDOW = 16
# `open` of many: hashes a request (the protocol's most), requests in flight.
OPEN_BATCH, OPEN_BATCH_WINDOW = 64, 2


def _objects(store):
    objects = os.path.join(store, "objects")
    return [os.path.join(dp, f) for dp, _, fs in os.walk(objects) for f in fs]


def _rounds(store):
    """Reads of every object per cached-bench run: ROUNDS_PER_RUN, more for a small store."""
    total = sum(os.path.getsize(p) for p in _objects(store))
    return max(ROUNDS_PER_RUN, -(-READ_PER_RUN // max(total, 1)))


def _cat(store):
    total = sum(os.path.getsize(p) for p in _objects(store))
    t = time.time()
    subprocess.run("cat %s/objects/*/* > /dev/null" % store, shell=True, check=True)
    return total / 1048576 / (time.time() - t)


def _bench(bin_dir, sock, kind, rounds):
    mode = {"open-batch": "open"}.get(kind, kind)
    extra = {"open": ["--window", str(OPEN_WINDOW)], "read": ["--window", str(OPEN_WINDOW)],
             "open-batch": ["--batch", str(OPEN_BATCH), "--window", str(OPEN_BATCH_WINDOW)]}.get(kind, [])
    out = subprocess.run(["nice", os.path.join(bin_dir, "cached-bench"), "read-all", "--socket", sock, "--mode", mode,
                          "--rounds", str(rounds)] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["mib_per_s"]


def _side(bin_dir, store, sock, kind, rounds):
    """One way of reading every object of one store: a function giving its MiB/s."""
    if kind == "cat":
        return lambda: _cat(store)
    return lambda: _bench(bin_dir, sock, kind, rounds)


def measure_reads(bin_dir, stores, runs, kinds=KINDS):
    """Medians over `runs` rounds, in MiB/s, per store: {label: {"files",
    "open", "open-batch", "read", "cat"}}.

    `stores` is {label: (store directory, socket of the daemon serving it
    with its objects cached)}, e.g. one on ext4 and one on btrfs. Every
    round runs each way of reading each store once, in an order rotated by
    one each round (benchlib.interleave), so each store's direct reads are
    measured beside its daemon's modes and no side always follows the same
    other one.
    """
    sides = {}
    for label, (store, sock) in stores.items():
        # One untimed pass: every file in the page cache, the daemon warm.
        _bench(bin_dir, sock, "files", 1)
        _bench(bin_dir, sock, "open", 1)
        rounds = _rounds(store)
        for kind in kinds:
            sides[(label, kind)] = _side(bin_dir, store, sock, kind, rounds)
    got = interleave(sides, runs)
    return {label: {kind: statistics.median(got[(label, kind)]) for kind in kinds} for label in stores}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="100 + 10 files instead of 1,000 + 100")
    ap.add_argument("--btrfs", action="store_true", help="a second store on a btrfs loop mount (root)")
    ap.add_argument("--small", type=int, help="objects of 100 KiB (default 1,000; --quick 100)")
    ap.add_argument("--large", type=int, help="objects of 2 MiB (default 100; --quick 10)")
    ap.add_argument("--btrfs-only", action="store_true", help="with --btrfs, no store on the scratch file system")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="the ways of reading measured (default all; a daemon older than open of many: no open-batch)")
    args = ap.parse_args()
    small, large = (100, 10) if args.quick else (1000, 100)
    small = small if args.small is None else args.small
    large = large if args.large is None else args.large
    tmp = tempfile.mkdtemp(prefix="cached-bench-open-")
    btrfs = benchfs.Btrfs(tmp)
    procs = []
    try:
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        base = start_origin(procs, os.path.join(ROOT, "Examples", "origin-server.py"), www, tmp)
        manifest = benchfs.write_images(www, lambda name: base + "/" + name, small, large)
        roots = {} if args.btrfs and args.btrfs_only else {benchfs.mount_type(tmp): tmp}
        if args.btrfs and btrfs.path():
            roots["btrfs"] = btrfs.path()
        stores = {}
        for label, root in roots.items():
            store, sock = os.path.join(root, "store"), os.path.join(tmp, "cached-%s.sock" % label)
            cachectl = start_cached(procs, args.bin_dir, store, sock, "--images-url", manifest, "--concurrency", "16")
            subprocess.run([cachectl, "--socket", sock, "--timeout", "0", "prefetch", "images"], check=True, capture_output=True)
            benchfs.verify_reads(sock, label, "on-change" if label == "btrfs" else None)
            stores[label] = (store, sock)
        objects = _objects(stores[next(iter(stores))][0])
        print("serving bytes: %d objects, %.0f MiB, %d rounds (medians, MiB/s)" %
              (len(objects), sum(map(os.path.getsize, objects)) / 1048576, args.runs))
        kinds = tuple(args.kinds.split(","))
        got = measure_reads(args.bin_dir, stores, args.runs, kinds)
        for label, m in got.items():
            for k in kinds:
                print("  %-6s %-10s %8.0f   %.2fx files" % (label, k, m[k], m[k] / m["files"]))
        print(json.dumps(got))
    finally:
        for p in reversed(procs):
            stop(p)
        btrfs.remove()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
