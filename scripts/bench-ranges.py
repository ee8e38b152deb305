#!/usr/bin/env python3
"""HTTP Range requests of a 64 MiB object: what verifying only the chunks a
range lies in saves (docs/performance.md, "Ranges").

  scripts/bench-ranges.py BIN_DIR [--base BASE_BIN_DIR] [--runs N] [--seconds S]
                          [--kind KIND ...] [--connections C ...] [--prefetch-runs N]

One nginx origin serves one 64 MiB PNG (random bytes after its signature).
Each daemon (BIN_DIR's, and BASE_BIN_DIR's when given: a build of another
commit, such as the one before chunk digests, which hashes the whole object
for any range) gets its own store, prefetched from that origin, and its HTTP
front-end on a loopback port. One client, wrk (one thread), asks each the
same requests, the daemons interleaved in every round (the order rotated):

  range 1 byte   Range: bytes=N-N, N cycling through 63 offsets, one per MiB
  range 1 MiB    Range: bytes=N-(N+1 MiB-1) at the same N: two chunks each
  whole          a plain GET of the object (64 MiB hashed and sent)

at 1 and 8 connections; requests/s and the daemon's CPU per request,
medians of the rounds. Then the commit side: each build downloads the image
into a fresh store, interleaved (--prefetch-runs). A benchmark: it prints
figures and asserts nothing.
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
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, nginx_conf, start_cached, stop, wait_for  # noqa: E402
from benchhttp import wrk_requests_script  # noqa: E402

MIB = 1 << 20
SIZE = 64 * MIB
OFFSETS = [k * MIB + 12345 for k in range(63)]
KINDS = {
    "range 1 byte": lambda n: "bytes=%d-%d" % (n, n),
    "range 1 MiB": lambda n: "bytes=%d-%d" % (n, n + MIB - 1),
    "whole": None,
}


def wrk_script(path, kind):
    """A wrk script cycling through the requests of `kind` for `path` and
    printing requests, bytes, microseconds and errors on one line."""
    make = KINDS[kind]
    if make is None:
        reqs = 'reqs[1] = wrk.format("GET", "%s")' % path
    else:
        reqs = "\n  ".join('reqs[%d] = wrk.format("GET", "%s", {Range = "%s"})' % (i + 1, path, make(n))
                           for i, n in enumerate(OFFSETS))
    return wrk_requests_script("\n", reqs)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url, script, connections, seconds, pid):
    """One wrk run: requests/s and the daemon's CPU microseconds per request; refused on any error."""
    before = cpu_seconds(pid)
    out = subprocess.run(["wrk", "-t1", "-c%d" % connections, "-d%ds" % seconds, "--timeout", "60s", "-s", script, url],
                         check=True, capture_output=True, text=True).stdout
    cpu = cpu_seconds(pid) - before
    line = [x for x in out.splitlines() if x.startswith("BENCH ")][-1].split()
    requests, _, micros, errors, status = map(int, line[1:])
    if errors or status or not requests:
        raise SystemExit("wrk against %s: %d requests, %d socket errors, %d answers not 2xx/3xx" % (url, requests, errors, status))
    return requests / (micros / 1e6), cpu / requests * 1e6


