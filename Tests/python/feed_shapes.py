"""The feed shapes of issue 23 ("Real feeds") against the built daemon, each
served by a real nginx (static files with nginx's own ETags, Link headers
from its configuration: Tests/Fixtures/feeds/nginx-shapes.conf) or, where a
shape needs logic, by a small scripted origin (the Mastodon timeline:
Tests/Fixtures/feeds/mastodon-origin.py). The documents and what the daemon
should make of them are in Tests/Fixtures/feeds/shapes.py.

These are test_feed_shapes.py's tests (the pytest suite, Tests/python):
one for the reference client, one per shape, one per fault; `-k NAME`
runs some; FEED_SHAPES_QUICK=1 (make test) makes each API's feed shorter.

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
all 304. (The faults the Swift suite holds against the daemon and a real
nginx are not repeated here: loops, a later page that fails,
posts-max-pages, posts-items naming an object, a fetch-header-file others
can read, 401s, credentials across redirects and to another origin.)

Issue 32 ("Every feed the web serves") adds the APIs of
Tests/Fixtures/feeds/apis.py: Reddit, Bluesky, Slack, Stripe, YouTube, X
(cursor and token paging), Lemmy, HN Search (page numbers), Contentful,
json-server, Confluence (offsets) from a scripted origin that computes each
page from the request (api-origin.py, host P: strong ETags, 304s); GitLab,
Discourse (HTML unless Accept asks for JSON), an RSS 2.0 blog, a podcast and
an Atom feed from nginx. Each goes through the same flow, with every post
read back by id and every request's Accept checked; the reference client
reads the paging kinds, wrapped items and RSS/Atom as issue 32 says. Each
feed with a sign of more pages is run again without its paging settings:
page 1 is stored, `cachectl prefetch` exits 7 with a warning naming the
member, the answer's `warnings`, status `feed_warnings`, /metrics and the log
say it. Then posts-keep = all over 20 refreshes of a sliding RSS window and
`cachectl delete post`; a repeated cursor, an offset the origin ignores, an
HTML answer, and three hostile XML documents (billion laughs, an external
entity naming /etc/passwd, 10,000 levels deep), each failing the refresh and
changing nothing. Then posts-keep = 15 over the same window (the newest 15,
`kept` in each summary); a paged image manifest on its own URL (YouTube
search.list's thumbnails on host B, images-paging = cursor), and the same
left without images-paging (the "images page 1 has more" warning, exit 7,
status, /metrics); the HTTP charset over the XML declaration (RFC 7303:
UTF-8 bytes declared ISO-8859-1, served with charset=utf-8, and the same
without a charset as a control); and a daemon on a configuration file
whose paging settings are added later, by SIGHUP and by a restart: every
page must then be ingested. The shapes reddit-thumbnails (images-url =
posts-url inheriting the posts' items, item and cursor paging) and
azure-tables (posts-cursor = header:x-ms-continuation-NextTableName) go
through the whole flow above. `-k reference` runs the reference client
alone (no daemon is started).

Each check prints one line, PASS or FAIL and what it saw; a test fails
with its checks that failed. At the end of the module (`report`), per
shape, the settings used and the requests the origin's log shows for the
three prefetches.
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "Fixtures", "feeds")
sys.path.insert(0, HERE)
sys.path.insert(0, FIXTURES)
import world  # noqa: E402  (puts scripts/ on the path for benchlib)
from benchlib import free_port, stop, wait_for  # noqa: E402
import shapes  # noqa: E402
import apis  # noqa: E402

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


class Origins:
    def __init__(self, tmp, procs, quick=False):
        self.tmp = tmp
        self.ports = {"A": free_port(), "B": free_port(), "DEAD": free_port()}
        roots = {k: os.path.join(tmp, "www-" + k) for k in "ab"}
        for r in roots.values():
            os.makedirs(r)
        self.files = shapes.Files(roots)
        with open(os.path.join(FIXTURES, "nginx-shapes.conf")) as f:
            conf = f.read()
        n, size = apis.sizes(quick)
        values = {"DIR": tmp, "A": str(self.ports["A"]), "B": str(self.ports["B"]),
                  "USER": "user root;" if os.geteuid() == 0 else "", "MAPS": apis.gitlab_maps(self.ports["A"], n, size)}
        for k, v in values.items():
            conf = conf.replace("@%s@" % k, v)
        try:
            self.nginx = world.Origin(tmp, conf=conf, ports=[self.ports["A"], self.ports["B"]]).p
        except RuntimeError as e:
            raise SystemExit(str(e))
        procs.append(self.nginx)
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
        # Issue 32: the APIs whose pages are computed per request (api-origin.py).
        self.api_data = os.path.join(tmp, "api-data")
        os.makedirs(self.api_data)
        port_file = os.path.join(tmp, "api.port")
        self.api = subprocess.Popen([sys.executable, os.path.join(FIXTURES, "api-origin.py"), "--data", self.api_data,
                                     "--port-file", port_file, "--log", os.path.join(tmp, "api.log")],
                                    stdout=subprocess.DEVNULL, stderr=open(tmp + "/api.out", "wb"))
        procs.append(self.api)
        if not wait_for(lambda: os.path.exists(port_file), 10):
            raise SystemExit("the API origin did not start: " + open(tmp + "/api.out").read()[-1500:])
        self.ports["P"] = int(open(port_file).read())
        names = {"127.0.0.1:%d" % self.ports["A"]: "A", "127.0.0.1:%d" % self.ports["B"]: "B", "127.0.0.1:%d" % self.ports["M"]: "M",
                 "127.0.0.1:%d" % self.ports["P"]: "P"}
        self.logs = Logs([AccessLog(os.path.join(tmp, "access.log"), names), AccessLog(os.path.join(tmp, "mastodon.log"), names),
                          AccessLog(os.path.join(tmp, "api.log"), names)])


def json_lines(text):
    """Each line of `text` that is JSON, parsed (cachectl --json prints one document a line)."""
    for line in text.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            pass


# --- the daemon ----------------------------------------------------------------

class Daemon(world.Daemon):
    """cached on its own store, socket and HTTP port, configured on the
    command line only (--config /dev/null), started by `start()`."""

    def __init__(self, bin_dir, tmp, name, settings, config="/dev/null"):
        self.dir = os.path.join(tmp, "d-" + name)
        os.makedirs(self.dir)
        self.settings = settings
        extra = ["--retry-delay", "0.05"] + [x for k, v in settings for x in ("--" + k, v)]
        world.Daemon.__init__(self, os.path.abspath(bin_dir), self.dir + "/store", self.dir + "/sock", http_port=free_port(),
                              extra=extra, log=self.dir + "/stderr", admin=False, log_level="info", start=False, config=config)
        self.http_port, self.stderr_path = self.port, self.log

    def ctl(self, *args, timeout=300):
        return world.Daemon.ctl(self, *args, timeout=timeout)

    def prefetch(self, what):
        """cachectl --json prefetch WHAT: (exit status, answer or None, stderr)."""
        r = self.ctl("--json", "prefetch", what)
        answer = None
        for answer in json_lines(r.stdout):
            pass
        return r.returncode, answer, r.stderr.strip()

    def call(self, request, timeout=60):
        return world.Daemon.call(self, request, timeout=timeout)

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


def origin_host(shape):
    return {"mastodon": "M", "api": "P"}.get(shape.origin, "A")


def feed_requests(entries, shape):
    """The requests of `entries` for the shape's feed pages (on its origin)."""
    host, pages = origin_host(shape), [shape.norm(u) for u in shape.pages()]
    return [e for e in entries if e["host"] == host and shape.norm(e["uri"]) in pages]


def prefetch_summary(code, answer, err):
    if answer is None:
        return "exit %d, no answer; %s" % (code, short(err))
    if not answer.get("ok"):
        return "exit %d, %s: %s" % (code, answer.get("error", {}).get("code"), short(answer.get("error", {}).get("message"), 400))
    return "exit %d, posts %s, images %s%s" % (code, canon(answer.get("posts")), canon(answer.get("images")),
                                               ", failures " + short(canon(answer.get("failures")), 300) if answer.get("failures") else "")


def is_decimal(s):
    return isinstance(s, str) and s.lstrip("-").isdigit() and s == str(int(s))


