"""RSS and Atom as particular generators and servers send them, through the
built daemon, a real nginx and cachectl: what the newcomer's review of
7 December found stored wrong, or refused, or lost without a word.

- WordPress's Atom feed writes its titles as `type="html"` in CDATA, with
  character references: stored as HTML, no title search found them.
- The Guardian's `media:content` says neither `medium` nor `type`: no item
  had an image, and the prefetch said to fix `images-url-field`.
- A feed declared ISO-8859-1 whose bytes are windows-1252 stored C1
  controls where its quotes and euro signs were.
- A feed a server labels `text/html` (a static file under `default_type
  text/html`) was refused as an HTML page.
- An RSS 0.90 feed, and any feed whose items are in a namespace the reader
  does not know, was stored as a feed of no posts: every post removed,
  exit status 0, nothing said.
"""
import json
import os
import struct
import urllib.parse
import urllib.request
import zlib

import pytest

from world import Origin, free_port


def png(seed):
    """A valid 2x2 RGB PNG, different for each seed."""
    raw = b"".join(b"\x00" + bytes([(seed * 40 + i * 7) % 256 for i in range(6)]) for _ in range(2))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


WP_ATOM = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:thr="http://purl.org/syndication/thread/1.0" xml:lang="en-US">
  <title type="text">Example</title>
  <updated>2024-01-10T14:01:02Z</updated>
  <id>https://example.wordpress.org/feed/atom/</id>
  <entry>
    <author><name>alice</name></author>
    <title type="html"><![CDATA[It&#8217;s &#8220;Quoted&#8221; &#038; Ampersanded]]></title>
    <link rel="alternate" type="text/html" href="https://example.wordpress.org/2024/01/10/quoted/"/>
    <id>https://example.wordpress.org/?p=42</id>
    <updated>2024-01-10T14:01:02Z</updated>
    <published>2024-01-10T14:00:00Z</published>
    <summary type="html"><![CDATA[An excerpt [&hellip;]]]></summary>
    <content type="html"><![CDATA[<p>It&#8217;s here.</p>]]></content>
    <thr:total>0</thr:total>
  </entry>
</feed>
"""

GUARDIAN = """<?xml version="1.0" encoding="UTF-8"?>
<rss xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:media="http://search.yahoo.com/mrss/" version="2.0"><channel>
  <title>World news | The Guardian</title><link>https://www.theguardian.com/world</link>
  %s
</channel></rss>
"""
GUARDIAN_ITEM = """<item><title>Story %(n)d</title><link>https://www.theguardian.com/world/2024/jan/10/story-%(n)d</link>
    <guid>https://www.theguardian.com/world/2024/jan/10/story-%(n)d</guid>
    <media:content width="140" url="%(base)s/img/media/%(n)d/master.jpg?width=140&amp;quality=85&amp;s=a%(n)d">
      <media:credit scheme="urn:ebu">Photograph: Agency</media:credit></media:content>
    <media:content width="460" url="%(base)s/img/media/%(n)d/master.jpg?width=460&amp;s=b%(n)d"/>
    <dc:creator>Reporter %(n)d</dc:creator></item>"""

RSS_090 = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://my.netscape.com/rdf/simple/0.9/">
  <channel><title>Mozilla Dot Org</title><link>http://www.mozilla.org</link><description>the Mozilla Organization web site</description></channel>
  <item><title>New Status Updates</title><link>http://www.mozilla.org/status/</link></item>
  <item><title>Bugzilla Reorganized</title><link>http://www.mozilla.org/bugs/</link></item>
</rdf:RDF>
"""


def latin_feed():
    """windows-1252 bytes declared ISO-8859-1, as a Windows editor saves them."""
    return (b'<?xml version="1.0" encoding="ISO-8859-1"?>\n<rss version="2.0"><channel><title>Caf\xe9</title>'
            b"<item><guid>1</guid><title>\x93Smart quotes\x94 cost \x80 5 \x96 caf\xe9</title></item></channel></rss>\n")


@pytest.fixture(scope="module")
def origin(module_world):
    """nginx with the types real servers send (Atom, RSS, PNG), `/html/`
    labelling everything `text/html` as a misconfigured server does, and
    the Guardian's image paths (their query strings ignored, as a CDN's)."""
    www = os.path.join(module_world.path, "www")
    os.makedirs(os.path.join(www, "html"))
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    files = {"wp-atom.xml": WP_ATOM, "guardian.rss": GUARDIAN % "\n".join(GUARDIAN_ITEM % {"n": n, "base": base} for n in range(1, 4)),
             "rss090.xml": RSS_090, "html/feed.rss": GUARDIAN % (GUARDIAN_ITEM % {"n": 1, "base": base})}
    for name, text in files.items():
        with open(os.path.join(www, name), "w") as f:
            f.write(text)
    with open(os.path.join(www, "latin.rss"), "wb") as f:
        f.write(latin_feed())
    for n in range(1, 4):
        os.makedirs(os.path.join(www, "img", "media", str(n)))
        with open(os.path.join(www, "img", "media", str(n), "master.jpg"), "wb") as f:
            f.write(png(n))  # served as image/png: the store reads the bytes, not the name
    tmp = os.path.join(module_world.path, "nginx")
    os.makedirs(os.path.join(tmp, "ntmp"))
    conf = """worker_processes 1; daemon off; pid %(t)s/nginx.pid; error_log %(t)s/nginx-error.log;
events { worker_connections 256; }
http { access_log off; client_body_temp_path %(t)s/ntmp; proxy_temp_path %(t)s/ntmp; fastcgi_temp_path %(t)s/ntmp;
  uwsgi_temp_path %(t)s/ntmp; scgi_temp_path %(t)s/ntmp;
  types { application/atom+xml xml; application/rss+xml rss; image/png jpg; }
  server { listen 127.0.0.1:%(p)d; root %(w)s; location /html/ { types { } default_type text/html; } } }
""" % {"t": tmp, "p": port, "w": www}
    o = Origin(tmp, conf=conf, ports=[port])
    yield base, www
    o.stop()


def daemon(module_world, name, url, *extra):
    return module_world.daemon(os.path.join(module_world.path, name), name=name, http=True,
                               extra=["--config", "/dev/null", "--posts-url", url] + list(extra))


def prefetched(module_world, name, url, *extra, what="posts"):
    """A daemon on its own store, its feeds prefetched: exit status 0 asserted."""
    d = daemon(module_world, name, url, *extra)
    r = d.ctl("prefetch", what)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def posts(d):
    """Every stored post, from cachectl --json get posts (one answer line a page)."""
    r = d.ctl("--json", "get", "posts")
    assert r.returncode == 0, r.stderr
    return [p for line in r.stdout.splitlines() if line.strip() for p in json.loads(line)["posts"]]


def test_wordpress_atom_titles_are_stored_as_text_and_found(origin, module_world):
    base, _ = origin
    d = prefetched(module_world, "wp", base + "/wp-atom.xml")
    [post] = posts(d)
    assert post["title"] == "It\u2019s \u201cQuoted\u201d & Ampersanded"
    assert post["summary"] == "An excerpt [\u2026]"
    assert post["content_html"] == "<p>It&#8217;s here.</p>"
    found = d.ctl("get", "posts", "--query", "It\u2019s")
    assert found.returncode == 0 and "Ampersanded" in found.stdout and found.stdout.rstrip().endswith("1 post"), found.stdout
    # cachectl shows an entry's author as the user and its content as the body (was "-" and "-").
    assert found.stdout.splitlines()[1].split() == ["https://example.wordpress.org/?p=42", "alice", "It\u2019s", "\u201cQuoted\u201d", "&", "Ampersanded"]
    one = d.ctl("get", "post", "https://example.wordpress.org/?p=42")
    assert one.stdout.startswith("Post https://example.wordpress.org/?p=42 by user alice\nTitle: It\u2019s \u201cQuoted\u201d & Ampersanded\n\n"
                                 "<p>It&#8217;s here.</p>\n"), one.stdout
    with urllib.request.urlopen("http://127.0.0.1:%d/posts?q=%s" % (d.port, urllib.parse.quote("& Ampersanded")), timeout=10) as http:
        assert [p["id"] for p in json.load(http)] == ["https://example.wordpress.org/?p=42"]


def test_guardian_media_without_medium_or_type_are_the_images(origin, module_world):
    base, www = origin
    url = base + "/guardian.rss"
    d = prefetched(module_world, "guardian", url, "--images-url", url, "--images-url-field", "/image", what="all")
    assert [p["image"] for p in posts(d)] == ["%s/img/media/%d/master.jpg?width=140&quality=85&s=a%d" % (base, n, n) for n in range(1, 4)]
    rows = d.ctl("--json", "get", "images")
    assert rows.returncode == 0, rows.stderr
    listed = [row for line in rows.stdout.splitlines() for row in json.loads(line)["images"]]
    assert len(listed) == 3 and all(row.get("hash") for row in listed), listed
    for n in range(1, 4):
        out = os.path.join(module_world.path, "guardian-%d.png" % n)
        got = d.ctl("get", "image", str(n - 1), "-o", out)
        assert got.returncode == 0, got.stderr
        with open(os.path.join(www, "img", "media", str(n), "master.jpg"), "rb") as want, open(out, "rb") as have:
            assert have.read() == want.read(), "row %d holds its story's image" % (n - 1)


def test_windows_1252_declared_iso_8859_1_is_read_as_browsers_read_it(origin, module_world):
    base, _ = origin
    d = prefetched(module_world, "latin", base + "/latin.rss")
    assert [p["title"] for p in posts(d)] == ["\u201cSmart quotes\u201d cost \u20ac 5 \u2013 caf\u00e9"]


def test_a_feed_served_as_text_html_is_read(origin, module_world):
    base, _ = origin
    with urllib.request.urlopen(base + "/html/feed.rss", timeout=10) as http:
        assert http.headers["Content-Type"].startswith("text/html"), "the origin must label it text/html for this test"
    d = prefetched(module_world, "mislabeled", base + "/html/feed.rss")
    assert [p["title"] for p in posts(d)] == ["Story 1"]


def test_rss_090_is_read_and_items_in_an_unknown_namespace_change_nothing(origin, module_world):
    base, www = origin
    d = prefetched(module_world, "rss090", base + "/rss090.xml")
    assert [p["title"] for p in posts(d)] == ["New Status Updates", "Bugzilla Reorganized"]
    # The same URL now serves items in a namespace no RSS has: the page
    # fails, saying so, and the two posts stay (before: both removed, exit 0).
    with open(os.path.join(www, "rss090.xml"), "w") as f:
        f.write(RSS_090.replace("http://my.netscape.com/rdf/simple/0.9/", "http://example.org/rss/9"))
    r = d.ctl("prefetch", "posts")
    assert r.returncode == 6, r.stdout + r.stderr
    assert "2 <item> elements are in namespace http://example.org/rss/9" in r.stderr, r.stderr
    assert [p["title"] for p in posts(d)] == ["New Status Updates", "Bugzilla Reorganized"]
    status = json.loads(d.ctl("--json", "status").stdout)
    assert "http://example.org/rss/9" in json.dumps(status), status
