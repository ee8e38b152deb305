#!/usr/bin/env python3
"""The daemon at the scale users reach, with HTTP on (issue 22): a real nginx
origin serving a manifest of ROWS images, a prefetch with /events
subscribers (half reading, half not) and pipelining connections that never
read (JSON lines `list_posts` and HTTP `GET /posts`), then the resident
memory and descriptors before and after; descriptor exhaustion by `open`
requests never read under a low RLIMIT_NOFILE; silent HTTP connections at
`http-max-connections`; LISTERS connections pipelining listings of
LISTING_POSTS posts they never read, the peak within max-queued-bytes-total
plus one listing (issue 33); image variants of VARIANTS rows over HTTP under
a small `variant-max-size`, helpers replaced every 100 jobs all along
(issue 26); a feed of SCALE_POSTS posts listed, searched and stopped
(issue 34, soak_posts.py).

The parts are test_soak.py's tests (the pytest suite, Tests/python): one
test per part, failing with the checks of it that failed. SOAK_ARGS gives
the sizes (`parser()`'s options: --rows N --posts N --subscribers N
--pipeliners N --rounds N --variants N --listers N --listing-posts N
--listing-total SIZE --scale-posts N ...). `make test` runs a short one
(10,000 rows, 50 subscribers, 200 pipeliners, one round, 200 connections
not reading listings of 20,000 posts under max-queued-bytes-total 32M,
1,000 variants, 100,000 posts), `make soak` a long one (600 such
connections under 256M, 1,000,000 posts). Each check prints one line.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import struct
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import world  # noqa: E402  (puts scripts/ on the path for benchlib)
from benchlib import call_socket, free_port, status_kib, stop, wait_for  # noqa: E402
import soak_posts  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
RESULTS = []


def check(name, ok, detail=""):
    """Notes one check of the part under way (its test fails with those that failed)."""
    RESULTS.append((name, ok, detail))
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)


def rss_mib(pid):
    return status_kib(pid, "VmRSS") / 1024.0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class Peak(threading.Thread):
    """Samples the daemon's RSS every 50 ms; `peak` is the largest seen."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.running = pid, 0.0, True

    def run(self):
        while self.running:
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except OSError:
                return
            time.sleep(0.05)


def write_origin(www, rows, posts, listing_posts):
    os.makedirs(www + "/img")
    for i in range(rows):
        with open("%s/img/%d.png" % (www, i), "wb") as f:
            f.write(PNG + (b"soak image %08d " % i) * 8)
    with open(www + "/manifest.json", "w") as f:
        json.dump([{"url": "img/%d.png" % i} for i in range(rows)], f)
    with open(www + "/posts.json", "w") as f:
        json.dump([{"userId": i % 10, "id": i, "title": "post %d" % i, "body": "soak body " * 100} for i in range(1, posts + 1)], f)
    with open(www + "/listing-posts.json", "w") as f:
        json.dump([{"userId": i % 10, "id": i, "title": "post %d" % i, "body": "listing body " * 80} for i in range(1, listing_posts + 1)], f)