def cachectl_post_args(pid, string=False):
    """cachectl's words for get post ID: the id's text, whatever its kind (an
    integer and a string of the same spelling find each other, docs/protocol.md
    "Post ids"); with --string the string id of that spelling first."""
    return ["get", "post"] + (["--string"] if string else []) + [str(pid)]


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
    """get_post of `pid` over the socket (its own kind first), cachectl and
    HTTP (the text: an integer when it spells one; with --string and
    ?kind=string the string first): each must answer the exact item it should
    find and the id that item is kept by."""
    posts = shape.posts if posts is None else posts
    requests = [("over the socket", pid, "int" if isinstance(pid, int) else "string")]
    if isinstance(pid, str) and is_decimal(pid):
        requests.append(("over the socket as the integer %s" % pid, int(pid), "int"))
    for how, value, kind in requests:
        item = resolve(shape, posts, value, kind)
        want = shape.text(item)
        try:
            a = d.call({"op": "get_post", "id": value})
        except (OSError, ValueError) as e:
            a = {"ok": False, "error": {"message": str(e)}}
        got = shape.text(a.get("post")) if a.get("ok") else "error: " + short(canon(a.get("error")), 200)
        ok = got == want and canon(a.get("id")) == canon(shape.id_of(item))
        check("%s: %s get_post %s %s is the exact item %s" % (shape.name, label, canon(value), how, canon(shape.id_of(item))), ok,
              "id %s, %d bytes" % (canon(a.get("id")), len(want.encode())) if ok else "id %s, %s" % (canon(a.get("id")), short(got, 160)))
    # cachectl and HTTP read the text alike: the integer id when it spells
    # one, else the string; --string and ?kind=string ask for the string first.
    first = "int" if is_decimal(str(pid)) else "string"
    cachectl_check(d, shape, posts, pid, label, first, cachectl_post_args(pid))
    http_post_check(d, shape, posts, pid, label, first, "")
    if is_decimal(str(pid)):
        cachectl_check(d, shape, posts, pid, label, "string", cachectl_post_args(pid, string=True))
        http_post_check(d, shape, posts, pid, label, "string", "?kind=string")


def cachectl_check(d, shape, posts, pid, label, kind, args):
    item = resolve(shape, posts, pid, kind)
    want = shape.text(item)
    r = d.ctl("--json", *args)
    try:
        answer = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    except (ValueError, IndexError):
        answer = {}
    ok = shape.text(answer.get("post")) == want and canon(answer.get("id")) == canon(shape.id_of(item))
    check("%s: %s cachectl %s is the exact item %s" % (shape.name, label, " ".join(args), canon(shape.id_of(item))), ok,
          "exit 0" if ok else "exit %d %s" % (r.returncode, short(r.stdout + r.stderr, 200)))


def http_post_check(d, shape, posts, pid, label, kind, query):
    item = resolve(shape, posts, pid, kind)
    want = shape.text(item)
    path = "/posts/" + urllib.parse.quote(str(pid), safe="") + query
    try:
        status, body = d.http(path)
        got = shape.text(json.loads(body)) if status == 200 else None
    except (OSError, ValueError, http.client.HTTPException) as e:
        status, body, got = 0, str(e).encode(), None
    check("%s: %s HTTP GET %s is the exact item %s" % (shape.name, label, path, canon(shape.id_of(item))), got == want,
          "status %d %s" % (status, short(body.decode("utf-8", "replace"), 200)) if got != want else "200")


def listing_check(d, shape, posts, label):
    want = [shape.text(p) for p in shape.listing(posts)]
    try:
        a = d.call({"op": "list_posts"})
    except (OSError, ValueError) as e:
        a = {"ok": False, "error": {"message": str(e)}}
    got = [shape.text(p) for p in a.get("posts", [])] if a.get("ok") else None
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
            ids = [canon(shape.id_of(json.loads(p))) if isinstance(json.loads(p), dict) else "?" for p in got]
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


ACCEPT = apis.ACCEPT

# Where a "has more" warning looks (issue 32): these members, at the top
# level or one level down.
SIGN_MEMBERS = ("next", "next_url", "next_cursor", "nextPageToken", "cursor", "after", "more_topics_url", "next_page",
                "next_token")


def has_more_signs(doc):
    """The (pointer, value) pairs of a page that say there is more (issue 32, point 4)."""
    out = []
    if not isinstance(doc, dict):
        return out

    def sign(key, value):
        if key == "has_more":
            return value is True
        return key in SIGN_MEMBERS and value not in (None, "", False)
    for k, v in doc.items():
        if sign(k, v):
            out.append(("/" + k, v))
    for k, v in doc.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if sign(k2, v2):
                    out.append(("/%s/%s" % (k, k2), v2))
    return out


def xml_text(el):
    return "".join(el.itertext()) if el is not None else None


def collapse(text):
    """XML's and HTML's white space (not a no-break space) as single spaces, none at the ends."""
    import re
    return re.sub(r"[ \t\n\r\f]+", " ", text).strip(" \t\n\r\f")


def html_text(markup):
    """What a browser shows of `markup`, on one line (docs/protocol.md, "RSS and Atom": a plain-text title or
    summary): Python's own HTML parser, character references decoded, script and style left out, a space where
    a block or line ends."""
    import html.parser

    class Text(html.parser.HTMLParser):
        hidden = {"script", "style", "template", "head", "title"}
        breaking = {"br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "ul",
                    "ol", "dl", "dt", "dd", "hr", "section", "article", "header", "footer", "figure", "figcaption", "table"}

        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.out, self.skip = [], 0

        def handle_starttag(self, tag, attrs):
            self.skip += tag in self.hidden
            if tag in self.breaking:
                self.out.append(" ")

        def handle_endtag(self, tag):
            self.skip -= tag in self.hidden and self.skip > 0
            if tag in self.breaking:
                self.out.append(" ")

        def handle_data(self, data):
            if not self.skip:
                self.out.append(data)
    t = Text()
    t.feed(markup)
    t.close()
    return collapse("".join(t.out))


def atom_plain(el):
    """An Atom text construct (RFC 4287, 3.1) as JSON Feed's plain text: html made text, xhtml's text, text as written."""
    if el is None:
        return None
    kind = el.get("type", "text")
    if kind in ("html", "text/html"):
        return html_text(el.text or "")
    if kind in ("xhtml", "application/xhtml+xml"):
        return collapse(xml_text(el))
    return xml_text(el).strip(" \t\n\r")


NO_IMAGE_EXTENSIONS = {"mp3", "m4a", "aac", "ogg", "oga", "opus", "wav", "flac", "mp4", "m4v", "mov", "webm", "mkv", "avi",
                       "mpg", "mpeg", "m3u8", "mpd", "pdf", "zip", "txt", "html"}


def media_attachments(item, enclosure_urls, NS):
    """Every media:content of an item (any medium, also inside media:group) whose URL no enclosure names:
    {url, mime_type from type, size_in_bytes from fileSize}, as docs/protocol.md's attachments row says."""
    out = []
    for m in item.findall(".//{%s}content" % NS["media"]):
        url = (m.get("url") or "").strip()
        if not url or url in enclosure_urls:
            continue
        a = {"url": url}
        if m.get("type"):
            a["mime_type"] = m.get("type").strip()
        if (m.get("fileSize") or "").strip().isdigit():
            a["size_in_bytes"] = int(m.get("fileSize").strip())
        out.append(a)
    return out


def rss_image(it, enclosures, NS):
    """An RSS item's image, by the documented order: an image enclosure, a media:content that is an image,
    a media:thumbnail, a media:content saying neither medium nor type (unless its path names audio, video or a
    document), the item's itunes:image."""
    img = next((x.get("url") for x in enclosures if (x.get("type") or "").startswith("image/")), None)
    media = it.findall(".//{%s}content" % NS["media"])
    if img is None:
        img = next((m.get("url") for m in media if m.get("url") and (m.get("medium") == "image" or
                    (m.get("type") or "").lower().startswith("image/"))), None)
    if img is None and it.find(".//{%s}thumbnail" % NS["media"]) is not None:
        img = it.find(".//{%s}thumbnail" % NS["media"]).get("url")
    if img is None:
        def names_no_image(url):
            name = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
            return "." in name and name.rsplit(".", 1)[1].lower() in NO_IMAGE_EXTENSIONS
        img = next((m.get("url") for m in media if m.get("url") and m.get("medium") is None and m.get("type") is None
                    and not names_no_image(m.get("url"))), None)
    if img is None and it.find("{%s}image" % NS["itunes"]) is not None:
        img = it.find("{%s}image" % NS["itunes"]).get("href")
    return img


