#!/usr/bin/env python3
"""make bench: cached against its peers, in one run, on this machine.

Prints one table of medians over RUNS runs (default 5) with each peer's figure
and the ratio, and writes it with the machine's description to
bench/results.md. Benchmarks, not tests: nothing here passes or fails.

  scripts/bench.py BIN_DIR [--runs N] [--quick] [--only SECTION ...] [--ranges-base BASE_BIN_DIR] [--scale-posts N]
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchhttp import check_same_answers, export_answers, http_get, nginx_workers, wrk_script, wrk_side  # noqa: E402 (beside this script)
from benchlib import free_port, interleave, load_script, nginx_conf, request_answer, sh, stop, wait_for, write_posts  # noqa: E402
import benchfs  # noqa: E402
import benchscale  # noqa: E402
import benchvariants  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))








class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self, p):
        stop(p)

    def stop_all(self):
        for p in reversed(self.procs):
            self.stop(p)


class Bench:
    def __init__(self, bin_dir, runs, quick, only=None, output=None, ranges_base=None, scale_posts=None):
        self.only = only
        self.scale_posts = scale_posts or (1000000 if not quick else 10000)  # the scale-posts section's feed
        self.ranges_base = ranges_base
        self.output = os.path.abspath(output or os.path.join(ROOT, "bench", "results.md"))
        self.bin = bin_dir
        self.runs = runs
        self.quick = quick
        self.tmp = tempfile.mkdtemp(prefix="cached-bench-")
        # Every section's files are under here, and several are served by an
        # nginx whose workers run as an unprivileged user: made traversable
        # now, not by whichever section starts an nginx first (each section
        # must run alone: --only prefetch has its own nginx under tmp/prefetch).
        os.chmod(self.tmp, 0o755)
        self.procs = Procs()
        self.btrfs = benchfs.Btrfs(self.tmp)  # mounted on first use (serving, http-large)
        self.ext4_journal = benchfs.LoopFS(self.tmp, "ext4")  # mounted on first use (prefetch)
        self.rows = []  # (section, measure, cached, peer name, peer, ratio text, goal)
        self.notes = []  # (title, text): a missed goal's profile, written below the table

    def cachectl(self, sock, *args):
        return subprocess.run([os.path.join(self.bin, "cachectl"), "--socket", sock] + list(args),
                              check=True, capture_output=True, text=True).stdout

    def start_cached(self, store, sock, *args):
        p = self.procs.start([os.path.join(self.bin, "cached"), "--store", store, "--socket", sock,
                              "--log-level", "warning"] + list(args))
        ok = wait_for(lambda: subprocess.run([os.path.join(self.bin, "cachectl"), "--socket", sock, "ping"],
                                             capture_output=True).returncode == 0)
        if not ok:
            raise SystemExit("cached did not start")
        return p

    def nginx_www(self):
        """The folder nginx serves on 127.0.0.1 (started on first use)."""
        www = os.path.join(self.tmp, "www")
        if getattr(self, "nginx_port", None):
            return www
        os.makedirs(www, exist_ok=True)
        self.nginx_port = free_port()
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(self.tmp, self.nginx_port, www))
        self.procs.start(["nginx", "-c", conf, "-p", self.tmp])
        if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", self.nginx_port)) == 0):
            raise SystemExit("nginx did not start (see %s/nginx-error.log)" % self.tmp)
        return www

    def nginx_url(self, path):
        return "http://127.0.0.1:%d/%s" % (self.nginx_port, path)

    def start_redis(self):
        """redis-server on a Unix socket, no persistence; its socket path."""
        if getattr(self, "redis_sock", None):
            return self.redis_sock
        self.redis_sock = os.path.join(self.tmp, "redis.sock")
        self.procs.start(["redis-server", "--port", "0", "--unixsocket", self.redis_sock, "--save", "", "--appendonly", "no"])
        if not wait_for(lambda: os.path.exists(self.redis_sock)):
            raise SystemExit("redis-server did not start")
        return self.redis_sock

    def row(self, section, measure, ours, peer_name, peer, better, goal, met=None):
        """`met`: a function of (ours, peer) saying whether the goal holds, or None."""
        if peer:
            ratio = ours / peer if better == "higher" else peer / ours
            ratio_text = "%.2fx" % ratio
        else:
            ratio_text = "-"
        met_text = "-" if met is None else ("yes" if met(ours, peer) else "**no**")
        self.rows.append((section, measure, ours, peer_name, peer, ratio_text, goal, met_text))
        print("  %-34s cached %-12s %-26s %-12s %-7s %s" % (measure, fmt(ours), peer_name, fmt(peer) if peer else "-", ratio_text, met_text), flush=True)

    def not_measured(self, section, measure, peer_name, goal, reason):
        """A goal's row with no figures: the run could not measure it, and says why."""
        reason = " ".join(reason.replace("|", "/").split())  # one table cell
        self.rows.append((section, measure, None, peer_name, None, "-", goal, "not measured: " + reason))
        print("  %-34s not measured: %s" % (measure, reason), flush=True)

    # 1. Request rate ---------------------------------------------------------
    def request_rate(self):
        print("== request rate: get_post over the Unix socket vs Redis GET of the same answer bytes", flush=True)
        www = self.nginx_www()
        shutil.copy(os.path.join(ROOT, "Examples", "origin", "posts.json"), os.path.join(www, "posts.json"))
        sock = os.path.join(self.tmp, "cached.sock")
        cached = self.start_cached(os.path.join(self.tmp, "store-rate"), sock, "--posts-url", self.nginx_url("posts.json"))
        self.cachectl(sock, "prefetch", "posts")
        rsock = self.start_redis()
        lines = load_redis_with_answers(sock, rsock, range(1, 101))
        print("  Redis holds cached's exact answer lines (%d to %d bytes) under post:N and bench:%%012d" %
              (min(map(len, lines)), max(map(len, lines))), flush=True)
        for pipeline in (1, 16):
            for c in (1, 8, 64):
                n = (20000 if c == 1 else 200000) * (1 if pipeline == 1 else 4)
                if self.quick:
                    n //= 10
                load = [os.path.join(self.bin, "cached-bench"), "load", "--connections", str(c), "--requests", str(n),
                        "--pipeline", str(pipeline)]
                sides = {
                    "cached": lambda: json.loads(sh(load + ["--socket", sock])),
                    "redis": lambda: json.loads(sh(load + ["--socket", rsock, "--redis"])),
                    "redis-benchmark": lambda: redis_benchmark(rsock, c, n, pipeline),
                }
                got = interleave(sides, self.runs)
                for side in ("cached", "redis"):
                    errors = sum(x["errors"] for x in got[side])
                    if errors:
                        raise SystemExit("%s answered %d requests with other bytes than primed" % (side, errors))
                label = "C=%d%s" % (c, ", P=16" if pipeline > 1 else "")
                med = lambda side, k: statistics.median(x[k] for x in got[side])
                self.row("request rate", "get_post ops/s " + label, med("cached", "ops"), "Redis GET, same client",
                         med("redis", "ops"), "higher", "at least Redis's", lambda o, p: o >= p)
                self.row("request rate", "p99 us " + label, med("cached", "p99_us"), "Redis GET, same client",
                         med("redis", "p99_us"), "lower", "at most 1.2 x Redis's", lambda o, p: o <= 1.2 * p)
                self.row("request rate", "ops/s " + label + " (reference)", med("cached", "ops"), "redis-benchmark",
                         med("redis-benchmark", "ops"), "higher", "(another client: reported)")
        self.procs.stop(cached)

    # 2. Prefetch -------------------------------------------------------------
    def prefetch(self):
        """On the scratch file system, then on an ext4 with its default
        journal made for the run: ext4 without a journal (this machine's
        scratch) makes every tool's file creation slow after deletions,
        while with one each fsync is a journal commit (docs/performance.md,
        "Prefetch")."""
        small, large = (1000, 100) if not self.quick else (100, 10)
        print("== prefetch: %d x 100 KiB + %d x 2 MiB from nginx on 127.0.0.1 (scripts/bench-prefetch.py)" % (small, large), flush=True)
        bench_prefetch = load_script("bench-prefetch")
        places = [(benchfs.mount_type(self.tmp) + " (scratch)", self.tmp)]
        journal = self.ext4_journal.path()
        if journal:
            places.append(("ext4 with a journal (loop)", journal))
        for where, root in places:
            got = bench_prefetch.measure_prefetch(self.bin, self.runs, os.path.join(root, "prefetch"), small, large)
            label = "%d files, %s, %s" % (got["files"], fmt_bytes(got["bytes"]), where)
            # Met only when both the medians and the median of each round's own
            # ratio say so: the tools' times swing 2x from round to round here.
            for peer, key, most in (("curl --parallel-max 16", "curl", 1.2), ("aria2c -j 16", "aria2c", 0.5)):
                paired = got["cached_vs_%s_paired" % key]
                self.row("prefetch", "wall s, %s (rounds' own ratios: median %.2f)" % (label, paired), got["cached_s"], peer,
                         got[key + "_s"], "lower", "at most %.1f x %s's" % (most, key),
                         lambda o, p, paired=paired, most=most: o <= most * p and paired <= most)
            self.row("prefetch", "durable floor s, %s (rounds' own floor/curl: median %.2f)" % (label, got["floor_vs_curl_paired"]),
                     got["floor_s"], "curl --parallel-max 16", got["curl_s"], "lower", "(reported: durability alone)")
            self.row("prefetch", "wall s, %s" % label, got["cached_s"], "durable floor", got["floor_s"], "lower", "(reported)")
            self.row("prefetch", "daemon CPU s (user + system), %s" % where, got["daemon_cpu_user_s"] + got["daemon_cpu_sys_s"],
                     "", None, "lower", "(reported)")
        self.ext4_journal.remove()  # no later section uses it

    # 4. cachectl as scripts use it ------------------------------------------
    def cli(self):
        print("== cachectl --json get post 1 vs redis-cli GET of the same bytes, one process per call (scripts/bench-cli.py)",
              flush=True)
        www = self.nginx_www()
        shutil.copy(os.path.join(ROOT, "Examples", "origin", "posts.json"), os.path.join(www, "posts.json"))
        sock = os.path.join(self.tmp, "cli.sock")
        p = self.start_cached(os.path.join(self.tmp, "store-cli"), sock, "--posts-url", self.nginx_url("posts.json"))
        self.cachectl(sock, "prefetch", "posts")
        got = load_script("bench-cli").measure_cli(self.bin, sock, self.start_redis(), runs=max(20, self.runs))
        self.row("cachectl", "whole process, ms", got["cachectl_ms"], "redis-cli GET", got["redis_cli_ms"], "lower",
                 "at most redis-cli's", lambda o, p: o <= p)
        self.row("cachectl", "peak resident KiB", got["cachectl_kib"], "redis-cli GET", got["redis_cli_kib"], "lower",
                 "at most redis-cli's", lambda o, p: o <= p)
        self.procs.stop(p)

    # 6. Scale ------------------------------------------------------------------
    def scale(self):
        """How the figures change with the data: posts, manifest rows, many
        small images, long logs. One daemon per size, fresh store."""
        www = self.nginx_www()
        sizes = (1000, 100000) if not self.quick else (1000, 10000)  # 1,000,000: scale-posts (scripts/benchscale.py)
        for n in sizes:
            print("== scale: %d posts" % n, flush=True)
            name = "posts-%d.json" % n
            write_posts(os.path.join(www, name), n)
            sock = os.path.join(self.tmp, "scale-%d.sock" % n)
            store = os.path.join(self.tmp, "store-scale-%d" % n)
            p = self.start_cached(store, sock, "--posts-url", self.nginx_url(name), "--max-object-size", "1G")
            t = time.time()
            self.cachectl(sock, "prefetch", "posts")
            fetch_s = time.time() - t
            rss = resident_bytes(p.pid)
            ops = [json.loads(sh([os.path.join(self.bin, "cached-bench"), "load", "--socket", sock, "--connections", "8",
                                  "--requests", "100000", "--ids", str(n)]))["ops"] for _ in range(self.runs)]
            label = "%s posts" % fmt(n)
            self.row("scale", "get_post ops/s C=8, " + label, statistics.median(ops), "", None, "higher", "(reported)")
            self.row("scale", "resident MiB after the refresh, " + label, rss / 1048576, "", None, "lower", "(reported)")
            self.row("scale", "prefetch posts s, " + label, fetch_s, "", None, "lower", "(reported)")
            self.procs.stop(p)
            # The steady state: the same store opened again, posts from the log only.
            t = time.time()
            p = self.start_cached(store, sock, "--posts-url", self.nginx_url(name), "--max-object-size", "1G")
            self.row("scale", "restart to first ping s, " + label, time.time() - t, "", None, "lower", "(reported)")
            self.row("scale", "resident MiB after restart, " + label, resident_bytes(p.pid) / 1048576, "", None, "lower",
                     "(reported)")
            self.procs.stop(p)
            shutil.rmtree(store, ignore_errors=True)
            os.remove(os.path.join(www, name))

        rows = 100000 if not self.quick else 10000
        print("== scale: list_images with %d rows" % rows, flush=True)
        with open(os.path.join(www, "manifest-rows.json"), "w") as f:
            json.dump([{"url": "img/%06d.png" % i, "description": "image number %d" % i} for i in range(rows)], f)
        sock = os.path.join(self.tmp, "rows.sock")
        store = os.path.join(self.tmp, "store-rows")
        p = self.start_cached(store, sock, "--images-url", self.nginx_url("manifest-rows.json"), "--max-object-size", "1G")
        t = time.time()
        first = request_answer(sock, b'{"op":"list_images"}\n')
        first_s = time.time() - t
        times, size = [], 0
        for _ in range(self.runs):
            t = time.time()
            size = len(request_answer(sock, b'{"op":"list_images"}\n'))
            times.append(time.time() - t)
        label = "%s rows" % fmt(rows)
        self.row("scale", "list_images ms, " + label, statistics.median(times) * 1000, "", None, "lower", "(reported)")
        self.row("scale", "list_images answer MiB, " + label, size / 1048576, "", None, "lower", "(reported)")
        self.row("scale", "first list_images ms (fetches the manifest), " + label, first_s * 1000, "", None, "lower", "(reported)")
        self.row("scale", "resident MiB, " + label, resident_bytes(p.pid) / 1048576, "", None, "lower", "(reported)")
        assert len(first) == size
        self.procs.stop(p)
        shutil.rmtree(store, ignore_errors=True)

        count = 10000 if not self.quick else 1000
        print("== scale: prefetch of %d images of 2 KiB" % count, flush=True)
        os.makedirs(os.path.join(www, "small"), exist_ok=True)
        urls = []
        for i in range(count):
            with open(os.path.join(www, "small", "%05d.png" % i), "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(2048 - 8))
            urls.append(self.nginx_url("small/%05d.png" % i))
        with open(os.path.join(www, "manifest-small.json"), "w") as f:
            json.dump([{"url": u, "description": str(i)} for i, u in enumerate(urls)], f)
        with open(os.path.join(self.tmp, "curl-small.txt"), "w") as f:
            f.write("".join('url = "%s"\n' % u for u in urls))
        runs = min(self.runs, 3)

        def ours():
            store, sock = os.path.join(self.tmp, "store-small"), os.path.join(self.tmp, "small.sock")
            p = self.start_cached(store, sock, "--images-url", self.nginx_url("manifest-small.json"), "--concurrency", "16")
            t = time.time()
            self.cachectl(sock, "prefetch", "images")
            took = time.time() - t
            self.procs.stop(p)
            shutil.rmtree(store)
            return took

        def curl():
            out = os.path.join(self.tmp, "dl-small")
            os.makedirs(out)
            t = time.time()
            sh(["curl", "-s", "--parallel", "--parallel-max", "16", "--output-dir", out, "--remote-name-all", "-K",
                os.path.join(self.tmp, "curl-small.txt")])
            took = time.time() - t
            shutil.rmtree(out)
            return took

        got = interleave({"cached": ours, "curl": curl}, runs)
        self.row("scale", "prefetch s, %s images of 2 KiB" % fmt(count), statistics.median(got["cached"]),
                 "curl --parallel-max 16", statistics.median(got["curl"]), "lower", "(reported)")
        shutil.rmtree(os.path.join(www, "small"))

        # The two sizes alternate round by round (issue 34, point 7: the
        # larger replay at most 10x the smaller's time), each round's ratio
        # taken from its own pair: like with like, in the same minute.
        small, large = (1000000, 10000000) if not self.quick else (100000, 1000000)
        figures = {n: {"ready": [], "per": [], "rate": [], "replay": []} for n in (small, large)}

        def start_up(records):
            def measure():
                print("== scale: start-up with %d log records" % records, flush=True)
                out = sh([os.path.join(self.bin, "cached-bench"), "replay", str(records), "--daemon", os.path.join(self.bin, "cached")])
                f = figures[records]
                counts = {k: len(v) for k, v in f.items()}
                for line in out.splitlines():
                    if line.startswith("daemon: first ping answered"):
                        f["ready"].append(float(line.split("answered ")[1].split(" s")[0]))
                        f["per"].append(float(line.split("= ")[1].split(" bytes")[0]))
                    if line.startswith("in-process replay:"):
                        f["rate"].append(float(re.search(r"([0-9.]+) records/s", line).group(1)))
                        f["replay"].append(float(re.search(r"replay: ([0-9.]+) s", line).group(1)))
                # Every figure of every round, or none of the run: the ratio pairs rounds by position.
                if any(len(v) != counts[k] + 1 for k, v in f.items()):
                    raise SystemExit("cached-bench replay %d printed no figure for %s:\n%s"
                                     % (records, ", ".join(k for k, v in f.items() if len(v) != counts[k] + 1), out[-2000:]))
            return measure

        interleave({"small": start_up(small), "large": start_up(large)}, max(self.runs, 3))
        for records in (small, large):
            f = figures[records]
            label = "%s records" % fmt(records)
            self.row("scale", "exec to first ping s, " + label, statistics.median(f["ready"]), "", None, "lower",
                     "under 1 s" if records == 1000000 else "(reported)", (lambda o, p: o < 1) if records == 1000000 else None)
            self.row("scale", "replay records/s, " + label, statistics.median(f["rate"]), "", None, "higher", "(reported)")
            self.row("scale", "resident bytes/record, " + label, statistics.median(f["per"]), "", None, "lower",
                     "under 200" if records >= 1000000 else "(reported)", (lambda o, p: o < 200) if records >= 1000000 else None)
        # The rounds' own ratios' median: the machine's minute-to-minute noise
        # moves both sizes of a round together.
        ratios = [b / a for a, b in zip(figures[small]["replay"], figures[large]["replay"]) if a > 0]
        self.row("scale", "replay time %s / %s records" % (fmt(large), fmt(small)), statistics.median(ratios), "", None, "lower",
                 "at most 10x", lambda o, p: o <= 10)

    # 5. Idle memory -----------------------------------------
    def idle_memory(self):
        """Start-up with long logs is in `scale`."""
        print("== idle memory with the demo data", flush=True)
        origin_port = free_port()
        origin = self.procs.start([sys.executable, os.path.join(ROOT, "Examples", "origin-server.py"), "--root",
                                   os.path.join(ROOT, "Examples", "origin"), "--port", str(origin_port)])
        time.sleep(0.5)
        sock = os.path.join(self.tmp, "idle.sock")
        p = self.start_cached(os.path.join(self.tmp, "store-idle"), sock, "--posts-url", "http://127.0.0.1:%d/posts.json" % origin_port,
                              "--images-url", "http://127.0.0.1:%d/images/manifest.json" % origin_port)
        self.cachectl(sock, "prefetch")
        time.sleep(1)
        rss = 0
        with open("/proc/%d/status" % p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        self.row("memory", "idle resident MiB (demo data)", rss / 1048576, "", None, "lower", "under 20 MiB", lambda o, p: o < 20)
        self.procs.stop(p)
        self.procs.stop(origin)

    # 7. HTTP front-end ---------------------------------------------------------
    def http(self):
        """`GET /posts/{id}` and `GET /images/{row}` from cached's HTTP
        front-end against nginx serving the same answer bodies as static
        files, one wrk for both, the same URL sequence (every post id, every
        image row, in turn). The store is on the scratch file system, where
        the daemon's verify-reads = auto means always: every image is hashed
        before it is sent. Large images are `http-large` (scripts/benchfs.py)."""
        print("== http: GET /posts/{id} and /images/{row} vs nginx serving cached's exact bodies as static files (wrk)", flush=True)
        www = self.nginx_www()
        shutil.copytree(os.path.join(ROOT, "Examples", "origin"), os.path.join(www, "origin"), dirs_exist_ok=True)
        sock = os.path.join(self.tmp, "http.sock")
        port = free_port()
        cached = self.start_cached(os.path.join(self.tmp, "store-http"), sock, "--http-listen", "127.0.0.1:%d" % port,
                                   "--posts-url", self.nginx_url("origin/posts.json"),
                                   "--images-url", self.nginx_url("origin/images/manifest.json"))
        self.cachectl(sock, "prefetch")
        base = "http://127.0.0.1:%d" % port
        ids = [p["id"] for p in json.loads(http_get(base + "/posts")[2])]
        rows = len(json.loads(http_get(base + "/images")[2]))
        if not ids or not rows:
            raise SystemExit("cached lists %d posts and %d images after the prefetch" % (len(ids), rows))
        paths = {"posts": ["/posts/%d" % i for i in ids], "images": ["/images/%d" % r for r in range(rows)]}
        static = os.path.join(self.tmp, "static")
        types, bodies = export_answers(base, paths, static)
        servers = {}
        for name, workers, extra in (("nginx", "1", ""), ("nginx-auto", "auto", ""),
                                     ("nginx-ofc", "1", "open_file_cache max=1000; open_file_cache_valid 60s;")):
            servers[name] = self.start_static_nginx(name, static, workers, types, extra)
        check_same_answers(servers, paths["posts"] + paths["images"], bodies, types)
        workers = {name: nginx_workers(self.tmp, name) for name in servers}
        print("  %d posts (%d to %d bytes), %d images (%d to %d bytes), byte-identical from cached and every nginx; "
              "nginx auto has %d workers" % (len(paths["posts"]), min(len(bodies[p]) for p in paths["posts"]),
                                              max(len(bodies[p]) for p in paths["posts"]), rows,
                                              min(len(bodies[p]) for p in paths["images"]),
                                              max(len(bodies[p]) for p in paths["images"]), len(workers["nginx-auto"])),
              flush=True)
        seconds = 5 if not self.quick else 1
        for kind in ("posts", "images"):
            script, mean_body = self.wrk_cycle(kind, paths[kind], bodies)
            for c in (16, 64):
                got = self.wrk_rounds(base, cached.pid, servers, workers, script, c, seconds)
                heads = {n: statistics.median((x["bytes"] - x["requests"] * mean_body) / x["requests"] for x in got[n])
                         for n in got}
                print("  %s c=%d: mean head bytes per answer (wrk's Transfer/sec counts them; the MiB/s rows do not): %s" %
                      (kind, c, ", ".join("%s %.0f" % kv for kv in heads.items())), flush=True)
                label = "c=%d, wrk -t1, %d %s in turn" % (c, len(paths[kind]), "ids" if kind == "posts" else "rows")
                rate = lambda side: statistics.median(x["requests"] / x["seconds"] for x in got[side])
                body_mib = lambda side: statistics.median(x["requests"] * mean_body / x["seconds"] / 1048576 for x in got[side])
                cpu_us = lambda side: statistics.median(x["cpu_s"] / x["requests"] * 1e6 for x in got[side])
                if kind == "posts":
                    measure, figure, goal, least = "GET /posts/{id} req/s, " + label, rate, "at least nginx's (1 worker)", 1.0
                else:
                    # c=16 at least nginx's since issue 25 (it was 0.8x, and missed at 0.77x); c=64 unchanged.
                    least = 1.0 if c == 16 else 0.8
                    measure, figure, goal = "GET /images/{row} body MiB/s, " + label, body_mib, \
                        "at least nginx's (1 worker)" if least == 1.0 else "at least 0.8 x nginx's (1 worker)"
                self.row("http", measure, figure("cached"), "nginx static, worker_processes 1", figure("nginx"), "higher",
                         goal, lambda o, p, least=least: o >= least * p)
                if kind == "images":
                    self.row("http", "GET /images/{row} req/s, " + label, rate("cached"), "nginx static, worker_processes 1",
                             rate("nginx"), "higher", "(reported)")
                self.row("http", measure + " (reference)", figure("cached"), "nginx, worker_processes auto (%d)" %
                         len(workers["nginx-auto"]), figure("nginx-auto"), "higher", "(reference: more workers)")
                self.row("http", measure + " (reference)", figure("cached"), "nginx, 1 worker + open_file_cache",
                         figure("nginx-ofc"), "higher", "(reference: tuned nginx)")
                self.row("http", "CPU us per request, %s, %s" % (kind, label), cpu_us("cached"),
                         "nginx's worker, worker_processes 1", cpu_us("nginx"), "lower", "(reported)")
        self.procs.stop(cached)

    def wrk_cycle(self, name, paths, bodies):
        """The wrk script cycling through `paths`, and the mean body of the cycle."""
        script = os.path.join(self.tmp, "wrk-%s.lua" % name)
        with open(script, "w") as f:
            f.write(wrk_script(paths))
        return script, statistics.mean(len(bodies[p]) for p in paths)

    def wrk_rounds(self, base, pid, servers, workers, script, c, seconds):
        """cached and every nginx under the same wrk script and concurrency, in rotated rounds."""
        sides = {"cached": wrk_side(base, [pid], script, c, seconds)}
        for name, nport in servers.items():
            sides[name] = wrk_side("http://127.0.0.1:%d" % nport, workers[name], script, c, seconds)
        return interleave(sides, self.runs)

    def ranges(self):
        """HTTP `Range` requests of a 64 MiB object (scripts/bench-ranges.py):
        1 byte and 1 MiB, verified by the chunks they lie in, against the
        whole-object verification they needed before. With `--ranges-base`
        (`make bench-ranges`) that is a build of the commit before chunk
        digests asked the same ranges, interleaved; without it, whole GETs of
        the same object, which hash what such a range hashed then (and send
        64 MiB more)."""
        peer = "build %s, same ranges" % self.ranges_base if self.ranges_base else "whole GET, same object"
        print("== ranges: Range of a 64 MiB object over HTTP vs %s (wrk)" % peer, flush=True)
        rows, _ = load_script("bench-ranges").run(self.bin, self.ranges_base, self.runs, 3 if not self.quick else 1)
        figures = {(kind, c): m for kind, c, m in rows}
        for kind in ("range 1 byte", "range 1 MiB"):
            for c in (1, 8):
                m = figures[(kind, c)]
                base = m["base"] if self.ranges_base else figures[("whole", c)]["new"]
                label = "%s of a 64 MiB object, c=%d" % (kind.replace("range ", "Range of "), c)
                self.row("ranges", "req/s, " + label, m["new"][0], peer, base[0], "higher", "(reported)")
                self.row("ranges", "CPU us per request, " + label, m["new"][1], peer, base[1], "lower", "(reported)")

    def start_static_nginx(self, name, static, workers, types, extra=""):
        """nginx serving `static` (/posts/N as application/json, /images/N with
        cached's Content-Type for that row) on a free port; the port."""
        port = free_port()
        tmp = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(tmp, "ntmp"))
        image_types = "".join("    location = %s { types {} default_type %s; }\n" % (p, t)
                              for p, t in sorted(types.items()) if p.startswith("/images/"))
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""
worker_processes %(workers)s; daemon off; pid %(t)s/nginx.pid; error_log %(t)s/nginx-error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; keepalive_requests 100000; %(extra)s
  client_body_temp_path %(t)s/ntmp; proxy_temp_path %(t)s/ntmp; fastcgi_temp_path %(t)s/ntmp;
  uwsgi_temp_path %(t)s/ntmp; scgi_temp_path %(t)s/ntmp;
  server { listen 127.0.0.1:%(p)d; root %(w)s;
    location /posts/ { types {} default_type application/json; }
%(images)s  } }
""" % {"workers": workers, "t": tmp, "p": port, "w": static, "images": image_types, "extra": extra})
        self.procs.start(["nginx", "-c", conf, "-p", tmp])
        if not wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0):
            raise SystemExit("nginx (%s) did not start (see %s/nginx-error.log)" % (name, tmp))
        return port

    def machine(self):
        cpu = "unknown"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        mem = int(open("/proc/meminfo").readline().split()[1]) // 1024
        versions = []
        for cmd in (["swift", "--version"], ["redis-server", "--version"], ["nginx", "-v"], ["aria2c", "--version"], ["curl", "--version"]):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True)
                versions.append(((r.stdout or r.stderr).strip().splitlines() or ["?"])[0])
            except OSError:
                versions.append(cmd[0] + ": not found")
        return cpu, os.cpu_count(), mem, platform.release(), versions

    def report(self):
        cpu, cores, mem, kernel, versions = self.machine()
        lines = ["# cached benchmark results", "",
                 "Produced by `make bench` (scripts/bench.py) on %s. Medians of %d rounds; in every round each side ran once, "
                 "in an order rotated from round to round, on the same machine. A goal is met only where both sides faced the same "
                 "client and the same payload bytes: for requests, `cached-bench load` against cached and against Redis holding "
                 "cached's exact answer lines; for HTTP, one wrk against cached and against nginx (worker_processes 1) serving cached's "
                 "exact answer bodies as static files; `redis-benchmark` and nginx `worker_processes auto` rows are references. "
                 "How each comparison is made: "
                 "docs/performance.md." % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), self.runs), "",
                 "Machine: %s, %d cores, %d MiB memory, Linux %s." % (cpu, cores, mem, kernel), "",
                 "Versions: " + "; ".join(versions), "",
                 "| section | measure | cached | peer | peer figure | ratio (>1: cached better) | goal | met |",
                 "|---|---|---|---|---|---|---|---|"]
        for s, m, ours, pn, peer, ratio, goal, met in self.rows:
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (s, m, fmt(ours), pn or "-", fmt(peer) if peer else "-", ratio, goal, met))
        for title, note in self.notes:
            lines += ["", "## Missed: " + title, "", note]
        text = "\n".join(lines) + "\n"
        os.makedirs(os.path.dirname(self.output), exist_ok=True)
        with open(self.output, "w") as f:
            f.write(text)
        print()
        print(text)

    def sections(self):
        """The sections in their order. `--only http` runs http-small and
        http-large; `--only http-large` that one alone."""
        return (("rate", self.request_rate), ("prefetch", self.prefetch), ("serving", lambda: benchfs.serving(self)),
                ("cli", self.cli), ("memory", self.idle_memory), ("scale", self.scale), ("scale-posts", lambda: benchscale.run(self)),
                ("http-small", self.http), ("http-large", lambda: benchfs.http_large_images(self)), ("ranges", self.ranges),
                ("variants", lambda: benchvariants.run(self)))

    def run(self):
        # A SIGTERM or SIGHUP unwinds through `finally` too: the btrfs mount must not outlive the run.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
        try:
            for name, section in self.sections():
                if not self.only or name in self.only or name.split("-")[0] in self.only:
                    section()
            self.report()
        finally:
            self.procs.stop_all()
            self.btrfs.remove()
            self.ext4_journal.remove()
            shutil.rmtree(self.tmp, ignore_errors=True)


def resident_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def load_redis_with_answers(sock_path, redis_path, ids):
    """Stores in Redis, for every id, the exact line cached answers to
    get_post (under post:ID for cached-bench and bench:%012d for
    redis-benchmark's __rand_int__), so both serve the same payload bytes."""
    r = socket.socket(socket.AF_UNIX)
    r.connect(redis_path)
    lines = []
    for i, post in enumerate(ids):
        line = request_answer(sock_path, b'{"op":"get_post","id":%d}\n' % post)
        if not line.startswith(b'{"ok":true'):
            raise SystemExit("get_post %d: %r" % (post, line))
        lines.append(line)
        for key in (b"post:%d" % post, b"bench:%012d" % i):
            r.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(line), line))
            if r.recv(16) != b"+OK\r\n":
                raise SystemExit("Redis refused SET %s" % key)
    r.close()
    return lines


