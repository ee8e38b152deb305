#!/usr/bin/env python3
"""A small local origin for cached's demo and tests.

Serves a directory over HTTP on 127.0.0.1 with a listen backlog large enough
for parallel downloads, counts the requests it answers per path, and can be
slowed down. GET /_stats returns the counts as JSON; GET /_reset clears them.
GET /_fail?path=/posts.json&times=2&status=503 makes the next 2 requests for
that path answer 503 (a transient origin fault, for retry tests).
Last-Modified and If-Modified-Since work as in http.server.

  origin-server.py --root Examples/origin [--port 0] [--port-file F] [--delay S]
"""
import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time
from functools import partial

counts = {}
failures = {}  # path -> [remaining, status]
lock = threading.Lock()


class Handler(http.server.SimpleHTTPRequestHandler):
    delay = 0.0

    def log_message(self, fmt, *args):
        if os.environ.get("ORIGIN_VERBOSE"):
            sys.stderr.write("origin: " + (fmt % args) + "\n")

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            with lock:
                body = json.dumps(counts).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if path == "/_reset":
            with lock:
                counts.clear()
            self.send_response(204)
            self.end_headers()
            return
        if path == "/_fail":
            from urllib.parse import parse_qs, urlsplit
            q = parse_qs(urlsplit(self.path).query)
            with lock:
                failures[q["path"][0]] = [int(q.get("times", ["1"])[0]), int(q.get("status", ["503"])[0])]
            self.send_response(204)
            self.end_headers()
            return
        with lock:
            counts[path] = counts.get(path, 0) + 1
            fault = failures.get(path)
            status = None
            if fault and fault[0] > 0:
                fault[0] -= 1
                status = fault[1]
        if status:
            body = b"<html><body>injected failure</body></html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.delay:
            time.sleep(self.delay)
        super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True
    allow_reuse_address = True


def main():
    # A parent may have spawned us with signals blocked (threads of a test
    # runner often do); we want SIGTERM and SIGINT to stop us.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    args = ap.parse_args()
    Handler.delay = args.delay
    server = Server(("127.0.0.1", args.port), partial(Handler, directory=args.root))
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.rename(tmp, args.port_file)
    print(f"origin serving {args.root} on http://127.0.0.1:{port}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
