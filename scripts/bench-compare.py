#!/usr/bin/env python3
"""make bench-compare: two builds of cached, A/B interleaved, in one run.

  scripts/bench-compare.py BASE_BIN_DIR NEW_BIN_DIR [--runs N]

The same client (NEW's cached-bench and cachectl) drives both daemons, on the
same payload bytes, alternating A and B in every round; the table is medians.
Measures get_post ops/s (C=1, 8, 64), read of every object (MiB/s), an
images prefetch from nginx (wall s), HTTP GETs of every post and image row
through the front-end with one wrk (requests/s, C=16) and start-up with a
200,000-record log.
A benchmark: it prints figures and asserts nothing.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib
bench = importlib.import_module("bench")  # its process and nginx helpers
benchhttp = importlib.import_module("benchhttp")  # its wrk helpers

ROOT = bench.ROOT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cached-ab-")
    os.chmod(tmp, 0o755)
    procs = bench.Procs()
    client = os.path.join(a.new, "cached-bench")
    ctl = os.path.join(a.new, "cachectl")
    results = {}

    def note(measure, side, value):
        results.setdefault(measure, {"A": [], "B": []})[side].append(value)

    def start(bin_dir, name, *args):
        sock = os.path.join(tmp, name + ".sock")
        p = procs.start([os.path.join(bin_dir, "cached"), "--store", os.path.join(tmp, name), "--socket", sock,
                         "--log-level", "warning", "--config", "/dev/null"] + list(args))
        if not bench.wait_for(lambda: subprocess.run([ctl, "--socket", sock, "ping"], capture_output=True).returncode == 0):
            raise SystemExit("cached did not start: " + bin_dir)
        return p, sock

    try:
        origin_port = bench.free_port()
        procs.start([sys.executable, os.path.join(ROOT, "Examples", "origin-server.py"), "--root",
                     os.path.join(ROOT, "Examples", "origin"), "--port", str(origin_port)])
        time.sleep(0.5)
        www = os.path.join(tmp, "www", "img")
        os.makedirs(www)
        port = bench.free_port()
        urls = []
        for i in range(300):
            with open(os.path.join(www, "%04d.png" % i), "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(100 * 1024 - 8))
            urls.append("http://127.0.0.1:%d/img/%04d.png" % (port, i))
        with open(os.path.join(tmp, "www", "manifest.json"), "w") as f:
            json.dump([{"url": u} for u in urls], f)
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write("worker_processes 1; daemon off; pid %(t)s/nginx.pid; error_log %(t)s/nginx-error.log;\n"
                    "events { worker_connections 1024; }\nhttp { access_log off; sendfile on; keepalive_requests 100000;\n"
                    "  client_body_temp_path %(t)s/n; proxy_temp_path %(t)s/n; fastcgi_temp_path %(t)s/n; uwsgi_temp_path %(t)s/n; scgi_temp_path %(t)s/n;\n"
                    "  server { listen 127.0.0.1:%(p)d; root %(t)s/www; } }\n" % {"t": tmp, "p": port})
        procs.start(["nginx", "-c", conf, "-p", tmp])
        bench.wait_for(lambda: bench.socket.socket().connect_ex(("127.0.0.1", port)) == 0)
        feeds = ["--posts-url", "http://127.0.0.1:%d/posts.json" % origin_port,
                 "--images-url", "http://127.0.0.1:%d/manifest.json" % port, "--concurrency", "16"]

        wrk_scripts = {}
        for kind, paths in (("/posts/{id}", ["/posts/%d" % i for i in range(1, 101)]),
                            ("/images/{row}", ["/images/%d" % i for i in range(300)])):
            wrk_scripts[kind] = os.path.join(tmp, "wrk-%d.lua" % len(wrk_scripts))
            with open(wrk_scripts[kind], "w") as f:
                f.write(benchhttp.wrk_script(paths))
        for r in range(a.runs):
            for side, bin_dir in (("A", a.base), ("B", a.new)) if r % 2 == 0 else (("B", a.new), ("A", a.base)):
                name = "%s%d" % (side, r)
                http_port = bench.free_port()
                p, sock = start(bin_dir, name, *feeds, "--http-listen", "127.0.0.1:%d" % http_port)
                subprocess.run([ctl, "--socket", sock, "prefetch", "posts"], check=True, capture_output=True)
                t = time.time()
                subprocess.run([ctl, "--socket", sock, "prefetch", "images"], check=True, capture_output=True)
                note("prefetch 300 x 100 KiB from nginx, wall s (lower is better)", side, time.time() - t)
                for c in (1, 8, 64):
                    n = 20000 if c == 1 else 100000
                    out = json.loads(bench.sh([client, "load", "--socket", sock, "--connections", str(c), "--requests", str(n)]))
                    note("get_post ops/s C=%d" % c, side, out["ops"])
                    note("get_post p99 us C=%d (lower is better)" % c, side, out["p99_us"])
                # One read-all is ~30 MiB, tens of milliseconds: too short to
                # stand alone on a shared machine, so the round's figure is
                # the median of five in a row.
                reads = [json.loads(bench.sh([client, "read-all", "--socket", sock]))["mib_per_s"] for _ in range(5)]
                note("read of every object (median of 5 in a row), MiB/s", side, statistics.median(reads))
                # The HTTP front-end: the same wrk script for both, every post
                # then every image row in turn (small answers and 100 KiB
                # objects through the loop's output queue).
                for kind, script in wrk_scripts.items():
                    got = benchhttp.wrk("http://127.0.0.1:%d" % http_port, script, 16, 3)
                    note("HTTP GET %s, requests/s C=16 (wrk)" % kind, side, got["requests"] / got["seconds"])
                procs.stop(p)
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
                out = bench.sh([client, "replay", "200000", "--daemon", os.path.join(bin_dir, "cached")])
                for line in out.splitlines():
                    if line.startswith("daemon: first ping answered"):
                        note("start-up, 200,000 records, s to first ping (lower is better)", side,
                             float(line.split("answered ")[1].split(" s")[0]))
        print("\n| measure | A (base) | B (new) | B/A |\n|---|---|---|---|")
        for m, v in results.items():
            ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
            print("| %s | %s | %s | %.2f |" % (m, bench.fmt(ma), bench.fmt(mb), mb / ma if ma else 0))
        print("\nMedians of %d runs each, A and B interleaved (A first in even rounds); the same client for both." % a.runs)
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
