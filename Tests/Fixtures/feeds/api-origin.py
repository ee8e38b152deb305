#!/usr/bin/env python3
"""The APIs of issue 32 whose pages are computed per request (a cursor, a
token, an offset or a page number sent back), for Tests/python/feed_shapes.py.
Each answers as its public documentation shows (body layout, parameter
names, where the next cursor is, how the last page looks); the documents
are in Tests/Fixtures/feeds/shapes.py.

    api-origin.py --data DIR --port-file FILE --log FILE

DIR/NAME.json holds one API's state, re-read on every request (a test edits
a page by rewriting it): {"items": [...] (the elements as the API lists
them, in its order), "token": "..." (the credential it asks for, if any),
"fault": "..." (see the faults below)}.

| path | API | pages by |
|---|---|---|
| /r/cached/new.json | Reddit listing | `after` = `data.after` (the last child's fullname), `limit` |
| /xrpc/app.bsky.feed.getAuthorFeed | Bluesky | `cursor` = `cursor` (absent on the last page), `limit`, `actor` required |
| /api/conversations.history | Slack | `cursor` = `response_metadata.next_cursor` ("" last), `has_more`, `limit`, `channel` |
| /v1/customers | Stripe | `starting_after` = the last item's `id`, `has_more`, `limit` |
| /youtube/v3/playlistItems | YouTube Data v3 | `pageToken` = `nextPageToken`, `maxResults`, `key` required |
| /2/users/2244994945/tweets | X API v2 | `pagination_token` = `meta.next_token`, `max_results` |
| /api/v3/post/list | Lemmy 0.19 | `page` from 1 (an empty `posts` past the end), `limit`; `next_page` too |
| /api/v1/search_by_date | HN Algolia | `page` from 0, `hitsPerPage`, `nbPages` |
| /spaces/cachedspace/environments/master/entries | Contentful CDA | `skip`/`limit`, `total`; `access_token` |
| /posts | json-server (jsonplaceholder) | `_start`/`_limit`, `X-Total-Count` |
| /wiki/rest/api/content | Confluence REST v1 | `start`/`limit`; `_links.next` (relative to the wrong base) |
| /r/NAME/new.json | Reddit listing (another subreddit: state `reddit-NAME`) | as /r/cached/new.json |
| /youtube/v3/search | YouTube Data v3 search.list (a paged image manifest of thumbnails) | as playlistItems |
| /Tables | Azure Table storage, Query Tables | `NextTableName` = the `x-ms-continuation-NextTableName` response header (absent on the last page), `$top`; a SAS (`sig`) required |
| /fault/cursor | a Slack-like cursor | fault "repeat": page 3's next_cursor is page 1's again |
| /fault/offset | a Contentful-like offset | fault "ignore-skip": `skip` is ignored, every page is page 1 (the offset does not advance) |

Every page carries a strong ETag of its body; a request whose If-None-Match
holds it is answered 304. Unknown cursors and tokens are refused the way the
API refuses them. One JSON line per request to the log: server, method, uri,
status, inm, ims, authorization, api_key, accept, etag (nginx's format in
nginx-shapes.conf).
"""
import argparse
import base64
import hashlib
import json
import os
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def q(query, name, default=None):
    v = query.get(name)
    return v[0] if v else default


def bounded(text, default, low, high):
    try:
        n = int(text) if text is not None else default
    except ValueError:
        n = default
    return max(low, min(high, n))


def yt_token(offset, prev=False):
    """YouTube's page tokens are a small protobuf: field 1 the offset, field 2 the direction."""
    out, n = b"\x08", offset
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            break
    return base64.b64encode(out + (b"\x10\x01" if prev else b"\x10\x00")).decode().rstrip("=")


def x_token(offset):
    return hashlib.sha1(b"x-%d" % offset).hexdigest()[:13] + "dibdnow9c7btw3w29grvxfcgvpb9n9co"


