#!/usr/bin/env python3
"""A Mastodon-style timeline for Tests/python/feed_shapes.py: the one feed shape
whose pages need logic nginx cannot give (they are computed from the query).

    mastodon-origin.py --data FILE --token TOKEN --port-file FILE --log FILE

GET /api/v1/timelines/public?limit=N[&max_id=ID] answers, newest first, the
statuses of FILE (a JSON array, re-read on every request, so a test edits a
page by rewriting it) whose decimal-string `id` is below `max_id`, at most
`limit` (default 20) of them, as Mastodon does:

- without `Authorization: Bearer TOKEN`: 401, `WWW-Authenticate: Bearer ...`
  and `{"error":"The access token is invalid"}` (Doorkeeper's answer);
- a page with statuses has `Link: <...&max_id=LAST>; rel="next",
  <...&min_id=FIRST>; rel="prev"`; the empty page after the last one is
  `[]` without a Link;
- every page has a weak ETag of its body (Rails' `W/"md5"`); a request whose
  `If-None-Match` holds it is answered 304 with the same ETag and Link.

Every request is logged to FILE as one JSON line: method, uri, status,
inm (If-None-Match), ims (If-Modified-Since), authorization (yes/-), accept.
"""
import argparse
import hashlib
import json
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATH = "/api/v1/timelines/public"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self):
        return "Mastodon"

    def log_message(self, *args):
        pass

    def record(self, status):
        entry = {"server": "%s:%d" % self.server.server_address, "method": self.command, "uri": self.path, "status": status,
                 "inm": self.headers.get("If-None-Match") or "", "ims": self.headers.get("If-Modified-Since") or "",
                 "authorization": "yes" if self.headers.get("Authorization") else "-",
                 "accept": self.headers.get("Accept") or ""}
        with self.server.lock:
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status != 304:
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if status != 304 and self.command != "HEAD":
            self.wfile.write(body)
        self.record(status)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path != PATH:
            return self.answer(404, b'{"error":"Record not found"}')
        if self.headers.get("Authorization") != "Bearer " + self.server.token:
            return self.answer(401, b'{"error":"The access token is invalid"}',
                               [("WWW-Authenticate", 'Bearer realm="Doorkeeper", error="invalid_token", '
                                                     'error_description="The access token is invalid"')])
        query = urllib.parse.parse_qs(url.query)
        limit = int(query.get("limit", ["20"])[0])
        with open(self.server.data_path) as f:
            statuses = json.load(f)
        statuses.sort(key=lambda s: int(s["id"]), reverse=True)
        if "max_id" in query:
            statuses = [s for s in statuses if int(s["id"]) < int(query["max_id"][0])]
        page = statuses[:limit]
        body = json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
        headers = [("ETag", 'W/"%s"' % hashlib.md5(body).hexdigest()), ("Cache-Control", "private, no-store"),
                   ("Vary", "Accept, Authorization")]
        if page:
            base = "http://%s:%d%s?limit=%d" % (self.server.server_address + (PATH, limit))
            headers.append(("Link", '<%s&max_id=%s>; rel="next", <%s&min_id=%s>; rel="prev"' % (base, page[-1]["id"], base, page[0]["id"])))
        inm = self.headers.get("If-None-Match")
        if inm and headers[0][1] in [t.strip() for t in inm.split(",")]:
            return self.answer(304, headers=headers)
        self.answer(200, body, headers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.data_path, server.token, server.log_path, server.lock = a.data, a.token, a.log, threading.Lock()
    open(a.log, "a").close()
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
