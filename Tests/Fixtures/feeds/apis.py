"""The feeds of issue 32 ("Every feed the web serves") as their APIs shape
them, from each API's public documentation: what the scripted origin
(api-origin.py, host P) lists, the static pages nginx serves (host A:
GitLab, Discourse, an RSS blog, a podcast, an Atom feed, an RSS 1.0 feed,
a sliding RSS window), the settings of each (the recipes of docs/operations.md, "Feeds in
the wild") and what the daemon should make of them (shapes.Shape).

Sizes: the full run lists 35 posts 10 to a page (4 pages); FEED_SHAPES_QUICK=1 11 posts
5 to a page (3 pages; Lemmy's empty 4th page, which ends its walk, too).
"""
import datetime
import email.utils
import json
import os
import urllib.parse
from xml.sax.saxutils import escape

from shapes import Edit, Shape, image, lorem

ACCEPT = ("application/feed+json, application/json;q=0.9, application/atom+xml;q=0.8, "
          "application/rss+xml;q=0.8, application/xml;q=0.7, */*;q=0.1")

SLACK_TOKEN = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy"
STRIPE_KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
YOUTUBE_KEY = "AIzaSyD-cached-test-key-0123456789"
X_TOKEN = "AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAA0%2BuSeid%2BULvsea4JtiGRiSDSJSI%3DEUifiRBkKG5E2XzMDjRfl76ZC9Ub0wnz4XsNiRVBChTYbJcE3F"
CONTENTFUL_TOKEN = "0b7f6x59a0-cached-delivery-token"

# The paging settings a "has more" run leaves out.
PAGING_KEYS = ("posts-paging", "posts-cursor", "posts-cursor-param", "posts-cursor-last", "posts-has-more",
               "posts-offset-param", "posts-limit-param", "posts-page-size", "posts-total", "posts-page-param",
               "posts-page-start", "posts-total-pages", "posts-next")

def sizes(quick):
    """(posts, page size) of each API feed."""
    return (11, 5) if quick else (35, 10)


T0 = datetime.datetime(2024, 3, 1, 10, 0, 0, tzinfo=datetime.timezone.utc)


def iso(n, fraction=""):
    """The n-th post's time, newest first (n = 0 the newest): an hour apart."""
    return (T0 - datetime.timedelta(hours=n)).strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def unix(n):
    return int((T0 - datetime.timedelta(hours=n)).timestamp())


def with_params(uri, params):
    """`uri` with each of `params` set in its query (kept in place when there, else appended), values escaped."""
    split = urllib.parse.urlsplit(uri)
    pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
    for k, v in params:
        for n, (key, _) in enumerate(pairs):
            if key == k:
                pairs[n] = (k, str(v))
                break
        else:
            pairs.append((k, str(v)))
    query = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote, safe="")
    return urllib.parse.urlunsplit(("", "", split.path, query, ""))


def chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


class Ctx:
    def __init__(self, files, ports, data_dir, quick):
        self.f, self.p, self.data, self.quick = files, ports, data_dir, quick
        self.n, self.size = sizes(quick)

    def state(self, name, items, **extra):
        path = os.path.join(self.data, name + ".json")
        with open(path + ".tmp", "w") as out:
            json.dump(dict(extra, items=items), out, ensure_ascii=False)
        os.rename(path + ".tmp", path)

    def api(self, uri):
        return "http://127.0.0.1:%d%s" % (self.p["P"], uri)


def unset(settings):
    return [(k, v) for k, v in settings if k not in PAGING_KEYS]