def slack_cursor(ts):
    # Standard base64 (Slack's cursors are), its bytes chosen so that every cursor has "+", "/" and "=":
    # sent unescaped, "+" arrives as a space and the origin answers invalid_cursor.
    return base64.b64encode(("next_ts:%s" % ts).encode() + b"\x0f\xbf\xff\xbe").decode()


def reddit(h, query, st):
    items, limit = st["items"], bounded(q(query, "limit"), 25, 1, 100)
    start = 0
    after = q(query, "after")
    if after:
        names = [c["data"]["name"] for c in items]
        start = names.index(after) + 1 if after in names else len(items)
    page = items[start:start + limit]
    more = start + limit < len(items)
    return 200, {"kind": "Listing", "data": {"after": page[-1]["data"]["name"] if page and more else None, "dist": len(page),
                                            "modhash": "", "geo_filter": "", "children": page, "before": None}}


def bluesky(h, query, st):
    if not q(query, "actor"):
        return 400, {"error": "InvalidRequest", "message": "Error: Params must have the property \"actor\""}
    items, limit = st["items"], bounded(q(query, "limit"), 50, 1, 100)
    cursor = q(query, "cursor")
    if cursor is not None:
        items = [i for i in items if i["post"]["indexedAt"] < cursor]
    page = items[:limit]
    body = {"feed": page}
    if len(items) > limit:
        body["cursor"] = page[-1]["post"]["indexedAt"]
    return 200, body


def slack(h, query, st):
    if h.headers.get("Authorization") != "Bearer " + st["token"]:
        return 200, {"ok": False, "error": "not_authed"}
    if q(query, "channel") != "C0123CACHED":
        return 200, {"ok": False, "error": "channel_not_found"}
    items, limit = st["items"], bounded(q(query, "limit"), 100, 1, 999)
    start = 0
    cursor = q(query, "cursor")
    if cursor:
        cursors = {slack_cursor(m["ts"]): n for n, m in enumerate(items)}
        if cursor not in cursors:
            return 200, {"ok": False, "error": "invalid_cursor"}
        start = cursors[cursor]
    page = items[start:start + limit]
    more = start + limit < len(items)
    nxt = slack_cursor(items[start + limit]["ts"]) if more else ""
    if st.get("fault") == "repeat" and start >= 2 * limit:
        nxt, more = slack_cursor(items[limit]["ts"]), True  # page 3 names page 2's cursor again
    return 200, {"ok": True, "messages": page, "has_more": more, "pin_count": 0,
                 "channel_actions_ts": None, "channel_actions_count": 0, "response_metadata": {"next_cursor": nxt}}


def stripe(h, query, st):
    if h.headers.get("Authorization") != "Bearer " + st["token"]:
        return 401, {"error": {"message": "You did not provide an API key. You need to provide your API key in the "
                                          "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
                               "type": "invalid_request_error"}}
    items, limit = st["items"], bounded(q(query, "limit"), 10, 1, 100)
    start = 0
    after = q(query, "starting_after")
    if after is not None:
        ids = [c["id"] for c in items]
        if after not in ids:
            return 400, {"error": {"code": "resource_missing", "doc_url": "https://stripe.com/docs/error-codes/resource-missing",
                                   "message": "No such customer: '%s'" % after, "param": "starting_after",
                                   "type": "invalid_request_error"}}
        start = ids.index(after) + 1
    page = items[start:start + limit]
    return 200, {"object": "list", "data": page, "has_more": start + limit < len(items), "url": "/v1/customers"}