def png(width, height, seed):
    """A real RGB PNG (decodable, so a helper can make its variant), its
    pixels a gradient that differs with `seed`."""
    rows = b"".join(b"\x00" + bytes((x * 7 + seed) % 256 if c == 0 else (y * 5 + seed // 256) % 256 if c == 1 else (x + y + seed) % 256
                                     for x in range(width) for c in range(3)) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return PNG + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def write_variant_origin(www, count):
    """`count` distinct decodable 64 x 48 PNGs and their manifest, variants.json."""
    os.makedirs(www + "/vimg")
    for i in range(count):
        with open("%s/vimg/%d.png" % (www, i), "wb") as f:
            f.write(png(64, 48, i))
    with open(www + "/variants.json", "w") as f:
        json.dump([{"url": "vimg/%d.png" % i} for i in range(count)], f)


class Daemon(world.Daemon):
    """The soak's daemon: its own directory under `tmp`, the feeds from
    `origin`, HTTP on a free port (no admin), its log kept, 16 transfers."""

    def __init__(self, bin_dir, tmp, name, origin, extra=(), nofile=None, manifest="manifest.json", posts="posts.json", store=None,
                 log_level="notice"):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        super().__init__(os.path.abspath(bin_dir), store or self.dir + "/store", self.dir + "/sock", http_port=free_port(),
                         extra=["--posts-url", origin + "/" + posts, "--images-url", origin + "/" + manifest,
                                "--concurrency", "16"] + list(extra),
                         log=self.dir + "/log", nofile=nofile, admin=False, log_level=log_level)


class Subscriber(threading.Thread):
    """An /events stream; a reading one drains it and notes a `done` event."""

    def __init__(self, port, reading):
        super().__init__(daemon=True)
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.reading, self.done, self.bytes = reading, False, 0

    def run(self):
        tail = b""
        while self.reading:
            try:
                b = self.s.recv(65536)
            except OSError:
                return
            if not b:
                return
            self.bytes += len(b)
            tail = (tail + b)[-64:]
            if b"event: done" in tail:
                self.done = True


def pipeliners(d, count, depth):
    """`count` connections, half JSON lines and half HTTP, each sending `depth` listings and never reading."""
    conns = []
    for i in range(count):
        if i % 2 == 0:
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            payload = b'{"op":"list_posts"}\n' * depth
        else:
            s = socket.create_connection(("127.0.0.1", d.port))
            payload = b"GET /posts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * depth
        s.setblocking(False)
        try:
            s.sendall(payload)
        except BlockingIOError:
            pass  # the daemon stopped reading: it is bounding this connection
        conns.append(s)
    return conns


def settled(d, peak, base_rss, base_fds, fd_slack, rss_slack, pause, what=""):
    """Once closes are noticed and the heap trimmed (a couple of ticks):
    descriptors and resident memory checked against where they were before
    a part's load; stops `peak`; returns them."""
    wait_for(lambda: fds(d.p.pid) <= base_fds + fd_slack, 15, 0.2)
    time.sleep(pause)
    peak.running = False
    after_rss, after_fds = rss_mib(d.p.pid), fds(d.p.pid)
    check(what + "descriptors back to where they were", after_fds <= base_fds + fd_slack, "%d before, %d after" % (base_fds, after_fds))
    check(what + "resident memory given back", after_rss <= base_rss + rss_slack, "%.0f MiB before, %.0f MiB after" % (base_rss, after_rss))
    return after_rss, after_fds


def soak_prefetch(bin_dir, tmp, origin, a):
    extra = ["--http-max-connections", str(a.subscribers + a.pipeliners + 64)]
    d = Daemon(bin_dir, tmp, "prefetch", origin, extra + (["--max-queued-bytes-total", a.total] if a.total else []))
    try:
        r = d.ctl("prefetch")
        check("a first prefetch of %d rows with HTTP on" % a.rows, r.returncode == 0 and d.alive(), r.stdout.strip()[-200:] + r.stderr[-300:])
        time.sleep(1.5)
        base_rss, base_fds = rss_mib(d.p.pid), fds(d.p.pid)
        peak = Peak(d.p.pid)
        peak.start()
        for round in range(a.rounds):
            subs = [Subscriber(d.port, i % 2 == 0) for i in range(a.subscribers)]
            for s in subs:
                s.start()
            conns = pipeliners(d, a.pipeliners, a.depth)
            t0 = time.time()
            r = d.ctl("prefetch", "--force")
            took = time.time() - t0
            health = d.http_get("/healthz") if d.alive() else 0
            check("round %d: prefetch --force with %d subscribers and %d pipeliners" % (round + 1, a.subscribers, a.pipeliners),
                  r.returncode == 0 and d.alive(), "%.1f s; %s" % (took, (r.stdout + r.stderr).strip()[-300:]))
            check("round %d: /healthz answers during the load" % (round + 1), health == 200, "status %d" % health)
            time.sleep(0.5)
            done = sum(1 for s in subs if s.reading and s.done)
            check("round %d: every reading subscriber saw the prefetch end" % (round + 1), done == (a.subscribers + 1) // 2,
                  "%d of %d" % (done, (a.subscribers + 1) // 2))
            for s in subs:
                s.reading = False
                s.s.close()
            for c in conns:
                c.close()
        after_rss, after_fds = settled(d, peak, base_rss, base_fds, fd_slack=4, rss_slack=48, pause=2.5)
        # 64 MiB of queued answers in total, each connection's own 4 MiB
        # beyond it at most once, and what the prefetch itself holds.
        check("peak resident memory bounded", peak.peak <= base_rss + 64 + 400, "%.0f MiB at peak, %.0f MiB before" % (peak.peak, base_rss))
        print("figures: rss %.0f -> peak %.0f -> %.0f MiB, fds %d -> %d" % (base_rss, peak.peak, after_rss, base_fds, after_fds))
        half_closed_spin(d)
    finally:
        d.stop()


def soak_listings(bin_dir, tmp, origin, a):
    """Issue 33, point 6: LISTERS connections, half HTTP and half JSON lines,
    each pipelining `depth` listings of LISTING_POSTS posts of about 1 KB
    and never reading. Listings being built count at their size, so the peak
    stays within max-queued-bytes-total plus one listing (it was 4 MiB a
    listing whatever its size: +458 MB at 256M with 300 + 300 of 21 MB)."""
    extra = ["--http-max-connections", str(a.listers + 64), "--max-queued-bytes-total", a.listing_total]
    d = Daemon(bin_dir, tmp, "listings", origin, extra, posts="listing-posts.json")
    try:
        r = d.ctl("prefetch", "posts")
        check("a prefetch of %d posts" % a.listing_posts, r.returncode == 0 and d.alive(), (r.stdout + r.stderr).strip()[-300:])
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(b"GET /posts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        listing = b""
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            listing += b
        s.close()
        one = len(listing) / 1048576.0
        total = int(a.listing_total.rstrip("M"))
        time.sleep(1.5)
        base_rss, base_fds = rss_mib(d.p.pid), fds(d.p.pid)
        peak = Peak(d.p.pid)
        peak.start()
        conns = pipeliners(d, a.listers, a.depth)
        time.sleep(a.listing_seconds)
        health = d.http_get("/healthz") if d.alive() else 0
        check("listings: /healthz answers with %d connections not reading listings" % a.listers, health == 200, "status %d" % health)
        for c in conns:
            c.close()
        after_rss, after_fds = settled(d, peak, base_rss, base_fds, fd_slack=4, rss_slack=48, pause=2.5, what="listings: ")
        # The bound, one listing past it, and what is not answers (15 to
        # 25 MiB measured at 200 connections, debug build): the pages of
        # listings being sized (some 64 bytes a post each, on the workers and
        # waiting for the loop), the busy lines, the connections' buffers,
        # the heap's own slack. Before the fix: +206 MiB at 32M.
        slack = 64
        check("listings: peak within max-queued-bytes-total plus one listing", peak.peak <= base_rss + total + one + slack,
              "%.0f MiB at peak, %.0f MiB before: +%.0f MiB, bound %d MiB + one listing %.1f MiB + %d MiB"
              % (peak.peak, base_rss, peak.peak - base_rss, total, one, slack))
        print("figures (listings): %d connections, listing %.1f MiB, max-queued-bytes-total %s, rss %.0f -> peak %.0f (+%.0f) -> %.0f MiB"
              % (a.listers, one, a.listing_total, base_rss, peak.peak, peak.peak - base_rss, after_rss))
    finally:
        d.stop()


def half_closed_spin(d):
    """An HTTP/1.0 listing larger than the socket buffers, the client's side
    shut for writing and never read: the loop must not spin on it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    s.sendall(b"GET /posts HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    time.sleep(1)
    cpu0 = cpu_seconds(d.p.pid)
    time.sleep(2)
    cpu = cpu_seconds(d.p.pid) - cpu0
    check("a half-closed connection with a large answer unread does not spin the loop", cpu < 1.0, "%.2f s of CPU in 2 s" % cpu)
    s.close()


def soak_descriptors(bin_dir, tmp, origin, a):
    nofile = 256
    d = Daemon(bin_dir, tmp, "emfile", origin, [], nofile=nofile)
    try:
        r = d.ctl("prefetch", "images")
        check("a prefetch of %d rows under a limit of %d descriptors" % (a.rows, nofile), r.returncode == 0 and "0 failed" in r.stdout,
              (r.stdout + r.stderr).strip()[-200:])
        if not d.alive():
            check("the daemon survives the prefetch of %d rows" % a.rows, False, open(d.log).read()[-300:])
            return
        hashes = [x["hash"] for x in d.call({"op": "list_images", "limit": 10}).get("images", []) if x.get("hash")]
        if not hashes:
            check("an object to open", False, "no image was cached")
            return
        base_fds = fds(d.p.pid)
        line = (json.dumps({"op": "open", "hash": hashes[0]}) + "\n").encode()
        attackers = []
        for _ in range(90):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(d.sock)
            except OSError:
                break
            s.setblocking(False)
            try:
                s.sendall(line * 256)
            except (BlockingIOError, OSError):
                pass
            attackers.append(s)
        time.sleep(1)
        cpu0, log0 = cpu_seconds(d.p.pid), d.log_bytes()
        time.sleep(3)
        cpu = cpu_seconds(d.p.pid) - cpu0
        grown = d.log_bytes() - log0
        r = d.ctl("ping", timeout=10)  # status 124 when it gives no answer
        check("a new client is answered while %d connections hold descriptors" % len(attackers), r.returncode == 0, r.stderr.strip())
        check("the loop does not spin", cpu < 1.5, "%.2f s of CPU in 3 s" % cpu)
        check("the log does not flood", grown < 16384, "%d bytes in 3 s" % grown)
        check("descriptors stay under the limit", fds(d.p.pid) < nofile, "%d of %d" % (fds(d.p.pid), nofile))
        for s in attackers:
            s.close()
        wait_for(lambda: fds(d.p.pid) <= base_fds + 2, 10, 0.2)
        check("descriptors back once they leave", fds(d.p.pid) <= base_fds + 2, "%d before, %d after" % (base_fds, fds(d.p.pid)))
        print("figures: %.2f s CPU and %d log bytes in 3 s under the attack" % (cpu, grown))
    finally:
        d.stop()
        if any(not ok for _, ok, _ in RESULTS):
            print("log tail:", open(d.log).read()[-1500:])


def soak_accept(bin_dir, tmp, origin, a):
    """Connections past what the descriptor limit holds: accept fails with
    EMFILE; the daemon answers busy, does not spin and does not flood its log."""
    nofile = 64
    d = Daemon(bin_dir, tmp, "accept", origin, [], nofile=nofile)
    try:
        conns = []
        for _ in range(nofile + 40):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)  # the kernel's backlog takes it whether or not the daemon can
            conns.append(s)
        time.sleep(1.5)
        cpu0, log0 = cpu_seconds(d.p.pid), d.log_bytes()
        time.sleep(3)
        cpu, grown = cpu_seconds(d.p.pid) - cpu0, d.log_bytes() - log0
        busy = 0
        for s in conns:
            s.setblocking(False)
            try:
                if b'"busy"' in s.recv(4096):
                    busy += 1
            except (BlockingIOError, OSError):
                pass
        check("connections past the descriptor limit are told busy", busy > 0, "%d of %d" % (busy, len(conns)))
        check("accept out of descriptors does not spin the loop", cpu < 1.0, "%.2f s of CPU in 3 s" % cpu)
        check("accept out of descriptors does not flood the log", grown < 16384, "%d bytes in 3 s" % grown)
        for s in conns:
            s.close()
        r = d.ctl("ping", timeout=10)  # status 124 when it gives no answer
        check("a client is answered once they leave", r.returncode == 0, r.stderr.strip())
        print("figures: %.2f s CPU and %d log bytes in 3 s with accept out of descriptors, %d told busy" % (cpu, grown, busy))
    finally:
        d.stop()


def write_tiny_feed(www, pages, page_size):
    """Issue 33's hostile feed: `pages` JSON Feed pages linked by next_url,
    each filled up to `page_size` bytes with posts of nothing but an id
    (`{"id":N}`, about 10 bytes each). Returns how many posts they hold."""
    os.makedirs(www + "/tiny")
    n = 1
    for k in range(1, pages + 1):
        head = '{"version":"https://jsonfeed.org/version/1.1","title":"tiny",%s"items":[' % (
            '"next_url":"p%d.json",' % (k + 1) if k < pages else "")
        parts, size = [], len(head) + 2
        while True:
            item = '{"id":%d}' % n
            if size + len(item) + 1 > page_size:
                break
            parts.append(item)
            size += len(item) + 1
            n += 1
        with open("%s/tiny/p%d.json" % (www, k), "w") as f:
            f.write(head + ",".join(parts) + "]}")
    return n - 1


def soak_tiny(bin_dir, tmp, origin, a):
    """Issue 33, point 1: a feed of millions of tiny posts. Before, 16 pages
    of `{"id":N}` under feed-max-size 2M made 1,973,776 posts, a peak of
    1,073 MB resident and 1,973,776 files. A refresh past posts-max-items is
    refused while its page is parsed, writes nothing and gives its memory
    back; under the bound, memory per post stays near what a post needs."""
    total = write_tiny_feed(tmp + "/www", a.tiny_pages, a.tiny_page_size)
    page = str(a.tiny_page_size)
    limit = a.tiny_limit or total * 2 // 3
    d = Daemon(bin_dir, tmp, "tiny", origin, ["--feed-max-size", page] + (["--posts-max-items", str(limit)] if a.tiny_limit == 0 else []),
               posts="tiny/p1.json")
    try:
        time.sleep(1)
        base = rss_mib(d.p.pid)
        peak = Peak(d.p.pid)
        peak.start()
        r = d.ctl("--timeout", "0", "prefetch", "posts", timeout=3600)
        time.sleep(2.5)
        after = rss_mib(d.p.pid)
        files = len(os.listdir(d.store + "/posts"))
        check("a feed of %d tiny posts past posts-max-items %d is refused naming it" % (total, limit),
              r.returncode == 6 and "more than posts-max-items %d items" % limit in r.stderr, (r.stdout + r.stderr).strip()[-300:])
        check("the refused refresh wrote no post file", files == 0, "%d files" % files)
        # What stays is malloc's per-thread arenas, reused by the next walk (before: 192 MB after a walk failed at page 10).
        check("the refused refresh gave its memory back", after <= base + 64, "%.0f MiB before, %.0f MiB after" % (base, after))
        r = d.ctl("--timeout", "0", "prefetch", "posts", timeout=3600)
        time.sleep(2.5)
        peak.running = False
        again = rss_mib(d.p.pid)
        check("a second refused refresh takes no more", r.returncode == 6 and again <= after + 8, "%.0f MiB, then %.0f MiB" % (after, again))
        print("figures: %d posts refused: rss %.0f -> peak %.0f -> %.0f MiB, %.0f MiB after a second" % (total, base, peak.peak, after, again))
    finally:
        d.stop()
    # The same feed under a bound it fits in: every post stored, memory per post measured.
    d = Daemon(bin_dir, tmp, "tiny-stored", origin, ["--feed-max-size", page, "--posts-max-items", str(total)], posts="tiny/p1.json")
    try:
        time.sleep(1)
        base = rss_mib(d.p.pid)
        peak = Peak(d.p.pid)
        peak.start()
        t0 = time.time()
        r = d.ctl("--timeout", "0", "prefetch", "posts", timeout=3600)
        took = time.time() - t0
        time.sleep(2.5)
        peak.running = False
        after = rss_mib(d.p.pid)
        files = len(os.listdir(d.store + "/posts"))
        check("%d tiny posts stored under posts-max-items %d" % (total, total),
              r.returncode == 0 and r.stdout.startswith("posts:  %d fetched" % total) and files == total,
              "%d files; %s" % (files, (r.stdout + r.stderr).strip()[-300:]))
        per_post = (after - base) * 1048576 / total
        per_peak = (peak.peak - base) * 1048576 / total
        # Malloc's arenas and the threads' first work take a few MiB whatever the posts: 16 MiB are allowed beside them.
        check("resident memory: at most %d bytes a stored post (and 16 MiB)" % a.tiny_per_post,
              after - base <= 16 + total * a.tiny_per_post / 1048576, "%.0f bytes a post" % per_post)
        check("the refresh's peak: at most %d bytes a post (and 16 MiB)" % a.tiny_peak_per_post,
              peak.peak - base <= 16 + total * a.tiny_peak_per_post / 1048576, "%.0f bytes a post" % per_peak)
        print("figures: %d posts stored in %.0f s: rss %.0f -> peak %.0f -> %.0f MiB (%.0f B a post, %.0f at peak)" % (
            total, took, base, peak.peak, after, per_post, per_peak))
    finally:
        d.stop()
    d = Daemon(bin_dir, tmp, "tiny-stored", origin, ["--feed-max-size", page, "--posts-max-items", str(total)], posts="tiny/p1.json",
               store=d.store)
    try:
        time.sleep(2)
        restarted = rss_mib(d.p.pid)
        per_post = (restarted - base) * 1048576 / total
        check("after a restart: at most %d bytes a post (and 16 MiB)" % a.tiny_per_post, restarted - base <= 16 + total * a.tiny_per_post / 1048576,
              "%.0f MiB, %.0f bytes a post" % (restarted, per_post))
        print("figures: restarted with %d posts: rss %.0f MiB" % (total, restarted))
    finally:
        d.stop()
        shutil.rmtree(d.store, ignore_errors=True)


def soak_silent(bin_dir, tmp, origin, a):
    d = Daemon(bin_dir, tmp, "silent", origin, ["--http-max-connections", "64"])
    try:
        silent = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(64)]
        time.sleep(1.5)
        status = d.http_get("/healthz")
        check("HTTP answers with http-max-connections silent connections open", status == 200, "status %d" % status)
        for s in silent:
            s.close()
    finally:
        d.stop()


def children(pid):
    """The daemon's child processes (its variant helpers): pid -> state letter."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out[int(entry)] = fields[0]
    return out


def variant_sweep(d, rows, width, clients=16, backwards=False):
    """GET /images/{row}?w=WIDTH&format=webp for every row (last row first
    when `backwards`), `clients` keep-alive connections at once; the
    statuses seen, counted."""
    statuses, lock = {}, threading.Lock()

    def one_client(k):
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
        for n in range(k, rows, clients):
            row = rows - 1 - n if backwards else n
            try:
                conn.request("GET", "/images/%d?w=%d&format=webp" % (row, width))
                r = conn.getresponse()
                r.read()
                status = r.status
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
        conn.close()
    threads = [threading.Thread(target=one_client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def soak_variants(bin_dir, tmp, origin, a):
    """Issue 26 at scale: a variant of every one of `--variants` rows over
    HTTP, 16 clients at once, under a variant-max-size far below what they
    take, twice (the second sweep hits what was kept and remakes what was
    evicted); helpers replaced every 100 jobs all along. Memory, descriptors,
    helper processes and the store's bytes are checked before and after."""
    cap = 64 * 1024
    d = Daemon(bin_dir, tmp, "variants", origin, ["--variant-max-size", str(cap), "--variant-sizes", "32,48"], manifest="variants.json")
    try:
        r = d.ctl("prefetch", "images")
        check("a prefetch of %d decodable images" % a.variants, r.returncode == 0, (r.stdout + r.stderr).strip()[-300:])
        if "variants: off" in open(d.log).read():
            check("the daemon found its variant helper", False, open(d.log).read()[-500:])
            return
        status = d.call({"op": "status"})
        base_bytes, base_rss, base_fds = status["bytes"], rss_mib(d.p.pid), fds(d.p.pid)
        peak = Peak(d.p.pid)
        peak.start()
        t0 = time.time()
        first = variant_sweep(d, a.variants, 32)
        took = time.time() - t0
        check("every row's variant made (first sweep)", first == {200: a.variants}, "%s in %.1f s" % (first, took))
        counters = d.call({"op": "status"})["counters"]
        check("one decode per variant, none failed", counters["variants_made"] == a.variants and counters["variant_failures"] == 0,
              "made %d, failed %d" % (counters["variants_made"], counters["variant_failures"]))
        # Backwards: the variants kept are the last made (least recently
        # used evicted first), so they are asked for first. The same order
        # again would find each one just evicted (an LRU cache scanned in
        # order, larger than it holds, hits nothing).
        second = variant_sweep(d, a.variants, 32, backwards=True)
        status = d.call({"op": "status"})
        counters = status["counters"]
        made_again, hits = counters["variants_made"] - a.variants, counters["variant_hits"]
        check("second sweep: kept variants hit, evicted ones made again", second == {200: a.variants} and hits > 0 and made_again > 0
              and made_again + hits == a.variants, "%s, %d hits, %d made again" % (second, hits, made_again))
        check("variants kept within variant-max-size", status["bytes"] <= base_bytes + cap and status["variants"] < a.variants,
              "%d variants kept; store %d bytes, %d before the variants (cap %d)" % (status["variants"], status["bytes"], base_bytes, cap))
        kids = children(d.p.pid)
        check("at most variant-helpers helpers, none left a zombie", len(kids) <= 2 and "Z" not in kids.values(), "%s" % kids)
        # Before the sweeps no helper ran: after them, each live one holds its two pipes, and nothing more.
        after_rss, after_fds = settled(d, peak, base_rss, base_fds, fd_slack=2 * len(kids), rss_slack=32, pause=1, what="variants: ")
        log = open(d.log).read()
        check("no helper killed or failed", "was killed" not in log and "variant helper" not in log, log[-400:])
        print("figures (variants): %d rows, first sweep %.1f s (%.0f variants/s), rss %.0f -> peak %.0f -> %.0f MiB, fds %d -> %d"
              % (a.variants, took, a.variants / took, base_rss, peak.peak, after_rss, base_fds, after_fds))
    finally:
        d.stop()


def parser():
    """The soak's sizes (SOAK_ARGS), with make test's defaults."""
    ap = argparse.ArgumentParser(prog="SOAK_ARGS")
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--posts", type=int, default=5000)
    ap.add_argument("--subscribers", type=int, default=50)
    ap.add_argument("--pipeliners", type=int, default=200)
    ap.add_argument("--depth", type=int, default=64, help="listings each pipeliner sends")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--total", default="64M", help="max-queued-bytes-total ('' for a daemon without it)")
    ap.add_argument("--variants", type=int, default=1000, help="rows whose variants are made, over HTTP")
    ap.add_argument("--tiny-pages", type=int, default=3, help="pages of the tiny-posts feed")
    ap.add_argument("--tiny-page-size", type=int, default=256 << 10, help="bytes of each (its feed-max-size)")
    ap.add_argument("--tiny-limit", type=int, default=0, help="posts-max-items of the refused refresh: 0 sets two thirds of the posts; else it is the daemon's default, left unset")
    ap.add_argument("--tiny-per-post", type=int, default=256, help="resident bytes a stored post may cost at most")
    ap.add_argument("--tiny-peak-per-post", type=int, default=512, help="peak bytes a post may cost during its refresh")
    ap.add_argument("--listers", type=int, default=200, help="connections pipelining listings they never read (listings)")
    ap.add_argument("--listing-posts", type=int, default=20000, help="posts of about 1 KB in the listings part's store")
    ap.add_argument("--listing-total", default="32M", help="max-queued-bytes-total of the listings part, in M")
    ap.add_argument("--listing-seconds", type=float, default=6, help="how long the listings part's connections stay")
    ap.add_argument("--scale-posts", type=int, default=100000, help="posts of the posts part's feed (soak_posts.py)")
    return ap


def write_www(www, a):
    """What the soak's nginx serves: the manifest, the posts, the variants' images."""
    write_origin(www, a.rows, a.posts, a.listing_posts)
    write_variant_origin(www, a.variants)


# Each part: (bin_dir, tmp, origin, a), checks noted with `check`.
PARTS = {"prefetch": soak_prefetch, "listings": soak_listings, "descriptors": soak_descriptors, "accept": soak_accept,
         "silent": soak_silent, "variants": soak_variants, "tiny": soak_tiny,
         "posts": lambda *args: soak_posts.run(sys.modules[__name__], *args)}