def api_shape(c, name, title, uri, settings, wrapped, pages, id_key, ids_from, edit_at, edit_fn, signs, credentials=None,
              item=None, state_extra=None, unwrap=lambda x: x):
    """A shape on the scripted origin: `wrapped` as the API lists them,
    stored as unwrap(element); `edit_fn(element)` changes the element at
    `edit_at` (on page 2)."""
    state_extra = state_extra or {}
    c.state(name, wrapped, **state_extra)
    posts = [unwrap(w) for w in wrapped]
    ids = [ids_from(p) for p in posts]

    def edit():
        new = list(wrapped)
        new[edit_at] = edit_fn(json.loads(json.dumps(wrapped[edit_at])))
        c.state(name, new, **state_extra)
        changed = [pages[edit_at // c.size]]
        return Edit("posts", [u for u in pages if u not in changed], changed, posts=[unwrap(w) for w in new],
                    changed_ids=[ids[edit_at]])

    s = Shape(name, title, [("posts-url", c.api(uri))] + settings, posts, pages, [ids[0], ids[edit_at], ids[-1]],
              id_key=id_key, origin="api", edit=edit, credentials="P" if credentials else None, norm_query=True,
              signs=signs, accept=ACCEPT, first_page=posts[:c.size])
    s.unset = unset(s.settings) if signs else None
    s.id_of = lambda item: pointer_get(item, id_key)
    return s


def pointer_get(doc, ptr):
    if not ptr.startswith("/"):
        return doc[ptr]
    for t in ptr.split("/")[1:]:
        doc = doc[t.replace("~1", "/").replace("~0", "~")]
    return doc


# --- cursor and token APIs ------------------------------------------------------

def b36(n):
    digits, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def reddit(c):
    """Reddit listing: {"kind":"Listing","data":{"after":"t3_...","children":[{"kind":"t3","data":{...}}]}}."""
    def child(n):
        pid = b36(2400000000 - n * 37)
        return {"kind": "t3", "data": {
            "approved_at_utc": None, "subreddit": "cached", "selftext": lorem(n), "author_fullname": "t2_6l4z3",
            "saved": False, "title": "Reddit post %d: caf\u00e9 & <tags>" % n, "subreddit_name_prefixed": "r/cached",
            "name": "t3_" + pid, "score": 100 - n, "thumbnail": "self", "created": float(unix(n)), "domain": "self.cached",
            "id": pid, "author": "u_cached", "num_comments": n, "permalink": "/r/cached/comments/%s/post_%d/" % (pid, n),
            "url": "https://www.reddit.com/r/cached/comments/%s/post_%d/" % (pid, n), "created_utc": float(unix(n)),
            "over_18": False}}
    wrapped = [child(n) for n in range(c.n)]
    first = "/r/cached/new.json?limit=%d&raw_json=1" % c.size
    pages = [first] + [with_params(first, [("after", ch[-1]["data"]["name"])]) for ch in chunks(wrapped, c.size)[:-1]]
    settings = [("posts-items", "/data/children"), ("posts-item", "/data"), ("posts-paging", "cursor"),
                ("posts-cursor", "/data/after"), ("posts-cursor-param", "after")]

    def edit(ch):
        ch["data"]["title"] += ", edited"
        ch["data"]["edited"] = float(unix(0) + 60)
        return ch
    return api_shape(c, "reddit", "Reddit listing: /data/children, each post under /data, cursor /data/after sent as ?after= (limit kept)",
                     first, settings, wrapped, pages, "/id", lambda p: p["id"], c.size + 1, edit, ["/data/after"],
                     unwrap=lambda w: w["data"])


def bluesky(c):
    """Bluesky app.bsky.feed.getAuthorFeed: {"feed":[{"post":{...}}],"cursor":"..."} (no cursor on the last page)."""
    did = "did:plc:z72i7hdynmk6r22z27h6tvur"

    def item(n):
        rkey = "3kmq" + b36(1000000 + n * 7919).rjust(9, "2")
        post = {"uri": "at://%s/app.bsky.feed.post/%s" % (did, rkey), "cid": "bafyreib%055d" % n,
                "author": {"did": did, "handle": "alice.bsky.social", "displayName": "Alice \u2600",
                           "avatar": "https://cdn.bsky.app/img/avatar/plain/%s/bafkreiabc@jpeg" % did, "labels": []},
                "record": {"$type": "app.bsky.feed.post", "createdAt": iso(n, ".000"), "langs": ["en"],
                           "text": "skeet %d: %s" % (n, lorem(n))},
                "replyCount": n % 3, "repostCount": 0, "likeCount": 2 * n, "quoteCount": 0,
                "indexedAt": iso(n, ".%03d" % (n % 1000)), "labels": []}
        out = {"post": post}
        if n % 5 == 2:
            out["reason"] = {"$type": "app.bsky.feed.defs#reasonRepost",
                             "by": {"did": "did:plc:ewvi7nxzyoun6zhxrhs64oiz", "handle": "bob.bsky.social"},
                             "indexedAt": iso(n, ".500")}
        return out
    wrapped = [item(n) for n in range(c.n)]
    first = "/xrpc/app.bsky.feed.getAuthorFeed?actor=alice.bsky.social&limit=%d" % c.size
    pages = [first] + [with_params(first, [("cursor", ch[-1]["post"]["indexedAt"])]) for ch in chunks(wrapped, c.size)[:-1]]
    settings = [("posts-items", "/feed"), ("posts-item", "/post"), ("posts-id", "/uri"), ("posts-paging", "cursor"),
                ("posts-cursor", "/cursor")]

    def edit(it):
        it["post"]["likeCount"] += 100
        return it
    return api_shape(c, "bluesky", "Bluesky getAuthorFeed: /feed, the post under /post, id /uri (at:// URIs), cursor /cursor (a timestamp, escaped)",
                     first, settings, wrapped, pages, "/uri", lambda p: p["uri"], c.size + 2, edit, ["/cursor"],
                     unwrap=lambda w: w["post"])


def slack_cursor(ts):
    import base64
    # Standard base64 (Slack's cursors are), its bytes chosen so that every cursor has "+", "/" and "=":
    # sent unescaped, "+" arrives as a space and the origin answers invalid_cursor.
    return base64.b64encode(("next_ts:%s" % ts).encode() + b"\x0f\xbf\xff\xbe").decode()


def slack(c):
    """Slack conversations.history: {"ok":true,"messages":[...],"has_more":true,"response_metadata":{"next_cursor":"..."}}."""
    def msg(n):
        m = {"type": "message", "user": "U0%08d" % (n % 4), "text": "message %d <https://example.org|a link> :wave:" % n,
             "ts": "%d.%06d" % (unix(n), 100 + n)}
        if n % 4 == 1:
            m.update({"thread_ts": m["ts"], "reply_count": 2, "reply_users_count": 1, "latest_reply": "%d.000900" % unix(n)})
        return m
    wrapped = [msg(n) for n in range(c.n)]
    first = "/api/conversations.history?channel=C0123CACHED&limit=%d" % c.size
    pages = [first] + [with_params(first, [("cursor", slack_cursor(wrapped[k]["ts"]))])
                       for k in range(c.size, c.n, c.size)]
    settings = [("posts-items", "/messages"), ("posts-id", "/ts"), ("posts-paging", "cursor"),
                ("posts-cursor", "/response_metadata/next_cursor"), ("posts-has-more", "/has_more"),
                ("fetch-header", "Authorization: Bearer " + SLACK_TOKEN)]

    def edit(m):
        m["text"] += " (edited)"
        m["edited"] = {"user": m["user"], "ts": "%d.000000" % unix(0)}
        return m
    return api_shape(c, "slack", "Slack conversations.history: /messages, id /ts (decimal strings), cursor /response_metadata/next_cursor (base64, escaped), has_more; Bearer token",
                     first, settings, wrapped, pages, "/ts", lambda p: p["ts"], c.size + 1, edit,
                     ["/has_more", "/response_metadata/next_cursor"], credentials=True, state_extra={"token": SLACK_TOKEN})


def stripe(c):
    """Stripe list: {"object":"list","url":"/v1/customers","has_more":true,"data":[...]}; ?starting_after=<last id>."""
    def cust(n):
        cid = "cus_P%s" % b36(60000000000 + n * 999331)[::-1].upper()
        return {"id": cid, "object": "customer", "address": None, "balance": 0, "created": unix(n), "currency": "eur",
                "default_source": None, "delinquent": False, "description": None, "discount": None,
                "email": "customer%d@example.com" % n, "invoice_prefix": "A%04X" % n,
                "invoice_settings": {"custom_fields": None, "default_payment_method": None, "footer": None,
                                     "rendering_options": None},
                "livemode": False, "metadata": {"n": str(n)}, "name": "Customer %d" % n, "phone": None,
                "preferred_locales": [], "shipping": None, "tax_exempt": "none", "test_clock": None}
    wrapped = [cust(n) for n in range(c.n)]
    first = "/v1/customers?limit=%d" % c.size
    pages = [first] + [with_params(first, [("starting_after", ch[-1]["id"])]) for ch in chunks(wrapped, c.size)[:-1]]
    settings = [("posts-items", "/data"), ("posts-paging", "cursor"), ("posts-cursor-last", "/id"),
                ("posts-cursor-param", "starting_after"), ("posts-has-more", "/has_more"),
                ("fetch-header", "Authorization: Bearer " + STRIPE_KEY)]

    def edit(x):
        x["email"] = "changed@example.com"
        return x
    return api_shape(c, "stripe", "Stripe list: /data, has_more, ?starting_after=<the last item's /id>; Bearer secret key",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 3, edit, ["/has_more"],
                     credentials=True, state_extra={"token": STRIPE_KEY})


def yt_token(offset):
    import base64
    return base64.b64encode(b"\x08" + bytes([offset]) + b"\x10\x00").decode().rstrip("=")


def youtube(c):
    """YouTube Data API v3 playlistItems: {"nextPageToken":"CAoQAA","items":[...]}, ?pageToken=, ?key= kept."""
    def item(n):
        vid = ("dQw4w9WgXc" + b36(n * 131)).ljust(11, "Q")[:11]
        return {"kind": "youtube#playlistItem", "etag": "Xy%025d" % n,
                "id": "UExCQ0YyREFDNkZGQjU3NERFLjU2QjQ0RjZEMTA1NTdDQzY%04d" % n,
                "snippet": {"publishedAt": iso(n), "channelId": "UC_x5XG1OV2P6uZZ5FSM9Ttw",
                            "title": "Video %d \u2013 cached" % n, "description": lorem(n),
                            "thumbnails": {"default": {"url": "https://i.ytimg.com/vi/%s/default.jpg" % vid, "width": 120, "height": 90},
                                           "high": {"url": "https://i.ytimg.com/vi/%s/hqdefault.jpg" % vid, "width": 480, "height": 360}},
                            "channelTitle": "Google for Developers", "playlistId": "PLBCF2DAC6FFB574DE", "position": n,
                            "resourceId": {"kind": "youtube#video", "videoId": vid},
                            "videoOwnerChannelTitle": "Google for Developers", "videoOwnerChannelId": "UC_x5XG1OV2P6uZZ5FSM9Ttw"}}
    wrapped = [item(n) for n in range(c.n)]
    first = "/youtube/v3/playlistItems?part=snippet&playlistId=PLBCF2DAC6FFB574DE&maxResults=%d&key=%s" % (c.size, YOUTUBE_KEY)
    pages = [first] + [with_params(first, [("pageToken", yt_token(k))]) for k in range(c.size, c.n, c.size)]
    settings = [("posts-items", "/items"), ("posts-paging", "cursor"), ("posts-cursor", "/nextPageToken"),
                ("posts-cursor-param", "pageToken")]

    def edit(x):
        x["snippet"]["title"] += " (re-titled)"
        return x
    return api_shape(c, "youtube", "YouTube Data API v3: /items, /nextPageToken sent as ?pageToken=, the API key in ?key= kept on every page",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, ["/nextPageToken"],
                     state_extra={"token": YOUTUBE_KEY})


def x_token(offset):
    import hashlib
    return hashlib.sha1(b"x-%d" % offset).hexdigest()[:13] + "dibdnow9c7btw3w29grvxfcgvpb9n9co"


def xv2(c):
    """X API v2 user tweets: {"data":[...],"meta":{"result_count":..,"next_token":"..."}}."""
    def tweet(n):
        tid = str(1763000000000000000 - n * 4194304001)
        return {"edit_history_tweet_ids": [tid], "id": tid, "text": "tweet %d https://t.co/abc%d" % (n, n),
                "created_at": iso(n, ".000"), "author_id": "2244994945"}
    wrapped = [tweet(n) for n in range(c.n)]
    first = "/2/users/2244994945/tweets?max_results=%d&tweet.fields=created_at,author_id" % c.size  # 5 to 100
    pages = [first] + [with_params(first, [("pagination_token", x_token(k))]) for k in range(c.size, c.n, c.size)]
    settings = [("posts-items", "/data"), ("posts-paging", "cursor"), ("posts-cursor", "/meta/next_token"),
                ("posts-cursor-param", "pagination_token"), ("fetch-header", "Authorization: Bearer " + X_TOKEN)]

    def edit(t):
        t["text"] += " (edited: a new version)"
        return t
    return api_shape(c, "x", "X API v2: /data, id a decimal string, /meta/next_token sent as ?pagination_token=; Bearer token",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, ["/meta/next_token"],
                     credentials=True, state_extra={"token": X_TOKEN})


# --- page-number and offset APIs ------------------------------------------------------

def lemmy(c):
    """Lemmy 0.19 /api/v3/post/list: {"posts":[{"post":{...},"creator":{...},"counts":{...}}],"next_page":"..."}; ?page=N from 1."""
    def view(n):
        pid = 9000 - n
        return {"post": {"id": pid, "name": "Lemmy post %d" % n, "url": "https://example.org/l/%d" % n, "body": lorem(n),
                         "creator_id": 77, "community_id": 12, "removed": False, "locked": False,
                         "published": iso(n, ".%06d" % (n * 17)), "deleted": False, "nsfw": False,
                         "thumbnail_url": "https://lemmy.example/pictrs/image/%d.jpeg" % pid,
                         "ap_id": "https://lemmy.example/post/%d" % pid, "local": True, "language_id": 37,
                         "featured_community": False, "featured_local": False},
                "creator": {"id": 77, "name": "alice", "banned": False, "published": "2023-06-01T00:00:00.000000Z",
                            "actor_id": "https://lemmy.example/u/alice", "local": True, "deleted": False,
                            "bot_account": False, "instance_id": 1},
                "community": {"id": 12, "name": "asklemmy", "title": "Ask Lemmy", "removed": False,
                              "actor_id": "https://lemmy.example/c/asklemmy", "local": True, "hidden": False,
                              "instance_id": 1, "visibility": "Public"},
                "creator_banned_from_community": False, "banned_from_community": False, "creator_is_moderator": False,
                "creator_is_admin": False,
                "counts": {"post_id": pid, "comments": n, "score": 10 + n, "upvotes": 10 + n, "downvotes": 0,
                           "published": iso(n, ".000000"), "newest_comment_time": iso(n, ".000000")},
                "subscribed": "NotSubscribed", "saved": False, "read": False, "hidden": False, "creator_blocked": False,
                "my_vote": None, "unread_comments": 0}
    wrapped = [view(n) for n in range(c.n)]
    first = "/api/v3/post/list?community_name=asklemmy&sort=New&limit=%d" % c.size
    count = len(chunks(wrapped, c.size))
    pages = [with_params(first, [("page", k)]) for k in range(1, count + 2)]  # and the empty page after the last
    settings = [("posts-items", "/posts"), ("posts-item", "/post"), ("posts-paging", "page")]

    def edit(v):
        v["post"]["name"] += ", edited"
        v["post"]["updated"] = iso(0, ".000000")
        return v
    return api_shape(c, "lemmy", "Lemmy 0.19: /posts, the post under /post (integer ids), ?page=N from 1 until an empty page",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, ["/next_page"],
                     unwrap=lambda w: w["post"])


def hn(c):
    """HN Search (Algolia) /api/v1/search_by_date: {"hits":[...],"page":0,"nbPages":N,...}; ?page=N from 0."""
    def hit(n):
        oid = str(39000000 - n * 13)
        return {"_highlightResult": {"author": {"matchLevel": "none", "matchedWords": [], "value": "pg"},
                                     "title": {"matchLevel": "none", "matchedWords": [], "value": "Story %d" % n}},
                "_tags": ["story", "author_pg", "story_" + oid], "author": "pg", "children": [int(oid) + 1],
                "created_at": iso(n, ".000"), "created_at_i": unix(n), "num_comments": n, "objectID": oid,
                "points": 100 + n, "story_id": int(oid), "title": "Story %d" % n, "updated_at": iso(n, ".000"),
                "url": "https://example.org/story/%d" % n}
    wrapped = [hit(n) for n in range(c.n)]
    first = "/api/v1/search_by_date?tags=story&hitsPerPage=%d" % c.size
    count = len(chunks(wrapped, c.size))
    pages = [with_params(first, [("page", k)]) for k in range(count)]
    settings = [("posts-items", "/hits"), ("posts-id", "/objectID"), ("posts-paging", "page"), ("posts-page-start", "0"),
                ("posts-total-pages", "/nbPages")]

    def edit(h):
        h["points"] += 1000
        return h
    return api_shape(c, "hn-algolia", "HN Search (Algolia): /hits, id /objectID, ?page=N from 0 up to /nbPages (no request past it)",
                     first, settings, wrapped, pages, "objectID", lambda p: p["objectID"], c.size + 1, edit, [])


def contentful(c):
    """Contentful CDA entries: {"sys":{"type":"Array"},"total":N,"skip":0,"limit":L,"items":[{"sys":{"id":...},"fields":{...}}]}."""
    def entry(n):
        return {"metadata": {"tags": []},
                "sys": {"space": {"sys": {"type": "Link", "linkType": "Space", "id": "cachedspace"}},
                        "id": ("5KsDBWseXY6QegucYAoacS" if n == 0 else "4B%020d" % (n * 7919)), "type": "Entry",
                        "createdAt": iso(n, ".123"), "updatedAt": iso(n, ".456"),
                        "environment": {"sys": {"id": "master", "type": "Link", "linkType": "Environment"}},
                        "revision": 1, "contentType": {"sys": {"type": "Link", "linkType": "ContentType", "id": "blogPost"}},
                        "locale": "en-US"},
                "fields": {"title": "Entry %d" % n, "slug": "entry-%d" % n, "body": lorem(n),
                           "heroImage": {"sys": {"type": "Link", "linkType": "Asset", "id": "asset%d" % n}}}}
    wrapped = [entry(n) for n in range(c.n)]
    first = "/spaces/cachedspace/environments/master/entries?access_token=%s&content_type=blogPost" % CONTENTFUL_TOKEN
    pages = [with_params(first, [("skip", k), ("limit", c.size)]) for k in range(0, c.n, c.size)]
    settings = [("posts-items", "/items"), ("posts-id", "/sys/id"), ("posts-paging", "offset"), ("posts-offset-param", "skip"),
                ("posts-limit-param", "limit"), ("posts-page-size", str(c.size)), ("posts-total", "/total")]

    def edit(e):
        e["sys"]["revision"] = 2
        e["fields"]["title"] += ", revised"
        return e
    return api_shape(c, "contentful", "Contentful CDA: /items, id /sys/id, offset ?skip=&limit= (posts-page-size) up to /total; access_token kept",
                     first, settings, wrapped, pages, "/sys/id", lambda p: p["sys"]["id"], c.size + 1, edit, [],
                     state_extra={"token": CONTENTFUL_TOKEN})


def jsonserver(c):
    """json-server (jsonplaceholder) /posts?_start=N&_limit=M: a bare array, X-Total-Count; a short page ends it."""
    wrapped = [{"userId": 1 + n // 10, "id": n + 1, "title": "json-server post %d" % (n + 1), "body": lorem(n)}
               for n in range(c.n)]
    first = "/posts?_start=0&_limit=%d" % c.size
    pages = [with_params(first, [("_start", k)]) for k in range(0, c.n, c.size)]
    if c.n % c.size == 0:
        pages.append(with_params(first, [("_start", c.n)]))
    settings = [("posts-paging", "offset"), ("posts-offset-param", "_start"), ("posts-limit-param", "_limit")]

    def edit(x):
        x["title"] += ", edited"
        return x
    return api_shape(c, "jsonplaceholder-offset", "json-server (jsonplaceholder) ?_start=&_limit=: a bare array, the URL's _limit kept, a short page ends it",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, [])


def wordpress_pages(c):
    """WordPress REST by page number (?page=N, per_page), ended by the X-WP-TotalPages header: WordPress
    answers 400 rest_post_invalid_page_number past its last page, so a walk to an empty page fails."""
    wrapped = [{"id": 500 - n, "date": iso(n, ""), "date_gmt": iso(n, ""), "slug": "post-%d" % n, "status": "publish",
                "type": "post", "link": "https://blog.example/post-%d/" % n,
                "title": {"rendered": "Numbered post %d &#8211; WordPress" % n},
                "content": {"rendered": "<p>%s</p>\n" % lorem(n), "protected": False},
                "excerpt": {"rendered": "<p>%s&#8230;</p>\n" % lorem(n)[:20], "protected": False},
                "author": 1, "featured_media": 0, "sticky": False, "format": "standard", "categories": [1], "tags": []}
               for n in range(c.n)]
    first = "/blog/wp-json/wp/v2/posts?per_page=%d" % c.size
    count = len(chunks(wrapped, c.size))
    pages = [with_params(first, [("page", k)]) for k in range(1, count + 1)]  # none past the last: it answers 400
    settings = [("posts-paging", "page"), ("posts-total-pages", "header:X-WP-TotalPages")]

    def edit(x):
        x["title"]["rendered"] += ", edited"
        return x
    return api_shape(c, "wordpress-pages", "WordPress REST by ?page=N up to the X-WP-TotalPages header (400 past the last page)",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, [])


def confluence(c):
    """Confluence REST v1 /wiki/rest/api/content: {"results":[...],"start":0,"limit":L,"size":n,"_links":{"next":...}}."""
    def page(n):
        pid = str(65601 + n * 3)
        return {"id": pid, "type": "page", "status": "current", "title": "Runbook %d" % n,
                "macroRenderedOutput": {}, "extensions": {"position": n},
                "_expandable": {"container": "/rest/api/space/DOC", "space": "/rest/api/space/DOC",
                                "version": "", "history": "/rest/api/content/%s/history" % pid},
                "_links": {"webui": "/spaces/DOC/pages/%s/Runbook+%d" % (pid, n), "tinyui": "/x/%s" % pid,
                           "self": "https://cached.atlassian.example/wiki/rest/api/content/%s" % pid}}
    wrapped = [page(n) for n in range(c.n)]
    first = "/wiki/rest/api/content?spaceKey=DOC&type=page&limit=%d" % c.size
    pages = [with_params(first, [("start", k)]) for k in range(0, c.n, c.size)]
    if c.n % c.size == 0:
        pages.append(with_params(first, [("start", c.n)]))
    # No posts-page-size: the URL's limit is kept.
    settings = [("posts-items", "/results"), ("posts-paging", "offset"), ("posts-offset-param", "start"),
                ("posts-limit-param", "limit")]

    def edit(x):
        x["title"] += ", edited"
        return x
    return api_shape(c, "confluence", "Confluence REST v1: /results, string ids, offset ?start= (the URL's limit kept) until a short page (its _links.next is relative to the wrong base)",
                     first, settings, wrapped, pages, "id", lambda p: p["id"], c.size + 1, edit, ["/_links/next"])


# --- link-paged static APIs (nginx) -----------------------------------------------------

def gitlab(c):
    """GitLab REST issues: a bare array; Link (prev/next/first/last), X-Next-Page, X-Total-Pages."""
    A = c.p["A"]

    def issue(n, title=None):
        iid = c.n - n
        return {"id": 140000000 + iid * 101, "iid": iid, "project_id": 42, "title": title or "GitLab issue %d" % iid,
                "description": lorem(n), "state": "opened", "created_at": iso(n, ".000"), "updated_at": iso(n, ".000"),
                "closed_at": None, "closed_by": None, "labels": ["bug"] if n % 2 else [], "milestone": None,
                "author": {"id": 1, "username": "root", "name": "Administrator", "state": "active",
                           "web_url": "https://gitlab.example.com/root"},
                "type": "ISSUE", "assignees": [], "user_notes_count": n, "upvotes": 0, "downvotes": 0,
                "confidential": False, "web_url": "https://gitlab.example.com/group/proj/-/issues/%d" % iid,
                "references": {"short": "#%d" % iid, "relative": "#%d" % iid, "full": "group/proj#%d" % iid}}
    issues = [issue(n) for n in range(c.n)]

    def write(issues):
        for k, ch in enumerate(chunks(issues, c.size)):
            c.f.put("a", "gitlab/issues-%d.json" % (k + 1), ch)
    write(issues)
    count = len(chunks(issues, c.size))
    first = "/api/v4/projects/42/issues?state=opened&per_page=%d" % c.size
    pages = [first] + ["/api/v4/projects/42/issues?id=42&page=%d&per_page=%d&state=opened" % (k, c.size) for k in range(2, count + 1)]

    def edit():
        new = list(issues)
        new[c.size + 1] = issue(c.size + 1, "GitLab issue %d, edited" % (c.n - c.size - 1))
        write(new)
        return Edit("posts", [u for u in pages if u != pages[1]], [pages[1]], posts=new, changed_ids=[new[c.size + 1]["id"]])
    return Shape("gitlab", "GitLab REST issues: a bare array, Link rel=next (prev/first/last), X-Next-Page and X-Total-Pages",
                 [("posts-url", "http://127.0.0.1:%d%s" % (A, first))], issues, pages,
                 [issues[0]["id"], issues[c.size + 1]["id"], issues[-1]["id"]], edit=edit, accept=ACCEPT)


def gitlab_maps(A, n, size):
    """The nginx maps giving GitLab's headers per page."""
    count = len(chunks(list(range(n)), size))

    def u(k):
        return "http://127.0.0.1:%d/api/v4/projects/42/issues?id=42&page=%d&per_page=%d&state=opened" % (A, k, size)
    link, nxt, prev = [], [], []
    for k in range(1, count + 1):
        parts = []
        if k > 1:
            parts.append('<%s>; rel="prev"' % u(k - 1))
        if k < count:
            parts.append('<%s>; rel="next"' % u(k + 1))
        parts += ['<%s>; rel="first"' % u(1), '<%s>; rel="last"' % u(count)]
        link.append("        %d '%s';" % (k, ", ".join(parts)))
        nxt.append("        %d '%s';" % (k, k + 1 if k < count else ""))
        prev.append("        %d '%s';" % (k, k - 1 if k > 1 else ""))
    return ("    map $page $gl_link {\n%s\n        default \"\";\n    }\n" % "\n".join(link) +
            "    map $page $gl_next {\n%s\n        default \"\";\n    }\n" % "\n".join(nxt) +
            "    map $page $gl_prev {\n%s\n        default \"\";\n    }\n" % "\n".join(prev) +
            "    map $page $gl_total_pages { default %d; }\n    map $page $gl_total { default %d; }\n"
            "    map $page $gl_per_page { default %d; }\n" % (count, n, size))


def discourse(c):
    """Discourse /latest.json: {"users":[...],"topic_list":{"more_topics_url":"/latest?no_definitions=true&page=1","topics":[...]}};
    the next page's URL has no .json: nginx answers HTML unless Accept asks for JSON."""
    A = c.p["A"]

    def topic(n, title=None):
        tid = 5000 - n
        return {"id": tid, "title": title or "Topic %d" % n, "fancy_title": "Topic %d" % n, "slug": "topic-%d" % n,
                "posts_count": 1 + n % 4, "reply_count": n % 4, "highest_post_number": 1 + n % 4,
                "image_url": "https://meta.example/uploads/%d.png" % tid if n % 3 == 0 else None,
                "created_at": iso(n, ".000"), "last_posted_at": iso(n, ".000"), "bumped": True, "bumped_at": iso(n, ".000"),
                "archetype": "regular", "unseen": False, "pinned": False, "unpinned": None, "visible": True,
                "closed": False, "archived": False, "bookmarked": None, "liked": None, "tags": [], "views": 10 * n,
                "like_count": n, "has_summary": False, "last_poster_username": "alice", "category_id": 1,
                "pinned_globally": False, "featured_link": None,
                "posters": [{"extras": "latest single", "description": "Original Poster, Most Recent Poster", "user_id": 1,
                             "primary_group_id": None, "flair_group_id": None}]}
    topics = [topic(n) for n in range(c.n)]
    count = len(chunks(topics, c.size))
    pages = ["/latest.json"] + ["/latest?no_definitions=true&page=%d" % k for k in range(1, count)]

    def write(topics):
        for k, ch in enumerate(chunks(topics, c.size)):
            tl = {"can_create_topic": False, "per_page": c.size, "top_tags": [], "topics": ch}
            if k < count - 1:
                tl = dict({"can_create_topic": False, "more_topics_url": "/latest?no_definitions=true&page=%d" % (k + 1)},
                          per_page=c.size, top_tags=[], topics=ch)
            c.f.put("a", "discourse/latest-%d.json" % k, {"users": [{"id": 1, "username": "alice", "name": "Alice",
                                                                      "avatar_template": "/user_avatar/meta.example/alice/{size}/1_2.png",
                                                                      "trust_level": 2}],
                                                           "primary_groups": [], "flair_groups": [], "topic_list": tl})
            c.f.put("a", "discourse/latest-%d.html" % k,
                    ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Latest topics - Meta</title></head>"
                     "<body><noscript>%s</noscript></body></html>\n" % "".join("<a href=\"/t/%s/%d\">%s</a>" % (t["slug"], t["id"], t["title"]) for t in ch)).encode())
    write(topics)

    def edit():
        new = list(topics)
        new[c.size + 1] = topic(c.size + 1, "Topic %d, renamed" % (c.size + 1))
        write(new)
        return Edit("posts", [u for u in pages if u != pages[1]], [pages[1]], posts=new, changed_ids=[new[c.size + 1]["id"]])
    settings = [("posts-url", "http://127.0.0.1:%d/latest.json" % A), ("posts-items", "/topic_list/topics"),
                ("posts-next", "/topic_list/more_topics_url")]
    s = Shape("discourse", "Discourse /latest.json: /topic_list/topics, more_topics_url (relative, no .json: HTML unless Accept asks for JSON)",
              settings, topics, pages, [topics[0]["id"], topics[c.size + 1]["id"], topics[-1]["id"]], edit=edit,
              signs=["/topic_list/more_topics_url"], accept=ACCEPT, first_page=topics[:c.size])
    s.unset = unset(settings)
    return s


# --- RSS and Atom -----------------------------------------------------------------

NS = {"content": "http://purl.org/rss/1.0/modules/content/", "dc": "http://purl.org/dc/elements/1.1/",
      "atom": "http://www.w3.org/2005/Atom", "media": "http://search.yahoo.com/mrss/",
      "itunes": "http://www.itunes.com/dtds/podcast-1.0.dtd"}


def rfc822(dt, style):
    """A pubDate as feeds write it: numeric zones, GMT, no seconds."""
    if style == "gmt":
        return email.utils.format_datetime(dt.astimezone(datetime.timezone.utc), usegmt=True)
    if style == "noseconds":
        return dt.astimezone(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M +0000")
    tz = datetime.timezone(datetime.timedelta(hours={"plus1": 1, "minus5": -5}[style]))
    return email.utils.format_datetime(dt.astimezone(tz))


def rss_item_xml(it):
    """One <item> from the entry's facts (`it`)."""
    out = ["    <item>", "      <title>%s</title>" % escape(it["title"])]
    if it.get("link"):
        out.append("      <link>%s</link>" % escape(it["link"]))
    if it.get("creator"):
        out.append("      <dc:creator><![CDATA[%s]]></dc:creator>" % it["creator"])
    out.append("      <pubDate>%s</pubDate>" % it["pubDate"])
    for tag in it.get("tags", []):
        out.append("      <category><![CDATA[%s]]></category>" % tag)
    if it.get("guid"):
        out.append('      <guid isPermaLink="%s">%s</guid>' % ("true" if it["guid"] == it.get("link") else "false", escape(it["guid"])))
    if it.get("description") is not None:
        out.append("      <description>%s</description>" % escape(it["description"]))
    if it.get("encoded") is not None:
        out.append("      <content:encoded><![CDATA[%s]]></content:encoded>" % it["encoded"])
    for url, typ, length in it.get("enclosures", []):
        out.append('      <enclosure url="%s" length="%d" type="%s"/>' % (escape(url), length, typ))
    if it.get("media_content"):
        out.append('      <media:content url="%s" medium="image" type="image/jpeg" width="640" height="480"/>' % escape(it["media_content"]))
    if it.get("media_thumbnail"):
        out.append('      <media:thumbnail url="%s" width="150" height="150"/>' % escape(it["media_thumbnail"]))
    if it.get("itunes_image"):
        out.append('      <itunes:image href="%s"/>' % escape(it["itunes_image"]))
    out += it.get("extra", [])
    out.append("    </item>")
    return "\n".join(out)


def rss_expected(it):
    """The JSON Feed 1.1 item the daemon stores for an RSS <item> (issue 32)."""
    out = {"id": it.get("guid") or it["link"]}
    if it.get("link"):
        out["url"] = it["link"]
    out["title"] = it["title"]
    if it.get("encoded") is not None:
        out["content_html"] = it["encoded"]
        if it.get("description") is not None:
            out["summary"] = it["description"]
    elif it.get("description") is not None:
        out["content_html"] = it["description"]
    out["date_published"] = it["date"]
    if it.get("creator"):
        out["authors"] = [{"name": it["creator"]}]
    img = next((u for u, t, _ in it.get("enclosures", []) if t.startswith("image/")), None)
    img = img or it.get("media_content") or it.get("media_thumbnail") or it.get("itunes_image")
    if img:
        out["image"] = img
    attachments = [{"url": u, "mime_type": t, "size_in_bytes": n} for u, t, n in it.get("enclosures", [])]
    # Every media:content too (rss_item_xml writes it as image/jpeg), unless an enclosure names it.
    if it.get("media_content") and it["media_content"] not in [u for u, _, _ in it.get("enclosures", [])]:
        attachments.append({"url": it["media_content"], "mime_type": "image/jpeg"})
    if attachments:
        out["attachments"] = attachments
    if it.get("tags"):
        out["tags"] = list(it["tags"])
    return out


def rss_doc(title, link, items, encoding="UTF-8", next_url=None, self_url=None, channel_extra=()):
    head = ['<?xml version="1.0" encoding="%s"?>' % encoding,
            '<rss version="2.0" xmlns:content="%s" xmlns:dc="%s" xmlns:atom="%s" xmlns:media="%s" xmlns:itunes="%s">'
            % (NS["content"], NS["dc"], NS["atom"], NS["media"], NS["itunes"]),
            "  <channel>", "    <title>%s</title>" % escape(title), "    <link>%s</link>" % escape(link),
            "    <description>%s</description>" % escape(title + ": the latest"), "    <language>en</language>",
            "    <lastBuildDate>Fri, 01 Mar 2024 10:00:00 +0000</lastBuildDate>"]
    if self_url:
        head.append('    <atom:link href="%s" rel="self" type="application/rss+xml"/>' % escape(self_url))
    if next_url:
        head.append('    <atom:link href="%s" rel="next" type="application/rss+xml"/>' % escape(next_url))
    head += list(channel_extra)
    text = "\n".join(head + [rss_item_xml(i) for i in items] + ["  </channel>", "</rss>", ""])
    # Characters the declared encoding lacks as character references (as WordPress writes &#8230;).
    return text.encode({"UTF-8": "utf-8", "ISO-8859-1": "latin-1", "windows-1252": "cp1252"}[encoding], "xmlcharrefreplace")


def blog(c):
    """A WordPress-style RSS 2.0 blog, paged (?paged=N, atom:link rel=next): content:encoded in CDATA,
    an entity-escaped description, dc:creator, guid isPermaLink=false, pages declared windows-1252,
    ISO-8859-1 and UTF-8; images by enclosure, media:content and media:thumbnail."""
    A = c.p["A"]
    site = "https://blog.example"
    styles = ["plus1", "gmt", "minus5", "noseconds"]

    def item(n, k, title=None):
        dt = T0 - datetime.timedelta(hours=n)
        enc = {0: "cp1252", 1: "latin-1"}.get(k, "utf-8")
        word = {"cp1252": "\u201ccaf\u00e9\u201d \u20ac5", "latin-1": "na\u00efve \u00bbfa\u00e7ade\u00ab"}.get(enc, "\u65e5\u672c \u2713")
        it = {"title": title or "Post %d: %s & more" % (n, word), "link": "%s/%d/post-%d/" % (site, 2024, n),
              "creator": "Zo\u00eb Writer", "pubDate": rfc822(dt, styles[n % 4]),
              "date": (dt.replace(second=0) if styles[n % 4] == "noseconds" else dt).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "tags": ["Uncategorized", "caf\u00e9"] if n % 2 else ["News"],
              "guid": "%s/?p=%d" % (site, 1000 + n) if n % 5 else None,
              "description": "Excerpt of post %d [\u2026]" % n,
              "encoded": "<p>Full <strong>post</strong> %d: %s</p>\n<p>%s &amp; &lt;code&gt;</p>" % (n, word, lorem(n))}
        if n % 5 == 0:
            it["guid"] = None  # no guid: the link is the id
        if n % 7 == 3:  # an entity-escaped description and no content:encoded
            it["encoded"] = None
            it["description"] = "<p>Only a description, <em>escaped</em> HTML, post %d</p>" % n
        if n % 6 == 1:
            it["enclosures"] = [("http://127.0.0.1:%d/blog/img/%d.jpg" % (A, n), "image/jpeg", 5120 + n)]
        elif n % 6 == 2:
            it["media_content"] = "%s/wp-content/uploads/%d.jpg" % (site, n)
        elif n % 6 == 4:
            it["media_thumbnail"] = "%s/wp-content/uploads/%d-150x150.jpg" % (site, n)
        return it
    per = c.size
    count = max(3, len(chunks(list(range(c.n)), per)))
    pages_items = [[item(n, k) for n in range(k * per, min(c.n, (k + 1) * per))] for k in range(count)]
    encodings = ["windows-1252", "ISO-8859-1"] + ["UTF-8"] * (count - 2)
    uris = ["/blog/feed/"] + ["/blog/feed/?paged=%d" % k for k in range(2, count + 1)]

    def write(pages_items):
        for k, its in enumerate(pages_items):
            nxt = "http://127.0.0.1:%d%s" % (A, uris[k + 1]) if k + 1 < count else None
            c.f.put("a", "blog/feed-%d.rss" % (k + 1), rss_doc("A blog", site, its, encodings[k], nxt,
                                                               "http://127.0.0.1:%d%s" % (A, uris[k])))
    write(pages_items)
    posts = [rss_expected(i) for its in pages_items for i in its]

    def edit():
        new = [list(x) for x in pages_items]
        old = new[1][1]
        new[1][1] = dict(old, title=old["title"] + " (updated)", encoded=(old["encoded"] or "") + "<p>Update.</p>")
        write(new)
        return Edit("posts", [u for u in uris if u != uris[1]], [uris[1]], posts=[rss_expected(i) for its in new for i in its],
                    changed_ids=[rss_expected(new[1][1])["id"]])
    return Shape("rss-blog", "RSS 2.0 blog (WordPress-like): content:encoded CDATA, escaped descriptions, dc:creator, "
                             "pages declared windows-1252 / ISO-8859-1 / UTF-8, atom:link rel=next",
                 [("posts-url", "http://127.0.0.1:%d/blog/feed/" % A)], posts, uris,
                 [posts[0]["id"], posts[per + 1]["id"], posts[-1]["id"]], edit=edit, exact=False, accept=ACCEPT)


def podcast(c):
    """A podcast RSS (Apple's tags): itunes:image per episode, audio enclosures, one episode with an image
    enclosure too; paged by atom:link rel=next; served as application/xml. Its images as the manifest."""
    A = c.p["A"]
    pics = ["sample.jpg", "sample.png", "sample.gif", "sample.webp"]
    base = "http://127.0.0.1:%d/podcast/" % A
    eps = []
    for n in range(min(c.n, 9)):
        dt = T0 - datetime.timedelta(days=7 * n)
        pic = pics[n % len(pics)]
        art = base + "art/ep%d.%s" % (n, pic.split(".")[1])
        c.f.put("a", "podcast/art/ep%d.%s" % (n, pic.split(".")[1]), image(pic))
        it = {"title": "Episode %d: Caching \u2013 the whole story" % (100 - n), "link": "https://pod.example/ep/%d" % (100 - n),
              "pubDate": rfc822(dt, "gmt"), "date": dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "guid": "pod-example-ep-%d" % (100 - n),
              "description": "<p>Show notes for episode %d: <a href=\"https://pod.example\">links</a></p>" % (100 - n),
              "enclosures": [("https://media.pod.example/ep%d.mp3" % (100 - n), "audio/mpeg", 34216300 + n)],
              "itunes_image": art, "pic": pic,
              "extra": ["      <itunes:duration>00:42:%02d</itunes:duration>" % n,
                        "      <itunes:episode>%d</itunes:episode>" % (100 - n),
                        "      <itunes:explicit>false</itunes:explicit>"]}
        if n == 1:  # an image enclosure (first) besides the audio: it is the image, both are attachments
            cover = base + "art/cover-ep%d.jpg" % n
            c.f.put("a", "podcast/art/cover-ep%d.jpg" % n, image("sample.jpg"))
            it["enclosures"] = [(cover, "image/jpeg", len(image("sample.jpg")))] + it["enclosures"]
            it["pic"] = "sample.jpg"
        eps.append(it)
    per = 3
    pages_items = chunks(eps, per)
    uris = ["/podcast/feed.xml"] + ["/podcast/feed-%d.xml" % k for k in range(2, len(pages_items) + 1)]
    chan = ['    <itunes:author>Pod Example</itunes:author>', '    <itunes:image href="%sart/show.jpg"/>' % base,
            '    <itunes:category text="Technology"/>', '    <itunes:explicit>false</itunes:explicit>',
            '    <itunes:type>episodic</itunes:type>']
    c.f.put("a", "podcast/art/show.jpg", image("sample.jpg"))

    def write(pages_items):
        for k, its in enumerate(pages_items):
            nxt = "http://127.0.0.1:%d%s" % (A, uris[k + 1]) if k + 1 < len(uris) else None
            c.f.put("a", uris[k].lstrip("/"), rss_doc("Pod Example", "https://pod.example", its, "UTF-8", nxt, None, chan))
    write(pages_items)
    posts = [rss_expected(i) for i in eps]
    rows = [(p["image"], image(i["pic"]), p["title"]) for p, i in zip(posts, eps)]

    def edit():
        new = [list(x) for x in pages_items]
        new[1][0] = dict(new[1][0], title=new[1][0]["title"] + " (re-cut)")
        write(new)
        new_posts = [rss_expected(i) for its in new for i in its]
        new_rows = [(p["image"], image(i["pic"]), p["title"]) for p, i in zip(new_posts, [i for its in new for i in its])]
        return Edit("all", [u for u in uris if u != uris[1]], [uris[1]], posts=new_posts, rows=new_rows,
                    changed_ids=[new_posts[per]["id"]])
    url = "http://127.0.0.1:%d/podcast/feed.xml" % A
    return Shape("podcast", "podcast RSS: itunes:image, audio enclosures and one image enclosure, application/xml, atom:link rel=next; "
                            "images-url = posts-url with images-url-field = /image",
                 [("posts-url", url), ("images-url", url), ("images-url-field", "/image"), ("images-description-field", "/title")],
                 posts, uris, [posts[0]["id"], posts[1]["id"], posts[-1]["id"]], rows=rows, image_pages=uris, edit=edit,
                 same_feed=True, exact=False, accept=ACCEPT)


def atom_entry_xml(e):
    out = ["  <entry>", "    <title type=\"text\">%s</title>" % escape(e["title"]),
           '    <link rel="alternate" type="text/html" href="%s"/>' % escape(e["url"]), "    <id>%s</id>" % escape(e["id"]),
           "    <published>%s</published>" % e["published_raw"], "    <updated>%s</updated>" % e["updated_raw"],
           "    <author><name>%s</name><uri>https://atom.example/~ann</uri></author>" % escape(e["author"])]
    for t in e["tags"]:
        out.append('    <category term="%s"/>' % escape(t))
    for u, t, n in e.get("enclosures", []):
        out.append('    <link rel="enclosure" type="%s" length="%d" href="%s"/>' % (t, n, escape(u)))
    if e.get("summary"):
        out.append("    <summary>%s</summary>" % escape(e["summary"]))
    kind, body = e["content"]
    if kind == "xhtml":
        out.append('    <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">%s</div></content>' % body)
    elif kind == "html":
        out.append('    <content type="html">%s</content>' % escape(body))
    else:
        out.append('    <content type="text">%s</content>' % escape(body))
    out.append("  </entry>")
    return "\n".join(out)


def atom_expected(e):
    out = {"id": e["id"], "url": e["url"], "title": e["title"]}
    kind, body = e["content"]
    out["content_text" if kind == "text" else "content_html"] = body
    if e.get("summary"):
        out["summary"] = e["summary"]
    out["date_published"], out["date_modified"] = e["published"], e["updated"]
    out["authors"] = [{"name": e["author"], "url": "https://atom.example/~ann"}]  # JSON Feed's author url from <uri>
    img = next((u for u, t, _ in e.get("enclosures", []) if t.startswith("image/")), None)
    if img:
        out["image"] = img
    if e.get("enclosures"):
        out["attachments"] = [{"url": u, "mime_type": t, "size_in_bytes": n} for u, t, n in e["enclosures"]]
    if e["tags"]:
        out["tags"] = list(e["tags"])
    return out


def atom(c):
    """An Atom 1.0 feed paged by RFC 5005 (<link rel="next"> relative and absolute): xhtml, html and text
    content, RFC 3339 times with offsets, an image by rel=enclosure."""
    A = c.p["A"]

    def entry(n, title=None):
        dt = T0 - datetime.timedelta(hours=3 * n)
        off = datetime.timezone(datetime.timedelta(hours=2))
        e = {"id": "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344e%04d" % n if n % 2 else "tag:atom.example,2024:entry-%d" % n,
             "url": "https://atom.example/entries/%d" % n, "title": title or "Atom entry %d \u00b7 \u00e9t\u00e9" % n,
             "published_raw": dt.astimezone(off).isoformat(), "published": dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
             "updated_raw": (dt + datetime.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "updated": (dt + datetime.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "author": "Ann Atom", "tags": ["atom", "t%d" % (n % 3)], "summary": "Summary of entry %d" % n if n % 3 else None}
        k = n % 3
        if k == 0:
            e["content"] = ("xhtml", "<p>Entry %d in <em>XHTML</em> &amp; more</p>" % n)
        elif k == 1:
            e["content"] = ("html", "<p>Entry %d in escaped <b>HTML</b></p>" % n)
        else:
            e["content"] = ("text", "Entry %d in plain text: 1 < 2 & 3 > 2" % n)
        if n % 4 == 1:
            e["enclosures"] = [("https://atom.example/media/%d.png" % n, "image/png", 2048 + n),
                               ("https://atom.example/media/%d.pdf" % n, "application/pdf", 90000 + n)]
        return e
    entries = [entry(n) for n in range(c.n)]
    per = c.size
    pages_entries = chunks(entries, per)
    uris = ["/atom/feed.atom"] + ["/atom/feed-%d.atom" % k for k in range(2, len(pages_entries) + 1)]

    def write(pages_entries):
        for k, es in enumerate(pages_entries):
            links = ['  <link rel="self" href="http://127.0.0.1:%d%s"/>' % (A, uris[k]),
                     '  <link rel="alternate" type="text/html" href="https://atom.example/"/>']
            if k + 1 < len(uris):  # page 1's next is relative, the others' absolute
                links.append('  <link rel="next" href="%s"/>' % (uris[k + 1].rsplit("/", 1)[1] if k == 0 else
                                                                "http://127.0.0.1:%d%s" % (A, uris[k + 1])))
            if k > 0:
                links.append('  <link rel="previous" href="http://127.0.0.1:%d%s"/>' % (A, uris[k - 1]))
            doc = "\n".join(['<?xml version="1.0" encoding="utf-8"?>', '<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en">',
                             "  <title>Atom example</title>", "  <id>urn:uuid:60a76c80-d399-11d9-b91C-0003939e0af6</id>",
                             "  <updated>2024-03-01T10:00:00Z</updated>", "  <author><name>Ann Atom</name></author>"] + links +
                            [atom_entry_xml(e) for e in es] + ["</feed>", ""])
            c.f.put("a", uris[k].lstrip("/"), doc.encode())
    write(pages_entries)
    posts = [atom_expected(e) for e in entries]

    def edit():
        new = [list(x) for x in pages_entries]
        new[1][1] = dict(new[1][1], title=new[1][1]["title"] + " (corrected)", updated_raw="2024-03-02T00:00:00Z",
                         updated="2024-03-02T00:00:00Z")
        write(new)
        return Edit("posts", [u for u in uris if u != uris[1]], [uris[1]], posts=[atom_expected(e) for es in new for e in es],
                    changed_ids=[new[1][1]["id"]])
    return Shape("atom", "Atom 1.0 paged by RFC 5005 rel=next (relative, then absolute): xhtml/html/text content, "
                         "times with offsets, rel=enclosure image",
                 [("posts-url", "http://127.0.0.1:%d/atom/feed.atom" % A)], posts, uris,
                 [posts[0]["id"], posts[per + 1]["id"], posts[-1]["id"]], edit=edit, exact=False, accept=ACCEPT)


RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RSS1 = "http://purl.org/rss/1.0/"


def rss1(c):
    """RSS 1.0 (RDF): <rdf:RDF> with <channel> and sibling <item rdf:about>, dc:date and dc:creator; one page
    (RSS 1.0 has no paging), served as application/xml."""
    A = c.p["A"]

    def item(n, title=None):
        dt = T0 - datetime.timedelta(hours=5 * n)
        return {"about": "https://rdf.example/news/%d" % n, "link": "https://rdf.example/news/%d?from=rss" % n,
                "title": title or "RDF news %d" % n, "description": "<p>News %d &amp; notes</p>" % n,
                "date": dt.strftime("%Y-%m-%dT%H:%M:%SZ"), "dc_date": dt.astimezone(datetime.timezone(datetime.timedelta(hours=9))).isoformat(),
                "creator": "Ren\u00e9 RDF"}
    items = [item(n) for n in range(5)]

    def write(items):
        doc = ['<?xml version="1.0" encoding="utf-8"?>',
               '<rdf:RDF xmlns:rdf="%s" xmlns="%s" xmlns:dc="%s">' % (RDF, RSS1, NS["dc"]),
               '  <channel rdf:about="https://rdf.example/rss">', "    <title>RDF example</title>",
               "    <link>https://rdf.example/</link>", "    <description>RSS 1.0</description>",
               "    <items><rdf:Seq>%s</rdf:Seq></items>" % "".join('<rdf:li rdf:resource="%s"/>' % i["about"] for i in items),
               "  </channel>"]
        for i in items:
            doc += ['  <item rdf:about="%s">' % i["about"], "    <title>%s</title>" % escape(i["title"]),
                    "    <link>%s</link>" % escape(i["link"]), "    <description>%s</description>" % escape(i["description"]),
                    "    <dc:date>%s</dc:date>" % i["dc_date"], "    <dc:creator>%s</dc:creator>" % escape(i["creator"]),
                    "  </item>"]
        doc.append("</rdf:RDF>\n")
        c.f.put("a", "rdf/news.xml", "\n".join(doc).encode())
    write(items)

    def expected(i):
        return {"id": i["about"], "url": i["link"], "title": i["title"], "content_html": i["description"],
                "date_published": i["date"], "authors": [{"name": i["creator"]}]}
    posts = [expected(i) for i in items]

    def edit():
        new = list(items)
        new[3] = item(3, "RDF news 3, corrected")
        write(new)
        return Edit("posts", [], ["/rdf/news.xml"], posts=[expected(i) for i in new], changed_ids=[new[3]["about"]])
    return Shape("rss1", "RSS 1.0 (RDF): rdf:about ids, dc:date with an offset, dc:creator; one page",
                 [("posts-url", "http://127.0.0.1:%d/rdf/news.xml" % A)], posts, ["/rdf/news.xml"],
                 [posts[0]["id"], posts[3]["id"]], edit=edit, exact=False, accept=ACCEPT)


def api_shapes(c):
    return [reddit(c), bluesky(c), slack(c), stripe(c), youtube(c), xv2(c), lemmy(c), hn(c), contentful(c), jsonserver(c),
            wordpress_pages(c), confluence(c), gitlab(c), discourse(c), blog(c), podcast(c), atom(c), rss1(c), reddit_thumbnails(c),
            azure_tables(c)]


# --- images-url = posts-url inheriting the posts' paging; a header cursor ----------------------

THUMB_PICS = ["sample.jpg", "sample.png", "sample.gif", "sample.webp"]


def reddit_child(n, sub, thumb=None, title=None):
    """One child of a Reddit listing of r/SUB; an image post with a thumbnail URL when `thumb` is given."""
    pid = b36(2300000000 - n * 41)
    data = {"approved_at_utc": None, "subreddit": sub, "selftext": "", "author_fullname": "t2_6l4z3", "saved": False,
            "title": title or "r/%s post %d: caf\u00e9" % (sub, n), "subreddit_name_prefixed": "r/" + sub, "name": "t3_" + pid,
            "score": 100 - n, "thumbnail_height": 140, "thumbnail_width": 140, "thumbnail": thumb or "self",
            "created": float(unix(n)), "domain": "i.redd.it" if thumb else "self." + sub, "id": pid, "author": "u_cached",
            "num_comments": n, "permalink": "/r/%s/comments/%s/post_%d/" % (sub, pid, n),
            "url": "https://i.redd.it/%s.jpg" % pid if thumb else "https://www.reddit.com/r/%s/comments/%s/post_%d/" % (sub, pid, n),
            "created_utc": float(unix(n)), "over_18": False}
    if thumb:
        data["post_hint"] = "image"
    return {"kind": "t3", "data": data}


def reddit_listing(c, sub, thumbs=False):
    """r/SUB on the scripted origin (state reddit-SUB): the children, the page URIs a cursor walk asks, the first URI.
    With `thumbs`, every post's `thumbnail` is an image on host B (Tests/Fixtures/images), cycling jpg, png, gif, webp."""
    B = c.p["B"]
    wrapped, rows = [], []
    for n in range(c.n):
        thumb = None
        if thumbs:
            pic = THUMB_PICS[n % len(THUMB_PICS)]
            rel = "thumbs/%s-%d.%s" % (sub, n, pic.split(".")[1])
            c.f.put("b", rel, image(pic))
            thumb = "http://127.0.0.1:%d/%s" % (B, rel)
        wrapped.append(reddit_child(n, sub, thumb))
    c.state("reddit-" + sub, wrapped)
    first = "/r/%s/new.json?limit=%d&raw_json=1" % (sub, c.size)
    pages = [first] + [with_params(first, [("after", ch[-1]["data"]["name"])]) for ch in chunks(wrapped, c.size)[:-1]]
    return wrapped, pages, first


REDDIT_PAGING = [("posts-paging", "cursor"), ("posts-cursor", "/data/after"), ("posts-cursor-param", "after")]


def reddit_thumbnails(c):
    """Reddit's image posts as the manifest too: images-url = posts-url and only posts-* paging settings, so the
    manifest inherits posts-items, posts-item, posts-paging, posts-cursor and posts-cursor-param (docs/operations.md:
    images-* default to their posts-* namesakes when images-url is posts-url); images-url-field = /thumbnail of the
    unwrapped post. Each page is fetched once for both feeds."""
    sub = "pics"
    wrapped, pages, first = reddit_listing(c, sub, thumbs=True)
    url = c.api(first)
    settings = [("posts-url", url), ("posts-items", "/data/children"), ("posts-item", "/data")] + REDDIT_PAGING + [
        ("images-url", url), ("images-url-field", "/thumbnail"), ("images-description-field", "/title")]
    posts = [w["data"] for w in wrapped]
    pics = [THUMB_PICS[n % len(THUMB_PICS)] for n in range(c.n)]
    rows = [(p["thumbnail"], image(pic), p["title"]) for p, pic in zip(posts, pics)]
    at = c.size + 1

    def edit():
        new = json.loads(json.dumps(wrapped))
        rel = "thumbs/%s-%d-v2.bmp" % (sub, at)
        c.f.put("b", rel, image("sample.bmp"))
        new[at]["data"].update(title=new[at]["data"]["title"] + ", edited", thumbnail="http://127.0.0.1:%d/%s" % (c.p["B"], rel))
        c.state("reddit-" + sub, new)
        new_posts = [w["data"] for w in new]
        new_rows = list(rows)
        new_rows[at] = (new_posts[at]["thumbnail"], image("sample.bmp"), new_posts[at]["title"])
        changed = [pages[at // c.size]]
        return Edit("all", [u for u in pages if u not in changed], changed, posts=new_posts, rows=new_rows,
                    changed_ids=[posts[at]["id"]], new_images=["/" + rel])
    s = Shape("reddit-thumbnails", "Reddit image posts, images-url = posts-url with only posts-* paging settings (the manifest "
                                   "inherits items, item, cursor paging), images-url-field = /thumbnail (host B)",
              settings, posts, pages, [posts[0]["id"], posts[at]["id"], posts[-1]["id"]], rows=rows, image_pages=pages,
              origin="api", edit=edit, same_feed=True, norm_query=True, accept=ACCEPT, first_page=posts[:c.size])
    return s


def azure_next(name):
    """A NextTableName continuation token as Azure writes them (as api-origin.py makes them)."""
    import base64
    b = base64.b64encode(name.encode() + b"\x01\x01").decode().replace("=", "-")
    return "1!%d!%s" % (len(b), b)


AZURE_SAS = "cached+sas/sig="  # the SAS signature (base64: "+", "/" and "="), percent-encoded in the URL


def azure_tables(c):
    """Azure Table storage Query Tables: the next page's token is a response header, x-ms-continuation-NextTableName,
    sent back as ?NextTableName= with the original query kept (the SAS, $top): posts-cursor = header:NAME."""
    names = ["cached%s%03d" % (w, n) for n, w in zip(range(c.n), ["Posts", "Images", "Audit", "Users", "Jobs"] * 99)]
    items = [{"TableName": t} for t in names]
    c.state("azure-tables", items, token=AZURE_SAS)
    first = ("/Tables?sv=2019-02-02&ss=t&srt=sco&sp=rl&se=2030-01-01T00%%3A00%%3A00Z&spr=https&sig=%s&%%24top=%d"
             % (urllib.parse.quote(AZURE_SAS, safe=""), c.size))
    pages = [first] + [with_params(first, [("NextTableName", azure_next(names[k]))]) for k in range(c.size, c.n, c.size)]
    settings = [("posts-items", "/value"), ("posts-id", "/TableName"), ("posts-paging", "cursor"),
                ("posts-cursor", "header:x-ms-continuation-NextTableName"), ("posts-cursor-param", "NextTableName")]
    at = c.size + 1

    def edit():
        # Tables are not renamed: one on page 2 is deleted and another created in its place (the same sort position).
        new = list(items)
        new[at] = {"TableName": names[at] + "b"}
        c.state("azure-tables", new, token=AZURE_SAS)
        changed = [pages[at // c.size]]
        return Edit("posts", [u for u in pages if u not in changed], changed, posts=new, changed_ids=[new[at]["TableName"]],
                    removed_ids=[names[at]])
    s = Shape("azure-tables", "Azure Table storage Query Tables: /value, id /TableName, the cursor in the x-ms-continuation-NextTableName "
                              "response header sent as ?NextTableName= (posts-cursor = header:NAME), the SAS and $top kept",
              [("posts-url", c.api(first))] + settings, items, pages, [names[0], names[at], names[-1]], id_key="TableName",
              origin="api", edit=edit, norm_query=True, accept=ACCEPT, first_page=items[:c.size])
    return s


# --- a paged image manifest on its own URL: YouTube search.list's thumbnails ----------------------

def youtube_thumbnails(c):
    """YouTube Data API v3 search.list as an image manifest on its own URL (images-paging = cursor,
    images-cursor = /nextPageToken sent as ?pageToken=; the key kept): each result's
    snippet.thumbnails.default.url is an image on host B. Returns the URL, the settings, the settings
    without images-paging (and its cursor settings), the page URIs, the rows and page 1's rows."""
    B = c.p["B"]

    def result(n):
        vid = ("tHumB" + b36(n * 7717 + 99)).ljust(11, "x")[:11]
        pic = THUMB_PICS[n % len(THUMB_PICS)]
        rel = "vi/%s/default.%s" % (vid, pic.split(".")[1])
        c.f.put("b", rel, image(pic))
        thumb = "http://127.0.0.1:%d/%s" % (B, rel)
        return {"kind": "youtube#searchResult", "etag": "Sr%025d" % n, "id": {"kind": "youtube#video", "videoId": vid},
                "snippet": {"publishedAt": iso(n), "channelId": "UC_x5XG1OV2P6uZZ5FSM9Ttw", "title": "Thumbnail video %d \u2013 caf\u00e9" % n,
                            "description": lorem(n),
                            "thumbnails": {"default": {"url": thumb, "width": 120, "height": 90},
                                           "medium": {"url": "https://i.ytimg.com/vi/%s/mqdefault.jpg" % vid, "width": 320, "height": 180},
                                           "high": {"url": "https://i.ytimg.com/vi/%s/hqdefault.jpg" % vid, "width": 480, "height": 360}},
                            "channelTitle": "Google for Developers", "liveBroadcastContent": "none", "publishTime": iso(n)}}, pic
    made = [result(n) for n in range(c.n)]
    items = [m for m, _ in made]
    c.state("youtube-search", items, token=YOUTUBE_KEY)
    first = ("/youtube/v3/search?part=snippet&channelId=UC_x5XG1OV2P6uZZ5FSM9Ttw&order=date&type=video&maxResults=%d&key=%s"
             % (c.size, YOUTUBE_KEY))
    pages = [first] + [with_params(first, [("pageToken", yt_token(k))]) for k in range(c.size, c.n, c.size)]
    rows = [(m["snippet"]["thumbnails"]["default"]["url"], image(pic), m["snippet"]["title"]) for m, pic in made]
    url = c.api(first)
    shape = [("images-url", url), ("images-items", "/items"), ("images-url-field", "/snippet/thumbnails/default/url"),
             ("images-description-field", "/snippet/title")]
    paging = [("images-paging", "cursor"), ("images-cursor", "/nextPageToken"), ("images-cursor-param", "pageToken")]
    return {"url": url, "settings": shape + paging, "unset": shape, "pages": pages, "rows": rows,
            "first_rows": rows[:c.size], "token": yt_token(c.size)}


# --- the HTTP charset over the XML declaration (RFC 7303) ------------------------------------

def charset_items():
    """Three RSS items whose text needs UTF-8 (é, €, “ ”, …, 日本)."""
    out = []
    for n, title in enumerate(["caf\u00e9 au lait", "\u20ac5 a month, \u201cfair\u201d", "na\u00efve \u2026 \u65e5\u672c"]):
        dt = T0 - datetime.timedelta(hours=n)
        out.append({"title": title, "link": "https://charset.example/%d" % n, "guid": "https://charset.example/%d" % n,
                    "pubDate": rfc822(dt, "gmt"), "date": dt.strftime("%Y-%m-%dT%H:%M:%SZ"), "creator": "Ren\u00e9e",
                    "description": "<p>%s: 5 \u20ac, d\u00e9j\u00e0 vu</p>" % title})
    return out


def charset_doc():
    """UTF-8 bytes under a declaration of ISO-8859-1 (a CMS that changed its storage and not its template)."""
    doc = rss_doc("Charset", "https://charset.example/", charset_items(), "UTF-8")
    return doc.replace(b'<?xml version="1.0" encoding="UTF-8"?>', b'<?xml version="1.0" encoding="ISO-8859-1"?>', 1)


# --- the sliding window (posts-keep = all) and the XML attacks ------------------------------

def window_item(n):
    """Post n of the sliding window (n = 1 the oldest), an hour apart."""
    dt = T0 + datetime.timedelta(hours=n)
    return {"title": "Window post %d" % n, "link": "https://window.example/posts/%d" % n,
            "guid": "https://window.example/posts/%d" % n, "pubDate": rfc822(dt, "gmt"),
            "date": dt.strftime("%Y-%m-%dT%H:%M:%SZ"), "description": "<p>Post %d of the window</p>" % n}


def window_write(f, refresh, path="window/feed.rss"):
    """The feed as refresh number `refresh` (from 1) sees it: the newest 10 of posts 1..refresh+9, newest first."""
    items = [window_item(n) for n in range(refresh + 9, refresh - 1, -1)]
    f.put("a", path, rss_doc("Window", "https://window.example/", items))
    return [rss_expected(i) for i in items]


def billion_laughs():
    ents = ['  <!ENTITY lol "lol">'] + ['  <!ENTITY lol%d "%s">' % (k, ("&lol%s;" % ("" if k == 1 else k - 1)) * 10)
                                      for k in range(1, 10)]
    return ('<?xml version="1.0"?>\n<!DOCTYPE rss [\n%s\n]>\n<rss version="2.0"><channel><title>laughs</title>'
            '<item><title>&lol9;</title><guid>https://attack.example/1</guid><description>&lol9;</description></item>'
            '</channel></rss>\n' % "\n".join(ents)).encode()


def external_entity():
    return (b'<?xml version="1.0"?>\n<!DOCTYPE rss [\n  <!ENTITY xxe SYSTEM "file:///etc/passwd">\n]>\n'
            b'<rss version="2.0"><channel><title>xxe</title><item><title>&xxe;</title>'
            b'<guid>https://attack.example/1</guid><description>&xxe;</description></item></channel></rss>\n')


def deep_document(depth=10000):
    return ('<?xml version="1.0"?>\n<rss version="2.0"><channel><title>deep</title>' + "<x>" * depth + "</x>" * depth +
            '<item><title>deep</title><guid>https://attack.example/1</guid></item></channel></rss>\n').encode()