def youtube(h, query, st):
    if q(query, "key") != st["token"]:
        return 403, {"error": {"code": 403, "message": "The request is missing a valid API key.",
                               "errors": [{"message": "The request is missing a valid API key.", "domain": "global",
                                           "reason": "forbidden"}], "status": "PERMISSION_DENIED"}}
    items, limit = st["items"], bounded(q(query, "maxResults"), 5, 0, 50)
    start = 0
    token = q(query, "pageToken")
    if token:
        tokens = {yt_token(n): n for n in range(0, len(items) + 1)}
        if token not in tokens:
            return 400, {"error": {"code": 400, "message": "The request specifies an invalid page token.",
                                   "errors": [{"message": "The request specifies an invalid page token.",
                                               "domain": "youtube.parameter", "reason": "invalidPageToken",
                                               "location": "pageToken", "locationType": "parameter"}]}}
        start = tokens[token]
    page = items[start:start + limit]
    body = {"kind": "youtube#playlistItemListResponse",
            "etag": hashlib.sha1(json.dumps(page).encode()).hexdigest()[:27]}
    if start + limit < len(items):
        body["nextPageToken"] = yt_token(start + limit)
    if start > 0:
        body["prevPageToken"] = yt_token(start, prev=True)
    body["items"] = page
    body["pageInfo"] = {"totalResults": len(items), "resultsPerPage": limit}
    return 200, body


def xv2(h, query, st):
    if h.headers.get("Authorization") != "Bearer " + st["token"]:
        return 401, {"title": "Unauthorized", "type": "about:blank", "status": 401, "detail": "Unauthorized"}
    items, limit = st["items"], bounded(q(query, "max_results"), 10, 5, 100)
    start = 0
    token = q(query, "pagination_token")
    if token:
        tokens = {x_token(n): n for n in range(0, len(items) + 1)}
        if token not in tokens:
            return 400, {"errors": [{"parameters": {"pagination_token": [token]}, "message": "The `pagination_token` query parameter value [%s] is not valid" % token}],
                         "title": "Invalid Request", "detail": "One or more parameters to your request was invalid.",
                         "type": "https://api.twitter.com/2/problems/invalid-request"}
        start = tokens[token]
    page = items[start:start + limit]
    meta = {"result_count": len(page)}
    if page:
        meta["newest_id"], meta["oldest_id"] = page[0]["id"], page[-1]["id"]
    if start + limit < len(items):
        meta["next_token"] = x_token(start + limit)
    if start > 0:
        meta["previous_token"] = x_token(start) + "p"
    return 200, ({"data": page, "meta": meta} if page else {"meta": meta})


def azure_next(name):
    """A NextTableName continuation token as Azure writes them ("1!<length>!<base64 with - for =>"): opaque, with "!"."""
    b = base64.b64encode(name.encode() + b"\x01\x01").decode().replace("=", "-")
    return "1!%d!%s" % (len(b), b)


def azure_tables(h, query, st):
    """Azure Table storage Query Tables (GET /Tables, JSON minimal metadata): {"odata.metadata": ..., "value":
    [{"TableName": ...}]}; up to $top (1000) a page; more in the x-ms-continuation-NextTableName response header,
    sent back as ?NextTableName= with the original query (the SAS, $top) kept."""
    if q(query, "sig") != st["token"]:
        return 403, {"odata.error": {"code": "AuthenticationFailed", "message": {
            "lang": "en-US", "value": "Server failed to authenticate the request. Make sure the value of Authorization "
                                      "header is formed correctly including the signature."}}}
    items, top = st["items"], bounded(q(query, "$top"), 1000, 1, 1000)
    start = 0
    token = q(query, "NextTableName")
    if token:
        tokens = {azure_next(t["TableName"]): n for n, t in enumerate(items)}
        if token not in tokens:
            return 400, {"odata.error": {"code": "InvalidInput", "message": {
                "lang": "en-US", "value": "One of the request inputs is not valid."}}}
        start = tokens[token]
    page = items[start:start + top]
    headers = [("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"),
               ("x-ms-version", "2019-02-02"), ("x-ms-request-id", hashlib.sha1(json.dumps(page).encode()).hexdigest()[:32])]
    if start + top < len(items):
        headers.append(("x-ms-continuation-NextTableName", azure_next(items[start + top]["TableName"])))
    return 200, {"odata.metadata": "https://cachedacct.table.core.windows.net/$metadata#Tables", "value": page}, headers