def redis_benchmark(rsock, c, n, pipeline):
    """redis-benchmark's own client, GET of the same values (a reference row)."""
    csv = sh(["redis-benchmark", "-s", rsock, "-c", str(c), "-n", str(n), "-P", str(pipeline), "-r", "100", "--csv",
              "GET", "bench:__rand_int__"]).strip().splitlines()[-1]
    cols = [x.strip('"') for x in csv.split(",")]
    return {"ops": float(cols[1]), "p99_us": float(cols[6]) * 1000}


def fmt(x):
    if x is None:
        return "-"
    if x >= 1000:
        return "{:,.0f}".format(x)
    if x >= 100:
        return "%.0f" % x
    return "%.2f" % x


def fmt_bytes(n):
    return "%.0f MiB" % (n / 1048576)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    ap.add_argument("--only", action="append", help="run only this section (rate, prefetch, serving, cli, memory, scale, which is "
                    "scale and scale-posts, http, which is http-small and http-large, ranges, variants); repeatable")
    ap.add_argument("--scale-posts", type=int, help="posts of the scale-posts section's feed (default 1,000,000; --quick 10,000)")
    ap.add_argument("--output", help="where the table goes (default bench/results.md)")
    ap.add_argument("--ranges-base", help="the ranges section compares with this build (BIN_DIR of another commit) instead of whole GETs")
    a = ap.parse_args()
    Bench(a.bin, a.runs, a.quick, a.only, a.output, a.ranges_base, a.scale_posts).run()
