#!/usr/bin/env python3
"""The page at `/` at scale (issue 24), measured in headless Chromium: the
measurements of test_page_scale.py (make test on the debug build, make
browser-scale on the release build at 50,000 posts and 5,000 rows), and a
command line for measuring a kept store again:

    python3 Tests/python/page_scale.py BIN_DIR --store DIR [--posts N] [--rows N] [--out DIR]

A feed of `posts` posts and a manifest of `rows` images (distinct 8x8
PNGs; every 500th row a missing file, row 3 a TIFF) written to a scratch
directory and served by a real nginx are prefetched into a store (kept with
--store); the daemon serves that store over HTTP and Chromium opens `/`
over the DevTools protocol (Tests/Fixtures/browser/page_check.py's driver),
once at 1280x800 and once at 390x844 (a phone). For each: first paint and
first contentful paint; long tasks (a PerformanceObserver registered
before the page's own script runs); how long until posts and rows are on
screen; image requests in the first 3 s; the page's height; a screenshot
(and on the phone one more after tapping the Images tab). Then the
daemon's time for title searches over every post (`/posts?q=`). The bounds
(`failures`) are test_page_scale.py's; the command line prints them too.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "..", "Fixtures", "browser"))
from benchlib import free_port  # noqa: E402
import page_check  # noqa: E402
from world import Daemon, Origin  # noqa: E402

OBSERVER_JS = """
window.__longtasks = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longtasks.push([Math.round(e.startTime), Math.round(e.duration)]);
  }).observe({ type: "longtask", buffered: true });
} catch (e) { window.__longtasks = null; }
"""

READY_JS = "document.querySelectorAll('article.post').length > 0 && document.querySelectorAll('tr[data-row]').length > 0"

MEASURE_JS = """(() => {
  const paint = {};
  for (const p of performance.getEntriesByType('paint')) paint[p.name] = Math.round(p.startTime);
  const lt = window.__longtasks || [];
  return { paint, observed: Array.isArray(window.__longtasks), longtasks: lt.length, longest: lt.reduce((m, t) => Math.max(m, t[1]), 0),
           longtask_total: lt.reduce((s, t) => s + t[1], 0), longtask_list: lt.slice(0, 20),
           height: document.documentElement.scrollHeight,
           posts_in_dom: document.querySelectorAll('article.post').length,
           rows_in_dom: document.querySelectorAll('tr[data-row]').length,
           imgs_in_dom: document.querySelectorAll('tr[data-row] img').length };
})()"""

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar "
         "papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def png(i):
    """An 8x8 PNG of a colour made from `i` (each row its own object)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rgb = bytes(((i * 37) % 256, (i * 91) % 256, (i * 53) % 256))
    raw = b"".join(b"\0" + rgb * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def write_origin(www, posts, rows):
    os.makedirs(www + "/img")
    for i in range(rows):
        if i == 3:
            with open("%s/img/%d.tif" % (www, i), "wb") as f:
                f.write(b"II*\0" + b"\0" * 60)
        elif i % 500 != 499:
            with open("%s/img/%d.png" % (www, i), "wb") as f:
                f.write(png(i))
    manifest = [{"url": "img/%d.%s" % (i, "tif" if i == 3 else "png"), "description": "image %d" % i} for i in range(rows)]
    with open(www + "/manifest.json", "w") as f:
        json.dump(manifest, f)
    feed = [{"userId": 1 + i % 10, "id": i,
             "title": " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + " %d" % i,
             "body": ("post %d: " % i) + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(40))}
            for i in range(1, posts + 1)]
    with open(www + "/posts.json", "w") as f:
        json.dump(feed, f)


def prefetch(bins, store, posts, rows, tmp):
    """Fills `store` from a scratch nginx serving what `write_origin` writes."""
    www = tmp + "/www"
    write_origin(www, posts, rows)
    origin = Origin(tmp + "/nginx", www)
    try:
        daemon = Daemon(bins, store, tmp + "/prefetch.sock", None,
                        ["--posts-url", origin.base + "/posts.json", "--images-url", origin.base + "/manifest.json"])
        try:
            t = time.monotonic()
            r = daemon.ctl("prefetch")
            print("prefetch: status %d in %.1f s: %s" % (r.returncode, time.monotonic() - t, (r.stdout + r.stderr)[-300:].strip()))
        finally:
            daemon.stop()
    finally:
        origin.stop()


