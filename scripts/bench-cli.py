#!/usr/bin/env python3
"""cachectl as scripts use it: one whole process per call, against redis-cli.

`cachectl --json get post 1` against `redis-cli -s SOCK GET key`, with Redis
holding exactly the bytes cachectl prints (so both print the same line), A/B
interleaved, medians of RUNS pairs: wall time from spawn to exit, and peak
resident memory of the whole process (GNU time's %M, in a run of its own). A benchmark: it
prints figures and asserts nothing.

  scripts/bench-cli.py BIN_DIR [--runs N]

Standalone it starts the example origin, a daemon with the posts prefetched
and a redis-server on a Unix socket. `measure_cli(bin_dir, sock, redis_sock,
runs=20)` is what scripts/bench.py can import, for servers it started itself.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import quiet, start_cached, start_origin, stop, wait_for as _wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "cached:post:1"


def _run(argv):
    """Wall milliseconds of one whole process, spawn to exit; its stdout."""
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    ms = (time.perf_counter() - t) * 1000
    os.close(r)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed with status %d" % (argv, os.waitstatus_to_exitcode(status)))
    return ms, out


def _peak_kib(argv, scratch):
    """Peak resident KiB of one whole process, from GNU time (%M).

    Not this Python's wait4: a child spawned from a large process inherits
    its parent's high-water mark across exec (vfork or fork both count the
    parent's pages), so ru_maxrss here would be Python's. /usr/bin/time is
    small (it adds under 1 MiB, the same to both sides).
    """
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", scratch] + argv, check=True, stdout=subprocess.DEVNULL)
    with open(scratch) as f:
        return int(f.read().split()[-1])


def measure_cli(bin_dir, sock, redis_sock, runs=20):
    """Medians over `runs` interleaved pairs: {cachectl_ms, cachectl_kib, redis_cli_ms, redis_cli_kib}.

    The daemon on `sock` must have post 1; Redis on `redis_sock` is given
    the exact line `cachectl --json get post 1` prints (without the newline
    redis-cli adds), and both outputs are checked to be the same bytes.
    """
    cachectl = [os.path.join(bin_dir, "cachectl"), "--socket", sock, "--json", "get", "post", "1"]
    redis_cli = shutil.which("redis-cli")
    if redis_cli is None:
        raise SystemExit("redis-cli is not installed (apt-get install redis-tools)")
    _, line = _run(cachectl)
    subprocess.run([redis_cli, "-s", redis_sock, "-x", "SET", KEY], input=line.rstrip(b"\n"), check=True, capture_output=True)
    redis = [redis_cli, "-s", redis_sock, "GET", KEY]
    _, same = _run(redis)
    if same != line:
        raise SystemExit("redis-cli printed other bytes than cachectl: %r vs %r" % (same[:80], line[:80]))
    fd, scratch = tempfile.mkstemp(prefix="bench-cli-time-")
    os.close(fd)
    figures = {"cachectl_ms": [], "cachectl_kib": [], "redis_cli_ms": [], "redis_cli_kib": []}
    for i in range(runs + 2):
        pair = [("cachectl", cachectl), ("redis_cli", redis)]
        if i % 2:
            pair.reverse()
        for name, argv in pair:
            ms, _ = _run(argv)
            kib = _peak_kib(argv, scratch)
            if i >= 2:  # two warm-up pairs: page cache, the daemon's first connections
                figures[name + "_ms"].append(ms)
                figures[name + "_kib"].append(kib)
    os.unlink(scratch)
    return {k: statistics.median(v) for k, v in figures.items()}




def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cached-bench-cli-")
    procs = []
    try:
        base = start_origin(procs, os.path.join(ROOT, "Examples", "origin-server.py"), os.path.join(ROOT, "Examples", "origin"), tmp)
        sock, redis_sock = os.path.join(tmp, "cached.sock"), os.path.join(tmp, "redis.sock")
        procs.append(quiet(["redis-server", "--port", "0", "--unixsocket", redis_sock, "--save", "", "--appendonly", "no"]))
        cachectl = start_cached(procs, args.bin_dir, os.path.join(tmp, "store"), sock, "--posts-url", base + "/posts.json")
        if not _wait_for(lambda: subprocess.run(["redis-cli", "-s", redis_sock, "PING"], capture_output=True).returncode == 0):
            raise SystemExit("redis-server did not start")
        subprocess.run([cachectl, "--socket", sock, "prefetch", "posts"], check=True, capture_output=True)
        m = measure_cli(args.bin_dir, sock, redis_sock, args.runs)
        print("one process per call, medians of %d interleaved pairs:" % args.runs)
        print("  cachectl --json get post 1   %6.2f ms  %6d KiB peak RSS" % (m["cachectl_ms"], m["cachectl_kib"]))
        print("  redis-cli GET (same bytes)   %6.2f ms  %6d KiB peak RSS" % (m["redis_cli_ms"], m["redis_cli_kib"]))
        print("  ratio                        %6.2fx    %6.2fx" % (m["cachectl_ms"] / m["redis_cli_ms"], m["cachectl_kib"] / m["redis_cli_kib"]))
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
