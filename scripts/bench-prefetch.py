#!/usr/bin/env python3
"""An images prefetch from nginx: cached against curl and aria2c, interleaved.

  scripts/bench-prefetch.py BIN_DIR [--runs N] [--files-small N --files-large N]
                            [--base BASE_BIN_DIR] [--profile [DIR]] [--ext4-journal]

Serves SMALL files of 100 KiB and LARGE files of 2 MiB (random bytes after a
PNG signature) from nginx on 127.0.0.1, configured as in scripts/bench.py.
Each round runs, one after the other: `cachectl prefetch images` into a fresh
store (`--concurrency 16`; the daemon is started and pinged first, only the
prefetch is timed), `curl --parallel --parallel-max 16` into an empty folder,
`aria2c -j 16 -x 1 --file-allocation=none`, and the durable-files floor:
the same bytes, already in this script's memory, written as the store
writes an object (a temp file, `fsync`, `rename` into a fan-out directory,
`fsync` of that directory; a new fan-out directory's parent fsynced too) on
16 threads, with no network, hashing or log: what durability alone costs
on this file system, which curl does not pay. With `--base`, a second
cached (an older build) runs in every round too, before or after the first in
alternate rounds, for an A/B of a change. Prints the medians of the rounds
and the ratios; the last line is JSON (cached_s, curl_s, aria2c_s, and
floor_s, base_s with --base, plus the daemon's CPU seconds per prefetch).

With `--ext4-journal` it all runs on an ext4 made with mkfs's defaults (so
with a journal) on a loop device, rather than in $TMPDIR.

With `--profile`, one more prefetch each under `perf stat -e task-clock`,
`perf record -g` (cpu-clock) and `strace -c -f`, attached to the daemon, and
the per-thread CPU split; the summaries are saved to DIR (default
./prefetch-profile) and printed. Profiled runs are not in the medians.

A benchmark: it prints figures and asserts nothing. scripts/bench.py can
import `measure_prefetch(bin_dir, runs, tmp, small, large)`.
"""
import argparse
import concurrent.futures
import hashlib
import threading
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchfs  # noqa: E402
from benchlib import fsync_dir, nginx_conf, wait_for as _wait_for, free_port as _free_port, stop as _stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
# With --keep-files, what each round downloaded is removed only at the end:
# on an ext4 without a journal, every new inode is searched for past the
# inodes deleted in the last minute or more (`recently_deleted`), so deleting
# 1,100 files between rounds makes the next round's file creation slower.
KEPT = []


def _remove(path):
    if KEPT is not None and _keep_files[0]:
        KEPT.append(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


_keep_files = [False]








def _cpu_seconds(pid):
    """User and system CPU seconds of a process (all its threads so far)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def _thread_cpu(pid):
    """CPU seconds (user + system) per thread name."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


class Origin:
    """nginx serving the files, as scripts/bench.py sets it up."""

    def __init__(self, tmp, small, large):
        self.tmp = tmp
        www = os.path.join(tmp, "www")
        os.makedirs(os.path.join(www, "img"))
        os.chmod(tmp, 0o755)  # nginx's workers run as an unprivileged user
        self.port = _free_port()
        self.urls = []
        self.bytes = 0
        self.bodies = []  # the floor's input (_floor_round)
        for i in range(small + large):
            n = 100 * 1024 if i < small else 2 * 1024 * 1024
            name = "img/%04d.png" % i
            body = b"\x89PNG\r\n\x1a\n" + os.urandom(n - 8)
            with open(os.path.join(www, name), "wb") as f:
                f.write(body)
            self.bodies.append(body)
            self.bytes += n
            self.urls.append("http://127.0.0.1:%d/%s" % (self.port, name))
        with open(os.path.join(www, "manifest.json"), "w") as f:
            json.dump([{"url": u, "description": str(i)} for i, u in enumerate(self.urls)], f)
        self.url_list = os.path.join(tmp, "urls.txt")
        with open(self.url_list, "w") as f:
            f.write("\n".join(self.urls) + "\n")
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(tmp, self.port, www))
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", self.port)) == 0):
            raise SystemExit("nginx did not start")
        self.manifest = "http://127.0.0.1:%d/manifest.json" % self.port
        # Said here rather than as a failed prefetch (cachectl's exit 6): a
        # 403 is a folder above `tmp` nginx's workers may not enter.
        try:
            urllib.request.urlopen(self.manifest, timeout=30).close()
        except urllib.error.HTTPError as e:
            self.stop()
            raise SystemExit("nginx answers %d for the manifest: its workers (an unprivileged user) cannot read %s; "
                             "every folder above it must be traversable" % (e.code, www))

    def nginx_pids(self):
        """The master and its workers."""
        pids = [self.proc.pid]
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                            pids.append(int(p))
                except OSError:
                    pass
        return pids

    def stop(self):
        _stop(self.proc)


