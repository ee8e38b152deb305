#!/usr/bin/env python3
"""A misbehaving origin for cached's tests: the bundled origin plus faults.

Everything Examples/origin-server.py serves, plus:
  /fault/status/CODE/...            answers CODE with an HTML body
  /fault/hang/SECONDS/PATH          waits SECONDS before answering PATH
  /fault/drip/MS/BYTES/PATH         sends PATH in chunks of BYTES every MS milliseconds
  /fault/stall/PATH                 sends half of PATH, then nothing for 60 s
  /fault/cut/PATH                   announces PATH's length, sends half, closes
  /fault/longer/PATH                announces 100 bytes more than PATH has, closes
  /fault/chunked/PATH               PATH in chunked encoding, no Content-Length
  /fault/html/...                   200 with an HTML page
  /fault/redirect-loop/N            302 to /fault/redirect-loop/N+1, forever
  /fault/redirect/SCHEME            302 to a SCHEME:// URL (file, ftp, gopher)
  /fault/redirect-to/PORT/PATH      302 to http://127.0.0.1:PORT/PATH (another origin)
  /fault/redirect-body/BYTES/PATH   302 to /PATH with a body of BYTES bytes
  /auth/PATH                        PATH (any of the above too) when the request
                                    has "Authorization: Bearer TOKEN", else 401
  /_token?value=TOKEN               sets the TOKEN /auth/ asks for (kept out of
                                    the URLs, so that a test can look for it)
  /etag/PATH                        PATH with an ETag; If-None-Match answers 304
  /_log                             every request: path, status, body bytes sent,
                                    User-Agent, If-None-Match, If-Modified-Since,
                                    client port (one per connection), and every
                                    header as received (name: [values])
"""
import hashlib
import importlib.util
import json
import os
import socket
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("origin_server", os.path.join(here, "..", "..", "Examples", "origin-server.py"))
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)

log = []
# Requests parsed and not yet finished (their log entry is written last,
# after the client already has the answer): /_log waits for them, so a test
# that asks for the log right after its client got an answer sees that
# request. Bounded: a request that hangs on purpose delays /_log 1 s at most.
busy = [0]
idle = threading.Condition(base.lock)
token = [None]  # what /auth/ asks for, set by /_token


