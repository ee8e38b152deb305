"""The soak's `posts` part (issue 34, "How it is checked"): a newcomer's feed
of POSTS posts (one bare JSON array, scripts/benchlib.py's write_posts,
about 280 bytes a post) from the soak's nginx, on a fresh store:

- the feed, larger than `max-object-size` (set below the feed's size when
  the default 64 MiB is not) but under `feed-max-size` (its default, 1 GiB),
  is accepted by `cachectl prefetch posts`;
- `cachectl get posts | wc -l` equals POSTS and the table's two lines, its
  head and its count (`ID USER TITLE`, `N posts`; the client's peak resident
  memory and the wall time printed), the daemon's descriptors and resident
  memory back to where they were before the listing;
- after a clean restart, a title search (`cachectl get posts --query TITLE
  --limit 10`) right after `ready` answers the right posts, and the total
  the protocol gives is the right count (its time printed);
- SIGTERM during the start's background pass over `posts/` (made long by a
  `posts/` emptied while the daemon was down, as BackgroundPassTests does)
  ends the daemon with exit status 0 within 1 s (the issue's own bound;
  the time printed) and logs how far the pass got;
- SIGTERM while the feed's page is parsed (on a fresh store, from the debug
  line that says the page arrived) ends the daemon the same way, the refresh
  saying the page was not read to its end, `cachectl prefetch` failing, and
  the store opening after it with nothing stored.

Times other than SIGTERM's are printed, not asserted: the machine is shared.
`make test` runs it at 100,000 posts (soak.py's default), `make soak` at
1,000,000. soak.py passes itself as `h` (check, Daemon, Peak, settled...).
"""
import os
import shutil
import signal
import subprocess
import time

from benchlib import call_socket, post_title, write_posts

MIB = 1 << 20


def vm_hwm_mib(pid):
    """The process's peak resident memory so far (VmHWM), MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def count_lines(cmd):
    """Runs `cmd`, counting the lines of its output as they come (`| wc -l`):
    (lines, first line, last line, exit status, wall s, s to the first line,
    peak resident KiB of the process, stderr's tail)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines, first, head, tail = 0, None, b"", b""
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        if first is None:
            first = time.time() - t0
        if lines == 0:
            head = (head + b)[:200]
        lines += b.count(b"\n")
        tail = (tail + b)[-200:]
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    line = lambda text: text.decode(errors="replace").strip()
    return (lines, line(head.split(b"\n")[0]), line(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]), p.returncode, time.time() - t0,
            first or 0.0, usage.ru_maxrss, err.decode(errors="replace")[-300:])


def terminate(d):
    """SIGTERM to the daemon: (its exit status, or None after 30 s; the seconds it took)."""
    t0 = time.time()
    d.p.send_signal(signal.SIGTERM)
    try:
        status = d.p.wait(30)
    except subprocess.TimeoutExpired:
        status = None
    return status, time.time() - t0


