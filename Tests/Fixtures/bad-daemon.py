#!/usr/bin/env python3
"""A fake cached that misbehaves on purpose, for the clients' tests.

    bad-daemon.py SOCKET MODE [INTERVAL]

Listens on the Unix socket SOCKET (made here, mode 0600) and answers every
request line on every connection the way MODE says, until killed:

  huge-read     get_image names an object; open is an unknown op (a daemon
                older than open); read declares 34,359,738,368 bytes and then
                streams zeros until the client hangs up
  big-read      as huge-read, but read declares 134,217,728 bytes (128 MiB,
                a size the clients accept) and sends them, then stays open
  huge-read-max as huge-read, declaring 34,359,738,352 bytes (16 x (2^31-1),
                the most cachectl 0.1 accepted, and then tried to allocate)
  endless-line  every answer is 1.25 GiB with no newline, streamed in 1 MiB
                pieces (never held), then the connection is closed
  deep          every answer is an object holding 200,000 nested arrays
  deep-legit    every answer lists one post as deeply nested as a feed may
                hold (63 levels: 65 in the answer), as a real daemon can
  array         every answer is `[1,2,3]`
  devzero       get_image names an object; open answers size 3,000,000,000
                and passes a descriptor of /dev/zero with it
  shortfile     as devzero, but the descriptor is a regular file of 10 bytes
  fd-flood      every answer is a valid line sent one byte per message, each
                byte with 8 descriptors of /dev/null (344 in all)
  trickle       every answer is a valid line sent one byte every INTERVAL
                seconds (default 0.5)
  no-ok         every answer's ok is the string "true", and a stray valid
                ping answer follows it (read as the next call's answer by a
                client that keeps the connection)
  no-code       every answer is ok false with a number for error.code, and
                a stray valid ping answer follows it
  reset         waits for a request and closes the connection without
                reading it, as a daemon that is stopping does: the client's
                recvmsg fails with ECONNRESET
  hangup        reads a request and closes the connection without answering

Standard library only. Prints "ready" on stdout once it listens.
"""

import json
import os
import select
import socket
import sys
import tempfile
import threading
import time

HASH = "0123456789abcdef0123456789abcdef"
IMAGE = {"ok": True, "image": {"row": 0, "url": "http://127.0.0.1/a.png", "description": None, "hash": HASH,
                               "size": 10, "type": "image/png", "path": "/nonexistent/a.png"}}
READ_SIZES = {"huge-read": 34359738368, "huge-read-max": 34359738352, "big-read": 128 << 20}
ENDLESS = 5 << 28          # 1.25 GiB
DEPTH = 200000
OPEN_SIZE = 3000000000
MISSHAPEN = {"no-ok": {"ok": "true", "version": "0.0.0", "protocol": 1},
             "no-code": {"ok": False, "error": {"code": 7, "message": "seven"}}}
STRAY = {"ok": True, "version": "stray", "protocol": 1}


def line(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def unknown(op: str) -> bytes:
    return line({"ok": False, "error": {"code": "bad_request", "message": f"unknown op \"{op}\""}})


def stream(conn: socket.socket, piece: bytes, total: int) -> None:
    """Sends `total` bytes made of `piece` repeated, until the client hangs up."""
    sent = 0
    while sent < total:
        chunk = piece[: min(len(piece), total - sent)]
        conn.sendall(chunk)
        sent += len(chunk)


def answer(mode: str, op: str, conn: socket.socket, interval: float) -> bool:
    """Answers one request; False when the connection should be closed."""
    if mode in ("huge-read", "huge-read-max", "big-read", "devzero", "shortfile") and op == "get_image":
        conn.sendall(line(IMAGE))
        return True
    if mode in READ_SIZES:
        if op == "read":
            conn.sendall(line({"ok": True, "size": READ_SIZES[mode]}))
            stream(conn, bytes(1 << 20), READ_SIZES[mode])
            return mode == "big-read"
        conn.sendall(unknown(op))
        return True
    if mode in ("devzero", "shortfile"):
        if op != "open":
            conn.sendall(unknown(op))
            return True
        if mode == "devzero":
            fd = os.open("/dev/zero", os.O_RDONLY)
        else:
            with tempfile.TemporaryFile() as f:
                f.write(b"0123456789")
                f.flush()
                fd = os.dup(f.fileno())
        try:
            socket.send_fds(conn, [line({"ok": True, "size": OPEN_SIZE})], [fd])
        finally:
            os.close(fd)
        return True
    if mode == "endless-line":
        conn.sendall(b'{"ok":true,"pad":"')
        stream(conn, b"a" * (1 << 20), ENDLESS)
        return False
    if mode == "deep":
        conn.sendall(b'{"ok":true,"x":' + b"[" * DEPTH + b"]" * DEPTH + b"}\n")
        return True
    if mode == "deep-legit":
        post = b'{"id":1,"x":' + b"[" * 62 + b"]" * 62 + b"}"
        conn.sendall(b'{"ok":true,"total":1,"posts":[' + post + b"]}\n")
        return True
    if mode == "array":
        conn.sendall(b"[1,2,3]\n")
        return True
    if mode == "fd-flood":
        null = os.open("/dev/null", os.O_RDONLY)
        try:
            for byte in line({"ok": True, "version": "0.0.0", "protocol": 1}):
                socket.send_fds(conn, [bytes([byte])], [null] * 8)
        finally:
            os.close(null)
        return True
    if mode == "trickle":
        for byte in line({"ok": True, "version": "0.0.0", "protocol": 1, "pad": "x" * 120}):
            conn.sendall(bytes([byte]))
            time.sleep(interval)
        return True
    if mode in MISSHAPEN:
        conn.sendall(line(MISSHAPEN[mode]) + line(STRAY))
        return True
    raise SystemExit(f"unknown mode {mode}")


def serve(conn: socket.socket, mode: str, interval: float) -> None:
    buffer = b""
    if mode == "reset":
        # Unread bytes at close: the kernel resets the peer (ECONNRESET).
        select.select([conn], [], [], 10)
        conn.close()
        return
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                raw, buffer = buffer.split(b"\n", 1)
                try:
                    op = str(json.loads(raw).get("op"))
                except (ValueError, AttributeError):
                    op = ""
                if mode == "hangup" or not answer(mode, op, conn, interval):
                    return
    except OSError:
        return  # the client hung up
    finally:
        conn.close()


def main() -> None:
    path, mode = sys.argv[1], sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    listener.bind(path)
    os.umask(old)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, mode, interval), daemon=True).start()


if __name__ == "__main__":
    main()
