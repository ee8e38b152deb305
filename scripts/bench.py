#!/usr/bin/env python3
"""make bench: cached against its peers, in one run, on this machine.

Prints one table of medians over RUNS runs (default 3) with each peer's figure
and the ratio, and writes it with the machine's description to
bench/results.md. Benchmarks, not tests: nothing here passes or fails.

  scripts/bench.py BIN_DIR [--runs N] [--quick]
"""
import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, capture_output=True, text=True, **kw).stdout


def wait_for(cond, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for p in reversed(self.procs):
            self.stop(p)


class Bench:
    def __init__(self, bin_dir, runs, quick):
        self.bin = bin_dir
        self.runs = runs
        self.quick = quick
        self.tmp = tempfile.mkdtemp(prefix="cached-bench-")
        self.procs = Procs()
        self.rows = []  # (section, measure, cached, peer name, peer, ratio text, goal)

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

    # 1. Request rate ---------------------------------------------------------
    def request_rate(self):
        print("== request rate: get_post over the Unix socket vs Redis GET", flush=True)
        origin_port = free_port()
        self.procs.start([sys.executable, os.path.join(ROOT, "Examples", "origin-server.py"), "--root",
                          os.path.join(ROOT, "Examples", "origin"), "--port", str(origin_port)])
        time.sleep(0.5)
        sock = os.path.join(self.tmp, "cached.sock")
        cached = self.start_cached(os.path.join(self.tmp, "store-rate"), sock,
                                   "--posts-url", "http://127.0.0.1:%d/posts.json" % origin_port)
        self.cachectl(sock, "prefetch", "posts")
        posts = json.loads(self.cachectl(sock, "--json", "get", "posts"))["posts"]
        size = int(statistics.mean(len(json.dumps(p, separators=(",", ":"))) for p in posts))
        rsock = os.path.join(self.tmp, "redis.sock")
        self.procs.start(["redis-server", "--port", "0", "--unixsocket", rsock, "--save", "", "--appendonly", "no"])
        wait_for(lambda: os.path.exists(rsock))
        sh(["redis-benchmark", "-s", rsock, "-t", "set", "-n", "1000", "-d", str(size), "-q"])
        # The keys cached-bench asks for in its Redis mode: key:1 .. key:100.
        subprocess.run(["redis-cli", "-s", rsock], input="".join("SET key:%d %s\n" % (i, "x" * size) for i in range(1, 101)),
                       text=True, check=True, capture_output=True)
        print("  posts average %d bytes; Redis values of the same size" % size, flush=True)
        for pipeline in (1, 16):
            for c in (1, 8, 64):
                n = (20000 if c == 1 else 200000) * (1 if pipeline == 1 else 4)
                if self.quick:
                    n //= 10
                ours, peer, same = [], [], []
                for _ in range(self.runs):
                    out = json.loads(sh([os.path.join(self.bin, "cached-bench"), "load", "--socket", sock, "--connections",
                                         str(c), "--requests", str(n), "--pipeline", str(pipeline)]))
                    ours.append(out)
                    csv = sh(["redis-benchmark", "-s", rsock, "-c", str(c), "-n", str(n), "-t", "get", "-d", str(size),
                              "-P", str(pipeline), "--csv"]).strip().splitlines()[-1]
                    cols = [x.strip('"') for x in csv.split(",")]
                    peer.append({"ops": float(cols[1]), "p99_us": float(cols[6]) * 1000})
                    redis_same = json.loads(sh([os.path.join(self.bin, "cached-bench"), "load", "--socket", rsock,
                                                "--connections", str(c), "--requests", str(n), "--pipeline", str(pipeline),
                                                "--redis-value-size", str(size)]))
                    same.append(redis_same)
                label = "C=%d%s" % (c, ", P=16" if pipeline > 1 else "")
                med = lambda xs, k: statistics.median(x[k] for x in xs)
                timed = pipeline == 1
                self.row("request rate", "ops/s " + label, med(ours, "ops"), "redis-benchmark", med(peer, "ops"), "higher",
                         "at least Redis's" if timed else "(reported)", (lambda o, p: o >= p) if timed else None)
                self.row("request rate", "p99 us " + label, med(ours, "p99_us"), "redis-benchmark", med(peer, "p99_us"), "lower",
                         "at most 1.5 x Redis's" if timed else "(reported)", (lambda o, p: o <= 1.5 * p) if timed else None)
                self.row("request rate", "ops/s " + label + " (same client)", med(ours, "ops"), "Redis, cached-bench", med(same, "ops"),
                         "higher", "(reported)")
        self.procs.stop(cached)

    # 2. Prefetch -------------------------------------------------------------
    def prefetch(self):
        small, large = (1000, 100) if not self.quick else (100, 10)
        print("== prefetch: %d x 100 KiB + %d x 2 MiB from nginx on 127.0.0.1" % (small, large), flush=True)
        www = os.path.join(self.tmp, "www")
        os.makedirs(os.path.join(www, "img"))
        os.chmod(self.tmp, 0o755)  # nginx's workers run as an unprivileged user
        urls = []
        port = free_port()
        for i in range(small + large):
            n = 100 * 1024 if i < small else 2 * 1024 * 1024
            name = "img/%04d.png" % i
            with open(os.path.join(www, name), "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(n - 8))
            urls.append("http://127.0.0.1:%d/%s" % (port, name))
        with open(os.path.join(www, "manifest.json"), "w") as f:
            json.dump([{"url": u, "description": str(i)} for i, u in enumerate(urls)], f)
        with open(os.path.join(self.tmp, "urls.txt"), "w") as f:
            f.write("\n".join(urls) + "\n")
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""
worker_processes 1; daemon off; pid %(t)s/nginx.pid; error_log %(t)s/nginx-error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path %(t)s/ntmp; proxy_temp_path %(t)s/ntmp; fastcgi_temp_path %(t)s/ntmp;
  uwsgi_temp_path %(t)s/ntmp; scgi_temp_path %(t)s/ntmp;
  server { listen 127.0.0.1:%(p)d; root %(w)s; } }
""" % {"t": self.tmp, "p": port, "w": www})
        nginx = self.procs.start(["nginx", "-c", conf, "-p", self.tmp])
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0)
        total = sum(os.path.getsize(os.path.join(www, "img", x)) for x in os.listdir(os.path.join(www, "img")))

        ours, aria, aria_sync, curl = [], [], [], []
        for r in range(self.runs):
            store, sock = os.path.join(self.tmp, "store-pf-%d" % r), os.path.join(self.tmp, "pf-%d.sock" % r)
            p = self.start_cached(store, sock, "--images-url", "http://127.0.0.1:%d/manifest.json" % port, "--concurrency", "16")
            t = time.time()
            self.cachectl(sock, "prefetch", "images")
            ours.append(time.time() - t)
            self.procs.stop(p)
            shutil.rmtree(store)
            for tool, times in (("aria", aria), ("curl", curl)):
                out = os.path.join(self.tmp, "dl-%s-%d" % (tool, r))
                os.makedirs(out)
                t = time.time()
                if tool == "aria":
                    sh(["aria2c", "-q", "-j", "16", "-x", "1", "--file-allocation=none", "-d", out, "-i", os.path.join(self.tmp, "urls.txt")])
                    times.append(time.time() - t)
                    sh(["sync"])
                    aria_sync.append(time.time() - t)
                else:
                    sh(["curl", "-s", "--parallel", "--parallel-max", "16", "--output-dir", out, "--remote-name-all"] + urls)
                    times.append(time.time() - t)
                shutil.rmtree(out)
        med = statistics.median
        label = "%d files, %s" % (small + large, fmt_bytes(total))
        self.row("prefetch", "wall s, " + label, med(ours), "aria2c -j 16", med(aria), "lower", "at most aria2c's", lambda o, p: o <= p)
        self.row("prefetch", "wall s (peer + sync)", med(ours), "aria2c -j 16 + sync", med(aria_sync), "lower", "(reported)")
        self.row("prefetch", "wall s", med(ours), "curl --parallel-max 16", med(curl), "lower", "(reported)")

        # 3. Serving bytes (store of the last run kept for this) ---------------
        print("== serving bytes: read of every object vs cat", flush=True)
        store, sock = os.path.join(self.tmp, "store-read"), os.path.join(self.tmp, "read.sock")
        p = self.start_cached(store, sock, "--images-url", "http://127.0.0.1:%d/manifest.json" % port, "--concurrency", "16")
        self.cachectl(sock, "prefetch", "images")
        files = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(store, "objects")) for f in fs]
        ours, cat = [], []
        for _ in range(self.runs):
            out = json.loads(sh([os.path.join(self.bin, "cached-bench"), "read-all", "--socket", sock]))
            ours.append(out["mib_per_s"])
            t = time.time()
            subprocess.run("cat %s/objects/*/* > /dev/null" % store, shell=True, check=True)
            cat.append(total / 1048576 / (time.time() - t))
        self.row("serving", "read MiB/s", statistics.median(ours), "cat > /dev/null", statistics.median(cat), "higher", "at least 0.8 x cat's",
                 lambda o, p: o >= 0.8 * p)
        self.procs.stop(p)
        self.procs.stop(nginx)

    # 4. Start-up and 5. idle memory -----------------------------------------
    def startup(self):
        records = 1000000 if not self.quick else 100000
        print("== start-up with %d log records" % records, flush=True)
        readies, per = [], []
        for _ in range(self.runs):
            out = sh([os.path.join(self.bin, "cached-bench"), "replay", str(records), "--daemon", os.path.join(self.bin, "cached")])
            for line in out.splitlines():
                if line.startswith("daemon:"):
                    readies.append(float(line.split("answered ")[1].split(" s")[0]))
                    per.append(float(line.split("= ")[1].split(" bytes")[0]))
        self.row("start-up", "exec to first ping, s", statistics.median(readies), "", None, "lower", "under 1 s", lambda o, p: o < 1)
        self.row("start-up", "resident bytes/record", statistics.median(per), "", None, "lower", "under 200", lambda o, p: o < 200)

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
                 "Produced by `make bench` (scripts/bench.py) on %s. Medians of %d runs; every peer measured in the same run on the same machine."
                 % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), self.runs), "",
                 "Machine: %s, %d cores, %d MiB memory, Linux %s." % (cpu, cores, mem, kernel), "",
                 "Versions: " + "; ".join(versions), "",
                 "| section | measure | cached | peer | peer figure | ratio (>1: cached better) | goal | met |",
                 "|---|---|---|---|---|---|---|---|"]
        for s, m, ours, pn, peer, ratio, goal, met in self.rows:
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (s, m, fmt(ours), pn or "-", fmt(peer) if peer else "-", ratio, goal, met))
        text = "\n".join(lines) + "\n"
        os.makedirs(os.path.join(ROOT, "bench"), exist_ok=True)
        with open(os.path.join(ROOT, "bench", "results.md"), "w") as f:
            f.write(text)
        print()
        print(text)

    def run(self):
        try:
            self.request_rate()
            self.prefetch()
            self.startup()
            self.report()
        finally:
            self.procs.stop_all()
            shutil.rmtree(self.tmp, ignore_errors=True)


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
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    a = ap.parse_args()
    Bench(a.bin, a.runs, a.quick).run()