def run(h, bin_dir, tmp, origin, a):
    n = a.scale_posts
    www = tmp + "/www"
    size = write_posts(www + "/scale-posts.json", n)
    # A feed over max-object-size but under feed-max-size: at 1,000,000 posts
    # (276 MB) the defaults say so; a smaller feed gets a max-object-size below its size.
    extra, bound = [], "64 MiB (the default)"
    if size <= 64 * MIB:
        mos = max(1, size // MIB // 2)
        extra, bound = ["--max-object-size", "%dM" % mos], "%d MiB" % mos
    check = h.check
    d = h.Daemon(bin_dir, tmp, "posts", origin, extra, posts="scale-posts.json")
    aside = None
    try:
        t0 = time.time()
        r = d.ctl("--timeout", "0", "prefetch", "posts", timeout=7200)
        took = time.time() - t0
        check("posts: a feed of %d posts, %.0f MiB, over max-object-size %s and under feed-max-size 1 GiB, accepted" % (n, size / MIB, bound),
              r.returncode == 0 and r.stdout.startswith("posts:  %d fetched" % n), (r.stdout + r.stderr).strip()[-300:])
        time.sleep(1.5)
        base_rss, base_fds, hwm = h.rss_mib(d.p.pid), h.fds(d.p.pid), vm_hwm_mib(d.p.pid)
        print("figures (posts): prefetch of %d posts in %.1f s; resident %.0f MiB after it, peak %.0f MiB (%.2fx)"
              % (n, took, base_rss, hwm, hwm / base_rss), flush=True)

        # Every post listed, page by page, in the memory of one page.
        peak = h.Peak(d.p.pid)
        peak.start()
        lines, head, last, status, wall, first, client_kib, err = count_lines([d.cachectl, "--socket", d.sock, "get", "posts"])
        # A post a line, between the table's head and its count.
        check("posts: `cachectl get posts | wc -l` is %d posts and the table's head and count" % n,
              status == 0 and lines == n + 2 and head.split() == ["ID", "USER", "TITLE"] and last == "%d posts" % n,
              "%d lines (%r ... %r), exit %d %s" % (lines, head, last, status, err))
        h.settled(d, peak, base_rss, base_fds, fd_slack=2, rss_slack=48, pause=1.5, what="posts: after the listing: ")
        print("figures (posts): get posts: %d lines in %.2f s (first after %.3f s), cachectl peak resident %.1f MiB; daemon peak %.0f MiB"
              % (lines, wall, first, client_kib / 1024.0, peak.peak), flush=True)

        # A clean restart, then a search at once.
        t0 = time.time()
        d.stop()
        stopped = time.time() - t0
        t0 = time.time()
        d = h.Daemon(bin_dir, tmp, "posts", origin, extra, posts="scale-posts.json", store=d.store)
        ping = time.time() - t0
        query = post_title(1)  # posts 1, 34, 67, ...: one title in 33
        want = list(range(1, n + 1, 33))
        t0 = time.time()
        r = d.ctl("get", "posts", "--query", query, "--limit", "10")
        search = time.time() - t0
        ids = [int(line.split()[0]) for line in r.stdout.splitlines()[1:-1]]
        check("posts: a search right after the restart's ready answers the first 10 of its posts", r.returncode == 0 and ids == want[:10],
              "%s; %s" % (ids, r.stderr.strip()[-200:]))
        total = call_socket(d.sock, {"op": "list_posts", "query": query, "limit": 1}).get("total")
        check("posts: the search counts %d matches" % len(want), total == len(want), "total %s" % total)
        print("figures (posts): clean stop %.2f s; restart to ping %.2f s, resident %.0f MiB; first search (10 of %d) %.3f s, whole cachectl"
              % (stopped, ping, h.rss_mib(d.p.pid), len(want), search), flush=True)

        # posts/ emptied while the daemon is down: its start writes every file again, in the background.
        d.stop()
        aside = tmp + "/posts-aside"
        os.rename(d.store + "/posts", aside)
        os.mkdir(d.store + "/posts")
        d = h.Daemon(bin_dir, tmp, "posts", origin, extra, posts="scale-posts.json", store=d.store)
        time.sleep(0.2)
        written = len(os.listdir(d.store + "/posts"))
        status, took = terminate(d)
        log = open(d.log).read()
        tail = log[log.rfind("ready:"):]
        check("posts: SIGTERM during the background pass: exit status 0 within 1 s", status == 0 and took < 1.0,
              "%.3f s, status %s" % (took, status))
        check("posts: the pass logs how far it got, no worker left busy", "reconciliation stopped at" in tail and "workers still busy" not in tail,
              tail[-400:])
        print("figures (posts): SIGTERM %.3f s after ready + 0.2 s, the pass rewriting %d post files (%d written by then)"
              % (took, n, written), flush=True)
    finally:
        d.stop()
        if aside:
            shutil.rmtree(aside, ignore_errors=True)
        shutil.rmtree(d.store, ignore_errors=True)
    stop_while_reading(h, bin_dir, tmp, origin, extra, n)


def stop_while_reading(h, bin_dir, tmp, origin, extra, n):
    """SIGTERM while the feed's one page is read: from the debug line that
    says it arrived (the page's parse looks at the stop flag every few
    thousand posts; docs/architecture.md, "Background passes")."""
    check = h.check
    d = h.Daemon(bin_dir, tmp, "posts-parse", origin, extra, posts="scale-posts.json", log_level="debug")
    try:
        mark = d.log_bytes()
        ctl = subprocess.Popen([d.cachectl, "--socket", d.sock, "--timeout", "0", "prefetch", "posts"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        arrived = h.wait_for(lambda: "received; reading it" in d.stderr_since(mark) or ctl.poll() is not None, 600, 0.005)
        status, took = terminate(d)
        out, err = ctl.communicate(timeout=60)
        log = d.stderr_since(mark)
        check("posts: the page of %d posts arrived before the prefetch ended" % n, arrived and "received; reading it" in log,
              "prefetch exit %s: %s" % (ctl.returncode, (out + err).strip()[-300:]))
        check("posts: SIGTERM while the page is read: exit status 0 within 1 s", status == 0 and took < 1.0,
              "%.3f s, status %s" % (took, status))
        check("posts: the refresh says the page was not read to its end; no worker left busy",
              "the page was not read to its end: the daemon is stopping" in log and "workers still busy" not in log, log[-600:])
        check("posts: the prefetch cut short is not reported as done", ctl.returncode != 0, "exit %s: %s" % (ctl.returncode, out.strip()[-200:]))
        d = h.Daemon(bin_dir, tmp, "posts-parse", origin, extra, posts="scale-posts.json", store=d.store)
        # `status`, not `get posts`: a listing of posts never fetched fetches them.
        st = call_socket(d.sock, {"op": "status"})
        check("posts: after it the store opens with nothing stored", st.get("ok") is True and st.get("posts") == 0, str(st)[:300])
        print("figures (posts): SIGTERM %.3f s while the page of %d posts was read; cachectl prefetch: exit %d, %s"
              % (took, n, ctl.returncode, (out + err).strip().splitlines()[-1:] or "-"), flush=True)
    finally:
        d.stop()
        shutil.rmtree(d.store, ignore_errors=True)