def rfc3339(text):
    """An RSS (RFC 822) or Atom (RFC 3339) time as RFC 3339 UTC, whole seconds."""
    import datetime
    import email.utils
    text = text.strip()
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        dt = email.utils.parsedate_to_datetime(text)
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def xml_items(body):
    """RSS 2.0, RSS 1.0 or Atom 1.0 as JSON Feed 1.1 items (the mapping of
    issue 32, docs/protocol.md), and the rel="next" link. ElementTree reads
    no DTD and no external entity; the fixtures here are friendly."""
    import xml.etree.ElementTree as ET
    NS = apis.NS
    A = "{%s}" % NS["atom"]
    root = ET.fromstring(body)
    items, nxt = [], None
    if root.tag == A + "feed":
        for link in root.findall(A + "link"):
            if link.get("rel") == "next":
                nxt = link.get("href")
        for e in root.findall(A + "entry"):
            item = {"id": e.findtext(A + "id").strip()}
            for link in e.findall(A + "link"):
                if link.get("rel", "alternate") == "alternate":
                    item["url"] = link.get("href")
            item["title"] = atom_plain(e.find(A + "title"))
            content = e.find(A + "content")
            if content is not None:
                kind = content.get("type", "text")
                if kind == "xhtml":
                    div = content[0]
                    inner = (div.text or "") + "".join(
                        ET.tostring(ch, encoding="unicode", default_namespace="http://www.w3.org/1999/xhtml").replace(
                            ' xmlns="http://www.w3.org/1999/xhtml"', "") for ch in div)
                    item["content_html"] = inner
                elif kind == "html":
                    item["content_html"] = content.text or ""
                else:
                    item["content_text"] = content.text or ""
            if e.find(A + "summary") is not None:
                item["summary"] = atom_plain(e.find(A + "summary"))
            if e.find(A + "published") is not None:
                item["date_published"] = rfc3339(e.findtext(A + "published"))
            if e.find(A + "updated") is not None:
                item["date_modified"] = rfc3339(e.findtext(A + "updated"))
            authors = [dict([("name", a.findtext(A + "name"))] + ([("url", a.findtext(A + "uri"))] if a.find(A + "uri") is not None else []))
                       for a in e.findall(A + "author")]
            if authors:
                item["authors"] = authors
            enc = [link for link in e.findall(A + "link") if link.get("rel") == "enclosure"]
            img = next((link.get("href") for link in enc if (link.get("type") or "").startswith("image/")), None)
            if img:
                item["image"] = img
            attachments = [{"url": link.get("href"), "mime_type": link.get("type"),
                            "size_in_bytes": int(link.get("length"))} for link in enc] + media_attachments(e, [x.get("href") for x in enc], NS)
            if attachments:
                item["attachments"] = attachments
            tags = [c.get("term") for c in e.findall(A + "category")]
            if tags:
                item["tags"] = tags
            items.append(item)
        return items, nxt
    if root.tag == "{%s}RDF" % apis.RDF:  # RSS 1.0 (or 0.90): items beside the channel, in its namespace
        R = "{%s}" % apis.RSS1
        if not root.findall(R + "item") and root.findall("{http://my.netscape.com/rdf/simple/0.9/}item"):
            R = "{http://my.netscape.com/rdf/simple/0.9/}"
        for it in root.findall(R + "item"):
            item = {"id": it.get("{%s}about" % apis.RDF) or it.findtext(R + "link")}
            if it.findtext(R + "link"):
                item["url"] = it.findtext(R + "link").strip()
            item["title"] = it.findtext(R + "title")
            if it.findtext(R + "description") is not None:
                item["content_html"] = it.findtext(R + "description")
            if it.findtext("{%s}date" % NS["dc"]):
                item["date_published"] = rfc3339(it.findtext("{%s}date" % NS["dc"]))
            creators = [x.text for x in it.findall("{%s}creator" % NS["dc"])]
            if creators:
                item["authors"] = [{"name": n} for n in creators]
            items.append(item)
        return items, None
    channel = root.find("channel")
    for link in channel.findall(A + "link"):
        if link.get("rel") == "next":
            nxt = link.get("href")
    for it in channel.findall("item"):
        guid, link = it.findtext("guid"), it.findtext("link")
        item = {"id": (guid or link).strip()}
        if link:
            item["url"] = link.strip()
        item["title"] = it.findtext("title")
        encoded, desc = it.findtext("{%s}encoded" % NS["content"]), it.findtext("description")
        if encoded is not None:
            item["content_html"] = encoded
            if desc is not None and html_text(desc):
                item["summary"] = html_text(desc)
        elif desc is not None:
            item["content_html"] = desc
        date = it.findtext("pubDate") or it.findtext("{%s}date" % NS["dc"])
        if date:
            item["date_published"] = rfc3339(date)
        creators = [c.text for c in it.findall("{%s}creator" % NS["dc"])]
        if creators:
            item["authors"] = [{"name": n} for n in creators]
        enc = it.findall("enclosure")
        img = rss_image(it, enc, NS)
        if img:
            item["image"] = img
        attachments = [{"url": x.get("url"), "mime_type": x.get("type"), "size_in_bytes": int(x.get("length"))}
                       for x in enc] + media_attachments(it, [x.get("url") for x in enc], NS)
        if attachments:
            item["attachments"] = attachments
        tags = [c.text for c in it.findall("category")]
        if tags:
            item["tags"] = tags
        items.append(item)
    return items, nxt


INHERITED = ("items", "next", "paging", "cursor", "cursor-param", "cursor-last", "has-more", "offset-param", "limit-param",
             "page-size", "total", "page-param", "page-start", "total-pages", "item")


def reference_read(url, settings, prefix, etags, max_pages=50):
    """Reads one feed (`prefix` posts or images) as issues 23 and 32 say: the
    paging kind, wrapped items, RSS/Atom; its pages' URIs with their
    statuses, its items (unwrapped) and the "has more" signs of its pages."""
    headers = [v.split(":", 1) for k, v in settings if k == "fetch-header"]
    for k, v in settings:
        if k == "fetch-header-file":
            headers += [line.split(":", 1) for line in open(v).read().splitlines()
                        if ":" in line and not line.lstrip().startswith("#")]
    conf = dict(settings)
    # images-* default to their posts-* namesakes when images-url is posts-url (docs/operations.md, "Configuration").
    inherit = prefix == "images" and conf.get("images-url") == conf.get("posts-url")

    def opt(name, default=None):
        if inherit and name in INHERITED:
            return conf.get(prefix + "-" + name, conf.get("posts-" + name, default))
        return conf.get(prefix + "-" + name, default)
    kind = opt("paging", "link")
    first = url
    split = urllib.parse.urlsplit(first)
    url_limit = dict(urllib.parse.parse_qsl(split.query)).get(opt("limit-param", "limit"))

    def at(params):
        return first if not params else urllib.parse.urljoin(first, apis.with_params(first, params))
    size = opt("page-size")
    if kind == "offset":
        offset = 0
        url = at([(opt("offset-param", "offset"), 0)] + ([(opt("limit-param", "limit"), size)] if size else []))
    elif kind == "page":
        page_no = int(opt("page-start", "1"))
        url = at([(opt("page-param", "page"), page_no)])
    pages, items, seen, cursors, signs = [], [], set(), set(), []
    while url and len(pages) < max_pages:
        if url in seen:
            raise ValueError("loop at " + url)
        seen.add(url)
        req = urllib.request.Request(url, headers={"Accept": ACCEPT})
        for k, v in headers:
            req.add_header(k.strip(), v.strip())
        if url in etags:
            req.add_header("If-None-Match", etags[url][0])
        try:
            r = urllib.request.urlopen(req, timeout=10)
            status, body, rh = r.status, r.read(), r.headers
            etags[url] = (r.headers.get("ETag"), body, r.headers)
        except urllib.error.HTTPError as e:
            if e.code != 304:
                raise
            status, body, rh = 304, etags[url][1], etags[url][2]
        if "html" in (rh.get("Content-Type") or ""):
            raise ValueError("%s answered %s" % (url, rh.get("Content-Type")))
        link = rh.get("Link")
        split = urllib.parse.urlsplit(url)
        pages.append((split.path + ("?" + split.query if split.query else ""), status))
        nxt = None
        if body.lstrip()[:1] == b"<":
            raw, nxt = xml_items(body)
            doc = None
        else:
            doc = json.loads(body)
            signs.append(has_more_signs(doc))
            ptr, next_ptr = opt("items", ""), opt("next", "")
            if isinstance(doc, dict) and str(doc.get("version", "")).startswith("https://jsonfeed.org/version/"):
                ptr, next_ptr = ptr or "/items", next_ptr or "/next_url"
            raw = pointer(doc, ptr)
            if opt("item"):
                raw = [pointer(x, opt("item")) for x in raw]
            if kind == "link" and next_ptr:  # the document's next first, then Link (docs/protocol.md, "Pages")
                try:
                    nxt = pointer(doc, next_ptr)
                except (KeyError, IndexError, ValueError):
                    nxt = None
                if isinstance(nxt, dict):
                    nxt = nxt.get("href")
        items += raw
        if kind == "link":
            nxt = nxt or link_next(link)
            url = urllib.parse.urljoin(url, nxt) if nxt else None
        elif kind == "cursor":
            cursor = None
            if opt("has-more") and _get(doc, opt("has-more")) is False:
                cursor = None
            elif opt("cursor-last"):
                cursor = _get(raw[-1], opt("cursor-last")) if raw else None
            elif opt("cursor", "").startswith("header:"):
                cursor = rh.get(opt("cursor")[len("header:"):])
            else:
                cursor = _get(doc, opt("cursor"))
            if not raw or cursor in (None, ""):
                url = None
            else:
                if cursor in cursors:
                    raise ValueError("the cursor %r repeats on page %d" % (cursor, len(pages)))
                cursors.add(cursor)
                url = at([(opt("cursor-param", "cursor"), cursor)])
        elif kind == "offset":
            limit = int(size or url_limit or 0)
            if not raw:
                if opt("total") and offset < (_count(doc, rh, opt("total")) or 0):
                    raise ValueError("the offset does not advance on page %d" % len(pages))
                url = None
                continue
            offset += len(raw)
            total = _count(doc, rh, opt("total")) if opt("total") else None
            if total is not None:
                done = offset >= total
            else:
                done = bool(limit) and len(raw) < limit
            url = None if done else at([(opt("offset-param", "offset"), offset)] +
                                       ([(opt("limit-param", "limit"), size)] if size else []))
        elif kind == "page":
            start = int(opt("page-start", "1"))
            if not raw:
                url = None
                continue
            page_no += 1
            count = _count(doc, rh, opt("total-pages")) if opt("total-pages") else None
            if count is not None and page_no - start >= count:
                url = None
            else:
                url = at([(opt("page-param", "page"), page_no)])
    return pages, items, signs