class FaultHandler(base.Handler):
    # Keep-alive, as real origins do, so that connection reuse can be seen.
    protocol_version = "HTTP/1.1"
    def parse_request(self):
        ok = super().parse_request()
        if ok and self.path.split("?", 1)[0] != "/_log":
            with idle:
                busy[0] += 1
            self._busy = True
        return ok

    def handle_one_request(self):
        self._busy = False
        try:
            super().handle_one_request()
        finally:
            if self._busy:
                with idle:
                    busy[0] -= 1
                    idle.notify_all()

    def send_response(self, code, message=None):
        self._status = code
        super().send_response(code, message)

    def copyfile(self, source, outputfile):
        # In chunks, counting only what the client really took.
        while True:
            data = source.read(64 * 1024)
            if not data:
                return
            outputfile.write(data)
            self._sent = getattr(self, "_sent", 0) + len(data)

    def _record(self):
        with base.lock:
            log.append({
                "path": getattr(self, "_asked", self.path).split("?", 1)[0],
                "status": getattr(self, "_status", 0),
                "bytes": getattr(self, "_sent", 0),
                "ua": self.headers.get("User-Agent"),
                "inm": self.headers.get("If-None-Match"),
                "ims": self.headers.get("If-Modified-Since"),
                "port": self.client_address[1],
                "headers": self._headers_received(),
            })

    def _headers_received(self):
        out = {}
        for name, value in self.headers.items():
            out.setdefault(name.lower(), []).append(value)
        return out

    def _file(self, rel):
        path = os.path.join(self.directory, rel.lstrip("/"))
        with open(path, "rb") as f:
            return f.read()

    def _body(self, status, body, ctype="application/octet-stream", length=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        return body

    def _write(self, data):
        self.wfile.write(data)
        self.wfile.flush()
        self._sent = getattr(self, "_sent", 0) + len(data)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/_token":
            from urllib.parse import parse_qs, urlsplit
            with base.lock:
                token[0] = parse_qs(urlsplit(self.path).query)["value"][0]
            self._write(self._body(204, b""))
            return
        if path == "/_log":
            with idle:
                idle.wait_for(lambda: busy[0] == 0, timeout=1)
                body = json.dumps(log).encode()
            self._write(self._body(200, body, "application/json"))
            return
        if path.startswith("/auth/"):
            self._auth(path)
            return
        if not (path.startswith("/fault/") or path.startswith("/etag/")):
            try:
                super().do_GET()
            finally:
                self._record()
            return
        with base.lock:
            base.counts[path] = base.counts.get(path, 0) + 1
        try:
            self._fault(path)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._record()

    def _auth(self, path):
        # /auth/REST: REST as usual, for the bearer of the token alone.
        rest = path[len("/auth/"):]
        with base.lock:
            wanted = token[0]
        if wanted is None or self.headers.get("Authorization") != "Bearer " + wanted:
            with base.lock:
                base.counts[path] = base.counts.get(path, 0) + 1
            try:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Bearer realm="feeds"')
                body = b"unauthorized"
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self._write(body)
            finally:
                self._record()
            return
        self._asked = path  # logged as asked
        self.path = "/" + rest
        self.do_GET()

    def _fault(self, path):
        parts = path.split("/")[2:]
        kind = parts[0] if path.startswith("/fault/") else "etag"
        if kind == "status":
            self._write(self._body(int(parts[1]), b"<html><body>fault</body></html>", "text/html"))
        elif kind == "hang":
            time.sleep(float(parts[1]))
            self._write(self._body(200, self._file("/".join(parts[2:]))))
        elif kind == "drip":
            ms, chunk = int(parts[1]), int(parts[2])
            data = self._file("/".join(parts[3:]))
            self._body(200, b"", length=len(data))
            for i in range(0, len(data), chunk):
                self._write(data[i:i + chunk])
                time.sleep(ms / 1000)
        elif kind == "stall":
            data = self._file("/".join(parts[1:]))
            self._body(200, b"", length=len(data))
            self._write(data[:len(data) // 2])
            time.sleep(60)
        elif kind == "cut":
            data = self._file("/".join(parts[1:]))
            self._body(200, b"", length=len(data))
            self._write(data[:len(data) // 2])
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "longer":
            data = self._file("/".join(parts[1:]))
            self._body(200, b"", length=len(data) + 100)
            self._write(data)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif kind == "chunked":
            data = self._file("/".join(parts[1:]))
            self.protocol_version = "HTTP/1.1"
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(data), 64 * 1024):
                piece = data[i:i + 64 * 1024]
                self._write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            self._write(b"0\r\n\r\n")
            self.close_connection = True
        elif kind == "html":
            self._write(self._body(200, b"<!DOCTYPE html><html><body>Sorry, try later</body></html>", "text/html; charset=utf-8"))
        elif kind == "redirect-loop":
            self.send_response(302)
            self.send_header("Location", "/fault/redirect-loop/%d" % (int(parts[1]) + 1))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "redirect-to":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:%d/%s" % (int(parts[1]), "/".join(parts[2:])))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "redirect-body":
            body = b"r" * int(parts[1])
            self.send_response(302)
            self.send_header("Location", "/" + "/".join(parts[2:]))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._write(body)
        elif kind == "redirect":
            target = {"file": "file:///etc/passwd", "ftp": "ftp://127.0.0.1:1/x.png", "gopher": "gopher://127.0.0.1:1/x"}[parts[1]]
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif kind == "etag":
            data = self._file("/".join(parts))
            tag = '"%s"' % hashlib.sha1(data).hexdigest()
            if self.headers.get("If-None-Match") == tag:
                self.send_response(304)
                self.send_header("ETag", tag)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", tag)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._write(data)
        else:
            self._write(self._body(404, b"no such fault", "text/plain"))


if __name__ == "__main__":
    base.Handler = FaultHandler
    sys.argv[0] = "fault-origin.py"
    base.main()
