#!/usr/bin/env python3
"""Memory and time of the feed paths of issue 32 against the JSON paths of
before, the same posts each way, the release build (make bench-feeds):

- json: one bare JSON array of N posts (the path every feed took before);
- link: N/10 pages of 10 posts, each naming the next in a `Link` header;
- cursor: the same pages walked by a cursor (`posts-paging = cursor`,
  `posts-cursor = /cursor`), computed per request;
- rss: one RSS 2.0 document of the same N posts as items with an HTML
  description (about 50 MB at N = 100,000), read by libxml2.

Each side runs on a fresh store with its own daemon: `cachectl prefetch
posts`, then the daemon's peak resident memory (VmHWM) and resident memory
after (VmRSS), the time, and the posts stored. Sides are interleaved over
RUNS rounds and the medians printed.

    scripts/bench-feeds.py BIN_DIR [--posts N] [--runs R]
"""
import argparse
import html
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import free_port, interleave, start_cached, status_kib, stop  # noqa: E402

PAGE = 10


def make_posts(n):
    body = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. " * 3
    return [{"userId": i % 10, "id": i, "title": "post number %d" % i, "body": body} for i in range(1, n + 1)]


def rss(posts):
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>bench</title><link>http://b.test/</link>'
           '<description>bench</description>\n']
    for p in posts:
        out.append("<item><guid isPermaLink=\"false\">post-%d</guid><title>%s</title><link>http://b.test/p/%d</link>"
                   "<description>%s</description><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>\n"
                   % (p["id"], html.escape(p["title"]), p["id"], html.escape("<p>" + p["body"] + "</p>")))
    out.append("</channel></rss>\n")
    return "".join(out).encode()


def serve(posts):
    whole = json.dumps(posts).encode()
    xml = rss(posts)

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go in two writes: without this, Nagle and the
        # client's delayed ACK cost 40 ms a page.
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def answer(self, body, ctype, extra=()):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            if u.path == "/json":
                return self.answer(whole, "application/json")
            if u.path == "/rss":
                return self.answer(xml, "application/rss+xml")
            start = int(q.get("cursor") or q.get("page") or 0)
            page = posts[start:start + PAGE]
            more = start + PAGE < len(posts)
            if u.path == "/cursor":
                doc = {"items": page, "cursor": str(start + PAGE) if more else None}
                return self.answer(json.dumps(doc).encode(), "application/json")
            if u.path == "/link":
                extra = [("Link", '</link?page=%d>; rel="next"' % (start + PAGE))] if more else []
                return self.answer(json.dumps(page).encode(), "application/json", extra)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, len(whole), len(xml)


def run_side(bin_dir, base, name, n):
    tmp = tempfile.mkdtemp(prefix="bench-feeds-")
    procs = []
    pages = n // PAGE + 2
    args = {"json": ["--posts-url", base + "/json"],
            "link": ["--posts-url", base + "/link", "--posts-max-pages", str(pages)],
            "cursor": ["--posts-url", base + "/cursor", "--posts-items", "/items", "--posts-paging", "cursor",
                       "--posts-cursor", "/cursor", "--posts-max-pages", str(pages)],
            "rss": ["--posts-url", base + "/rss"]}[name]
    try:
        cachectl = start_cached(procs, bin_dir, tmp + "/store", tmp + "/sock", "--max-object-size", "512M", *args)
        pid = procs[0].pid
        t = time.monotonic()
        r = subprocess.run([cachectl, "--socket", tmp + "/sock", "--json", "prefetch", "posts"], capture_output=True, text=True)
        took = time.monotonic() - t
        if r.returncode != 0:
            raise SystemExit("%s: prefetch failed (%d): %s %s" % (name, r.returncode, r.stdout[-300:], r.stderr[-300:]))
        # The daemon gives a large feed's memory back on a worker once the
        # answer is sent: resident memory is read after it settles.
        time.sleep(1.5)
        posts = json.loads(r.stdout.splitlines()[-1])["posts"]
        stored = posts["fetched"] + posts["unchanged"]
        return {"hwm": status_kib(pid, "VmHWM") / 1024, "rss": status_kib(pid, "VmRSS") / 1024, "s": took, "posts": stored}
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--posts", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    posts = make_posts(a.posts)
    srv, json_bytes, rss_bytes = serve(posts)
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    sides = {name: (lambda name=name: run_side(a.bin_dir, base, name, a.posts)) for name in ["json", "link", "cursor", "rss"]}
    got = interleave(sides, a.runs)
    print("%d posts; JSON document %.1f MB, RSS document %.1f MB; %d pages of %d for link and cursor; medians of %d runs"
          % (a.posts, json_bytes / 1e6, rss_bytes / 1e6, a.posts // PAGE, PAGE, a.runs))
    print("| side | posts stored | peak resident (VmHWM) MiB | resident after MiB | prefetch s |")
    print("|---|---|---|---|---|")
    ok = True
    for name, runs in got.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("hwm", "rss", "s", "posts")}
        ok &= all(r["posts"] == a.posts for r in runs)
        print("| %s | %d | %.1f | %.1f | %.2f |" % (name, med["posts"], med["hwm"], med["rss"], med["s"]))
    srv.shutdown()
    if not ok:
        raise SystemExit("a side stored fewer posts than the feed holds")


if __name__ == "__main__":
    main()