# The daemons started and not yet stopped: main's `finally` stops them (a
# failed prefetch or profile must not keep a store, or a mount, busy).
_running = set()


class Daemon:
    def __init__(self, bin_dir, store, sock, manifest, env=None):
        self.bin = bin_dir
        self.sock = sock
        self.store = store
        self.proc = subprocess.Popen([os.path.join(bin_dir, "cached"), "--store", store, "--socket", sock,
                                      "--log-level", "warning", "--config", "/dev/null",
                                      "--images-url", manifest, "--concurrency", "16"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        _running.add(self)
        if not _wait_for(lambda: subprocess.run(self.ctl("ping"), capture_output=True).returncode == 0):
            _running.discard(self)
            _stop(self.proc)
            raise SystemExit("cached did not start: " + bin_dir)

    def ctl(self, *args):
        return [os.path.join(self.bin, "cachectl"), "--socket", self.sock] + list(args)

    def prefetch(self):
        """Wall seconds of one `cachectl prefetch images`, and the daemon's CPU seconds meanwhile."""
        u0, s0 = _cpu_seconds(self.proc.pid)
        t = time.time()
        subprocess.run(self.ctl("prefetch", "images"), check=True, capture_output=True)
        wall = time.time() - t
        u1, s1 = _cpu_seconds(self.proc.pid)
        return wall, u1 - u0, s1 - s0

    def stop(self):
        _running.discard(self)
        _stop(self.proc)
        _remove(self.store)


def _cached_round(bin_dir, tmp, name, origin, env=None):
    d = Daemon(bin_dir, os.path.join(tmp, "store-" + name), os.path.join(tmp, name + ".sock"), origin.manifest, env)
    try:
        return d.prefetch()
    finally:
        d.stop()


def _curl_round(tmp, name, origin):
    out = os.path.join(tmp, "dl-" + name)
    os.makedirs(out)
    t = time.time()
    subprocess.run(["curl", "-s", "--parallel", "--parallel-max", "16", "--output-dir", out, "--remote-name-all"] + origin.urls,
                   check=True, capture_output=True)
    wall = time.time() - t
    _remove(out)
    return wall


def _aria_round(tmp, name, origin):
    out = os.path.join(tmp, "dl-" + name)
    os.makedirs(out)
    t = time.time()
    subprocess.run(["aria2c", "-q", "-j", "16", "-x", "1", "--file-allocation=none", "-d", out, "-i", origin.url_list],
                   check=True, capture_output=True)
    wall = time.time() - t
    _remove(out)
    return wall


def _floor_round(tmp, name, origin):
    """Wall seconds of writing origin's files durably, as the store does (module doc)."""
    out = os.path.join(tmp, "floor-" + name)
    temp, objects = os.path.join(out, "tmp"), os.path.join(out, "objects")
    os.makedirs(temp)
    os.makedirs(objects)
    made, lock = set(), threading.Lock()

    def store(i, body):
        name = hashlib.md5(body[-4096:]).hexdigest()
        part = os.path.join(temp, "%d.part" % i)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view[:1 << 20]):]
            os.fsync(fd)
        finally:
            os.close(fd)
        fan = os.path.join(objects, name[:2])
        with lock:
            new = name[:2] not in made
            if new:
                os.mkdir(fan)
                made.add(name[:2])
        if new:
            fsync_dir(objects)
        os.rename(part, os.path.join(fan, name[2:]))
        fsync_dir(fan)

    t = time.time()
    pool = concurrent.futures.ThreadPoolExecutor(16)
    try:
        for f in [pool.submit(store, i, b) for i, b in enumerate(origin.bodies)]:
            f.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on an error, the writes not begun are dropped
    wall = time.time() - t
    _remove(out)
    return wall


