"""make bench's scale-posts section (issue 34, "How it is checked"): a
newcomer's million posts, side by side in one process tree, on this machine.

The feed is one bare JSON array of POSTS posts (scripts/benchlib.py's
write_posts, about 280 bytes a post, 282 MB at a million), served by nginx
with gzip (benchlib.nginx_conf), the daemon with its defaults
(`feed-max-size` 1 GiB) on a fresh store in the bench's temp dir. Against it:

- Redis (redis-server from Debian, a Unix socket, no persistence, a server
  of its own) holding the same posts' exact bytes: each post's JSON as the
  daemon stores it (minified; compared byte for byte with the daemon's
  post files for 1,000 ids) as a string value under its id, loaded with
  `redis-cli --pipe`; its VmRSS once loaded is the memory goals' peer;
- a second Redis holding, under post:ID, the exact line the daemon answers
  to `get_post` ID (compared for 1,000 ids): `get_post` against its `GET`
  at C = 8 and 64, ids spread over the million, the same client
  (`cached-bench load --ids POSTS`), rotated, medians of at least 3;
- SQLite (Python's sqlite3) ingesting the same file: `json.load`, then one
  transaction of `executemany` into (id INTEGER PRIMARY KEY, json TEXT),
  WAL, `synchronous=FULL`, the commit included (medians of up to 3 runs);
- the files floor: the same posts' bytes as the store's files, written
  without cached: each to a temp file in tmp/ renamed into one flat posts/
  directory (the store's layout, `posts/<id>.json`), once with an fsync of
  each file on 16 threads and of the directory at the end (what the store
  does), once single-threaded with no fsync (how the issue measured 181 s).

And cached's own: the refresh's resident memory (VmRSS, 2 s after the
prefetch answered) and its peak (VmHWM); `cachectl get posts | wc -l`, its
wall time and the client's peak resident memory; restarts (a clean stop,
then exec until `cachectl ping` answers, the resident memory then, and the
first `cachectl get posts --query TITLE --limit 10` right after, timed as a
whole process), medians of 3; SIGTERM during the start's pass over `posts/`
(emptied while the daemon was down, so the pass rewrites every file),
medians of 3. A goal missed gets a profile, written below the table: perf
record -F 1999 -g of the step repeated (a restart, SIGTERM), with
/proc/PID/smaps_rollup; for the refresh's memory, the refresh again on a
fresh store under perf record -e page-faults, its resident memory sampled.
"""
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import benchlib  # noqa: E402
from benchlib import free_port, fsync_dir, nginx_conf, post_title, status_kib, wait_for, write_posts  # noqa: E402

SECTION = "scale-posts"
MIB = 1 << 20
# Restarts measured in a run: the median of at least this many (one restart per round alone swung 0.88-1.13 s).
RESTARTS = 3

SQLITE = r"""
import json, sqlite3, sys, time
t0 = time.time()
db = sqlite3.connect(sys.argv[2], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE posts (id INTEGER PRIMARY KEY, json TEXT NOT NULL)")
posts = json.load(open(sys.argv[1]))
db.execute("BEGIN")
db.executemany("INSERT INTO posts VALUES (?, ?)", ((p["id"], json.dumps(p, separators=(",", ":"))) for p in posts))
db.execute("COMMIT")
n = db.execute("SELECT count(*) FROM posts").fetchone()[0]
print(json.dumps({"seconds": time.time() - t0, "rows": n}))
"""


def sqlite_version():
    """The SQLite library of the Python the bench runs (its ingest runs there)."""
    import sqlite3
    return sqlite3.sqlite_version