def lemmy(h, query, st):
    items, limit = st["items"], bounded(q(query, "limit"), 10, 1, 50)
    page_no = bounded(q(query, "page"), 1, 1, 100000)
    page = items[(page_no - 1) * limit:page_no * limit]
    body = {"posts": page}
    if page:
        body["next_page"] = "Pa%d" % page[-1]["post"]["id"]
    return 200, body


def hn(h, query, st):
    items, per = st["items"], bounded(q(query, "hitsPerPage"), 20, 1, 1000)
    page_no = bounded(q(query, "page"), 0, 0, 100000)
    pages = (len(items) + per - 1) // per
    page = items[page_no * per:(page_no + 1) * per]
    return 200, {"exhaustive": {"nbHits": True, "typo": True}, "exhaustiveNbHits": True, "exhaustiveTypo": True,
                 "hits": page, "hitsPerPage": per, "nbHits": len(items), "nbPages": pages, "page": page_no,
                 "params": "tags=%s&hitsPerPage=%d&page=%d" % (q(query, "tags", ""), per, page_no),
                 "processingTimeMS": 1, "query": ""}


def contentful(h, query, st):
    token = q(query, "access_token") or (h.headers.get("Authorization") or "").replace("Bearer ", "")
    if token != st["token"]:
        return 401, {"sys": {"type": "Error", "id": "AccessTokenInvalid"},
                     "message": "The access token you sent could not be found or is invalid.", "requestId": "7f3e1a"}
    items, limit = st["items"], bounded(q(query, "limit"), 100, 0, 1000)
    skip = bounded(q(query, "skip"), 0, 0, 10 ** 9)
    page = items[skip:skip + limit]
    if st.get("fault") == "ignore-skip":
        page, skip = items[:limit], 0  # an origin that does not take this offset parameter: page 1 every time
    return 200, {"sys": {"type": "Array"}, "total": len(items), "skip": skip, "limit": limit, "items": page}


def jsonserver(h, query, st):
    items = st["items"]
    start = bounded(q(query, "_start"), 0, 0, 10 ** 9)
    limit = q(query, "_limit")
    page = items[start:start + int(limit)] if limit and limit.isdigit() else items[start:]
    return 200, page, [("X-Total-Count", str(len(items))), ("Access-Control-Expose-Headers", "X-Total-Count")]


