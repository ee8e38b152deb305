#!/usr/bin/env python3
"""The feed shapes of issue 23 ("Real feeds") against the built daemon, each
served by a real nginx (static files with nginx's own ETags, Link headers
from its configuration: Tests/Fixtures/feeds/nginx-shapes.conf) or, where a
shape needs logic, by a small scripted origin (the Mastodon timeline:
Tests/Fixtures/feeds/mastodon-origin.py). The documents and what the daemon
should make of them are in Tests/Fixtures/feeds/shapes.py.

    scripts/feed-shapes.py BIN_DIR [--quick] [--only NAME[,NAME...]] [--keep]

First a reference client (a few lines of Python here) reads every good
shape as issue 23 says a feed is read, so that the fixtures are known to be
what the checks expect. Then, for every good shape, against the daemon:
three prefetches (`cachectl prefetch`), the 2nd and 3rd answered 304 page by
page with each page's own ETag (read from the origin's access log) and
writing nothing to the store; the listing in the right order with its ids;
a restart of the daemon (SIGKILL, started again on the same store); get_post
of each kind of id over the socket, cachectl and HTTP returning the exact
item and the id it is kept by; the images' bytes; an edit on a later page
picked up at the next prefetch while the other pages still answer 304; then
`cachectl compact`, SIGKILL and a restart, after which a prefetch is still
all 304. Then the faults: a loop of Link next links, a loop of document next
links, a later page that is a 404, a feed one page longer than
posts-max-pages (1001 pages; --quick: 21 pages past posts-max-pages=20),
posts-items pointing to an object (each with nothing of the feed changed),
a 0644 fetch-header-file, a redirect to another host, one there and back, a
next link to another host (whose log must show no credentials), a 401
without and with a wrong token.

Each check prints one line, PASS or FAIL and what it saw; at the end, per
shape, the settings used and the requests the origin's log shows for the
three prefetches. Exits 1 if any check failed.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "Tests", "Fixtures", "feeds")
sys.path.insert(0, HERE)
sys.path.insert(0, FIXTURES)
from benchlib import call_socket, free_port, stop, wait_for  # noqa: E402
import shapes  # noqa: E402

RESULTS = []
SUMMARY = []


def check(name, ok, detail=""):
    RESULTS.append((name, bool(ok)))
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    return bool(ok)


def canon(value):
    """A JSON value as the daemon stores a post: no whitespace, member order kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def short(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


# --- servers and their logs ----------------------------------------------------

class AccessLog:
    """A log of one JSON object per request (nginx's `shapes` format, the
    scripted origin's lines); `server` names are mapped to A, B, C, M."""

    def __init__(self, path, names):
        self.path, self.names = path, names

    def mark(self):
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def since(self, mark):
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            f.seek(mark)
            data = f.read()
        out = []
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            e["host"] = self.names.get(e.get("server"), e.get("server"))
            out.append(e)
        return out


class Logs:
    """Every origin's log, read together."""

    def __init__(self, logs):
        self.logs = logs

    def mark(self):
        return [log.mark() for log in self.logs]

    def settle(self, seconds=2.0):
        """Waits until no log has grown for 100 ms: nginx and the scripted
        origin write a request's line after its answer has gone."""
        last, end = None, time.time() + seconds
        while time.time() < end:
            now = self.mark()
            if now == last:
                return
            last = now
            time.sleep(0.1)

    def since(self, marks):
        out = []
        for log, m in zip(self.logs, marks):
            out += log.since(m)
        return out


def wait_port(host, port, seconds=10):
    def up():
        try:
            socket.create_connection((host, port), 0.5).close()
            return True
        except OSError:
            return False
    return wait_for(up, seconds, 0.05)


class Origins:
    def __init__(self, tmp, procs):
        self.tmp = tmp
        self.ports = {"A": free_port(), "B": free_port(), "C": free_port(), "DEAD": free_port()}
        roots = {k: os.path.join(tmp, "www-" + k) for k in "abc"}
        for r in roots.values():
            os.makedirs(r)
        os.makedirs(os.path.join(tmp, "ntmp"))
        self.files = shapes.Files(roots)
        with open(os.path.join(FIXTURES, "nginx-shapes.conf")) as f:
            conf = f.read()
        values = {"DIR": tmp, "A": str(self.ports["A"]), "B": str(self.ports["B"]), "C": str(self.ports["C"]),
                  "USER": "user root;" if os.geteuid() == 0 else ""}
        for k, v in values.items():
            conf = conf.replace("@%s@" % k, v)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(conf)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.nginx = subprocess.Popen([nginx, "-p", tmp, "-c", tmp + "/nginx.conf", "-e", tmp + "/nginx-error.log"],
                                      stdout=subprocess.DEVNULL, stderr=open(tmp + "/nginx.out", "wb"))
        procs.append(self.nginx)
        for host, port in (("127.0.0.1", self.ports["A"]), ("127.0.0.1", self.ports["B"]), ("127.0.0.2", self.ports["C"])):
            if not wait_port(host, port):
                raise SystemExit("nginx did not start: " + open(tmp + "/nginx.out").read()[-1500:] +
                                 open(tmp + "/nginx-error.log").read()[-1500:])
        port_file = os.path.join(tmp, "mastodon.port")
        self.mastodon_data = os.path.join(tmp, "mastodon.json")
        with open(self.mastodon_data, "w") as f:
            f.write("[]")
        self.mastodon = subprocess.Popen([sys.executable, os.path.join(FIXTURES, "mastodon-origin.py"), "--data", self.mastodon_data,
                                          "--token", shapes.MASTODON_TOKEN, "--port-file", port_file,
                                          "--log", os.path.join(tmp, "mastodon.log")],
                                         stdout=subprocess.DEVNULL, stderr=open(tmp + "/mastodon.out", "wb"))
        procs.append(self.mastodon)
        if not wait_for(lambda: os.path.exists(port_file), 10):
            raise SystemExit("the Mastodon origin did not start: " + open(tmp + "/mastodon.out").read()[-1500:])
        self.ports["M"] = int(open(port_file).read())
        names = {"127.0.0.1:%d" % self.ports["A"]: "A", "127.0.0.1:%d" % self.ports["B"]: "B",
                 "127.0.0.2:%d" % self.ports["C"]: "C", "127.0.0.1:%d" % self.ports["M"]: "M"}
        self.logs = Logs([AccessLog(os.path.join(tmp, "access.log"), names), AccessLog(os.path.join(tmp, "mastodon.log"), names)])


# --- the daemon ----------------------------------------------------------------

class Daemon:
    """cached on its own store, socket and HTTP port, configured on the
    command line only (--config /dev/null)."""

    def __init__(self, bin_dir, tmp, name, settings):
        self.dir = os.path.join(tmp, "d-" + name)
        os.makedirs(self.dir)
        self.cached, self.cachectl = os.path.join(bin_dir, "cached"), os.path.join(bin_dir, "cachectl")
        self.sock, self.http_port, self.settings = self.dir + "/sock", free_port(), settings
        self.stderr_path = self.dir + "/stderr"
        self.p = None

    def argv(self):
        args = [self.cached, "--config", "/dev/null", "--store", self.dir + "/store", "--socket", self.sock,
                "--http-listen", "127.0.0.1:%d" % self.http_port, "--log-level", "info", "--retry-delay", "0.05"]
        for k, v in self.settings:
            args += ["--" + k, v]
        return args

    def start(self):
        """True once it answers ping; False (the reason in `failure`) if it exits or never answers."""
        self.mark = os.path.getsize(self.stderr_path) if os.path.exists(self.stderr_path) else 0
        self.p = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=open(self.stderr_path, "ab"))
        up = wait_for(lambda: self.p.poll() is not None or self.ctl("ping", timeout=5).returncode == 0, 30, 0.05)
        if up and self.p.poll() is None:
            self.failure = ""
            return True
        self.failure = "exit status %s: %s" % (self.p.poll(), short(self.stderr_since(self.mark), 600))
        self.stop()
        return False

    def stderr_since(self, mark=0):
        with open(self.stderr_path, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    def ctl(self, *args, timeout=300):
        try:
            return subprocess.run([self.cachectl, "--socket", self.sock] + list(args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 124, "", "cachectl gave no answer in %d s" % timeout)

    def prefetch(self, what):
        """cachectl --json prefetch WHAT: (exit status, answer or None, stderr)."""
        r = self.ctl("--json", "prefetch", what)
        answer = None
        for line in r.stdout.splitlines():
            try:
                answer = json.loads(line)
            except ValueError:
                pass
        return r.returncode, answer, r.stderr.strip()

    def call(self, request):
        return call_socket(self.sock, request, timeout=60)

    def http(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def store_bytes(self):
        """The size of everything in the store (index.log, posts, objects)."""
        total = 0
        for root, _, files in os.walk(self.dir + "/store"):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_size
                except OSError:
                    pass
        return total

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        if self.p:
            stop(self.p)


# --- helpers for the checks -------------------------------------------------------

def describe(e):
    s = "%s %s %s" % (e["status"], e["host"], e["uri"])
    if e.get("inm"):
        s += " [If-None-Match: %s]" % e["inm"]
    if e.get("ims") and not e.get("inm"):
        s += " [If-Modified-Since: %s]" % e["ims"]
    if e.get("authorization") == "yes":
        s += " [Authorization]"
    return s


def feed_requests(entries, shape):
    """The requests of `entries` for the shape's feed pages (on its origin)."""
    host = "M" if shape.origin == "mastodon" else "A"
    return [e for e in entries if e["host"] == host and e["uri"] in shape.pages()]


def prefetch_summary(code, answer, err):
    if answer is None:
        return "exit %d, no answer; %s" % (code, short(err))
    if not answer.get("ok"):
        return "exit %d, %s: %s" % (code, answer.get("error", {}).get("code"), short(answer.get("error", {}).get("message"), 400))
    return "exit %d, posts %s, images %s%s" % (code, canon(answer.get("posts")), canon(answer.get("images")),
                                               ", failures " + short(canon(answer.get("failures")), 300) if answer.get("failures") else "")


def is_decimal(s):
    return isinstance(s, str) and s.lstrip("-").isdigit() and s == str(int(s))


def cachectl_post_args(pid):
    """cachectl's words for get post ID: the id's text, whatever its kind (an
    integer and a string of the same spelling find each other, docs/protocol.md
    "Post ids")."""
    return ["get", "post", str(pid)]


def same_id(a, b):
    """The same id, of the same kind (5 and "5" are two ids; True is no id)."""
    return type(a) is type(b) and a == b


def resolve(shape, posts, pid, kind):
    """The post get_post finds: the id of `kind` ("int" or "string") with
    pid's spelling first, else the other kind's (docs/protocol.md, "Post ids")."""
    text = str(pid)
    as_int = int(text) if is_decimal(text) else None
    order = [as_int, text] if kind == "int" else [text, as_int]
    for key in order:
        if key is None:
            continue
        found = next((p for p in posts if same_id(shape.id_of(p), key)), None)
        if found is not None:
            return found
    return None


def get_post_checks(d, shape, pid, label, posts=None):
    """get_post of `pid` over the socket (its own kind first), cachectl (the
    text: an integer when it spells one) and HTTP (a string first): each must
    answer the exact item it should find and the id that item is kept by."""
    posts = shape.posts if posts is None else posts
    requests = [("over the socket", pid, "int" if isinstance(pid, int) else "string")]
    if isinstance(pid, str) and is_decimal(pid):
        requests.append(("over the socket as the integer %s" % pid, int(pid), "int"))
    for how, value, kind in requests:
        item = resolve(shape, posts, value, kind)
        want = canon(item)
        try:
            a = d.call({"op": "get_post", "id": value})
        except (OSError, ValueError) as e:
            a = {"ok": False, "error": {"message": str(e)}}
        got = canon(a.get("post")) if a.get("ok") else "error: " + short(canon(a.get("error")), 200)
        ok = got == want and canon(a.get("id")) == canon(shape.id_of(item))
        check("%s: %s get_post %s %s is the exact item %s" % (shape.name, label, canon(value), how, canon(shape.id_of(item))), ok,
              "id %s, %d bytes" % (canon(a.get("id")), len(want.encode())) if ok else "id %s, %s" % (canon(a.get("id")), short(got, 160)))
    item = resolve(shape, posts, pid, "int" if is_decimal(str(pid)) else "string")
    want = canon(item)
    r = d.ctl("--json", *cachectl_post_args(pid))
    try:
        answer = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    except (ValueError, IndexError):
        answer = {}
    ok = canon(answer.get("post")) == want and canon(answer.get("id")) == canon(shape.id_of(item))
    check("%s: %s cachectl %s is the exact item %s" % (shape.name, label, " ".join(cachectl_post_args(pid)), canon(shape.id_of(item))), ok,
          "exit 0" if ok else "exit %d %s" % (r.returncode, short(r.stdout + r.stderr, 200)))
    item = resolve(shape, posts, pid, "string")
    want = canon(item)
    path = "/posts/" + urllib.parse.quote(str(pid), safe="")
    try:
        status, body = d.http(path)
        got = canon(json.loads(body)) if status == 200 else None
    except (OSError, ValueError, http.client.HTTPException) as e:
        status, body, got = 0, str(e).encode(), None
    check("%s: %s HTTP GET %s is the exact item %s" % (shape.name, label, path, canon(shape.id_of(item))), got == want,
          "status %d %s" % (status, short(body.decode("utf-8", "replace"), 200)) if got != want else "200")


def listing_check(d, shape, posts, label):
    want = [canon(p) for p in shape.listing(posts)]
    try:
        a = d.call({"op": "list_posts"})
    except (OSError, ValueError) as e:
        a = {"ok": False, "error": {"message": str(e)}}
    got = [canon(p) for p in a.get("posts", [])] if a.get("ok") else None
    if a.get("ok"):
        want_ids = [canon(shape.id_of(p)) for p in shape.listing(posts)]
        got_ids = [canon(i) for i in a.get("ids") or []]
        check("%s: %s list_posts' ids are the posts' ids, of their kinds, in order" % (shape.name, label), got_ids == want_ids,
              (short(" ".join(got_ids), 200) or "no ids") if got_ids != want_ids else "%d ids" % len(got_ids))
    order = "ascending ids" if all(type(shape.id_of(p)) is int for p in posts) else "feed order"
    detail = "%d posts in %s" % (len(want), order)
    if got != want:
        if got is None:
            detail = "error: " + short(canon(a.get("error")), 200)
        else:
            ids = [canon(json.loads(p).get(shape.id_key)) for p in got]
            detail = "%d posts, ids %s; wanted ids %s" % (len(got), short(" ".join(ids), 200),
                                                          short(" ".join(canon(shape.id_of(p)) for p in shape.listing(posts)), 200))
    check("%s: %s list_posts" % (shape.name, label), got == want, detail)


def images_check(d, shape, rows, label, fetch_bytes=True):
    try:
        a = d.call({"op": "list_images"})
    except (OSError, ValueError) as e:
        a = {"ok": False, "error": {"message": str(e)}}
    if not a.get("ok"):
        check("%s: %s list_images" % (shape.name, label), False, "error: " + short(canon(a.get("error")), 200))
        return
    got = [(x.get("url"), x.get("description"), x.get("hash") is not None) for x in a["images"]]
    want = [(url, desc, True) for url, _, desc in rows]
    check("%s: %s list_images: every row's url and description, all cached" % (shape.name, label), got == want,
          "%d rows" % len(want) if got == want else "got %s; wanted %s" % (short(canon(got), 300), short(canon(want), 300)))
    if not fetch_bytes:
        return
    bad = []
    for row, (url, data, _) in enumerate(rows):
        out = os.path.join(d.dir, "row-%d" % row)
        r = d.ctl("get", "image", str(row), "-o", out)
        if r.returncode != 0 or not os.path.exists(out) or open(out, "rb").read() != data:
            bad.append("row %d: exit %d %s" % (row, r.returncode, short(r.stderr, 100)))
    check("%s: %s each row's bytes are the image's (cachectl get image -o)" % (shape.name, label), not bad,
          "; ".join(bad) if bad else "%d images" % len(rows))


# --- the fixtures, read by a reference client ------------------------------------------
#
# Before the daemon is asked anything, a few lines of Python read each good
# shape by the rules of issue 23 (items and id pointers, JSON Feed's items,
# Link rel="next" always, the next pointer resolved against the page's URL,
# each page's ETag sent back): the pages, posts and rows it finds must be
# the ones the checks expect, and a second reading must be answered 304
# page by page. A FAIL of the daemon's checks is then the daemon's.

def pointer(doc, ptr):
    """RFC 6901: the value `ptr` points to in `doc`, or KeyError."""
    if ptr == "":
        return doc
    for token in ptr.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, list):
            doc = doc[int(token)]
        elif isinstance(doc, dict):
            doc = doc[token]
        else:
            raise KeyError(ptr)
    return doc


def link_next(value):
    """The target of the first rel="next" in a Link field (RFC 8288), or None."""
    i = 0
    while value and i < len(value):
        start = value.find("<", i)
        end = value.find(">", start)
        if start < 0 or end < 0:
            return None
        target, i = value[start + 1:end], end + 1
        params, quoted = "", False
        while i < len(value) and (quoted or value[i] != ","):
            quoted ^= value[i] == '"'
            params += value[i]
            i += 1
        for param in params.split(";"):
            k, _, v = param.strip().partition("=")
            if k.strip().lower() == "rel" and "next" in v.strip().strip('"').lower().split():
                return target
    return None


def reference_read(url, settings, prefix, etags):
    """Reads one feed (`prefix` posts or images) as issue 23 says; its pages'
    URIs with their statuses, and its items."""
    import urllib.request
    headers = [v.split(":", 1) for k, v in settings if k == "fetch-header"]
    for k, v in settings:
        if k == "fetch-header-file":
            headers += [line.split(":", 1) for line in open(v).read().splitlines()
                        if ":" in line and not line.lstrip().startswith("#")]
    conf = dict(settings)
    pages, items, seen = [], [], set()
    while url and len(pages) < 50:
        if url in seen:
            raise ValueError("loop at " + url)
        seen.add(url)
        req = urllib.request.Request(url)
        for k, v in headers:
            req.add_header(k.strip(), v.strip())
        if url in etags:
            req.add_header("If-None-Match", etags[url][0])
        try:
            r = urllib.request.urlopen(req, timeout=10)
            status, body, link = r.status, r.read(), r.headers.get("Link")
            etags[url] = (r.headers.get("ETag"), body)
        except urllib.error.HTTPError as e:
            if e.code != 304:
                raise
            status, body, link = 304, etags[url][1], e.headers.get("Link")
        split = urllib.parse.urlsplit(url)
        pages.append((split.path + ("?" + split.query if split.query else ""), status))
        doc = json.loads(body)
        ptr, next_ptr = conf.get(prefix + "-items", ""), conf.get(prefix + "-next", "")
        if isinstance(doc, dict) and str(doc.get("version", "")).startswith("https://jsonfeed.org/version/"):
            ptr, next_ptr = ptr or "/items", next_ptr or "/next_url"
        items += pointer(doc, ptr)
        nxt = None
        if next_ptr:  # the document's next first, then Link (docs/protocol.md, "Pages")
            try:
                nxt = pointer(doc, next_ptr)
            except (KeyError, IndexError, ValueError):
                nxt = None
            if isinstance(nxt, dict):
                nxt = nxt.get("href")
        nxt = nxt or link_next(link)
        url = urllib.parse.urljoin(url, nxt) if nxt else None
    return pages, items


def reference_check(shape):
    conf = dict(shape.settings)
    try:
        etags = {}
        first, posts = reference_read(conf["posts-url"], shape.settings, "posts", etags)
        again, _ = reference_read(conf["posts-url"], shape.settings, "posts", etags)
        ptr = conf.get("posts-id", "/id")
        seen, unique = set(), []
        for p in posts:
            key = canon(pointer(p, ptr))
            if key not in seen:
                seen.add(key)
                unique.append(p)
        posts = unique
        ok = ([u for u, _ in first] == shape.posts_pages and all(st == 200 for _, st in first) and
              [u for u, _ in again] == shape.posts_pages and all(st == 304 for _, st in again) and
              [canon(p) for p in posts] == [canon(p) for p in shape.posts] and
              [pointer(p, ptr) for p in posts] == [shape.id_of(p) for p in shape.posts])
        detail = "posts: %s; again: %s" % (" ".join("%d %s" % (st, u) for u, st in first), " ".join(str(st) for _, st in again))
        if "images-url" in conf:
            etags = {}
            ipages, rows = reference_read(conf["images-url"], shape.settings, "images", etags)
            base = conf["images-url"]
            got = [(urllib.parse.urljoin(base, pointer(r, conf.get("images-url-field", "/url"))),
                    pointer(r, conf.get("images-description-field", "/description"))) for r in rows]
            ok = ok and [u for u, _ in ipages] == shape.image_pages and got == [(u, d) for u, _, d in shape.rows]
            detail += "; images: %s, %d rows" % (" ".join("%d %s" % (st, u) for u, st in ipages), len(rows))
        check("fixtures: a reference client reads %s as the checks expect" % shape.name, ok, detail)
    except Exception as e:  # noqa: BLE001 (any failure of the fixtures is reported, not raised)
        check("fixtures: a reference client reads %s as the checks expect" % shape.name, False, "%s: %s" % (type(e).__name__, e))


# --- a good shape ------------------------------------------------------------------

def run_shape(bin_dir, tmp, origins, shape):
    print("== %s: %s" % (shape.name, shape.title), flush=True)
    d = Daemon(bin_dir, tmp, shape.name, shape.settings)
    entry = {"name": shape.name, "title": shape.title, "settings": shape.settings, "prefetches": []}
    SUMMARY.append(entry)
    if not check("%s: cached starts with the shape's settings" % shape.name, d.start(), d.failure):
        entry["prefetches"] = ["(cached did not start: %s)" % short(d.failure, 200)]
        return
    try:
        windows, written = [], []
        for k in (1, 2, 3):
            m = origins.logs.mark()
            size = d.store_bytes()
            code, answer, err = d.prefetch(shape.what)
            written.append(d.store_bytes() - size)
            origins.logs.settle()
            entries = origins.logs.since(m)
            windows.append(entries)
            entry["prefetches"].append(entries)
            ok = code == 0 and answer is not None and answer.get("ok")
            if k == 1 and ok:
                ok = (answer.get("posts") or {}).get("invalid", 0) == shape.invalid
            check("%s: prefetch %d (cachectl prefetch %s)%s" % (shape.name, k, shape.what,
                                                              ", %d invalid" % shape.invalid if k == 1 and shape.invalid else ""),
                  ok, prefetch_summary(code, answer, err))
        pages = shape.pages()
        first = feed_requests(windows[0], shape)
        check("%s: prefetch 1 asks for each page once, 200%s" % (shape.name, " (images-url = posts-url: once for both feeds)" if shape.same_feed else ""),
              sorted(e["uri"] for e in first) == sorted(pages) and all(e["status"] == 200 for e in first) and
              # each feed's pages in their order (the two feeds may be fetched side by side)
              [e["uri"] for e in first if e["uri"] in shape.posts_pages] == shape.posts_pages and
              [e["uri"] for e in first if e["uri"] in shape.image_pages] == shape.image_pages,
              "; ".join(describe(e) for e in first) or "no feed request in the log")
        for k in (1, 2):
            reqs = feed_requests(windows[k], shape)
            others = [e for e in windows[k] if e not in reqs]
            check("%s: prefetch %d: every page once, 304, with its own ETag" % (shape.name, k + 1),
                  sorted(e["uri"] for e in reqs) == sorted(pages) and len(reqs) == len(pages) and
                  all(e["status"] == 304 and e["inm"] for e in reqs) and not others,
                  "; ".join(describe(e) for e in windows[k]) or "no request in the log")
        check("%s: prefetches 2 and 3 (every page 304) write nothing to the store" % shape.name,
              written[1] == 0 and written[2] == 0,
              "the store grew by %d, %d and %d bytes in prefetches 1, 2 and 3" % tuple(written))
        validators = {}
        for e in first:
            validators[e["uri"]] = e.get("etag")
        sent = {e["uri"]: e["inm"] for e in feed_requests(windows[1], shape)}
        mismatched = [u for u in sent if validators.get(u) and sent[u] != validators[u]]
        if shape.origin == "nginx":
            check("%s: prefetch 2 sends each page the ETag that page gave" % shape.name, not mismatched and sent,
                  "; ".join("%s sent %s, had %s" % (u, sent[u], validators.get(u)) for u in mismatched) or
                  "%d pages" % len(sent))
        if shape.credentials:
            reqs = [e for w in windows for e in w if e["host"] == shape.credentials and e["uri"] in pages]
            check("%s: every feed request to %s carried Authorization" % (shape.name, shape.credentials),
                  reqs and all(e["authorization"] == "yes" for e in reqs), "%d of %d" % (
                      sum(e["authorization"] == "yes" for e in reqs), len(reqs)))
        for host in shape.foreign:
            reqs = [e for w in windows for e in w if e["host"] == host]
            check("%s: host %s (another origin) never received Authorization" % (shape.name, host),
                  reqs and all(e["authorization"] == "-" for e in reqs),
                  "%d requests, %d with Authorization" % (len(reqs), sum(e["authorization"] == "yes" for e in reqs)))
        listing_check(d, shape, shape.posts, "before the restart:")
        if shape.rows:
            images_check(d, shape, shape.rows, "before the restart:", fetch_bytes=False)

        d.kill()
        if not check("%s: cached starts again on the same store after SIGKILL" % shape.name, d.start(), d.failure):
            return
        kinds = {}
        for pid in shape.ids:
            kind = "integer id" if isinstance(pid, int) else "numeric string id" if is_decimal(pid) else "string id"
            kinds.setdefault(kind, 0)
            kinds[kind] += 1
            get_post_checks(d, shape, pid, "after the restart: " + kind)
        listing_check(d, shape, shape.posts, "after the restart:")
        if shape.rows:
            images_check(d, shape, shape.rows, "after the restart:")

        if shape.edit:
            e = shape.edit()
            m = origins.logs.mark()
            code, answer, err = d.prefetch(e.what)
            origins.logs.settle()
            entries = origins.logs.since(m)
            entry["edit"] = entries
            check("%s: prefetch after the edit" % shape.name, code == 0 and answer and answer.get("ok"),
                  prefetch_summary(code, answer, err))
            reqs = [x for x in entries if x["uri"] in e.unchanged + e.changed and x["host"] == ("M" if shape.origin == "mastodon" else "A")]
            statuses = {x["uri"]: x["status"] for x in reqs}
            want = dict([(u, 304) for u in e.unchanged] + [(u, 200) for u in e.changed])
            check("%s: after the edit on %s the other pages still answer 304, the edited one 200" % (
                      shape.name, ", ".join(e.changed)),
                  statuses == want and len(reqs) == len(want),
                  "; ".join(describe(x) for x in reqs) or "no feed request in the log")
            if e.posts is not None:
                for pid in e.changed_ids:
                    get_post_checks(d, shape, pid, "after the edit:", e.posts)
                listing_check(d, shape, e.posts, "after the edit:")
                for pid in e.removed_ids:
                    a = d.call({"op": "get_post", "id": pid})
                    check("%s: after the edit the post %s gone from page 2 is not_found" % (shape.name, canon(pid)),
                          not a.get("ok") and (a.get("error") or {}).get("code") == "not_found", short(canon(a), 200))
            if e.rows is not None:
                images_check(d, shape, e.rows, "after the edit:")
                for path in e.new_images:
                    got = [x for x in entries if x["uri"] == path]
                    check("%s: after the edit the new image %s was downloaded once" % (shape.name, path),
                          len(got) == 1 and got[0]["status"] == 200, "; ".join(describe(x) for x in got) or "not requested")
            compact_and_restart(d, origins, shape, e.posts if e.posts is not None else shape.posts,
                                e.rows if e.rows is not None else shape.rows)
    finally:
        d.stop()


def compact_and_restart(d, origins, shape, posts, rows):
    """cachectl compact, SIGKILL, start again: the posts, the rows and every
    page's validators survive the rewritten log (a prefetch is all 304)."""
    r = d.ctl("--json", "compact")
    check("%s: cachectl compact" % shape.name, r.returncode == 0, short(r.stdout + r.stderr, 200))
    d.kill()
    if not check("%s: cached starts again after compact and SIGKILL" % shape.name, d.start(), d.failure):
        return
    listing_check(d, shape, posts, "after compact and a restart:")
    if rows:
        images_check(d, shape, rows, "after compact and a restart:", fetch_bytes=False)
    m = origins.logs.mark()
    size = d.store_bytes()
    what = shape.what
    code, answer, err = d.prefetch(what)
    origins.logs.settle()
    entries = origins.logs.since(m)
    reqs = feed_requests(entries, shape)
    check("%s: after compact and a restart a prefetch is answered 304 on every page and writes nothing" % shape.name,
          code == 0 and sorted(e["uri"] for e in reqs) == sorted(shape.pages()) and len(reqs) == len(entries) and
          all(e["status"] == 304 for e in reqs) and d.store_bytes() == size,
          "%s; %s; the store grew by %d bytes" % (prefetch_summary(code, answer, err), "; ".join(describe(e) for e in entries) or "no request",
                                                  d.store_bytes() - size))


# --- the faults ----------------------------------------------------------------------

def fault_daemon(bin_dir, tmp, name, settings, entry):
    d = Daemon(bin_dir, tmp, name, settings)
    entry["settings"] = settings
    if not check("%s: cached starts with the fault's settings" % entry["name"], d.start(), d.failure):
        entry["outcome"] = "cached did not start: " + short(d.failure, 200)
        return None
    return d


def upstream_failure(code, answer):
    return code == 6 and answer is not None and not answer.get("ok") and answer.get("error", {}).get("code") == "upstream"


def message(answer):
    return ((answer or {}).get("error") or {}).get("message") or ""


def unchanged(d, ids_titles, total, name):
    """The posts are still what they were: `total` of them, each id's title as before.
    Counted by `status`, from memory: a `list_posts` of posts never stored
    would fetch them first (docs/protocol.md, "list_posts")."""
    try:
        got_total = d.call({"op": "status"}).get("posts")
        bad = []
        for pid, title in ids_titles:
            p = d.call({"op": "get_post", "id": pid})
            if not p.get("ok") or p["post"].get("title") != title:
                bad.append("%s: %s" % (pid, short(canon(p.get("post") or p.get("error")), 100)))
    except (OSError, ValueError) as e:
        got_total, bad = None, [str(e)]
    check("%s: nothing of the feed changed" % name, got_total == total and not bad,
          "%s posts (wanted %d)%s" % (got_total, total, "; " + "; ".join(bad) if bad else ""))


def fault_link_loop(bin_dir, tmp, o, entry):
    name = entry["name"]
    A = o.ports["A"]
    d = fault_daemon(bin_dir, tmp, "link-loop", [("posts-url", "http://127.0.0.1:%d/faults/loop/start.json" % A)], entry)
    if not d:
        return
    try:
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = o.logs.since(m)
        check("%s: Link next back to the first page fails the refresh (upstream)" % name,
              upstream_failure(code, answer) and "start.json" in message(answer), entry["outcome"])
        unchanged(d, [], 0, name)
    finally:
        d.stop()


def fault_doc_loop(bin_dir, tmp, o, entry):
    name = entry["name"]
    A = o.ports["A"]
    d = fault_daemon(bin_dir, tmp, "doc-loop", [("posts-url", "http://127.0.0.1:%d/django/page1.json" % A),
                                                ("posts-items", "/results"), ("posts-next", "/next")], entry)
    if not d:
        return
    try:
        results = shapes.django_pages(o.files, o.ports)
        code, answer, err = d.prefetch("posts")
        check("%s: Django REST pages (posts-items=/results, posts-next=/next) refresh" % name,
              code == 0 and answer and answer.get("ok"), prefetch_summary(code, answer, err))
        shapes.django_pages(o.files, o.ports, loop=True, edited=True)
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = o.logs.since(m)
        check("%s: page 2's next back to page 1 fails the refresh (upstream) naming the URL" % name,
              upstream_failure(code, answer) and "page1.json" in message(answer), entry["outcome"])
        unchanged(d, [(r["id"], r["title"]) for r in results], 4, name)
    finally:
        d.stop()


def fault_page_fails(bin_dir, tmp, o, entry):
    name = entry["name"]
    A = o.ports["A"]
    d = fault_daemon(bin_dir, tmp, "page-fails", [("posts-url", "http://127.0.0.1:%d/django-404/page1.json" % A),
                                                  ("posts-items", "/results"), ("posts-next", "/next")], entry)
    if not d:
        return
    try:
        results = shapes.django_pages(o.files, o.ports, "django-404")
        code, answer, err = d.prefetch("posts")
        check("%s: two Django REST pages refresh" % name, code == 0 and answer and answer.get("ok"),
              prefetch_summary(code, answer, err))
        shapes.django_pages(o.files, o.ports, "django-404", edited=True, missing=True)
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = o.logs.since(m)
        check("%s: page 1 edited and its next leading to a 404 fails the refresh (upstream) naming the URL" % name,
              upstream_failure(code, answer) and "gone.json" in message(answer), entry["outcome"])
        unchanged(d, [(r["id"], r["title"]) for r in results], 4, name + " (page 1's edit not stored either)")
    finally:
        d.stop()


def fault_max_pages(bin_dir, tmp, o, entry, quick):
    limit = 20 if quick else 1000
    name = entry["name"]
    A = o.ports["A"]
    settings = [("posts-url", "http://127.0.0.1:%d/many/p-1.json" % A), ("posts-items", "/results"), ("posts-next", "/next")]
    if quick:
        settings.append(("posts-max-pages", str(limit)))
    shapes.many_pages(o.files, limit)
    d = fault_daemon(bin_dir, tmp, "max-pages", settings, entry)
    if not d:
        return
    try:
        t0 = time.time()
        code, answer, err = d.prefetch("posts")
        check("%s: a feed of exactly %d pages (the bound) refreshes" % (name, limit),
              code == 0 and answer and answer.get("ok") and d.call({"op": "list_posts", "limit": 0}).get("total") == limit,
              "%s in %.1f s" % (prefetch_summary(code, answer, err), time.time() - t0))
        shapes.many_pages_extended(o.files, limit)
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        reqs = o.logs.since(m)
        entry["requests"] = ["%d requests: %d answered 304, %d 200; last %s" % (
            len(reqs), sum(e["status"] == 304 for e in reqs), sum(e["status"] == 200 for e in reqs),
            describe(reqs[-1]) if reqs else "-")]
        msg = message(answer)
        check("%s: page %d fails the refresh (upstream) naming posts-max-pages %d" % (name, limit + 1, limit),
              upstream_failure(code, answer) and "posts-max-pages" in msg and str(limit) in msg, entry["outcome"])
        unchanged(d, [(limit, "page %d" % limit)], limit, name)
    finally:
        d.stop()


def fault_items_object(bin_dir, tmp, o, entry):
    name = entry["name"]
    A = o.ports["A"]
    d = fault_daemon(bin_dir, tmp, "items-object", [("posts-url", "http://127.0.0.1:%d/faults/items.json" % A),
                                                    ("posts-items", "/data")], entry)
    if not d:
        return
    try:
        code, answer, err = d.prefetch("posts")
        check("%s: {\"data\": [...]} with posts-items=/data refreshes" % name, code == 0 and answer and answer.get("ok"),
              prefetch_summary(code, answer, err))
        o.files.put("a", "faults/items.json", {"data": {"id": 3, "title": "an object where the array was"}})
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = o.logs.since(m)
        msg = message(answer)
        check("%s: /data pointing to an object fails the refresh (upstream) naming the pointer and what is there" % name,
              upstream_failure(code, answer) and "/data" in msg and "object" in msg, entry["outcome"])
        unchanged(d, [], 2, name)
    finally:
        d.stop()


def fault_header_file_mode(bin_dir, tmp, o, entry):
    name = entry["name"]
    path = os.path.join(tmp, "headers-0644")
    with open(path, "w") as f:
        f.write("Authorization: Bearer %s\n" % shapes.MASTODON_TOKEN)
    os.chmod(path, 0o644)
    settings = [("posts-url", "http://127.0.0.1:%d/api/v1/timelines/public?limit=3" % o.ports["M"]), ("fetch-header-file", path)]
    entry["settings"] = settings
    m = o.logs.mark()
    d = Daemon(bin_dir, tmp, "header-0644", settings)
    try:
        if d.start():
            code, answer, err = d.prefetch("posts")
            said = message(answer) + " " + err
            entry["outcome"] = "started; prefetch: " + prefetch_summary(code, answer, err)
            refused = code != 0 and path in said
        else:
            said = d.failure
            entry["outcome"] = "refused to start: " + short(d.failure, 300)
            refused = d.p.returncode == 2 and path in said
        check("%s: refused, naming the file and its mode" % name,
              refused and ("644" in said or "mode" in said or "group" in said or "other" in said), entry["outcome"])
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "M"]
        entry["requests"] = reqs
        check("%s: the origin never received the file's Authorization" % name,
              all(e["authorization"] == "-" for e in reqs), "; ".join(describe(e) for e in reqs) or "no request")
    finally:
        d.stop()


CROSS_HEADERS = [("fetch-header", "Authorization: Bearer cross-origin-token"), ("fetch-header", "X-Api-Key: k-123")]


def fault_other_host(bin_dir, tmp, o, entry, kind):
    A = o.ports["A"]
    name = entry["name"]
    if kind == "redirect":
        url, there = "http://127.0.0.1:%d/faults/redirect/posts.json" % A, "/elsewhere/posts.json"
    elif kind == "bounce":
        url, there = "http://127.0.0.1:%d/faults/bounce/posts.json" % A, "/bounce/back"
    else:
        url, there = "http://127.0.0.1:%d/faults/cross/page1.json" % A, "/elsewhere/page2.json"
    d = fault_daemon(bin_dir, tmp, kind, [("posts-url", url)] + CROSS_HEADERS, entry)
    if not d:
        return
    try:
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = o.logs.since(m)
        entry["requests"] = reqs
        total = d.call({"op": "list_posts", "limit": 0}).get("total")
        entry["outcome"] = "%s; %s posts stored" % (prefetch_summary(code, answer, err), total)
        on_a = [e for e in reqs if e["host"] == "A"]
        on_c = [e for e in reqs if e["host"] == "C"]
        check("%s: the posts origin received the configured headers" % name,
              on_a and all(e["authorization"] == "yes" and e["api_key"] == "yes" for e in on_a),
              "; ".join(describe(e) + (" [X-Api-Key]" if e["api_key"] == "yes" else "") for e in on_a) or "no request")
        check("%s: the other host (127.0.0.2) was asked for %s and received no Authorization, no X-Api-Key" % (name, there),
              any(e["uri"] == there for e in on_c) and all(e["authorization"] == "-" and e["api_key"] == "-" for e in on_c),
              "; ".join(describe(e) + (" [X-Api-Key]" if e["api_key"] == "yes" else "") for e in on_c) +
              " (prefetch: %s)" % entry["outcome"] if on_c else "no request reached it (prefetch: %s)" % entry["outcome"])
        if kind == "bounce":
            landing = [e for e in on_a if e["uri"] == "/faults/bounce/landing.json"]
            check("%s: the redirect back to the posts origin was followed" % name, landing and code == 0 and total == 1,
                  "; ".join(describe(e) for e in landing) or "not requested (prefetch: %s)" % entry["outcome"])
    finally:
        d.stop()


def fault_401(bin_dir, tmp, o, entry, token):
    name = entry["name"]
    settings = [("posts-url", "http://127.0.0.1:%d/api/v1/timelines/public?limit=3" % o.ports["M"])]
    if token:
        settings.append(("fetch-header", "Authorization: Bearer " + token))
    d = fault_daemon(bin_dir, tmp, "401-" + ("wrong" if token else "none"), settings, entry)
    if not d:
        return
    try:
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = o.logs.since(m)
        msg = message(answer).lower()
        # docs/operations.md, "Credentials": "the origin refused the configured
        # fetch-header credentials (...)" / "no fetch-header is configured for this origin".
        said = ("refused" in msg and "credential" in msg) if token else ("no fetch-header" in msg or "none" in msg)
        check("%s: fails (upstream) with 401 saying %s" % (name, "the origin refused the credentials" if token else "no credentials were configured"),
              upstream_failure(code, answer) and "401" in msg and said, entry["outcome"])
    finally:
        d.stop()


def run_faults(bin_dir, tmp, o, quick, only):
    faults = [("link-loop", lambda e: fault_link_loop(bin_dir, tmp, o, e)),
              ("next-loop", lambda e: fault_doc_loop(bin_dir, tmp, o, e)),
              ("later-page-fails", lambda e: fault_page_fails(bin_dir, tmp, o, e)),
              ("max-pages", lambda e: fault_max_pages(bin_dir, tmp, o, e, quick)),
              ("items-object", lambda e: fault_items_object(bin_dir, tmp, o, e)),
              ("header-file-0644", lambda e: fault_header_file_mode(bin_dir, tmp, o, e)),
              ("redirect", lambda e: fault_other_host(bin_dir, tmp, o, e, "redirect")),
              ("redirect-and-back", lambda e: fault_other_host(bin_dir, tmp, o, e, "bounce")),
              ("next-link-other-host", lambda e: fault_other_host(bin_dir, tmp, o, e, "next")),
              ("401-none", lambda e: fault_401(bin_dir, tmp, o, e, None)),
              ("401-wrong", lambda e: fault_401(bin_dir, tmp, o, e, "not-the-token"))]
    for name, run in faults:
        if only and name not in only and "faults" not in only:
            continue
        print("== fault: %s" % name, flush=True)
        entry = {"name": "fault " + name, "settings": [], "fault": True}
        SUMMARY.append(entry)
        run(entry)


# --- the report -------------------------------------------------------------------

def report(o):
    print()
    print("== per shape: the settings used and the requests the origin's log shows")
    print("hosts: A = 127.0.0.1:%d (nginx, the feeds), B = 127.0.0.1:%d (nginx, images), C = 127.0.0.2:%d "
          "(nginx, another host), M = 127.0.0.1:%d (the scripted Mastodon origin)" % (o.ports["A"], o.ports["B"], o.ports["C"], o.ports["M"]))
    for e in SUMMARY:
        print()
        print("%s%s" % (e["name"], (": " + e["title"]) if e.get("title") else ""))
        for k, v in e["settings"]:
            print("    %s = %s" % (k, v))
        if e.get("fault"):
            print("  outcome: %s" % e.get("outcome", "-"))
            for r in e.get("requests", []):
                print("    %s" % (r if isinstance(r, str) else describe(r)))
            continue
        for k, window in enumerate(e["prefetches"]):
            if isinstance(window, str):
                print("  " + window)
                continue
            print("  prefetch %d: %d requests" % (k + 1, len(window)))
            for r in window:
                print("    " + describe(r))
        if e.get("edit") is not None:
            print("  prefetch after the edit: %d requests" % len(e["edit"]))
            for r in e["edit"]:
                print("    " + describe(r))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--quick", action="store_true", help="the 21-page feed past posts-max-pages=20 instead of 1001 pages")
    ap.add_argument("--only", default="", help="comma-separated shape or fault names (or 'faults')")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (printed)")
    a = ap.parse_args()
    only = [x for x in a.only.split(",") if x]
    for b in ("cached", "cachectl"):
        if not os.access(os.path.join(a.bin_dir, b), os.X_OK):
            raise SystemExit("%s is not built in %s (swift build)" % (b, a.bin_dir))
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        raise SystemExit("nginx is needed (make feed-shapes and make test install nginx-light)")
    tmp = tempfile.mkdtemp(prefix="cached-shapes-")
    os.chmod(tmp, 0o755)
    procs = []
    t0 = time.time()
    try:
        o = Origins(tmp, procs)
        good = shapes.good_shapes(o.files, o.ports, tmp)
        shapes.fault_documents(o.files, o.ports)
        chosen = [shape for shape in good if not only or shape.name in only]
        for shape in chosen:
            reference_check(shape)
        for shape in chosen:
            run_shape(a.bin_dir, tmp, o, shape)
        run_faults(a.bin_dir, tmp, o, a.quick, only)
        report(o)
    finally:
        for p in procs:
            stop(p)
        if a.keep:
            print("scratch directory kept: " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [n for n, ok in RESULTS if not ok]
    print()
    print("feed-shapes: %d passed, %d failed in %.0f s" % (len(RESULTS) - len(failed), len(failed), time.time() - t0))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
