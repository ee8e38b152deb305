#!/usr/bin/env python3
"""One hostile original against the variant helpers (issue 33, point 5):
an SVG of 300 x 300 that embeds a PNG of 45000 x 45000 pixels, which no
helper decodes within `variant-timeout 4`, and a 16 x 16 PNG beside it.

- sequential: six widths of the SVG asked one after another, then a
  thumbnail of the tiny PNG;
- at once: six widths of a second such SVG (other bytes: an original with
  no failure on record) asked at the same time, and 0.2 s later a
  thumbnail of the tiny PNG at a new width.

Each request is timed by the client over HTTP, from request to answer. The
decodes are the daemon's `variant_jobs` counter (the jobs given to a
helper; "-" for a daemon without it) and the helpers it stopped for
running past the timeout (its log's "during a job" lines).

  scripts/variant-hostile.py [BIN_DIR]   (default .build/debug)
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from benchlib import ROOT, call_socket, free_port, sh, start_origin, stop, wait_for

WIDTHS = [64, 96, 128, 160, 192, 256]


def hostile_svg(path, tmp, shade):
    """An SVG whose embedded PNG is 45000 x 45000 pixels of one `shade`."""
    png = os.path.join(tmp, "huge.png")
    sh(["vips", "black", os.path.join(tmp, "b.v"), "45000", "45000"])
    sh(["vips", "linear", os.path.join(tmp, "b.v"), png, "1", str(shade), "--uchar"])
    data = base64.b64encode(open(png, "rb").read()).decode()
    with open(path, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="300" height="300">'
                '<image width="300" height="300" xlink:href="data:image/png;base64,%s"/></svg>' % data)
    os.unlink(os.path.join(tmp, "b.v"))


def write_origin(www, tmp):
    """Examples/origin with the two SVGs and the tiny PNG as rows 16, 17 and 18."""
    shutil.copytree(os.path.join(ROOT, "Examples", "origin"), www)
    images = os.path.join(www, "images")
    hostile_svg(os.path.join(images, "hostile-a.svg"), tmp, 0)
    hostile_svg(os.path.join(images, "hostile-b.svg"), tmp, 1)
    sh(["vips", "black", os.path.join(images, "tiny.png"), "16", "16"])
    manifest = json.load(open(os.path.join(images, "manifest.json")))
    for name in ["hostile-a.svg", "hostile-b.svg", "tiny.png"]:
        manifest.append({"url": name, "description": name})
    json.dump(manifest, open(os.path.join(images, "manifest.json"), "w"))
    return len(manifest) - 3


def get(base, path):
    """(seconds, HTTP status, the start of an error's body)."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(base + path, timeout=120) as r:
            r.read()
            return time.monotonic() - start, r.status, ""
    except urllib.error.HTTPError as e:
        return time.monotonic() - start, e.code, e.read().decode(errors="replace")[:160]


def counts(sock, log):
    status = call_socket(sock, {"op": "status"})
    jobs = status.get("counters", {}).get("variant_jobs", "-")
    stopped = open(log).read().count("during a job")
    return "variant_jobs %s, helpers stopped during a job %d" % (jobs, stopped)


def at_once(base, requests):
    """Each (delay, path) on a thread of its own; their results in order."""
    results = [None] * len(requests)

    def run(i, delay, path):
        time.sleep(delay)
        results[i] = (path,) + get(base, path)
    threads = [threading.Thread(target=run, args=(i, d, p)) for i, (d, p) in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def show(label, results):
    print(label)
    for path, seconds, status, body in results:
        print("  %-22s %6.2f s  %d  %s" % (path, seconds, status, body.replace("\n", " ")[:140]))


def main():
    bin_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "debug"))
    tmp = tempfile.mkdtemp(prefix="variant-hostile-")
    procs = []
    try:
        first = write_origin(os.path.join(tmp, "www"), tmp)
        origin = start_origin(procs, os.path.join(ROOT, "Examples", "origin-server.py"), os.path.join(tmp, "www"), tmp)
        port, sock, log = free_port(), os.path.join(tmp, "sock"), os.path.join(tmp, "cached.log")
        procs.append(subprocess.Popen([os.path.join(bin_dir, "cached"), "--store", os.path.join(tmp, "store"), "--socket", sock,
                                       "--posts-url", origin + "/posts.json", "--images-url", origin + "/images/manifest.json",
                                       "--http-listen", "127.0.0.1:%d" % port, "--variant-timeout", "4", "--log-level", "warning"],
                                      stdout=subprocess.DEVNULL, stderr=open(log, "w")))
        base = "http://127.0.0.1:%d" % port
        if not wait_for(lambda: os.path.exists(sock) and call_socket(sock, {"op": "ping"}).get("ok")):
            raise SystemExit("cached did not start")
        for row in (first, first + 1, first + 2):
            get(base, "/images/%d" % row)  # the originals downloaded first: only variants are timed
        show("sequential: six widths of row %d, then the tiny PNG" % first,
             [("/images/%d?w=%d" % (first, w),) + get(base, "/images/%d?w=%d" % (first, w)) for w in WIDTHS]
             + [("/images/%d?w=32" % (first + 2),) + get(base, "/images/%d?w=32" % (first + 2))])
        print("  " + counts(sock, log))
        show("at once: six widths of row %d, the tiny PNG 0.2 s later" % (first + 1),
             at_once(base, [(0, "/images/%d?w=%d" % (first + 1, w)) for w in WIDTHS] + [(0.2, "/images/%d?w=48" % (first + 2))]))
        print("  " + counts(sock, log))
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