def wordpress(h, query, st):
    """WordPress REST /wp-json/wp/v2/posts?per_page=N&page=K: X-WP-Total and X-WP-TotalPages on
    every page, a Link with prev/next, and 400 rest_post_invalid_page_number past the last page."""
    items, per = st["items"], bounded(q(query, "per_page"), 10, 1, 100)
    page_no = bounded(q(query, "page"), 1, 1, 10 ** 6)
    pages = max(1, (len(items) + per - 1) // per)
    if page_no > pages:
        return 400, {"code": "rest_post_invalid_page_number",
                     "message": "The page number requested is larger than the number of pages available.",
                     "data": {"status": 400}}
    base = "http://%s:%d%s" % (h.server.server_address + (urllib.parse.urlsplit(h.path).path,))
    keep = [(k, v) for k, v in urllib.parse.parse_qsl(urllib.parse.urlsplit(h.path).query) if k != "page"]
    links = []
    if page_no > 1:
        links.append('<%s?%s>; rel="prev"' % (base, urllib.parse.urlencode(keep + [("page", page_no - 1)])))
    if page_no < pages:
        links.append('<%s?%s>; rel="next"' % (base, urllib.parse.urlencode(keep + [("page", page_no + 1)])))
    headers = [("X-WP-Total", str(len(items))), ("X-WP-TotalPages", str(pages))]
    if links:
        headers.append(("Link", ", ".join(links)))
    return 200, items[(page_no - 1) * per:page_no * per], headers


def confluence(h, query, st):
    items, limit = st["items"], bounded(q(query, "limit"), 25, 1, 200)
    start = bounded(q(query, "start"), 0, 0, 10 ** 9)
    page = items[start:start + limit]
    base = "http://%s:%d/wiki" % h.server.server_address
    keep = [(k, v) for k, v in urllib.parse.parse_qsl(urllib.parse.urlsplit(h.path).query) if k not in ("start", "limit")]
    links = {"base": base, "context": "/wiki"}
    if start + limit < len(items):
        # As Confluence sends it: relative to the site, missing the /wiki context (a client must prefix _links.base).
        links["next"] = "/rest/api/content?" + urllib.parse.urlencode(keep + [("limit", limit), ("start", start + limit)])
    links["self"] = base + "/rest/api/content"
    return 200, {"results": page, "start": start, "limit": limit, "size": len(page), "_links": links}


ROUTES = {
    "/r/cached/new.json": ("reddit", reddit),
    "/xrpc/app.bsky.feed.getAuthorFeed": ("bluesky", bluesky),
    "/api/conversations.history": ("slack", slack),
    "/v1/customers": ("stripe", stripe),
    "/youtube/v3/playlistItems": ("youtube", youtube),
    "/2/users/2244994945/tweets": ("x", xv2),
    "/api/v3/post/list": ("lemmy", lemmy),
    "/api/v1/search_by_date": ("hn-algolia", hn),
    "/spaces/cachedspace/environments/master/entries": ("contentful", contentful),
    "/posts": ("jsonplaceholder-offset", jsonserver),
    "/wiki/rest/api/content": ("confluence", confluence),
    "/blog/wp-json/wp/v2/posts": ("wordpress-pages", wordpress),
    "/youtube/v3/search": ("youtube-search", youtube),
    "/Tables": ("azure-tables", azure_tables),
    "/fault/cursor": ("fault-cursor", slack),
    "/fault/offset": ("fault-offset", contentful),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, status, etag):
        entry = {"server": "%s:%d" % self.server.server_address, "method": self.command, "uri": self.path, "status": status,
                 "inm": self.headers.get("If-None-Match") or "", "ims": self.headers.get("If-Modified-Since") or "",
                 "authorization": "yes" if self.headers.get("Authorization") else "-",
                 "api_key": "yes" if self.headers.get("X-Api-Key") else "-",
                 "accept": self.headers.get("Accept") or "", "etag": etag}
        with self.server.lock:
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def answer(self, status, body, headers=()):
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        etag = '"%s"' % hashlib.sha1(data).hexdigest()[:24] if status == 200 else ""
        inm = self.headers.get("If-None-Match")
        if etag and inm and etag in [t.strip() for t in inm.split(",")]:
            status = 304
        self.send_response(status)
        for name, value in headers:
            if status != 304 or name.lower() != "content-type":
                self.send_header(name, value)
        if etag:
            self.send_header("ETag", etag)
        if status != 304:
            if not any(name.lower() == "content-type" for name, _ in headers):
                self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 304 and self.command != "HEAD":
            self.wfile.write(data)
        self.record(status, etag)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        route = ROUTES.get(url.path)
        sub = re.match(r"^/r/([a-z0-9_]+)/new\.json$", url.path)
        if not route and sub:
            route = ("reddit-" + sub.group(1), reddit)  # another subreddit, its own state
        if not route:
            return self.answer(404, {"error": "not found"})
        try:
            with open(os.path.join(self.server.data_dir, route[0] + ".json")) as f:
                st = json.load(f)
        except FileNotFoundError:
            return self.answer(404, {"error": "no such API here"})
        out = route[1](self, urllib.parse.parse_qs(url.query, keep_blank_values=True), st)
        self.answer(out[0], out[1], out[2] if len(out) > 2 else ())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.data_dir, server.log_path, server.lock = a.data, a.log, threading.Lock()
    open(a.log, "a").close()
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