def rollup(pid):
    """/proc/PID/smaps_rollup's Rss lines, one text."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            return ", ".join(" ".join(line.split()[:2]) + " kB" for line in f if line.split()[0] in ("Rss:", "Anonymous:", "Pss_File:", "Pss_Anon:"))
    except OSError:
        return "-"


def compact(i):
    """Post i's bytes as the daemon stores them (minified JSON, the feed's member order)."""
    from benchlib import post_json
    return json.dumps(json.loads(post_json(i)), separators=(",", ":")).encode()


class Daemon:
    """cached on a store, its log kept (for `ready` and the pass's lines)."""

    def __init__(self, bench, store, sock, url, log):
        self.bench, self.sock, self.log = bench, sock, log
        self.ctl_path = os.path.join(bench.bin, "cachectl")
        self.started = time.time()
        self.p = subprocess.Popen([os.path.join(bench.bin, "cached"), "--store", store, "--socket", sock, "--posts-url", url,
                                   "--log-level", "notice"], stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
        bench.procs.procs.append(self.p)
        if not wait_for(lambda: self.ctl("ping").returncode == 0 or self.p.poll() is not None, 300, 0.01) or self.p.poll() is not None:
            raise SystemExit("cached did not start: " + open(log).read()[-2000:])
        self.ping_s = time.time() - self.started

    def ctl(self, *args):
        return subprocess.run([self.ctl_path, "--socket", self.sock] + list(args), capture_output=True, text=True)

    def term(self):
        """SIGTERM; seconds to the exit, the exit status."""
        t0 = time.time()
        self.p.send_signal(signal.SIGTERM)
        try:
            status = self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            status = self.p.wait()
        return time.time() - t0, status


def count_lines(cmd):
    """`cmd | wc -l`: (lines, exit status, wall s, peak resident KiB of `cmd`)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = 0
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        lines += b.count(b"\n")
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return lines, p.returncode, time.time() - t0, usage.ru_maxrss


def files_floor(root, n, fsync, threads):
    """Posts 1...n written as files, temp in root/tmp renamed into root/posts; seconds."""
    os.makedirs(root + "/tmp")
    os.makedirs(root + "/posts")
    t0 = time.time()

    def lane(k):
        for i in range(k + 1, n + 1, threads):
            tmp = "%s/tmp/%d-%d.tmp" % (root, k, i)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, compact(i))
            if fsync:
                os.fsync(fd)
            os.close(fd)
            os.rename(tmp, "%s/posts/%d.json" % (root, i))
    lanes = [threading.Thread(target=lane, args=(k,)) for k in range(threads)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    if fsync:
        fsync_dir(root + "/posts")
    return time.time() - t0


def load_redis(bench, n, store):
    """A redis-server of its own holding posts 1...n's stored bytes under their ids; (its pid, bytes loaded)."""
    sock = os.path.join(bench.tmp, "scale-redis.sock")
    p = bench.procs.start(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no"])
    if not wait_for(lambda: os.path.exists(sock)):
        raise SystemExit("redis-server did not start")
    sample = random.Random(34).sample(range(1, n + 1), min(n, 1000))
    for i in sample:
        with open("%s/posts/%d.json" % (store, i), "rb") as f:
            if f.read() != compact(i):
                raise SystemExit("post %d: the daemon's file is not the bytes loaded into Redis" % i)
    resp = os.path.join(bench.tmp, "scale-redis.resp")
    total = 0
    with open(resp, "wb") as f:
        for i in range(1, n + 1):
            key, value = b"%d" % i, compact(i)
            total += len(value)
            f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
    with open(resp, "rb") as f:
        out = subprocess.run(["redis-cli", "-s", sock, "--pipe"], stdin=f, capture_output=True, text=True, check=True).stdout
    os.remove(resp)
    size = int(subprocess.run(["redis-cli", "-s", sock, "DBSIZE"], capture_output=True, text=True, check=True).stdout)
    if size != n or "errors: 0" not in out:
        raise SystemExit("Redis holds %d keys of %d: %s" % (size, n, out))
    got = subprocess.run(["redis-cli", "-s", sock, "--no-raw", "STRLEN", str(n)], capture_output=True, text=True).stdout.split()[-1]
    if int(got) != len(compact(n)):
        raise SystemExit("Redis holds another value for %d" % n)
    time.sleep(1)
    return p, total


def rate_against_redis(bench, n, label, sock, runs):
    """Point 6's `get_post` at the scale: the daemon holding the million
    posts against a Redis of its own holding, under post:ID, the exact line
    the daemon answers to `get_post` ID (compared with the daemon's own
    answers for 1,000 ids), the same client (`cached-bench load --ids n`:
    ids spread over all of them), the two sides rotated, C = 8 and 64."""
    rsock = os.path.join(bench.tmp, "scale-redis-answers.sock")
    redis = bench.procs.start(["redis-server", "--port", "0", "--unixsocket", rsock, "--save", "", "--appendonly", "no"])
    if not wait_for(lambda: os.path.exists(rsock)):
        raise SystemExit("redis-server did not start")
    line = lambda i: b'{"ok":true,"id":%d,"post":%s}\n' % (i, compact(i))
    for i in random.Random(6).sample(range(1, n + 1), min(n, 1000)):
        got = benchlib.request_answer(sock, b'{"op":"get_post","id":%d}\n' % i)
        if got != line(i):
            raise SystemExit("get_post %d: the daemon answers %r, not the line loaded into Redis %r" % (i, got[:120], line(i)[:120]))
    resp = os.path.join(bench.tmp, "scale-redis-answers.resp")
    with open(resp, "wb") as f:
        for i in range(1, n + 1):
            key, value = b"post:%d" % i, line(i)
            f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
    with open(resp, "rb") as f:
        out = subprocess.run(["redis-cli", "-s", rsock, "--pipe"], stdin=f, capture_output=True, text=True, check=True).stdout
    os.remove(resp)
    if "errors: 0" not in out:
        raise SystemExit("Redis refused the answer lines: %s" % out)
    print("  a second Redis holds the daemon's %d get_post answer lines (1,000 compared)" % n, flush=True)
    for c in (8, 64):
        load = [os.path.join(bench.bin, "cached-bench"), "load", "--connections", str(c), "--requests", "200000", "--ids", str(n)]
        sides = {"cached": lambda: json.loads(subprocess.run(load + ["--socket", sock], capture_output=True, text=True, check=True).stdout),
                 "redis": lambda: json.loads(subprocess.run(load + ["--socket", rsock, "--redis"], capture_output=True, text=True,
                                                            check=True).stdout)}
        got = benchlib.interleave(sides, max(runs, 3))
        for side in sides:
            if sum(x["errors"] for x in got[side]):
                raise SystemExit("%s answered other bytes than the lines loaded" % side)
        med = lambda side, k: statistics.median(x[k] for x in got[side])
        bench.row(SECTION, "get_post ops/s C=%d, %s" % (c, label), med("cached", "ops"), "Redis GET, the same answer lines, same client",
                  med("redis", "ops"), "higher", "at least Redis's", lambda o, p: o >= p)
        bench.row(SECTION, "get_post p99 us C=%d, %s" % (c, label), med("cached", "p99_us"), "Redis GET, the same answer lines, same client",
                  med("redis", "p99_us"), "lower", "(reported)")
    bench.procs.stop(redis)


def perf_profile(bench, pid, name, until):
    """perf record -F 1999 -g of `pid` while `until()` runs; the report's first 40 lines."""
    out = os.path.join(bench.tmp, "perf-%s.data" % name)
    rec = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-o", out, "-p", str(pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        until()
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(60)
    return "`perf record -F 1999 -g -p PID` during the step, " + perf_report(out)


def run(bench):
    n = bench.scale_posts
    runs = min(bench.runs, 3)
    for tool in ("redis-server", "redis-cli", "nginx", "perf"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            bench.not_measured(SECTION, "the section", tool, "-", tool + " is not installed")
            return
    label = "%s posts" % "{:,}".format(n)
    print("== scale-posts: %s as one bare JSON array from nginx with gzip: cached vs Redis, SQLite, the files floor" % label, flush=True)
    root = os.path.join(bench.tmp, "scale-posts")
    www = os.path.join(root, "www")
    os.makedirs(www)
    os.makedirs(os.path.join(root, "ntmp"))
    os.chmod(root, 0o755)
    feed = os.path.join(www, "posts.json")
    size = write_posts(feed, n)
    port = free_port()
    with open(os.path.join(root, "nginx.conf"), "w") as f:
        f.write(nginx_conf(root, port, www, gzip=True))
    bench.procs.start(["nginx", "-c", os.path.join(root, "nginx.conf"), "-p", root])
    url = "http://127.0.0.1:%d/posts.json" % port
    if not wait_for(lambda: subprocess.run(["curl", "-sf", "-o", "/dev/null", url]).returncode == 0, 10):
        raise SystemExit("nginx did not start (%s/nginx-error.log)" % root)
    gz = subprocess.run(["curl", "-s", "-H", "Accept-Encoding: gzip", "-o", "/dev/null", "-w", "%{size_download}", url],
                        capture_output=True, text=True).stdout
    if int(gz) >= size:
        raise SystemExit("nginx did not gzip the feed")
    print("  the feed: %.1f MB, %.1f MB gzipped by nginx; SQLite %s" % (size / 1e6, int(gz) / 1e6, sqlite_version()), flush=True)
    notes = []

    # cached: the refresh.
    store, sock, log = os.path.join(root, "store"), os.path.join(root, "cached.sock"), os.path.join(root, "cached.log")
    d = Daemon(bench, store, sock, url, log)
    t0 = time.time()
    r = d.ctl("--timeout", "0", "prefetch", "posts")
    prefetch_s = time.time() - t0
    if r.returncode != 0 or not r.stdout.startswith("posts:  %d fetched" % n):
        raise SystemExit("cached's prefetch: %s %s" % (r.stdout, r.stderr))
    time.sleep(2)
    rss, hwm, refresh_rollup = status_kib(d.p.pid, "VmRSS") / 1024, status_kib(d.p.pid, "VmHWM") / 1024, rollup(d.p.pid)
    lines, status, list_s, client_kib = count_lines([d.ctl_path, "--socket", sock, "get", "posts"])
    if status != 0 or lines != n + 2:
        raise SystemExit("cachectl get posts: %d lines, exit %d" % (lines, status))

    # Redis: the same bytes.
    redis, loaded = load_redis(bench, n, store)
    redis_rss = status_kib(redis.pid, "VmRSS") / 1024
    print("  Redis holds %d values, %.0f MB, byte-equal to the daemon's files (1,000 compared)" % (n, loaded / 1e6), flush=True)

    bench.row(SECTION, "resident MiB after the refresh (VmRSS), " + label, rss, "Redis VmRSS, the same bytes", redis_rss, "lower",
              "at most 1.0 x Redis's", lambda o, p: o <= p)
    bench.row(SECTION, "the refresh's peak MiB (VmHWM), " + label, hwm, "cached's resident after it", rss, "lower",
              "at most 1.5 x the resident after it", lambda o, p: o <= 1.5 * p)
    if rss > redis_rss or hwm > 1.5 * rss:
        refresh_miss = ("resident after the refresh %.0f MiB, peak %.0f MiB; Redis %.0f MiB" % (rss, hwm, redis_rss),
                        "smaps_rollup after the refresh: " + refresh_rollup)

    else:
        refresh_miss = None
    rate_against_redis(bench, n, label, sock, runs)

    # SQLite and the files floor.
    sqlite = []
    for k in range(runs):
        db = os.path.join(root, "sqlite-%d.db" % k)
        out = subprocess.run([sys.executable, "-c", SQLITE, feed, db], capture_output=True, text=True, check=True).stdout
        got = json.loads(out)
        if got["rows"] != n:
            raise SystemExit("SQLite holds %d rows" % got["rows"])
        sqlite.append(got["seconds"])
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    floor_sync = files_floor(os.path.join(root, "floor-fsync"), n, True, 16)
    floor_plain = files_floor(os.path.join(root, "floor-plain"), n, False, 1)
    bench.row(SECTION, "prefetch posts s, from empty, " + label, prefetch_s, "SQLite ingest, one transaction, WAL, synchronous=FULL",
              statistics.median(sqlite), "lower", "(reported)")
    bench.row(SECTION, "prefetch posts s, from empty, " + label, prefetch_s, "the files floor: temp + fsync + rename, 16 threads",
              floor_sync, "lower", "(reported)")
    bench.row(SECTION, "prefetch posts s, from empty, " + label, prefetch_s, "the files floor: temp + rename, no fsync, 1 thread",
              floor_plain, "lower", "(reported)")
    bench.row(SECTION, "`cachectl get posts | wc -l` s, " + label, list_s, "", None, "lower", "(reported)")
    bench.row(SECTION, "`cachectl get posts` peak resident MiB, " + label, client_kib / 1024, "", None, "lower", "(reported: constant memory)")

    # Restarts after a clean stop: at least three whatever --runs, so that
    # one start slowed by the floors' writeback is not the whole figure.
    query = post_title(1)
    pings, rsses, searches, again, stops = [], [], [], [], []
    for _ in range(max(runs, RESTARTS)):
        stops.append(d.term()[0])
        d = Daemon(bench, store, sock, url, log)
        pings.append(d.ping_s)
        rsses.append(status_kib(d.p.pid, "VmRSS") / 1024)
        for into in (searches, again):
            t0 = time.time()
            r = d.ctl("get", "posts", "--query", query, "--limit", "10")
            into.append(time.time() - t0)
            if r.returncode != 0 or len(r.stdout.splitlines()) != 12:
                raise SystemExit("the search: %s %s" % (r.stdout, r.stderr))
    restart_rollup = rollup(d.p.pid)
    ping, rss_restart, search = statistics.median(pings), statistics.median(rsses), statistics.median(searches)
    bench.row(SECTION, "resident MiB after a restart (at ping), " + label, rss_restart, "Redis VmRSS, the same bytes", redis_rss, "lower",
              "at most 1.0 x Redis's", lambda o, p: o <= p)
    bench.row(SECTION, "restart to the first ping s, " + label, ping, "", None, "lower", "at most 1 s", lambda o, p: o <= 1)
    bench.row(SECTION, "first search after ready ms (cachectl, 10 of %s), %s" % ("{:,}".format(len(range(1, n + 1, 33))), label),
              search * 1000, "", None, "lower", "at most 100 ms", lambda o, p: o <= 100)
    bench.row(SECTION, "second search ms (reference), " + label, statistics.median(again) * 1000, "", None, "lower", "(reported)")
    bench.row(SECTION, "SIGTERM, idle, to exit s, " + label, statistics.median(stops), "", None, "lower", "(reported)")
    if rss_restart > redis_rss or ping > 1 or search > 0.1:
        notes.append(("resident after a restart %.0f MiB (Redis %.0f), restart to ping %.2f s, first search %.0f ms"
                      % (rss_restart, redis_rss, ping, search * 1000),
                      "smaps_rollup after the restart: " + restart_rollup + "\n\n" + restart_profile(bench, d, store, sock, url, log, query)))

    # SIGTERM during the start's pass over posts/, emptied while the daemon was down.
    terms, written = [], []
    d.term()
    os.rename(store + "/posts", root + "/posts-aside")
    os.mkdir(store + "/posts")
    for _ in range(runs):
        d = Daemon(bench, store, sock, url, log)
        time.sleep(0.5)
        written.append(len(os.listdir(store + "/posts")))
        took, status = d.term()
        text = open(log).read()
        if status != 0 or "reconciliation stopped at" not in text[text.rfind("ready:"):]:
            raise SystemExit("SIGTERM during the pass: status %s, %s" % (status, text[-600:]))
        terms.append(took)
    term = statistics.median(terms)
    bench.row(SECTION, "SIGTERM during the start's pass to exit s, " + label, term, "", None, "lower", "at most 1 s", lambda o, p: o <= 1)
    print("  SIGTERM 0.5 s after ping, the pass rewriting posts/ (%s files there by then): %s s"
          % (", ".join(map(str, written)), ", ".join("%.3f" % t for t in terms)), flush=True)
    if term > 1:
        d = Daemon(bench, store, sock, url, log)
        notes.append(("SIGTERM during the pass %.2f s" % term, perf_profile(bench, d.p.pid, "sigterm", lambda: (time.sleep(0.5), d.term()))))
    bench.procs.stop(redis)
    if refresh_miss:
        d.term()
        notes.insert(0, (refresh_miss[0], refresh_miss[1] + "\n\n" + peak_profile(bench, root, url)))
    bench.notes.extend(("scale-posts, " + label + ": " + what, text) for what, text in notes)


def restart_profile(bench, d, store, sock, url, log, query):
    """perf record -F 1999 -g of a restart (attached right after exec) to the first search's answer."""
    d.term()
    out = os.path.join(bench.tmp, "perf-restart.data")
    p = subprocess.Popen([os.path.join(bench.bin, "cached"), "--store", store, "--socket", sock, "--posts-url", url,
                          "--log-level", "notice"], stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
    bench.procs.procs.append(p)
    rec = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-o", out, "-p", str(p.pid)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    ctl = os.path.join(bench.bin, "cachectl")
    wait_for(lambda: subprocess.run([ctl, "--socket", sock, "ping"], capture_output=True).returncode == 0, 300, 0.01)
    subprocess.run([ctl, "--socket", sock, "get", "posts", "--query", query, "--limit", "10"], capture_output=True)
    rec.send_signal(signal.SIGINT)
    rec.wait(60)
    bench.procs.stop(p)
    return "`perf record -F 1999 -g -p PID` from right after exec to the first search's answer, " + perf_report(out)


def perf_report(data, children=False):
    """The 40 first symbols of `perf report -i DATA --no-children --sort symbol -g none` (flat; with
    `children`, --children: each function with what it calls), Swift's names demangled
    (`swift demangle --simplified --compact`), as markdown."""
    r = subprocess.run(["perf", "report", "-i", data, "--children" if children else "--no-children", "--sort", "symbol", "-g", "none",
                        "--stdio"], capture_output=True, text=True)
    top = "\n".join([re.sub(r"(\s+-)*\s*$", "", line) for line in r.stdout.splitlines() if line.strip() and not line.startswith("#")][:40])
    if shutil.which("swift"):
        top = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input=top, capture_output=True, text=True).stdout or top
    return "`perf report -i X %s --sort symbol -g none | head -40`, demangled:\n\n```\n%s\n```" % (
        "--children" if children else "--no-children", top.rstrip())


def peak_profile(bench, root, url):
    """The refresh again on a fresh store, under `perf record -e page-faults -g` (where the daemon first
    touches the pages it takes), its resident memory sampled every 0.1 s: markdown."""
    store, sock, log = os.path.join(root, "store-peak"), os.path.join(root, "peak.sock"), os.path.join(root, "peak.log")
    d = Daemon(bench, store, sock, url, log)
    out = os.path.join(bench.tmp, "perf-peak.data")
    rec = subprocess.Popen(["perf", "record", "-e", "page-faults", "-c", "16", "-g", "-o", out, "-p", str(d.p.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    samples, done = [], []

    def sample():
        t0 = time.time()
        while not done:
            samples.append((time.time() - t0, status_kib(d.p.pid, "VmRSS") / 1024))
            time.sleep(0.1)
    sampler = threading.Thread(target=sample)
    sampler.start()
    r = d.ctl("--timeout", "0", "prefetch", "posts")
    time.sleep(2)
    done.append(True)
    sampler.join()
    rec.send_signal(signal.SIGINT)
    rec.wait(120)
    hwm = status_kib(d.p.pid, "VmHWM") / 1024
    bench.procs.stop(d.p)
    shutil.rmtree(store, ignore_errors=True)
    step = max(1, len(samples) // 24)
    timeline = ", ".join("%.0f s %.0f" % x for x in samples[::step])
    peak_at = max(samples, key=lambda x: x[1]) if samples else (0, 0)
    return ("The refresh again on a fresh store (%s; VmHWM %.0f MiB): resident MiB every %.1f s from the prefetch's request: %s; "
            "the largest sample %.0f MiB at %.0f s of %.0f s.\n\n`perf record -e page-faults -c 16 -g -p PID` over it (each "
            "sample 16 page faults: where the daemon touches new pages), %s"
            % (r.stdout.strip().splitlines()[0] if r.stdout.strip() else r.stderr.strip(), hwm, 0.1 * step, timeline,
               peak_at[1], peak_at[0], samples[-1][0] if samples else 0, perf_report(out) + "\n\nand with what each calls: "
               + perf_report(out, children=True)))