def _count(doc, headers, setting):
    """A count named by a paging setting: a JSON Pointer into the page, or header:NAME."""
    if setting.lower().startswith("header:"):
        value = headers.get(setting[len("header:"):].strip())
        return int(value) if value and value.strip() else None
    value = _get(doc, setting)
    return None if value is None else int(value)


def _get(doc, ptr):
    try:
        return pointer(doc, ptr)
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def reference_check(shape):
    conf = dict(shape.settings)
    try:
        etags = {}
        first, posts, _ = reference_read(conf["posts-url"], shape.settings, "posts", etags)
        again, _, _ = reference_read(conf["posts-url"], shape.settings, "posts", etags)
        seen, unique = set(), []
        for p in posts:
            key = canon(shape.id_of(p))
            if key not in seen:
                seen.add(key)
                unique.append(p)
        posts = unique
        want_pages = [shape.norm(u) for u in shape.posts_pages]
        ok = ([shape.norm(u) for u, _ in first] == want_pages and all(st == 200 for _, st in first) and
              [shape.norm(u) for u, _ in again] == want_pages and all(st == 304 for _, st in again) and
              [shape.text(p) for p in posts] == [shape.text(p) for p in shape.posts] and
              [shape.id_of(p) for p in posts] == [shape.id_of(p) for p in shape.posts])
        detail = "posts: %d items, %s; again: %s" % (len(posts), " ".join("%d %s" % (st, u) for u, st in first),
                                                      " ".join(str(st) for _, st in again))
        if not ok and [shape.text(p) for p in posts] != [shape.text(p) for p in shape.posts]:
            bad = next((a, b) for a, b in zip([shape.text(p) for p in posts] + [""] * 99, [shape.text(p) for p in shape.posts])
                       if a != b)
            detail += "; first differing post: read %s, expected %s" % (short(bad[0], 400), short(bad[1], 400))
        if "images-url" in conf:
            etags = {}
            ipages, rows, _ = reference_read(conf["images-url"], shape.settings, "images", etags)
            base = conf["images-url"]
            got = [(urllib.parse.urljoin(base, pointer(r, conf.get("images-url-field", "/url"))),
                    pointer(r, conf.get("images-description-field", "/description"))) for r in rows]
            ok = ok and [u for u, _ in ipages] == shape.image_pages and got == [(u, d) for u, _, d in shape.rows]
            detail += "; images: %s, %d rows" % (" ".join("%d %s" % (st, u) for u, st in ipages), len(rows))
        check("fixtures: a reference client reads %s as the checks expect" % shape.name, ok, detail)
        if shape.name == "discourse":
            # Its next pages have no .json: asked as a browser asks, the origin answers HTML.
            url = urllib.parse.urljoin(conf["posts-url"], shape.posts_pages[1])
            r = urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "text/html,*/*;q=0.8"}), timeout=10)
            check("fixtures: discourse %s asked without JSON in Accept answers HTML" % shape.posts_pages[1],
                  r.headers.get("Content-Type", "").startswith("text/html"), r.headers.get("Content-Type", ""))
        if shape.unset is not None:
            # Left without its paging settings, page 1 is read alone and carries a sign of more.
            pages, items, signs = reference_read(conf["posts-url"], shape.unset, "posts", {})
            named = [p for p, _ in signs[0]] if signs else []
            check("fixtures: %s without its paging settings reads page 1 alone, which has more (%s)" % (
                      shape.name, ", ".join(shape.signs)),
                  len(pages) == 1 and [shape.text(p) for p in items] == [shape.text(p) for p in shape.first_page] and
                  all(s in named for s in shape.signs),
                  "%d pages, %d items; signs %s" % (len(pages), len(items), short(canon(signs[0] if signs else []), 200)))
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
        n = shape.norm
        posts_pages, image_pages = [n(u) for u in shape.posts_pages], [n(u) for u in shape.image_pages]
        check("%s: prefetch 1 asks for each page once, 200%s" % (shape.name, " (images-url = posts-url: once for both feeds)" if shape.same_feed else ""),
              sorted(n(e["uri"]) for e in first) == sorted(n(u) for u in pages) and all(e["status"] == 200 for e in first) and
              # each feed's pages in their order (the two feeds may be fetched side by side)
              [n(e["uri"]) for e in first if n(e["uri"]) in posts_pages] == posts_pages and
              [n(e["uri"]) for e in first if n(e["uri"]) in image_pages] == image_pages,
              "; ".join(describe(e) for e in first) or "no feed request in the log")
        for k in (1, 2):
            reqs = feed_requests(windows[k], shape)
            others = [e for e in windows[k] if e not in reqs]
            check("%s: prefetch %d: every page once, 304, with its own ETag" % (shape.name, k + 1),
                  sorted(n(e["uri"]) for e in reqs) == sorted(n(u) for u in pages) and len(reqs) == len(pages) and
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
        if shape.origin in ("nginx", "api"):
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
        if shape.accept:
            reqs = [e for w in windows for e in w if e["host"] == origin_host(shape) and n(e["uri"]) in [n(u) for u in pages]]
            bad = [e for e in reqs if e.get("accept") != shape.accept]
            check("%s: every feed request carried Accept: %s" % (shape.name, shape.accept), reqs and not bad,
                  "%d requests; %s" % (len(reqs), "; ".join("%s sent %r" % (e["uri"], e.get("accept")) for e in bad[:3]) or "all"))
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
        if shape.origin == "api" or not shape.exact or shape.accept:
            every_post_check(d, shape, shape.posts, "after the restart:")
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
            reqs = [x for x in entries if n(x["uri"]) in [n(u) for u in e.unchanged + e.changed] and x["host"] == origin_host(shape)]
            statuses = {n(x["uri"]): x["status"] for x in reqs}
            want = dict([(n(u), 304) for u in e.unchanged] + [(n(u), 200) for u in e.changed])
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
          code == 0 and sorted(shape.norm(e["uri"]) for e in reqs) == sorted(shape.norm(u) for u in shape.pages()) and len(reqs) == len(entries) and
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


def faults(bin_dir, tmp, o, quick):
    """The faults and the other flows only these shapes make, by name: each
    a function of its summary entry."""
    # The faults the Swift suite holds against the daemon and a real nginx
    # are not repeated here: link and document loops, a later page that
    # fails, posts-max-pages, posts-items naming an object
    # (IntegrationTests/FeedPagesTests), a fetch-header-file others can
    # read, 401s, credentials across a redirect, back again and to another
    # origin (IntegrationTests/CredentialsTests, CacheFetchTests/HTTPCredentialTests).
    return dict([("keep-all", lambda e: run_keep_all(bin_dir, tmp, o, e)),
                 ("keep-all-stops", lambda e: run_keep_stops(bin_dir, tmp, o, e, quick)),
                 ("keep-n", lambda e: run_keep_n(bin_dir, tmp, o, e)),
                 ("images-cursor", lambda e: run_images_cursor(bin_dir, tmp, o, e, quick)),
                 ("images-has-more", lambda e: run_images_has_more(bin_dir, tmp, o, e, quick)),
                 ("http-charset", lambda e: run_http_charset(bin_dir, tmp, o, e)),
                 ("sighup-paging", lambda e: run_paging_change(bin_dir, tmp, o, e, quick, "sighup")),
                 ("restart-paging", lambda e: run_paging_change(bin_dir, tmp, o, e, quick, "restart")),
                 ("cursor-repeats", lambda e: fault_cursor_repeat(bin_dir, tmp, o, e, quick)),
                 ("offset-ignored", lambda e: fault_offset_stall(bin_dir, tmp, o, e, quick)),
                 ("html-answer", lambda e: fault_html(bin_dir, tmp, o, e))] + [
                 ("xml-" + kind, (lambda k, mk, w: lambda e: run_xml_attack(bin_dir, tmp, o, e, k, mk, w))(kind, make, words))
                 for kind, make, words in ATTACKS])


def run_fault(name, run):
    """Runs one of `faults`, with its entry in the report."""
    print("== fault: %s" % name, flush=True)
    entry = {"name": "fault " + name, "settings": [], "fault": True}
    SUMMARY.append(entry)
    run(entry)


# The shapes and faults by name, known before the origins run (pytest's
# parameters); test_feed_shapes.py holds them equal to what is built.
SHAPE_NAMES = ["bare", "jsonfeed", "mastodon", "wordpress", "github", "jsonapi", "algolia", "jsonplaceholder", "mixed",
               "reddit", "bluesky", "slack", "stripe", "youtube", "x", "lemmy", "hn-algolia", "contentful",
               "jsonplaceholder-offset", "wordpress-pages", "confluence", "gitlab", "discourse", "rss-blog", "podcast", "atom", "rss1",
               "reddit-thumbnails", "azure-tables"]
FAULT_NAMES = ["keep-all", "keep-all-stops", "keep-n", "images-cursor", "images-has-more", "http-charset", "sighup-paging",
               "restart-paging", "cursor-repeats", "offset-ignored", "html-answer", "xml-billion-laughs",
               "xml-external-entity", "xml-10000-deep"]


def build(tmp, procs, quick):
    """The origins (nginx and the scripted ones, started into `procs`) and every good shape."""
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        raise RuntimeError("nginx is needed (make feed-shapes and make test install nginx-light)")
    o = Origins(tmp, procs, quick)
    good = shapes.good_shapes(o.files, o.ports, tmp)
    good += apis.api_shapes(apis.Ctx(o.files, o.ports, o.api_data, quick))
    return o, good


def run_good_shape(bin_dir, tmp, o, shape):
    """A good shape's whole flow, and its run without its paging settings when it has signs of more."""
    run_shape(bin_dir, tmp, o, shape)
    if shape.unset is not None:
        run_has_more(bin_dir, tmp, o, shape)


# --- issue 32: every post by id, "has more", posts-keep = all, XML attacks, paging faults --------

def every_post_check(d, shape, posts, label):
    """get_post of every post by its id (over the socket): the exact item."""
    bad = []
    for p in posts:
        pid = shape.id_of(p)
        try:
            a = d.call({"op": "get_post", "id": pid})
        except (OSError, ValueError) as e:
            a = {"ok": False, "error": {"message": str(e)}}
        if not a.get("ok") or shape.text(a.get("post")) != shape.text(p):
            bad.append("%s: %s" % (canon(pid), short(canon(a.get("post") or a.get("error")), 120)))
    check("%s: %s every post (%d) read back by id, the exact item" % (shape.name, label, len(posts)), not bad,
          "; ".join(bad[:3]) + (" (%d more)" % (len(bad) - 3) if len(bad) > 3 else "") if bad else "%d posts" % len(posts))


def warning_values(shape):
    """The "<pointer> = <value as JSON>" texts a warning on page 1 may carry."""
    _, _, signs = reference_read(dict(shape.settings)["posts-url"], shape.unset, "posts", {})
    return ["%s = %s" % (p, json.dumps(v, ensure_ascii=False)) for p, v in (signs[0] if signs else []) if p in shape.signs]


def run_has_more(bin_dir, tmp, o, shape):
    """The shape with its paging settings left out: page 1 is stored, and
    the prefetch, cachectl, status, /metrics and the log say there is more."""
    name = "has-more " + shape.name
    print("== %s" % name, flush=True)
    entry = {"name": name, "settings": shape.unset, "fault": True}
    SUMMARY.append(entry)
    d = fault_daemon(bin_dir, tmp, "more-" + shape.name, shape.unset, entry)
    if not d:
        return
    try:
        texts = warning_values(shape)
        o.logs.settle()  # the reference client's own request is logged after its answer
        m = o.logs.mark()
        r = d.ctl("prefetch", "posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == origin_host(shape)]
        entry["requests"] = reqs
        lines = [x for x in r.stderr.splitlines() if x.startswith("cachectl: warning: ")]
        entry["outcome"] = "exit %d; %s" % (r.returncode, short(r.stderr, 300) or "nothing on stderr")
        check("%s: cachectl prefetch exits 7 with 'cachectl: warning: posts page 1 has more: ...' naming %s" % (name, " or ".join(texts)),
              r.returncode == 7 and any("posts page 1 has more: " in x and any(t in x for t in texts) for x in lines),
              entry["outcome"])
        check("%s: one request, page 1" % name, len(reqs) == 1 and reqs[0]["status"] == 200,
              "; ".join(describe(e) for e in reqs) or "no request")
        listing_check(d, shape, shape.first_page, "(paging unset) page 1 is stored:")
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        again = [e for e in o.logs.since(m) if e["host"] == origin_host(shape)]
        warnings = (answer or {}).get("warnings")
        ok_w = isinstance(warnings, list) and any(
            isinstance(w, str) and w.startswith("posts page 1 has more: ") and any(t in w for t in texts) and "; set " in w
            for w in warnings)
        check("%s: the 2nd prefetch (page 1 answered 304) still answers ok with warnings naming it" % name,
              answer is not None and answer.get("ok") and ok_w and code in (0, 7) and [e["status"] for e in again] == [304],
              "exit %d, warnings %s; requests %s" % (code, short(canon(warnings), 300), "; ".join(describe(e) for e in again)))
        feed_warning_checks(d, name, "posts", answer, ok_w)
        log = d.stderr_since(0)
        check("%s: the daemon's log has the warning" % name,
              any("has more" in x and any(t in x for t in texts) and "warn" in x.lower() for x in log.splitlines()),
              short(" | ".join(x for x in log.splitlines() if "has more" in x), 300) or "no line says 'has more'")
    finally:
        d.stop()


def run_keep_all(bin_dir, tmp, o, entry):
    """posts-keep = all across 20 refreshes of an RSS window of the newest 10
    items, one new per refresh: 29 posts, the feed's then older ones newest
    first; then one removed by hand (cachectl delete post) stays removed."""
    name = entry["name"]
    A = o.ports["A"]
    url = "http://127.0.0.1:%d/window/feed.rss" % A
    apis.window_write(o.files, 1)
    d = fault_daemon(bin_dir, tmp, "keep-all", [("posts-url", url), ("posts-keep", "all")], entry)
    if not d:
        return
    shape = shapes.Shape("keep-all", "", [], [], [], [], exact=False)
    try:
        outcomes = []
        for k in range(1, 21):
            current = apis.window_write(o.files, k)
            code, answer, err = d.prefetch("posts")
            total = d.call({"op": "status"}).get("posts")
            outcomes.append((code, total))
        entry["outcome"] = "refreshes (exit, posts stored): " + " ".join("%d/%s" % x for x in outcomes)
        check("%s: 20 refreshes, each exit 0, the store growing by one a refresh (10 .. 29)" % name,
              outcomes == [(0, k + 9) for k in range(1, 21)], entry["outcome"])
        older = [apis.rss_expected(apis.window_item(n)) for n in range(19, 0, -1)]
        want = current + older
        a = d.call({"op": "list_posts"})
        got = [shape.text(p) for p in a.get("posts", [])]
        check("%s: list_posts: 29 posts, the feed's 10 in its order (29..20), then the older ones newest first (19..1)" % name,
              got == [shape.text(p) for p in want],
              "%d posts; ids %s" % (len(got), short(" ".join(str(shape.id_of(p)).rsplit("/", 1)[-1] for p in a.get("posts", [])), 200)))
        gone = want[15]["id"]
        r = d.ctl("delete", "post", gone)
        after = d.call({"op": "get_post", "id": gone})
        total = d.call({"op": "status"}).get("posts")
        check("%s: cachectl delete post %s exits 0; the post is not_found, 28 left" % (name, gone),
              r.returncode == 0 and (after.get("error") or {}).get("code") == "not_found" and total == 28,
              "exit %d %s; get_post %s; %s posts" % (r.returncode, short(r.stderr, 100), short(canon(after), 100), total))
        r = d.ctl("delete", "post", gone)
        check("%s: deleting it again exits 4" % name, r.returncode == 4, "exit %d %s" % (r.returncode, short(r.stderr, 100)))
        other = want[20]["id"]
        a = d.call({"op": "delete_post", "id": other})
        code, answer, err = d.prefetch("posts")
        a2 = d.call({"op": "list_posts"})
        left = [p for p in want if p["id"] not in (gone, other)]
        check("%s: {\"op\":\"delete_post\"} removes another; a refresh brings neither back (27 in order)" % name,
              a.get("ok") and code == 0 and [shape.text(p) for p in a2.get("posts", [])] == [shape.text(p) for p in left],
              "delete_post %s; prefetch %s; %d posts" % (short(canon(a), 100), prefetch_summary(code, answer, err),
                                                       len(a2.get("posts", []))))
    finally:
        d.stop()


def run_keep_stops(bin_dir, tmp, o, entry, quick):
    """posts-keep = all on the Reddit listing: a refresh stops walking at the
    first page whose items are all stored and unchanged (issue 32, point 5)."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    shape = apis.reddit(c)
    d = fault_daemon(bin_dir, tmp, "keep-stops", shape.settings + [("posts-keep", "all")], entry)
    if not d:
        return
    try:
        pages = len(shape.posts_pages)
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "P"]
        check("%s: the first refresh walks every page (%d)" % (name, pages),
              code == 0 and len(reqs) == pages and all(e["status"] == 200 for e in reqs),
              "%s; %s" % (prefetch_summary(code, answer, err), "; ".join(describe(e) for e in reqs)))
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "P"]
        check("%s: nothing new: one request, page 1 answered 304" % name,
              code == 0 and [e["status"] for e in reqs] == [304], "; ".join(describe(e) for e in reqs))
        # A new post on top: page 1 changes and page 2 (a new cursor) holds only stored posts: the walk stops there.
        with open(os.path.join(o.api_data, "reddit.json")) as f:
            state = json.load(f)
        new = json.loads(json.dumps(state["items"][0]))
        new["data"].update(id="zz1new", name="t3_zz1new", title="a new post on top")
        state["items"].insert(0, new)
        c.state("reddit", state["items"])
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "P"]
        total = d.call({"op": "status"}).get("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = reqs
        check("%s: one new post: pages 1 and 2 asked (200), then the walk stops; %d posts" % (name, len(shape.posts) + 1),
              code == 0 and [e["status"] for e in reqs] == [200, 200] and total == len(shape.posts) + 1,
              "%s; %s; %s posts" % (entry["outcome"], "; ".join(describe(e) for e in reqs), total))
        a = d.call({"op": "get_post", "id": "zz1new"})
        check("%s: the new post is read back by id" % name, a.get("ok") and a["post"].get("title") == "a new post on top",
              short(canon(a), 150))
    finally:
        d.stop()

def run_keep_n(bin_dir, tmp, o, entry, keep=15):
    """posts-keep = 15 over the sliding RSS window of keep-all (the newest 10, one new a refresh, 20 refreshes):
    the store holds the newest 15, the feed's 10 in its order then the 5 most recent kept from before; each
    refresh's summary counts those it kept in `kept` (docs/protocol.md, "History" and "prefetch")."""
    name = entry["name"]
    A = o.ports["A"]
    path = "window-n/feed.rss"
    url = "http://127.0.0.1:%d/%s" % (A, path)
    apis.window_write(o.files, 1, path)
    d = fault_daemon(bin_dir, tmp, "keep-n", [("posts-url", url), ("posts-keep", str(keep))], entry)
    if not d:
        return
    shape = shapes.Shape("keep-n", "", [], [], [], [], exact=False)
    try:
        outcomes, want_outcomes = [], []
        for k in range(1, 21):
            current = apis.window_write(o.files, k, path)
            code, answer, err = d.prefetch("posts")
            total = d.call({"op": "status"}).get("posts")
            outcomes.append((code, total, ((answer or {}).get("posts") or {}).get("kept")))
            want_outcomes.append((0, min(k + 9, keep), min(k - 1, keep - 10)))
        entry["outcome"] = "refreshes (exit/posts stored/kept): " + " ".join("%d/%s/%s" % x for x in outcomes)
        check("%s: 20 refreshes, each exit 0; the store grows to %d and stays there; the summary's kept is 0, 1, .. %d, then %d" % (
                  name, keep, keep - 10, keep - 10),
              outcomes == want_outcomes, entry["outcome"] + ("" if outcomes == want_outcomes else
                                                             "; wanted " + " ".join("%d/%s/%s" % x for x in want_outcomes)))
        older = [apis.rss_expected(apis.window_item(n)) for n in range(19, 19 - (keep - 10), -1)]
        want = current + older
        a = d.call({"op": "list_posts"})
        got = [shape.text(p) for p in a.get("posts", [])]
        check("%s: list_posts: %d posts, the feed's 10 in its order (29..20), then the %d most recent kept, newest first (19..%d)" % (
                  name, keep, keep - 10, 20 - (keep - 10)),
              got == [shape.text(p) for p in want],
              "%d posts; ids %s" % (len(got), short(" ".join(str(shape.id_of(p)).rsplit("/", 1)[-1] for p in a.get("posts", [])), 200)))
        dropped = apis.window_item(20 - (keep - 10) - 1)["guid"]
        p = d.call({"op": "get_post", "id": dropped})
        check("%s: the newest post past the %d (%s) is gone: not_found" % (name, keep, dropped),
              (p.get("error") or {}).get("code") == "not_found", short(canon(p), 150))
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "A"]
        a = d.call({"op": "list_posts"})
        check("%s: a refresh where nothing changed (304) keeps the same %d in the same order" % (name, keep),
              code == 0 and [e["status"] for e in reqs] == [304] and [shape.text(p) for p in a.get("posts", [])] == [shape.text(p) for p in want],
              "%s; %s; %d posts" % (prefetch_summary(code, answer, err), "; ".join(describe(e) for e in reqs), len(a.get("posts", []))))
    finally:
        d.stop()


def cachectl_get_images(d):
    """`cachectl --json get images`: (exit status, the rows or None, the output)."""
    r = d.ctl("--json", "get", "images")
    rows = None
    for doc in json_lines(r.stdout):
        if isinstance(doc, dict) and isinstance(doc.get("images"), list):
            rows = (rows or []) + doc["images"]
    return r.returncode, rows, r.stdout + r.stderr


def run_images_cursor(bin_dir, tmp, o, entry, quick):
    """A paged image manifest on its own URL: YouTube search.list's thumbnails with images-paging = cursor,
    images-cursor = /nextPageToken, images-cursor-param = pageToken (host P), each thumbnail an image on host B."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    yt = apis.youtube_thumbnails(c)
    d = fault_daemon(bin_dir, tmp, "images-cursor", yt["settings"], entry)
    if not d:
        return
    norm = shapes.Shape("images-cursor", "", [], [], [], [], norm_query=True).norm
    try:
        m = o.logs.mark()
        code, answer, err = d.prefetch("images")
        o.logs.settle()
        reqs = o.logs.since(m)
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = reqs
        images = (answer or {}).get("images") or {}
        check("%s: cachectl prefetch images exits 0, %d images downloaded, no warning" % (name, len(yt["rows"])),
              code == 0 and images.get("downloaded") == len(yt["rows"]) and not (answer or {}).get("warnings"),
              entry["outcome"] + ("; warnings %s" % canon(answer.get("warnings")) if (answer or {}).get("warnings") else ""))
        pages = [e for e in reqs if e["host"] == "P"]
        check("%s: the manifest's %d pages asked once each, in order, 200, the key kept on each" % (name, len(yt["pages"])),
              [norm(e["uri"]) for e in pages] == [norm(u) for u in yt["pages"]] and all(e["status"] == 200 for e in pages),
              "; ".join(describe(e) for e in pages) or "no request to P")
        thumbs = sorted(e["uri"] for e in reqs if e["host"] == "B" and e["status"] == 200)
        want_thumbs = sorted(urllib.parse.urlsplit(u).path for u, _, _ in yt["rows"])
        check("%s: each thumbnail downloaded once from host B" % name, thumbs == want_thumbs,
              "%d of %d" % (len(thumbs), len(want_thumbs)) if thumbs != want_thumbs else "%d images" % len(thumbs))
        rc, rows, out = cachectl_get_images(d)
        got = [(r.get("url"), r.get("description")) for r in rows or []]
        want = [(u, desc) for u, _, desc in yt["rows"]]
        check("%s: cachectl --json get images lists every row of every page (%d), url and description, in order" % (name, len(want)),
              rc == 0 and got == want, "exit %d; %d rows%s" % (rc, len(got), "" if got == want else "; got " + short(canon(got), 300)))
        shape = shapes.Shape("images-cursor", "", [], [], [], [])
        shape.name = name
        images_check(d, shape, yt["rows"], "")
        m = o.logs.mark()
        code, answer, err = d.prefetch("images")
        o.logs.settle()
        reqs = o.logs.since(m)
        pages = [e for e in reqs if e["host"] == "P"]
        check("%s: a second prefetch: each manifest page once, 304 with its own ETag; no image downloaded" % name,
              code == 0 and sorted(norm(e["uri"]) for e in pages) == sorted(norm(u) for u in yt["pages"]) and
              all(e["status"] == 304 and e["inm"] for e in pages) and not [e for e in reqs if e["host"] == "B" and e["status"] == 200],
              "%s; %s" % (prefetch_summary(code, answer, err), "; ".join(describe(e) for e in reqs)))
    finally:
        d.stop()


def feed_warning_checks(d, name, feed, answer, warned):
    """status feed_warnings equal to the prefetch answer's warnings, and /metrics cached_feed_incomplete{feed=FEED} 1."""
    warnings = (answer or {}).get("warnings")
    r = d.ctl("--json", "status")
    try:
        status = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        status = {}
    check("%s: cachectl --json status has feed_warnings, the prefetch's warnings" % name,
          warned and status.get("feed_warnings") == warnings, "feed_warnings %s" % short(canon(status.get("feed_warnings")), 300))
    try:
        st, body = d.http("/metrics")
        text = body.decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        st, text = 0, str(e)
    line = 'cached_feed_incomplete{feed="%s"} 1' % feed
    check("%s: /metrics has %s" % (name, line), st == 200 and line in text.splitlines(),
          "status %d; %s" % (st, " | ".join(x for x in text.splitlines() if x.startswith("cached_feed_incomplete")) or "no such line"))


def run_images_has_more(bin_dir, tmp, o, entry, quick):
    """The same manifest with images-paging left unset: page 1's rows only, and the prefetch says there is more:
    `images page 1 has more: /nextPageToken = "..."`, exit 7, status feed_warnings, cached_feed_incomplete{feed="images"} 1."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    yt = apis.youtube_thumbnails(c)
    d = fault_daemon(bin_dir, tmp, "images-has-more", yt["unset"], entry)
    if not d:
        return
    try:
        text = '/nextPageToken = %s' % json.dumps(yt["token"])
        m = o.logs.mark()
        r = d.ctl("prefetch", "images")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "P"]
        entry["requests"] = reqs
        entry["outcome"] = "exit %d; %s" % (r.returncode, short(r.stderr, 300) or "nothing on stderr")
        lines = [x for x in r.stderr.splitlines() if x.startswith("cachectl: warning: ")]
        check("%s: cachectl prefetch images exits 7 with 'cachectl: warning: images page 1 has more: %s; set images-paging = cursor ...'" % (name, text),
              r.returncode == 7 and any("images page 1 has more: " + text in x and "images-paging = cursor" in x for x in lines),
              entry["outcome"])
        check("%s: one manifest request, page 1" % name, len(reqs) == 1 and reqs[0]["status"] == 200,
              "; ".join(describe(e) for e in reqs) or "no request")
        rc, rows, out = cachectl_get_images(d)
        got = [(x.get("url"), x.get("description")) for x in rows or []]
        want = [(u, desc) for u, _, desc in yt["first_rows"]]
        check("%s: cachectl --json get images lists page 1's %d rows" % (name, len(want)), got == want,
              "exit %d; %d rows" % (rc, len(got)))
        code, answer, err = d.prefetch("images")
        warnings = (answer or {}).get("warnings")
        warned = isinstance(warnings, list) and any(isinstance(w, str) and w.startswith("images page 1 has more: " + text)
                                                    for w in warnings)
        check("%s: the 2nd prefetch (page 1 answered 304) answers ok with warnings naming it" % name,
              answer is not None and answer.get("ok") and warned and code in (0, 7),
              "exit %d, warnings %s" % (code, short(canon(warnings), 300)))
        feed_warning_checks(d, name, "images", answer, warned)
    finally:
        d.stop()


def whatwg_windows_1252(data):
    """`data` decoded as the WHATWG Encoding Standard decodes windows-1252 (the
    labels ISO-8859-1 and US-ASCII included): Python's cp1252, and the five
    bytes it leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) as the C1
    controls of their value."""
    return "".join(chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252") for b in data)


def run_http_charset(bin_dir, tmp, o, entry):
    """RFC 7303: an RSS document declared encoding="ISO-8859-1" whose bytes are UTF-8, served as
    "application/rss+xml; charset=utf-8" (nginx's charset directive): the HTTP charset wins and the titles
    arrive intact (café, €). The same bytes served with no charset parameter are read by the declaration
    (each UTF-8 byte a Latin-1 character, read as windows-1252 as browsers read ISO-8859-1): a control that
    the run tells the two apart."""
    name = entry["name"]
    A = o.ports["A"]
    doc = apis.charset_doc()
    o.files.put("a", "charset/feed.rss", doc)
    o.files.put("a", "nocharset/feed.rss", doc)
    items = apis.charset_items()
    want = [apis.rss_expected(i) for i in items]
    shape = shapes.Shape("http-charset", "", [], [], [], [], exact=False)
    for where, label in (("charset", "served with charset=utf-8"), ("nocharset", "served with no charset (control)")):
        d = fault_daemon(bin_dir, tmp, "charset-" + where, [("posts-url", "http://127.0.0.1:%d/%s/feed.rss" % (A, where))], entry)
        if not d:
            return
        try:
            m = o.logs.mark()
            code, answer, err = d.prefetch("posts")
            o.logs.settle()
            reqs = [e for e in o.logs.since(m) if e["host"] == "A"]
            ctype = reqs[0].get("content_type") if reqs else None
            if where == "charset":
                expected = want
                ok_type = ctype == "application/rss+xml; charset=utf-8"
                entry["outcome"] = prefetch_summary(code, answer, err)
            else:
                # By the declaration, the UTF-8 bytes are Latin-1 characters, which
                # a browser (and cached) reads as windows-1252 (WHATWG Encoding).
                expected = json.loads(whatwg_windows_1252(json.dumps(want, ensure_ascii=False).encode("utf-8")))
                ok_type = ctype == "application/rss+xml"
            check("%s: %s: the origin's Content-Type is %s" % (name, label, ctype), ok_type, ctype or "no request")
            a = d.call({"op": "list_posts"})
            got = a.get("posts") or []
            titles = [p.get("title") for p in got]
            check("%s: %s: the prefetch exits 0 and each item is %s (titles %s)" % (
                      name, label, "intact" if where == "charset" else "read by the declared ISO-8859-1",
                      " | ".join(x["title"] for x in expected)),
                  code == 0 and [shape.text(p) for p in got] == [shape.text(p) for p in expected],
                  "%s; titles %s" % (prefetch_summary(code, answer, err), canon(titles)))
        finally:
            d.stop()


class ConfigDaemon(Daemon):
    """cached reading its feed settings from a configuration file (--config FILE), so SIGHUP can change them."""

    def __init__(self, bin_dir, tmp, name, lines):
        Daemon.__init__(self, bin_dir, tmp, name, [], config=None)
        self.config = os.path.join(self.dir, "cached.conf")
        self.write_config(lines)

    def write_config(self, lines):
        with open(self.config + ".tmp", "w") as f:
            f.write("# feed-shapes: sighup-paging\n" + "".join("%s = %s\n" % kv for kv in lines))
        os.chmod(self.config + ".tmp", 0o644)
        os.rename(self.config + ".tmp", self.config)


def run_paging_change(bin_dir, tmp, o, entry, quick, how):
    """A daemon started on a Reddit look-alike without paging settings (a configuration file) stores page 1 and
    warns (exit 7); then the paging settings are added to the file and applied by SIGHUP (`how` = "sighup") or
    by a restart ("restart"): the next prefetch asks every page (page 1 answering 304 under the old settings
    must not keep the walk at page 1: feeds.state's digest sends it without validators), exit 0, no
    feed_warnings, cached_feed_incomplete{feed="posts"} 0 (docs/operations.md, "Configuration";
    docs/storage-format.md, "The feeds' state")."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    wrapped, pages, first = apis.reddit_listing(c, "hup" if how == "sighup" else "restart")
    posts = [w["data"] for w in wrapped]
    base = [("posts-url", c.api(first)), ("posts-items", "/data/children"), ("posts-item", "/data")]
    d = ConfigDaemon(bin_dir, tmp, how + "-paging", base)
    entry["settings"] = base
    if not check("%s: cached starts with --config FILE (mode 644) holding posts-url, posts-items, posts-item" % name, d.start(), d.failure):
        return
    shape = shapes.Shape(how, "", [], posts, pages, [], norm_query=True)
    shape.name = name
    after = "after SIGHUP" if how == "sighup" else "after the restart"
    try:
        r = d.ctl("prefetch", "posts")
        lines = [x for x in r.stderr.splitlines() if x.startswith("cachectl: warning: ")]
        check("%s: before: cachectl prefetch posts exits 7, 'posts page 1 has more: /data/after = ...'" % name,
              r.returncode == 7 and any("posts page 1 has more: /data/after = " in x for x in lines),
              "exit %d; %s" % (r.returncode, short(r.stderr, 300)))
        listing_check(d, shape, posts[:c.size], "before: page 1 alone:")
        d.write_config(base + apis.REDDIT_PAGING)
        if how == "sighup":
            mark = os.path.getsize(d.stderr_path)
            d.p.send_signal(signal.SIGHUP)
            reloaded = wait_for(lambda: "posts-paging" in d.stderr_since(mark) and "SIGHUP" in d.stderr_since(mark), 10, 0.05)
            said = [x for x in d.stderr_since(mark).splitlines() if "SIGHUP" in x or "posts-" in x]
            check("%s: SIGHUP after adding posts-paging, posts-cursor, posts-cursor-param to the file: the log names the changes" % name,
                  reloaded and d.p.poll() is None and all(any(k in x for x in said) for k in ("posts-paging", "posts-cursor", "posts-cursor-param")),
                  short(" | ".join(said), 500) or "nothing logged in 10 s")
        else:
            d.stop()
            if not check("%s: cached starts again with the paging settings added to the file" % name, d.start(), d.failure):
                return
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        o.logs.settle()
        reqs = [e for e in o.logs.since(m) if e["host"] == "P"]
        entry["outcome"] = prefetch_summary(code, answer, err)
        entry["requests"] = reqs
        check("%s: %s: the prefetch exits 0 with no warnings" % (name, after),
              code == 0 and answer and answer.get("ok") and not answer.get("warnings"),
              "%s; warnings %s" % (entry["outcome"], canon((answer or {}).get("warnings"))))
        check("%s: %s: every page asked once, in order (%d)" % (name, after, len(pages)),
              [shape.norm(e["uri"]) for e in reqs] == [shape.norm(u) for u in pages],
              "; ".join(describe(e) for e in reqs) or "no request")
        listing_check(d, shape, posts, "%s: every page ingested:" % after)
        every_post_check(d, shape, posts, "%s:" % after)
        r = d.ctl("--json", "status")
        try:
            status = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            status = {}
        check("%s: %s: cachectl --json status has feed_warnings empty" % (name, after),
              status.get("feed_warnings") == [], "feed_warnings %s" % canon(status.get("feed_warnings", "(absent)")))
        try:
            st, body = d.http("/metrics")
            text = body.decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as e:
            st, text = 0, str(e)
        check("%s: %s: /metrics has cached_feed_incomplete{feed=\"posts\"} 0" % (name, after),
              st == 200 and 'cached_feed_incomplete{feed="posts"} 0' in text.splitlines(),
              "status %d; %s" % (st, " | ".join(x for x in text.splitlines() if x.startswith("cached_feed_incomplete")) or "no such line"))
    finally:
        d.stop()


ATTACKS = [("billion-laughs", apis.billion_laughs, ("entit", "dtd", "doctype", "document type")),
           ("external-entity", apis.external_entity, ("entit", "dtd", "doctype", "document type", "external")),
           ("10000-deep", apis.deep_document, ("deep", "depth", "nest", "level"))]


def run_xml_attack(bin_dir, tmp, o, entry, kind, make, words):
    name = entry["name"]
    A = o.ports["A"]
    good = [apis.window_item(n) for n in (2, 1)]
    o.files.put("a", "attack/%s.rss" % kind, apis.rss_doc("Attack", "https://attack.example/", good))
    d = fault_daemon(bin_dir, tmp, "xml-" + kind, [("posts-url", "http://127.0.0.1:%d/attack/%s.rss" % (A, kind))], entry)
    if not d:
        return
    try:
        code, answer, err = d.prefetch("posts")
        check("%s: a friendly RSS of two items refreshes first" % name, code == 0 and answer and answer.get("ok"),
              prefetch_summary(code, answer, err))
        o.files.put("a", "attack/%s.rss" % kind, make())
        t0 = time.time()
        code, answer, err = d.prefetch("posts")
        took = time.time() - t0
        entry["outcome"] = "%s in %.1f s" % (prefetch_summary(code, answer, err), took)
        msg = message(answer).lower()
        check("%s: the prefetch fails (exit 6, upstream) saying why (%s)" % (name, " / ".join(words)),
              upstream_failure(code, answer) and any(w in msg for w in words) and took < 30, entry["outcome"])
        unchanged(d, [(i["guid"], i["title"]) for i in good], 2, name)
        a = d.call({"op": "list_posts"})
        check("%s: no stored post holds /etc/passwd's text; the daemon still answers" % name,
              a.get("ok") and "root:" not in canon(a.get("posts")), short(canon(a.get("error")), 100) if not a.get("ok") else "")
    finally:
        d.stop()


def fault_cursor_repeat(bin_dir, tmp, o, entry, quick):
    """A Slack-like cursor whose page 3 names page 2's cursor again."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    msgs = [{"type": "message", "user": "U0FAULT", "text": "m%d" % n, "ts": "%d.000100" % apis.unix(n)}
            for n in range(3 * c.size + 1)]
    c.state("fault-cursor", msgs, token=apis.SLACK_TOKEN)
    d = fault_daemon(bin_dir, tmp, "cursor-repeat", [
        ("posts-url", c.api("/fault/cursor?channel=C0123CACHED&limit=%d" % c.size)), ("posts-items", "/messages"),
        ("posts-id", "/ts"), ("posts-paging", "cursor"), ("posts-cursor", "/response_metadata/next_cursor"),
        ("posts-has-more", "/has_more"), ("fetch-header", "Authorization: Bearer " + apis.SLACK_TOKEN)], entry)
    if not d:
        return
    try:
        code, answer, err = d.prefetch("posts")
        check("%s: 4 cursor pages refresh" % name, code == 0 and answer and answer.get("ok"), prefetch_summary(code, answer, err))
        msgs[0] = dict(msgs[0], text="m0, edited in a refresh that fails")
        c.state("fault-cursor", msgs, token=apis.SLACK_TOKEN, fault="repeat")
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        o.logs.settle()
        entry["requests"] = o.logs.since(m)
        repeated = apis.slack_cursor(msgs[c.size]["ts"])
        msg = message(answer)
        check("%s: page 3 naming page 2's cursor again fails the refresh (upstream) naming the page" % name,
              upstream_failure(code, answer) and "cursor" in msg.lower() and
              ("page 3" in msg or repeated in msg or urllib.parse.quote(repeated, safe="") in msg), entry["outcome"])
        unchanged(d, [], len(msgs), name)
        p = d.call({"op": "get_post", "id": msgs[0]["ts"]})
        check("%s: page 1's edit was not stored" % name, p.get("ok") and p["post"].get("text") == "m0",
              short(canon(p.get("post") or p.get("error")), 100))
    finally:
        d.stop()


def fault_offset_stall(bin_dir, tmp, o, entry, quick):
    """A Contentful-like offset whose origin ignores the offset parameter: page 2 is page 1 again (the offset does
    not advance the walk); the walk must fail naming page 2, not store page 1 three times (or count its repeats invalid)."""
    name = entry["name"]
    c = apis.Ctx(o.files, o.ports, o.api_data, quick)
    items = [{"sys": {"id": "e%d" % n}, "fields": {"title": "entry %d" % n}} for n in range(2 * c.size + 1)]
    c.state("fault-offset", items, token=apis.CONTENTFUL_TOKEN)
    d = fault_daemon(bin_dir, tmp, "offset-stall", [
        ("posts-url", c.api("/fault/offset?access_token=" + apis.CONTENTFUL_TOKEN)), ("posts-items", "/items"),
        ("posts-id", "/sys/id"), ("posts-paging", "offset"), ("posts-offset-param", "skip"), ("posts-limit-param", "limit"),
        ("posts-page-size", str(c.size)), ("posts-total", "/total")], entry)
    if not d:
        return
    try:
        code, answer, err = d.prefetch("posts")
        check("%s: 3 offset pages refresh" % name, code == 0 and answer and answer.get("ok"), prefetch_summary(code, answer, err))
        items[0] = {"sys": {"id": "e0"}, "fields": {"title": "entry 0, edited in a refresh that fails"}}
        c.state("fault-offset", items, token=apis.CONTENTFUL_TOKEN, fault="ignore-skip")
        m = o.logs.mark()
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        o.logs.settle()
        entry["requests"] = o.logs.since(m)
        msg = message(answer)
        check("%s: page 2 holding page 1's items again (the offset does not advance) fails the refresh (upstream) naming the page" % name,
              upstream_failure(code, answer) and "offset" in msg.lower() and ("page 2" in msg or "skip=%d" % c.size in msg),
              entry["outcome"])
        unchanged(d, [], len(items), name)
        p = d.call({"op": "get_post", "id": "e0"})
        check("%s: page 1's edit was not stored" % name, p.get("ok") and p["post"]["fields"]["title"] == "entry 0",
              short(canon(p.get("post") or p.get("error")), 100))
    finally:
        d.stop()


def fault_html(bin_dir, tmp, o, entry):
    name = entry["name"]
    o.files.put("a", "faults/html/index.html", b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in</body></html>\n")
    d = fault_daemon(bin_dir, tmp, "html", [("posts-url", "http://127.0.0.1:%d/faults/html/posts" % o.ports["A"])], entry)
    if not d:
        return
    try:
        code, answer, err = d.prefetch("posts")
        entry["outcome"] = prefetch_summary(code, answer, err)
        check("%s: an HTML answer fails the refresh (upstream) naming its Content-Type" % name,
              upstream_failure(code, answer) and "text/html" in message(answer), entry["outcome"])
        unchanged(d, [], 0, name)
    finally:
        d.stop()


# --- the report -------------------------------------------------------------------

def report(o):
    print()
    print("== per shape: the settings used and the requests the origin's log shows")
    print("hosts: A = 127.0.0.1:%d (nginx, the feeds), B = 127.0.0.1:%d (nginx, images), "
          "M = 127.0.0.1:%d (the scripted Mastodon origin), P = 127.0.0.1:%d (the scripted APIs, "
          "api-origin.py)" % (o.ports["A"], o.ports["B"], o.ports["M"], o.ports["P"]))
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