def write_origin(www):
    """The 64 MiB PNG and a manifest naming it."""
    os.makedirs(www)
    with open(os.path.join(www, "big.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(SIZE - 8))
    with open(os.path.join(www, "manifest.json"), "w") as f:
        json.dump([{"url": "big.png", "description": "64 MiB"}], f)


def check_ranges(base, path):
    """Refuses to time a daemon whose answers are not the object's bytes."""
    with open(path, "rb") as f:
        data = f.read()
    for n in (OFFSETS[0], OFFSETS[-1]):
        req = urllib.request.Request(base + "/images/0", headers={"Range": "bytes=%d-%d" % (n, n + MIB - 1)})
        with urllib.request.urlopen(req, timeout=60) as r:
            if r.status != 206 or r.read() != data[n:n + MIB]:
                raise SystemExit("%s answers a range with other bytes" % base)


class Side:
    """One daemon: its store prefetched, its HTTP port, its process."""

    def __init__(self, name, bin_dir, tmp, manifest, procs):
        self.name = name
        store, sock, self.port = os.path.join(tmp, "store-" + name), os.path.join(tmp, name + ".sock"), free_port()
        cachectl = start_cached(procs, bin_dir, store, sock, "--images-url", manifest, "--max-object-size", "80M",
                                "--http-listen", "127.0.0.1:%d" % self.port, "--config", "/dev/null")
        self.pid = procs[-1].pid
        subprocess.run([cachectl, "--socket", sock, "prefetch", "images"], check=True, capture_output=True)
        self.base = "http://127.0.0.1:%d" % self.port


def prefetches(bins, tmp, manifest, runs):
    """The commit side: each build downloads the 64 MiB image into a fresh
    store `runs` times, the builds interleaved (order rotated); the
    daemon's wall seconds and CPU seconds for each: {name: [(s, cpu s)]}."""
    got = {name: [] for name in bins}
    names = list(bins)
    for r in range(runs):
        for name in names[r % len(names):] + names[:r % len(names)]:
            procs = []
            store, sock = os.path.join(tmp, "prefetch-" + name), os.path.join(tmp, "prefetch-%s.sock" % name)
            cachectl = start_cached(procs, bins[name], store, sock, "--images-url", manifest, "--max-object-size", "80M",
                                    "--config", "/dev/null")
            before, started = cpu_seconds(procs[-1].pid), time.time()
            subprocess.run([cachectl, "--socket", sock, "prefetch", "images"], check=True, capture_output=True)
            got[name].append((time.time() - started, cpu_seconds(procs[-1].pid) - before))
            stop(procs[-1])
            shutil.rmtree(store, ignore_errors=True)
    return got


def measure(sides, tmp, runs, seconds, kinds, connections):
    """Every kind at every concurrency on every side, rotated in each round:
    {(kind, c): {side: [(req/s, cpu us), ...]}}."""
    got = {}
    for kind in kinds:
        script = os.path.join(tmp, "wrk-%s.lua" % kind.replace(" ", "-"))
        with open(script, "w") as f:
            f.write(wrk_script("/images/0", kind))
        for c in connections:
            cell = got.setdefault((kind, c), {s.name: [] for s in sides})
            for r in range(runs):
                for s in sides[r % len(sides):] + sides[:r % len(sides)]:
                    cell[s.name].append(wrk(s.base, script, c, seconds, s.pid))
    return got


def table(got, names):
    rows = []
    for (kind, c), cell in got.items():
        med = {n: (statistics.median(x[0] for x in cell[n]), statistics.median(x[1] for x in cell[n])) for n in names}
        rows.append((kind, c, med))
    return rows


def run(bin_dir, base_dir, runs, seconds, kinds=tuple(KINDS), connections=(1, 8), prefetch_runs=0):
    """The table's rows (kind, c, {side: (req/s, CPU us)}) and, with
    `prefetch_runs`, the prefetch medians {side: (s, CPU s)}."""
    tmp = tempfile.mkdtemp(prefix="cached-ranges-")
    os.chmod(tmp, 0o755)  # nginx's workers run as an unprivileged user
    procs = []
    try:
        www = os.path.join(tmp, "www")
        write_origin(www)
        nport = free_port()
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(nginx_conf(tmp, nport, www))
        os.makedirs(os.path.join(tmp, "ntmp"))
        procs.append(subprocess.Popen(["nginx", "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        import socket
        if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", nport)) == 0):
            raise SystemExit("nginx did not start")
        manifest = "http://127.0.0.1:%d/manifest.json" % nport
        sides = [Side("new", bin_dir, tmp, manifest, procs)]
        if base_dir:
            sides.insert(0, Side("base", base_dir, tmp, manifest, procs))
        for s in sides:
            check_ranges(s.base, os.path.join(www, "big.png"))
        rows = table(measure(sides, tmp, runs, seconds, kinds, connections), [s.name for s in sides])
        for p in reversed(procs[1:]):
            stop(p)
        bins = {"base": base_dir, "new": bin_dir} if base_dir else {"new": bin_dir}
        got = prefetches(bins, tmp, manifest, prefetch_runs) if prefetch_runs else {}
        return rows, {n: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for n, v in got.items()}
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--base", help="a build of another commit (the one before chunk digests) to compare with")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--kind", action="append", choices=list(KINDS), help="only these requests (repeatable; default all)")
    ap.add_argument("--connections", action="append", type=int, help="only these concurrencies (repeatable; default 1 and 8)")
    ap.add_argument("--prefetch-runs", type=int, default=5, help="downloads of the image into a fresh store per build (0: none)")
    a = ap.parse_args()
    rows, pre = run(a.bin, a.base, a.runs, a.seconds, a.kind or tuple(KINDS), a.connections or (1, 8), a.prefetch_runs)
    if a.base:
        print("\n| request (64 MiB object) | c | base req/s | new req/s | new/base | base CPU us/req | new CPU us/req |")
        print("|---|---|---|---|---|---|---|")
        for kind, c, m in rows:
            print("| %s | %d | %.1f | %.1f | %.1fx | %.0f | %.0f |" % (kind, c, m["base"][0], m["new"][0], m["new"][0] / m["base"][0],
                                                                   m["base"][1], m["new"][1]))
        if pre:
            print("| prefetch of the image into a fresh store, s (CPU s); ratio base s / new s | - | %.2f (%.2f) | %.2f (%.2f) | %.2fx | - | - |"
                  % (pre["base"][0], pre["base"][1], pre["new"][0], pre["new"][1], pre["base"][0] / pre["new"][0]))
        print("\nMedians of %d rounds of %d s (prefetch: of %d), base and new interleaved (order rotated); the same wrk for both."
              % (a.runs, a.seconds, a.prefetch_runs))
    else:
        print("\n| request (64 MiB object) | c | req/s | CPU us/req |\n|---|---|---|---|")
        for kind, c, m in rows:
            print("| %s | %d | %.1f | %.0f |" % (kind, c, m["new"][0], m["new"][1]))
        if pre:
            print("\nprefetch of the image into a fresh store: %.2f s, %.2f CPU s (median of %d)" % (pre["new"][0], pre["new"][1], a.prefetch_runs))


if __name__ == "__main__":
    main()