def open_page(browser, url, width, height, mobile):
    """A fresh page at `url`, measured: the report's entry for one width."""
    page = page_check.Page(browser)
    page.call("Emulation.setDeviceMetricsOverride",
              {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    page.call("Page.addScriptToEvaluateOnNewDocument", {"source": OBSERVER_JS})
    page.call("Network.enable")
    browser.images = 0
    t = time.monotonic()
    err = page.navigate(url)
    if err:
        raise SystemExit("cannot open %s: %s" % (url, err))
    ready = None
    while time.monotonic() - t < 120:
        try:
            if page.evaluate("!!(%s)" % READY_JS):
                ready = time.monotonic() - t
                break
        except (page_check.EvalError, page_check.CDPError):
            pass
        browser.pump(0.02)
    browser.pump(max(0.0, 3 - (time.monotonic() - t)))
    m = page.evaluate(MEASURE_JS)
    m["ready_ms"] = round(ready * 1000) if ready is not None else None
    m["image_requests_3s"] = browser.images
    return page, m


def screenshot(page, path):
    import base64
    r = page.call("Page.captureScreenshot", {"format": "png"}, timeout=120)
    with open(path, "wb") as f:
        f.write(base64.b64decode(r["data"]))


def count_images(browser):
    """Counts the page's image requests as the driver reads its events."""
    note = browser.note_event

    def noting(msg):
        if msg.get("method") == "Network.requestWillBeSent":
            p = msg.get("params", {})
            if p.get("type") == "Image" or "/objects/" in p.get("request", {}).get("url", ""):
                browser.images += 1
        note(msg)
    browser.images = 0
    browser.note_event = noting


def search_time(port, query):
    url = "http://127.0.0.1:%d/posts?q=%s&limit=50" % (port, query)
    t = time.monotonic()
    with urllib.request.urlopen(url) as r:
        body = r.read()
        total = r.headers.get("X-Total-Count")
    return {"query": query, "ms": round((time.monotonic() - t) * 1000, 1), "total": total, "bytes": len(body)}


def measure(bins, store, out, chromium, tmp, posts=None, rows=None):
    """Serves `store` over HTTP and measures `/` at both widths; the report."""
    os.makedirs(out, exist_ok=True)
    report = {"posts": posts, "rows": rows}
    port = free_port()
    daemon = Daemon(bins, store, tmp + "/sock", port)
    browser = None
    try:
        browser = page_check.Browser(chromium, 60)
        browser.wait_ready()
        count_images(browser)
        url = "http://127.0.0.1:%d/" % port
        for name, w, h, mobile in (("desktop", 1280, 800, False), ("phone", 390, 844, True)):
            page, m = open_page(browser, url, w, h, mobile)
            screenshot(page, "%s/%s.png" % (out, name))
            if mobile and page.evaluate("!!document.querySelector('[data-tab=images]')"):
                page.evaluate("document.querySelector('[data-tab=images]').click()")
                browser.pump(1.5)
                screenshot(page, "%s/%s-images.png" % (out, name))
            report[name] = m
            print("%s %dx%d: %s" % (name, w, h, json.dumps({k: v for k, v in m.items() if k != "longtask_list"})))
        report["errors"] = browser.console
        report["search"] = [search_time(port, q) for q in ("tango", "zulu%20alpha", "nothing-matches")]
        print("search: %s" % json.dumps(report["search"]))
    finally:
        if browser:
            browser.close()
        daemon.stop()
    with open(out + "/report.json", "w") as f:
        json.dump(report, f, indent=2)
    return report


def failures(m, name):
    """What of one width's measurements is past the page's bounds (issue 24)."""
    out = []
    fp = m["paint"].get("first-paint")
    if fp is None or fp >= 1000:
        out.append("%s: first paint %s ms (bound 1000)" % (name, fp))
    if m.get("ready_ms") is None or m["ready_ms"] >= 3000:
        out.append("%s: posts and rows on screen after %s ms (bound 3000)" % (name, m.get("ready_ms")))
    if not m.get("observed"):
        out.append("%s: the longtask observer did not run: long tasks unmeasured" % name)
    elif m["longest"] > 200:
        out.append("%s: a long task of %d ms (bound 200)" % (name, m["longest"]))
    if m["image_requests_3s"] > 200:
        out.append("%s: %d image requests at load (bound 200)" % (name, m["image_requests_3s"]))
    if m["height"] > 20000:
        out.append("%s: the page is %d px tall (bound 20000)" % (name, m["height"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--posts", type=int, default=50000)
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--store", help="a store to reuse (filled first when it has no index.log)")
    ap.add_argument("--out", default=".build/page-scale", help="screenshots and report.json (.build/page-scale)")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
    a = ap.parse_args()
    bins = os.path.abspath(a.bin_dir)
    tmp = tempfile.mkdtemp(prefix="cached-page-scale-")
    os.chmod(tmp, 0o755)
    store = os.path.abspath(a.store) if a.store else tmp + "/store"
    try:
        if not os.path.exists(store + "/index.log"):
            prefetch(bins, store, a.posts, a.rows, tmp)
        report = measure(bins, store, a.out, a.chromium, tmp, a.posts, a.rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name in ("desktop", "phone"):
        for f in failures(report[name], name):
            print("page-scale: past a bound: " + f, file=sys.stderr)
    print("page-scale: report %s/report.json, screenshots in %s" % (a.out, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
