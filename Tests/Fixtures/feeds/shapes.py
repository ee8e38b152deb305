"""The feed shapes of issue 23 ("Real feeds") as documents, and what the
daemon should make of each: Tests/python/feed_shapes.py writes them under nginx's
roots (nginx-shapes.conf) or the Mastodon origin's data file
(mastodon-origin.py), then checks the daemon against `Shape`'s expectations.

Hosts: A is the feeds' origin (127.0.0.1), B the image host of the
thumbnails (127.0.0.1, another port), C another host (127.0.0.2) where
redirects and next links lead, M the scripted Mastodon origin, DEAD a port
nothing listens on (jsonplaceholder's `url`s, which must not be fetched).

Every document is written with its own modification time, so nginx's ETags
(mtime and size) differ from page to page and from before an edit to after
it: a daemon that sent one page's validators for another would be caught.
"""
import json
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(HERE, "..", "images")


def image(name):
    """The bytes of an image fixture (Tests/Fixtures/images/sample.EXT)."""
    with open(os.path.join(IMAGES, name), "rb") as f:
        return f.read()


class Files:
    """Writes documents under the servers' roots, atomically (nginx never
    serves half a file), each with a modification time of its own; a
    document written again unchanged is left alone (an edit touches only
    the pages it changes)."""

    def __init__(self, roots):
        self.roots = roots
        self.clock = int(time.time()) - 1_000_000

    def put(self, host, rel, data):
        if not isinstance(data, bytes):
            data = (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
        path = os.path.join(self.roots[host], rel.lstrip("/"))
        if os.path.exists(path) and open(path, "rb").read() == data:
            return path  # unchanged: the file, its mtime and so its ETag stay as they are
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.rename(path + ".tmp", path)
        self.clock += 17
        os.utime(path, (self.clock, self.clock))
        return path


class Edit:
    """An edit on a later page: which page URIs must then answer 304 and
    which 200, and the feed's posts and image rows after it."""

    def __init__(self, what, unchanged, changed, posts=None, rows=None, changed_ids=(), new_images=(), removed_ids=()):
        self.what, self.unchanged, self.changed, self.removed_ids = what, unchanged, changed, list(removed_ids)
        self.posts, self.rows, self.changed_ids, self.new_images = posts, rows, list(changed_ids), list(new_images)


class Shape:
    """One feed shape: how it is configured and what the daemon should serve.

    posts: the items in feed order (the dicts the documents hold); id_key:
    the member holding each one's id; ids: the ids get_post is asked for
    (one of each kind the shape has); rows: the image rows expected, as
    (absolute URL, image bytes, description); posts_pages / image_pages: the
    request URIs (path and query) one refresh of each feed makes, in order.
    """

    def __init__(self, name, title, settings, posts, posts_pages, ids, id_key="id", rows=(), image_pages=(),
                 origin="nginx", edit=None, same_feed=False, credentials=None, foreign=(), invalid=0,
                 norm_query=False, exact=True, signs=(), unset=None, first_page=None, accept=None):
        self.name, self.title, self.settings = name, title, settings
        self.posts, self.posts_pages, self.ids, self.id_key = posts, posts_pages, ids, id_key
        self.rows, self.image_pages, self.origin, self.edit = list(rows), list(image_pages), origin, edit
        self.same_feed = same_feed          # images-url is posts-url: each page once per prefetch
        self.credentials = credentials      # the server that must see Authorization on every feed request
        self.foreign = list(foreign)        # servers that must never see Authorization
        self.what = "all" if rows else "posts"
        self.invalid = invalid              # elements the first refresh counts invalid (repeated ids)
        # Issue 32. norm_query: the page URIs are compared as path and query
        # parameters (the daemon sets the paging parameters on the first
        # URL's query; their order and which characters it escapes beyond
        # the needed ones are its own). exact: the posts are the elements'
        # exact text (JSON); False for RSS/Atom, whose entries become JSON
        # Feed items compared as JSON values (member order is the daemon's).
        # signs: the pointers a "has more" warning may name when the paging
        # settings are left out (unset: those settings; first_page: the posts
        # then stored). accept: the Accept header every feed request carries.
        self.norm_query, self.exact, self.signs = norm_query, exact, list(signs)
        self.unset, self.first_page, self.accept = unset, first_page, accept

    def text(self, value):
        """A post as the checks compare it: its exact text, or for a JSON Feed
        item made from XML its JSON value (members sorted)."""
        if self.exact:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    def norm(self, uri):
        """A request URI as the page checks compare it."""
        if not self.norm_query:
            return uri
        import urllib.parse
        split = urllib.parse.urlsplit(uri)
        return split.path + "?" + "&".join("%s=%s" % kv for kv in sorted(urllib.parse.parse_qsl(split.query, keep_blank_values=True)))

    def id_of(self, item):
        return item[self.id_key]

    def listing(self, posts=None):
        """The posts list_posts should answer: ascending when every id is an integer, else feed order."""
        posts = self.posts if posts is None else posts
        ids = [self.id_of(p) for p in posts]
        if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return sorted(posts, key=self.id_of)
        return list(posts)

    def pages(self):
        """Every feed page URI one prefetch asks for (each once)."""
        seen = []
        for uri in self.posts_pages + self.image_pages:
            if uri not in seen:
                seen.append(uri)
        return seen


def lorem(n):
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt".split()
    return " ".join(words[(n + i) % len(words)] for i in range(8 + n % 5))


# --- the shapes --------------------------------------------------------------

def bare(f, p):
    """Today's shape: one bare JSON array of posts with integer ids, one manifest."""
    A, B = p["A"], p["B"]
    posts = [{"userId": 1, "id": i, "title": "bare post %d" % i, "body": lorem(i)} for i in (1, 2, 3)]
    rows = [("http://127.0.0.1:%d/bare/img/one.png" % A, image("sample.png"), "one, relative to the manifest"),
            ("http://127.0.0.1:%d/bare/two.jpg" % B, image("sample.jpg"), "two, on the image host")]
    f.put("a", "bare/posts.json", posts)
    f.put("a", "bare/manifest.json", [{"url": "img/one.png", "description": rows[0][2]},
                                      {"url": rows[1][0], "description": rows[1][2]}])
    f.put("a", "bare/img/one.png", rows[0][1])
    f.put("b", "bare/two.jpg", rows[1][1])

    def edit():
        new = [dict(x) for x in posts]
        new[1]["title"] = "bare post 2, edited at the origin"
        f.put("a", "bare/posts.json", new)
        return Edit("all", ["/bare/manifest.json"], ["/bare/posts.json"], posts=new, changed_ids=[2])

    return Shape("bare", "one bare JSON array, integer ids (the shape that works before issue 23)",
                 [("posts-url", "http://127.0.0.1:%d/bare/posts.json" % A),
                  ("images-url", "http://127.0.0.1:%d/bare/manifest.json" % A)],
                 posts, ["/bare/posts.json"], [1, 3], rows=rows, image_pages=["/bare/manifest.json"], edit=edit)


def jsonfeed(f, p):
    """JSON Feed 1.1, two pages by next_url, URL and tag ids, item images."""
    A = p["A"]
    base = "http://127.0.0.1:%d/feed/" % A
    ids = ["https://example.org/2024/01/a", "https://example.org/2024/01/b?x=1&y=2#frag",
           "tag:example.org,2024:caf\u00e9 au lait", "1001", "https://example.org/2024/02/e"]
    pics = ["sample.png", "sample.jpg", "sample.gif", "sample.webp", "sample.tiff"]
    items = []
    for n, (i, pic) in enumerate(zip(ids, pics)):
        item = {"id": i, "url": i if i.startswith("http") else "https://example.org/%d" % n,
                "title": "JSON Feed item %d" % n, "content_html": "<p>%s</p>" % lorem(n),
                "image": base + "img/" + pic if n != 3 else "img/" + pic,
                "date_published": "2024-01-%02dT10:00:00+01:00" % (n + 1), "tags": ["t%d" % n, "caf\u00e9"],
                "authors": [{"name": "Ann \u00c9crivain"}]}
        items.append(item)
        f.put("a", "feed/img/" + pic, image(pic))
    f.put("a", "feed/img/sample.bmp", image("sample.bmp"))
    head = {"version": "https://jsonfeed.org/version/1.1", "title": "Example", "home_page_url": "https://example.org/",
            "feed_url": base + "feed.json", "language": "en"}

    def pages(items):
        f.put("a", "feed/feed.json", dict(head, next_url=base + "feed-2.json", items=items[:3]))
        f.put("a", "feed/feed-2.json", dict(head, items=items[3:]))
    pages(items)
    rows = [(base + "img/" + pic, image(pic), it["title"]) for it, pic in zip(items, pics)]

    def edit():
        new = [dict(x) for x in items]
        new[4]["title"] = "JSON Feed item 4, edited: a new image too"
        new[4]["image"] = base + "img/sample.bmp"
        pages(new)
        new_rows = rows[:4] + [(base + "img/sample.bmp", image("sample.bmp"), new[4]["title"])]
        return Edit("all", ["/feed/feed.json"], ["/feed/feed-2.json"], posts=new, rows=new_rows,
                    changed_ids=[ids[4]], new_images=["/feed/img/sample.bmp"])

    return Shape("jsonfeed", "JSON Feed 1.1: items and next_url by its version alone, URL/tag ids, images-url = posts-url with the items' image",
                 [("posts-url", base + "feed.json"), ("images-url", base + "feed.json"),
                  ("images-url-field", "/image"), ("images-description-field", "/title")],
                 items, ["/feed/feed.json", "/feed/feed-2.json"], [ids[0], ids[2], ids[3], ids[1]],
                 rows=rows, image_pages=["/feed/feed.json", "/feed/feed-2.json"], edit=edit, same_feed=True)


MASTODON_TOKEN = "mastodon-token-0123456789abcdef"


def mastodon_statuses(n_edit=None):
    out = []
    for n in range(7):
        sid = str(111472916412345690 - n * 7)
        out.append({"id": sid, "created_at": "2024-01-0%dT12:00:00.000Z" % (7 - n), "in_reply_to_id": None,
                    "sensitive": False, "spoiler_text": "", "visibility": "public", "language": "en",
                    "uri": "https://social.example/users/alice/statuses/" + sid,
                    "url": "https://social.example/@alice/" + sid, "replies_count": n, "reblogs_count": 0,
                    "favourites_count": 2 * n,
                    "content": "<p>%s</p>" % ("status %d" % n if n != n_edit else "status %d, edited (Mastodon keeps the id)" % n),
                    "account": {"id": "109302", "username": "alice", "acct": "alice"},
                    "media_attachments": [], "mentions": [], "tags": [], "emojis": []})
    return out


def mastodon(f, p, data_path, header_file):
    """A Mastodon timeline: decimal-string ids, newest first, Link max_id, Bearer token."""
    M = p["M"]
    statuses = mastodon_statuses()
    with open(data_path, "w") as out:
        json.dump(statuses, out)
    path = "/api/v1/timelines/public?limit=3"
    pages = [path, path + "&max_id=" + statuses[2]["id"], path + "&max_id=" + statuses[5]["id"],
             path + "&max_id=" + statuses[6]["id"]]

    def edit():
        new = mastodon_statuses(n_edit=4)
        with open(data_path + ".tmp", "w") as out:
            json.dump(new, out)
        os.rename(data_path + ".tmp", data_path)
        return Edit("posts", [pages[0], pages[2], pages[3]], [pages[1]], posts=new, changed_ids=[new[4]["id"]])

    return Shape("mastodon", "Mastodon timeline: string ids, newest first, Link rel=next with max_id, Bearer token (a scripted origin)",
                 [("posts-url", "http://127.0.0.1:%d%s" % (M, path)), ("fetch-header-file", header_file)],
                 statuses, pages, [statuses[0]["id"], statuses[4]["id"], statuses[6]["id"]], origin="mastodon",
                 edit=edit, credentials="M")


def wordpress(f, p):
    """WordPress REST API: ?page=N, Link rel=next/prev, X-WP-TotalPages, rendered titles."""
    A = p["A"]
    site = "http://127.0.0.1:%d" % A

    def post(i, title=None):
        day = i - 100
        return {"id": i, "date": "2024-03-%02dT09:00:00" % day, "date_gmt": "2024-03-%02dT08:00:00" % day,
                "guid": {"rendered": "%s/?p=%d" % (site, i)}, "modified": "2024-03-%02dT09:00:00" % day,
                "slug": "post-%d" % i, "status": "publish", "type": "post", "link": "%s/post-%d/" % (site, i),
                "title": {"rendered": title or "Hello &#8211; post %d" % i},
                "content": {"rendered": "<p>%s</p>\n" % lorem(i), "protected": False},
                "excerpt": {"rendered": "<p>%s&#8230;</p>\n" % lorem(i)[:20], "protected": False},
                "author": 1, "featured_media": 0, "comment_status": "open", "sticky": False,
                "format": "standard", "meta": [], "categories": [1], "tags": [],
                "_links": {"self": [{"href": "%s/wp-json/wp/v2/posts/%d" % (site, i)}]}}
    posts = [post(i) for i in range(107, 100, -1)]  # newest first, 3 + 3 + 1

    def write(posts):
        for n in range(3):
            f.put("a", "wp/posts-%d.json" % (n + 1), posts[3 * n:3 * n + 3])
    write(posts)
    uris = ["/wp-json/wp/v2/posts", "/wp-json/wp/v2/posts?page=2", "/wp-json/wp/v2/posts?page=3"]

    def edit():
        new = list(posts)
        new[4] = post(103, "Hello &#8211; post 103, edited")
        write(new)
        return Edit("posts", [uris[0]], [uris[1]], posts=new, changed_ids=[103])

    return Shape("wordpress", "WordPress REST API: ?page=N with Link rel=next (and prev), X-WP-TotalPages, title.rendered",
                 [("posts-url", site + uris[0])], posts, uris, [107, 101, 103], edit=edit)


def github(f, p):
    """GitHub issues: large integer ids, Link rel=next/last/first/prev."""
    A = p["A"]
    api = "http://127.0.0.1:%d/repos/octo/hello/issues" % A

    def issue(n, body=None):
        iid = 2100000000 + n * 1117
        return {"url": "https://api.github.example/repos/octo/hello/issues/%d" % n, "id": iid,
                "node_id": "I_kwDO%08d" % n, "number": n, "title": "Issue %d" % n,
                "user": {"login": "octocat", "id": 583231, "type": "User", "site_admin": False},
                "labels": [{"id": 208045946, "name": "bug", "color": "f29513", "default": True}] if n % 2 else [],
                "state": "open", "locked": False, "assignee": None, "comments": n, "created_at": "2024-02-%02dT00:00:00Z" % n,
                "closed_at": None, "author_association": "OWNER", "body": body or "Body of issue %d: %s" % (n, lorem(n)),
                "reactions": {"total_count": 0, "+1": 0, "-1": 0}}
    issues = [issue(n) for n in range(8, 0, -1)]  # 3 + 3 + 2

    def write(issues):
        for k in range(3):
            f.put("a", "github/issues-%d.json" % (k + 1), issues[3 * k:3 * k + 3])
    write(issues)
    uris = ["/repos/octo/hello/issues?per_page=3", "/repos/octo/hello/issues?per_page=3&page=2",
            "/repos/octo/hello/issues?per_page=3&page=3"]

    def edit():
        new = list(issues)
        new[3] = issue(5, "Body of issue 5, edited: reproduction steps added")
        write(new)
        return Edit("posts", [uris[0], uris[2]], [uris[1]], posts=new, changed_ids=[new[3]["id"]])

    return Shape("github", "GitHub issues: integer ids past 2^31, Link rel=next/last (first/prev)",
                 [("posts-url", api + "?per_page=3")], issues, uris, [issues[0]["id"], issues[-1]["id"]], edit=edit)


def jsonapi(f, p):
    """JSON:API: {"data": [...], "links": {"next": relative}}, string ids."""
    A = p["A"]

    def article(i, title=None):
        return {"type": "articles", "id": i, "attributes": {"title": title or "JSON:API article " + i, "body": lorem(len(i))},
                "relationships": {"author": {"data": {"type": "people", "id": "9"}}},
                "links": {"self": "http://127.0.0.1:%d/jsonapi/articles/%s" % (A, i)}}
    data = [article("1"), article("2"), article("3"), article("5f0e3e4c-8a1b-4c2d-9e3f-0a1b2c3d4e5f"), article("10")]

    def write(data):
        f.put("a", "jsonapi/articles-1.json", {"jsonapi": {"version": "1.1"}, "meta": {"total": 5}, "data": data[:3],
                                               "links": {"self": "articles", "next": "articles?page%5Bnumber%5D=2"}})
        f.put("a", "jsonapi/articles-2.json", {"jsonapi": {"version": "1.1"}, "meta": {"total": 5}, "data": data[3:],
                                               "links": {"self": "articles?page%5Bnumber%5D=2",
                                                         "prev": "articles", "next": None}})
    write(data)
    uris = ["/jsonapi/articles", "/jsonapi/articles?page%5Bnumber%5D=2"]

    def edit():
        new = list(data)
        new[4] = article("10", "JSON:API article 10, edited")
        write(new)
        return Edit("posts", [uris[0]], [uris[1]], posts=new, changed_ids=["10"])

    return Shape("jsonapi", "JSON:API: posts-items=/data, posts-next=/links/next (relative), string ids (numeric-looking and UUID)",
                 [("posts-url", "http://127.0.0.1:%d/jsonapi/articles" % A), ("posts-items", "/data"),
                  ("posts-next", "/links/next")],
                 data, uris, ["1", "5f0e3e4c-8a1b-4c2d-9e3f-0a1b2c3d4e5f", "10"], edit=edit)


def algolia(f, p):
    """Algolia: {"hits": [...]} with objectID string ids; every hit also has
    the same integer `id`, so a daemon ignoring posts-id would see repeats."""
    A = p["A"]

    def hit(oid, n, title=None):
        return {"title": title or "Algolia hit %d" % n, "url": "https://example.org/hits/%d" % n, "points": 10 * n,
                "id": 1, "objectID": oid,
                "_highlightResult": {"title": {"value": "Algolia <em>hit</em> %d" % n, "matchLevel": "full",
                                               "matchedWords": ["hit"]}}}
    hits = [hit("4815162342", 0), hit("post-\u03b1/1 b", 1), hit("c3", 2), hit("d4", 3), hit("e5", 4)]

    def write(hits):
        for k in range(2):
            f.put("a", "algolia/hits-%d.json" % k, {"hits": hits[3 * k:3 * k + 3], "nbHits": 5, "page": k, "nbPages": 2,
                                                   "hitsPerPage": 3, "exhaustiveNbHits": True, "query": "",
                                                   "params": "query=&hitsPerPage=3&page=%d" % k, "processingTimeMS": 1})
    write(hits)
    uris = ["/1/indexes/posts?query=&hitsPerPage=3", "/1/indexes/posts?query=&hitsPerPage=3&page=1"]

    def edit():
        new = list(hits)
        new[3] = hit("d4", 3, "Algolia hit 3, edited")
        write(new)
        return Edit("posts", [uris[0]], [uris[1]], posts=new, changed_ids=["d4"])

    return Shape("algolia", "Algolia: posts-items=/hits, posts-id=/objectID (string ids), next by a relative Link",
                 [("posts-url", "http://127.0.0.1:%d%s" % (A, uris[0])), ("posts-items", "/hits"), ("posts-id", "/objectID")],
                 hits, uris, ["4815162342", "post-\u03b1/1 b", "d4"], id_key="objectID", edit=edit)


def mixed(f, p):
    """Integer and string ids in one feed, 5 beside "5" and "05", two pages by
    Link: the kinds must be told apart (docs/protocol.md, "Post ids"). Page 2
    repeats the integer 5 (skipped, counted invalid: the first is kept); the
    edit changes "05" and drops "a b/c?d"."""
    A = p["A"]
    page1 = [{"id": 5, "title": "the integer 5"}, {"id": "5", "title": "the string 5"}, {"id": -7, "title": "minus seven"}]
    repeat = {"id": 5, "title": "the integer 5 again, on page 2: skipped"}
    page2 = [{"id": "05", "title": "the string 05"}, {"id": "a b/c?d", "title": "a string with a space, a slash, a query"},
             repeat, {"id": 9007199254740993, "title": "2^53 + 1, past a double's integers"}]
    f.put("a", "mixed/page1.json", page1)
    f.put("a", "mixed/page2.json", page2)
    kept = [x for x in page2 if x is not repeat]

    def edit():
        new2 = [dict(page2[0], title="the string 05, edited")] + page2[2:]
        f.put("a", "mixed/page2.json", new2)
        return Edit("posts", ["/mixed/page1.json"], ["/mixed/page2.json"], posts=page1 + [x for x in new2 if x is not repeat],
                    changed_ids=["05"], removed_ids=["a b/c?d"])

    return Shape("mixed", "integer and string ids in one feed (5, \"5\", \"05\", -7, 2^53+1), a repeated id, pages by Link",
                 [("posts-url", "http://127.0.0.1:%d/mixed/page1.json" % A)], page1 + kept,
                 ["/mixed/page1.json", "/mixed/page2.json"], [5, "5", -7, "05", "a b/c?d", 9007199254740993], edit=edit,
                 invalid=1)


JP_TOKEN = "jsonplaceholder-token-42"


def jsonplaceholder(f, p):
    """jsonplaceholder: /posts (bare array) and /photos paged by json-server's
    Link, the thumbnails on the image host B; `url` names a dead host."""
    A, B, DEAD = p["A"], p["B"], p["DEAD"]
    posts = [{"userId": 1, "id": i, "title": "jsonplaceholder post %d" % i, "body": lorem(i)} for i in range(1, 5)]
    f.put("a", "jsonph/posts.json", posts)
    colours = ["92c952", "771796", "24f355", "d32776", "f66b97", "56a8c2", "b0f7cc"]
    pics = ["sample.png", "sample.jpg", "sample.gif", "sample.webp", "sample.bmp", "sample.tiff", "sample.avif"]
    for c, pic in zip(colours, pics):
        f.put("b", "150/" + c, image(pic))

    def photo(i, colour):
        return {"albumId": 1, "id": i, "title": "photo %d of album 1" % i,
                "url": "http://127.0.0.1:%d/600/%s" % (DEAD, colour),
                "thumbnailUrl": "http://127.0.0.1:%d/150/%s" % (B, colour)}
    photos = [photo(i + 1, colours[i]) for i in range(6)]

    def write(photos):
        f.put("a", "jsonph/photos-1.json", photos[:3])
        f.put("a", "jsonph/photos-2.json", photos[3:])
    write(photos)
    rows = [(ph["thumbnailUrl"], image(pic), ph["title"]) for ph, pic in zip(photos, pics)]
    uris = ["/jsonph/photos?_page=1&_limit=3", "/jsonph/photos?_page=2&_limit=3"]

    def edit():
        new = list(photos)
        new[4] = photo(5, colours[6])
        write(new)
        new_rows = rows[:4] + [(new[4]["thumbnailUrl"], image(pics[6]), new[4]["title"])] + rows[5:]
        return Edit("images", [uris[0]], [uris[1]], rows=new_rows, new_images=["/150/" + colours[6]])

    return Shape("jsonplaceholder", "jsonplaceholder /posts and /photos (json-server Link pages): images-url-field=/thumbnailUrl on another host",
                 [("posts-url", "http://127.0.0.1:%d/jsonph/posts" % A),
                  ("images-url", "http://127.0.0.1:%d%s" % (A, uris[0])),
                  ("images-url-field", "/thumbnailUrl"), ("images-description-field", "/title"),
                  ("fetch-header", "Authorization: Bearer " + JP_TOKEN)],
                 posts, ["/jsonph/posts"], [1, 4], rows=rows, image_pages=uris, edit=edit,
                 credentials="A", foreign=["B"])


def good_shapes(f, p, tmp):
    header_file = os.path.join(tmp, "mastodon-headers")
    with open(header_file, "w", newline="") as out:  # a comment, a blank line, CRLF endings: all allowed
        out.write("# the token of the Mastodon app\r\n\r\nAuthorization: Bearer %s\r\n" % MASTODON_TOKEN)
    os.chmod(header_file, 0o600)
    return [bare(f, p), jsonfeed(f, p), mastodon(f, p, os.path.join(tmp, "mastodon.json"), header_file),
            wordpress(f, p), github(f, p), jsonapi(f, p), algolia(f, p), jsonplaceholder(f, p), mixed(f, p)]