def _rounds(bin_dir, runs, tmp, origin, base=None, env=None, base_env=None, peers=True):
    cached, cpu_user, cpu_sys, curl, aria, based, based_cpu, floor = [], [], [], [], [], [], [], []
    for r in range(runs):
        sides = [("new", bin_dir, env)] + ([("base", base, base_env)] if base else [])
        if r % 2 == 1:
            sides.reverse()
        for side, b, e in sides:
            wall, u, s = _cached_round(b, tmp, "%s-%d" % (side, r), origin, e)
            if side == "new":
                cached.append(wall); cpu_user.append(u); cpu_sys.append(s)
            else:
                based.append(wall); based_cpu.append(u + s)
        curl.append(_curl_round(tmp, "curl-%d" % r, origin) if peers else float("nan"))
        aria.append(_aria_round(tmp, "aria-%d" % r, origin) if peers else float("nan"))
        floor.append(_floor_round(tmp, "%d" % r, origin) if peers else float("nan"))
        print("  round %d: cached %.3f s (daemon cpu %.2f user + %.2f sys)%s, curl %.3f s, aria2c %.3f s, durable floor %.3f s"
              % (r + 1, cached[-1], cpu_user[-1], cpu_sys[-1], (", base %.3f s (cpu %.2f)" % (based[-1], based_cpu[-1])) if base else "",
                 curl[-1], aria[-1], floor[-1]),
              file=sys.stderr, flush=True)
    med = statistics.median
    out = {"cached_s": med(cached), "curl_s": med(curl), "aria2c_s": med(aria),
           "cached_vs_curl": med(cached) / med(curl), "cached_vs_aria2c": med(cached) / med(aria),
           # Each round's own ratio, then their median: on a shared machine a
           # round's tools ran seconds apart, under the same other load.
           "cached_vs_curl_paired": med([a / b for a, b in zip(cached, curl)]) if peers else float("nan"),
           "cached_vs_aria2c_paired": med([a / b for a, b in zip(cached, aria)]) if peers else float("nan"),
           # The floor: durability alone (_floor_round) against curl, and cached against it.
           "floor_s": med(floor), "floor_vs_curl": med(floor) / med(curl), "cached_vs_floor": med(cached) / med(floor),
           "floor_vs_curl_paired": med([a / b for a, b in zip(floor, curl)]) if peers else float("nan"),
           "daemon_cpu_user_s": med(cpu_user), "daemon_cpu_sys_s": med(cpu_sys),
           "runs": runs, "files": len(origin.urls), "bytes": origin.bytes}
    if base:
        out["base_s"] = med(based)
        out["base_cpu_s"] = med(based_cpu)
        out["cached_vs_base"] = med(cached) / med(based)
        # Each round's own ratio, then their median: the pairs ran seconds apart,
        # so this is less moved by other load on a shared machine.
        out["cached_vs_base_paired"] = med([a / b for a, b in zip(cached, based)])
    return out


def measure_prefetch(bin_dir, runs, tmp, small=1000, large=100, base=None):
    """Medians of `runs` interleaved rounds: {cached_s, curl_s, aria2c_s, ...}.

    Serves the files from nginx under `tmp` (which must be empty or missing)
    for the length of the call.
    """
    os.makedirs(tmp, exist_ok=True)
    origin = Origin(tmp, small, large)
    try:
        return _rounds(bin_dir, runs, tmp, origin, base)
    finally:
        origin.stop()


def _attached(cmd, pid):
    """Starts a tool attached to `pid` and gives it time to attach."""
    p = subprocess.Popen(cmd + ["-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    return p


def _detach(p):
    p.send_signal(signal.SIGINT)
    return p.communicate(timeout=120)[1]


def profile(bin_dir, tmp, origin, out_dir):
    """One prefetch under each tool; writes and prints the summaries."""
    os.makedirs(out_dir, exist_ok=True)
    summary = []

    def save(name, text):
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
        summary.append("==== %s\n%s" % (name, text))

    # 1. Wall, CPU per thread and nginx's CPU (no tool attached).
    d = Daemon(bin_dir, os.path.join(tmp, "store-prof-cpu"), os.path.join(tmp, "prof-cpu.sock"), origin.manifest)
    ng = origin.nginx_pids()
    ng0 = sum(sum(_cpu_seconds(p)) for p in ng)
    th0 = _thread_cpu(d.proc.pid)
    wall, u, s = d.prefetch()
    th1 = _thread_cpu(d.proc.pid)
    ng1 = sum(sum(_cpu_seconds(p)) for p in ng)
    lines = ["wall %.3f s; daemon cpu %.2f s user + %.2f s sys = %.2f s (%.0f%% of one core over the wall); nginx cpu %.2f s"
             % (wall, u, s, u + s, 100 * (u + s) / wall, ng1 - ng0)]
    for name in sorted(th1, key=lambda n: -(th1[n] - th0.get(n, 0))):
        lines.append("  thread %-18s %.2f s" % (name, th1[name] - th0.get(name, 0)))
    d.stop()
    save("cpu.txt", "\n".join(lines) + "\n")

    # 2. perf stat: task-clock (no PMU counters here: software events only).
    d = Daemon(bin_dir, os.path.join(tmp, "store-prof-stat"), os.path.join(tmp, "prof-stat.sock"), origin.manifest)
    p = _attached(["perf", "stat", "-e", "task-clock,context-switches,cpu-migrations,page-faults"], d.proc.pid)
    wall, _, _ = d.prefetch()
    save("perf-stat.txt", "prefetch wall %.3f s\n%s" % (wall, _detach(p)))
    d.stop()

    # 3. perf record -g (cpu-clock).
    data = os.path.join(out_dir, "perf.data")
    d = Daemon(bin_dir, os.path.join(tmp, "store-prof-rec"), os.path.join(tmp, "prof-rec.sock"), origin.manifest)
    p = _attached(["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data], d.proc.pid)
    wall, _, _ = d.prefetch()
    _detach(p)
    d.stop()
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,dso,sym", "--stdio", "-g", "none",
                          "--percent-limit", "0.7"], capture_output=True, text=True).stdout
    rep = "\n".join(l for l in rep.splitlines() if l.strip() and not l.startswith("#") or l.startswith("# Samples"))
    save("perf-report.txt", "prefetch wall %.3f s (under perf record)\n%s\n" % (wall, rep))
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm", "--stdio", "-g", "none"],
                         capture_output=True, text=True).stdout
    save("perf-by-thread.txt", "\n".join(l for l in rep.splitlines() if l.strip() and not l.startswith("#")) + "\n")

    # 4. strace -c -f: syscall counts and time (slows the daemon; counts matter, not the wall).
    d = Daemon(bin_dir, os.path.join(tmp, "store-prof-strace"), os.path.join(tmp, "prof-strace.sock"), origin.manifest)
    p = _attached(["strace", "-c", "-f", "-w"], d.proc.pid)
    wall, _, _ = d.prefetch()
    save("strace-c.txt", "prefetch wall %.3f s (under strace: slower)\n%s" % (wall, _detach(p)))
    d.stop()
    # 5. perf trace -s: per thread, each syscall's count and latency (lighter than strace).
    d = Daemon(bin_dir, os.path.join(tmp, "store-prof-trace"), os.path.join(tmp, "prof-trace.sock"), origin.manifest)
    p = _attached(["perf", "trace", "-s"], d.proc.pid)
    wall, _, _ = d.prefetch()
    trace = _detach(p)
    d.stop()
    keep = [l for l in trace.splitlines() if l.strip() and (" events" in l or "syscall" in l or "----" in l or
            any(l.strip().startswith(c + " ") for c in ("fsync", "openat2", "write", "recvfrom", "mkdirat", "renameat", "linkat",
                                                         "futex", "poll", "newfstatat", "close", "sendto", "epoll_wait", "pwrite64")))]
    save("perf-trace-s.txt", "prefetch wall %.3f s (under perf trace)\n%s\n" % (wall, "\n".join(keep)))
    text = "\n".join(summary)
    print(text, file=sys.stderr)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files-small", type=int, default=1000)
    ap.add_argument("--files-large", type=int, default=100)
    ap.add_argument("--base", help="an older build's bin dir, measured in every round too (A/B)")
    ap.add_argument("--profile", nargs="?", const="prefetch-profile", metavar="DIR")
    ap.add_argument("--env", action="append", default=[], metavar="K=V", help="environment of BIN_DIR's daemon (experiments)")
    ap.add_argument("--base-env", action="append", default=[], metavar="K=V", help="environment of the base's daemon")
    ap.add_argument("--no-peers", action="store_true", help="skip curl, aria2c and the durable floor (a quicker A/B with --base)")
    ap.add_argument("--keep-files", action="store_true", help="remove what rounds downloaded only at the end (no deletions between rounds)")
    ap.add_argument("--ext4-journal", action="store_true",
                    help="run on an ext4 with its default journal, made on a loop device for the run (needs root)")
    a = ap.parse_args()
    # A SIGTERM or SIGHUP unwinds through `finally` too: no daemon, nginx or mount outlives the run.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    _keep_files[0] = a.keep_files
    env = dict(kv.split("=", 1) for kv in a.env)
    base_env = dict(kv.split("=", 1) for kv in a.base_env)
    outer = tmp = tempfile.mkdtemp(prefix="cached-pf-")
    loop = None
    origin = None
    try:
        if a.ext4_journal:
            os.chmod(outer, 0o755)  # nginx's workers (an unprivileged user) pass through it to the mount
            # Sparse: room for every copy a run keeps (each round's four with --keep-files).
            files = (a.files_small * 100 + a.files_large * 2048) << 10
            loop = benchfs.LoopFS(outer, "ext4", max(4 << 30, files * (4 * a.runs + 8 if a.keep_files else 8)))
            if not loop.path():
                raise SystemExit("--ext4-journal: " + loop.reason)
            tmp = tempfile.mkdtemp(prefix="cached-pf-", dir=loop.path())
        origin = Origin(tmp, a.files_small, a.files_large)
        print("prefetch: %d x 100 KiB + %d x 2 MiB (%.1f MiB) from nginx on 127.0.0.1, %d rounds"
              % (a.files_small, a.files_large, origin.bytes / 1048576, a.runs), file=sys.stderr, flush=True)
        result = _rounds(os.path.abspath(a.bin_dir), a.runs, tmp, origin, a.base and os.path.abspath(a.base),
                         env, base_env, not a.no_peers) if a.runs > 0 else {}
        if a.profile:
            profile(os.path.abspath(a.bin_dir), tmp, origin, os.path.abspath(a.profile))
        if result:
            print("medians: cached %.3f s, curl %.3f s (cached/curl %.2fx, goal <= 1.2x), aria2c %.3f s (cached/aria2c %.2fx, goal <= 0.5x), "
                  "durable floor %.3f s (floor/curl %.2fx, cached/floor %.2fx)%s"
                  % (result["cached_s"], result["curl_s"], result["cached_vs_curl"], result["aria2c_s"], result["cached_vs_aria2c"],
                     result["floor_s"], result["floor_vs_curl"], result["cached_vs_floor"],
                     (", base %.3f s (new/base %.2fx, median of the rounds' ratios %.2fx)" % (result["base_s"], result["cached_vs_base"], result["cached_vs_base_paired"])) if a.base else ""))
            print(json.dumps(result))
    finally:
        for d in list(_running):
            d.stop()
        if origin:
            origin.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if loop:
            loop.remove()
        shutil.rmtree(outer, ignore_errors=True)


if __name__ == "__main__":
    main()
