"""The sections of scripts/bench.py that put the store on two file systems in
one run: the scratch one the bench's tmp dir is on (ext4 on the project's
machine, where the daemon's `verify-reads = auto` means `always`) and a btrfs
file system the bench makes itself on a loop device (where `auto` means
`on-change`: btrfs checks a checksum of every data block it reads from the
disk, so an unchanged file in the page cache is not hashed again).

  LoopFS, Btrfs        a sparse image in the tmp dir, mkfs (btrfs, or ext4 with
                       its default journal), mount -o loop; unmounted and
                       removed by `remove()` (bench.py's finally)
  serving(bench)       open, read, cat against the object files read directly,
                       each file system against its own files, all rotated
  http_large_images(bench)
                       GET /images/{row} of large objects against nginx
                       serving the same bytes, on each file system, all rotated

docs/performance.md says what each comparison is and why.
"""
import json
import os
import statistics
import subprocess
import time

from benchhttp import check_same_answers, export_answers, http_get, nginx_workers, wrk_side
from benchlib import call_socket, free_port, interleave, load_script

# The serving figures before verify-reads landed (bench/results.md of
# 2026-12-01, every read hashed): the scratch store's no-regression reference.
SERVING_REFERENCE = {"open": (2332, 6230), "read": (1518, 6230)}
SERVING_REFERENCE_DATE = "2026-12-01"
# A ratio counts as no regression down to this fraction of the reference's:
# figures move by 10-20% between runs on the shared machine (docs/performance.md).
NOISE = 0.9


def mount_type(path):
    """The type of the file system holding `path` (/proc/self/mountinfo's
    longest mount point that is `path` or a parent), e.g. "ext4", "btrfs"."""
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            point = left.split()[4].replace("\\040", " ")
            inside = path == point or path.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, right.split()[0]
    return kind


class LoopFS:
    """A file system of `kind` on a sparse image file under `tmp`, made with
    its mkfs's defaults and mounted on the first `path()`. `path()` is its
    mount point, or None when it cannot be made; `reason` then says exactly
    why (the failing command and its message)."""

    SIZE = 4 << 30  # sparse: only what the bench writes takes disk space
    MKFS = {"btrfs": ["mkfs.btrfs", "-q", "-f"], "ext4": ["mkfs.ext4", "-q", "-F"]}

    def __init__(self, tmp, kind, size=SIZE):
        self.kind = kind
        self.size = size
        self.image = os.path.join(tmp, kind + ".img")
        self.mount_point = os.path.join(tmp, kind)
        self.mounted = False
        self.tried = False
        self.reason = None

    def path(self):
        if not self.tried:
            self.tried = True
            self.reason = self.make()
            if self.reason:
                print("  %s: not measured: %s" % (self.kind, self.reason), flush=True)
        return self.mount_point if self.mounted else None

    def make(self):
        """Makes and mounts the file system; None, or why it could not."""
        if os.geteuid() != 0:
            return "mounting a loop device needs root, and this runs as uid %d" % os.geteuid()
        with open(self.image, "wb") as f:
            f.truncate(self.size)
        os.makedirs(self.mount_point)
        why = run_for_reason(self.MKFS[self.kind] + [self.image]) or \
            run_for_reason(["mount", "-o", "loop", self.image, self.mount_point])
        if why:
            return why
        self.mounted = True
        os.chmod(self.mount_point, 0o755)  # nginx's workers run as an unprivileged user
        kind = mount_type(self.mount_point)
        if kind != self.kind:
            return "%s is mounted, but as %s" % (self.mount_point, kind)
        print("  %s: %s (sparse, %d GiB) mounted on %s" % (self.kind, self.image, self.size >> 30, self.mount_point), flush=True)
        return None

    def remove(self):
        """Unmounts (the daemons and nginx must be stopped) and deletes the
        image; says so on failure, never raises."""
        if self.mounted:
            why = None
            for _ in range(20):
                why = run_for_reason(["umount", self.mount_point])
                if not why:
                    self.mounted = False
                    break
                time.sleep(0.5)
            if self.mounted:
                print("%s: %s; unmounting lazily" % (self.kind, why), flush=True)
                run_for_reason(["umount", "-l", self.mount_point])
                self.mounted = False
        try:
            os.remove(self.image)
        except FileNotFoundError:
            pass
        except OSError as e:
            print("%s: could not remove %s: %s" % (self.kind, self.image, e), flush=True)


def Btrfs(tmp):
    """The btrfs the serving sections measure on (LoopFS)."""
    return LoopFS(tmp, "btrfs")


def run_for_reason(cmd):
    """Runs `cmd`; None if it succeeded, else a sentence with its exit status and message."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        return "`%s` could not run: %s" % (" ".join(cmd), e)
    if r.returncode == 0:
        return None
    return "`%s` failed (exit %d): %s" % (" ".join(cmd), r.returncode, (r.stderr or r.stdout).strip() or "no message")


def file_systems(bench):
    """Where each store goes: [(label, directory, the verify-reads mode it
    must report or None)], the scratch file system first, then btrfs when it
    could be mounted."""
    scratch = mount_type(bench.tmp)
    out = [(scratch if scratch != "btrfs" else "scratch btrfs", bench.tmp, None)]
    btrfs = bench.btrfs.path()
    if btrfs:
        out.append(("btrfs", btrfs, "on-change"))
    return out


def verify_reads(sock, label, expected):
    """The daemon's `verify_reads` from `status`; the bench stops, loudly,
    when it is not `expected` (None: any)."""
    mode = call_socket(sock, {"op": "status"}, timeout=30).get("verify_reads")
    if expected and mode != expected:
        raise SystemExit("the daemon with its store on %s reports verify_reads %r, not %r: its figures would not be "
                         "the ones this bench is for" % (label, mode, expected))
    print("  store on %s: verify_reads %s" % (label, mode), flush=True)
    return mode


def not_measured(bench, section, measure, peer, goal):
    bench.not_measured(section, measure, peer, goal, bench.btrfs.reason)


# 3. Serving bytes -------------------------------------------------------------
def write_images(www, url, small, large):
    """`small` images of 100 KiB and `large` of 2 MiB (random bytes after a
    PNG signature) under www/img, with a manifest of them; the manifest's URL."""
    os.makedirs(os.path.join(www, "img"), exist_ok=True)
    urls = []
    for i in range(small + large):
        name = "img/%04d.png" % i
        with open(os.path.join(www, name), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + os.urandom((100 * 1024 if i < small else 2 * 1024 * 1024) - 8))
        urls.append(url(name))
    with open(os.path.join(www, "manifest.json"), "w") as f:
        json.dump([{"url": u, "description": str(i)} for i, u in enumerate(urls)], f)
    return url("manifest.json")


def serving(bench):
    """Every object once per round through `open` (16 in flight), `read` and
    `cat`, against the same object files read directly, on the scratch file
    system and on btrfs; one daemon per file system, all sides rotated."""
    small, large = (1000, 100) if not bench.quick else (100, 10)
    print("== serving bytes: open, read, plain reads of the files and cat, the store on each file system "
          "(scripts/bench-open.py)", flush=True)
    manifest = write_images(bench.nginx_www(), bench.nginx_url, small, large)
    stores, modes, daemons = {}, {}, []
    for label, root, expected in file_systems(bench):
        store, sock = os.path.join(root, "store-read"), os.path.join(bench.tmp, "read-%s.sock" % label.replace(" ", "-"))
        daemons.append(bench.start_cached(store, sock, "--images-url", manifest, "--concurrency", "16"))
        bench.cachectl(sock, "prefetch", "images")
        modes[label] = verify_reads(sock, label, expected)
        stores[label] = (store, sock)
    got = load_script("bench-open").measure_reads(bench.bin, stores, bench.runs)
    for p in daemons:
        bench.procs.stop(p)
    for label in stores:
        if label == "btrfs":
            btrfs_serving_rows(bench, got[label])
        else:
            scratch_serving_rows(bench, label, modes[label], got[label])
    if "btrfs" not in stores:
        for what, goal in (("open", "at least 0.9 x direct reads"), ("read", "at least 0.5 x direct reads")):
            not_measured(bench, "serving", "%s of every object, MiB/s, store on btrfs" % what,
                         "files read directly, btrfs", goal)


def scratch_serving_rows(bench, label, mode, got):
    """The scratch file system: no regression against the reference run."""
    for what in ("open", "read"):
        ours, files = SERVING_REFERENCE[what]
        least = NOISE * ours / files
        bench.row("serving", "%s of every object, MiB/s, store on %s (verify-reads %s)" % (what, label, mode), got[what],
                  "files read directly, %s" % label, got["files"], "higher",
                  "no regression: at least %.2fx, %.0f%% of %s's %.2fx (bench/results.md: %s vs %s MiB/s)" %
                  (least, NOISE * 100, SERVING_REFERENCE_DATE, ours / files, "{:,}".format(ours), "{:,}".format(files)),
                  lambda o, p, least=least: o >= least * p)
    bench.row("serving", "read of every object, MiB/s, store on %s" % label, got["read"], "cat > /dev/null, %s" % label,
              got["cat"], "higher", "(reported)")
    bench.row("serving", "open of many (64 a request) of every object, MiB/s, store on %s" % label, got["open-batch"],
              "files read directly, %s" % label, got["files"], "higher", "(reported)")


def btrfs_serving_rows(bench, got):
    bench.row("serving", "open of many (64 a request) of every object, MiB/s, store on btrfs (verify-reads on-change)",
              got["open-batch"], "files read directly, btrfs", got["files"], "higher", "at least 0.9 x direct reads",
              lambda o, p: o >= 0.9 * p)
    bench.row("serving", "open of every object, one a request (16 in flight), MiB/s, store on btrfs", got["open"],
              "files read directly, btrfs", got["files"], "higher", "(reported: the goal is open of many's)")
    bench.row("serving", "read of every object, MiB/s, store on btrfs (verify-reads on-change)", got["read"],
              "files read directly, btrfs", got["files"], "higher", "at least 0.5 x direct reads", lambda o, p: o >= 0.5 * p)
    bench.row("serving", "read of every object, MiB/s, store on btrfs", got["read"], "cat > /dev/null, btrfs", got["cat"],
              "higher", "(reported)")


# 7. HTTP front-end, large images ------------------------------------------------
LARGE_SIZES = [1 << 20] * 8 + [8 << 20] * 2


def write_large_origin(www):
    """The large images (random bytes after a PNG signature, distinct per
    row) and their manifest under www/large-origin."""
    origin = os.path.join(www, "large-origin")
    os.makedirs(origin)
    for i, size in enumerate(LARGE_SIZES):
        with open(os.path.join(origin, "%02d.png" % i), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(size - 8))
    with open(os.path.join(origin, "manifest.json"), "w") as f:
        json.dump([{"url": "%02d.png" % i, "description": "large image %d" % i} for i in range(len(LARGE_SIZES))], f)


def large_setup(bench, label, root, expected, manifest, nginx):
    """On one file system: a daemon with its store under `root`, prefetched
    from the large origin, and nginx serving its exact answer bodies from a
    static copy under `root` (`nginx`: [(name, worker_processes)]). The
    daemon's side {"base", "pid", "process"}, its paths, its bodies, and
    nginx's ports by name."""
    sock, port = os.path.join(bench.tmp, "http-large-%s.sock" % label.replace(" ", "-")), free_port()
    cached = bench.start_cached(os.path.join(root, "store-http-large"), sock, "--http-listen", "127.0.0.1:%d" % port,
                                "--images-url", manifest)
    bench.cachectl(sock, "prefetch", "images")
    verify_reads(sock, label, expected)
    base = "http://127.0.0.1:%d" % port
    rows = len(json.loads(http_get(base + "/images")[2]))
    if rows != len(LARGE_SIZES):
        raise SystemExit("cached (store on %s) lists %d large images after the prefetch, not %d" % (label, rows, len(LARGE_SIZES)))
    paths = ["/images/%d" % r for r in range(rows)]
    types, bodies = export_answers(base, {"images": paths}, os.path.join(root, "static-large"))
    if sorted(len(b) for b in bodies.values()) != sorted(LARGE_SIZES):
        raise SystemExit("cached's large image bodies (store on %s) are not the origin's sizes" % label)
    servers = {name: bench.start_static_nginx(name, os.path.join(root, "static-large"), workers, types)
               for name, workers in nginx}
    check_same_answers(servers, paths, bodies, types)
    return {"base": base, "pid": cached.pid, "process": cached}, paths, bodies, servers


def http_large_images(bench):
    """`GET /images/{row}` of objects over cached's 256 KiB inline limit
    (sent with `sendfile`; under `always` first hashed on a worker thread),
    against nginx serving the daemon's exact answer bodies as static files
    from the same file system: the scratch one (nginx 1 worker and auto, the
    rows of the table before) and btrfs (nginx 1 worker). One wrk, the same
    URL cycle and connections for every side, all sides rotated each round."""
    print("== http: GET /images/{row} of %d large images (%s) vs nginx serving cached's exact bodies from the same "
          "file system (wrk)" % (len(LARGE_SIZES), " + ".join("%d x %d MiB" % (LARGE_SIZES.count(n), n >> 20)
                                                              for n in sorted(set(LARGE_SIZES)))), flush=True)
    www = bench.nginx_www()
    write_large_origin(www)
    manifest = bench.nginx_url("large-origin/manifest.json")
    cacheds, servers, reference = {}, {}, None
    for label, root, expected in file_systems(bench):
        nginx = [("nginx-large-btrfs", "1")] if label == "btrfs" else [("nginx-large", "1"), ("nginx-large-auto", "auto")]
        side, paths, bodies, ports = large_setup(bench, label, root, expected, manifest, nginx)
        if reference and bodies != reference:
            raise SystemExit("cached answers other large image bodies with its store on %s" % label)
        reference = bodies
        cacheds["cached-btrfs" if label == "btrfs" else "cached"] = side
        servers.update(ports)
    workers = {name: nginx_workers(bench.tmp, name) for name in servers}
    print("  %d images (%d to %d bytes), byte-identical from every daemon and every nginx" %
          (len(paths), min(LARGE_SIZES), max(LARGE_SIZES)), flush=True)
    seconds = 5 if not bench.quick else 1
    script, mean_body = bench.wrk_cycle("large", paths, reference)
    for c in (16, 64):
        sides = {name: wrk_side(s["base"], [s["pid"]], script, c, seconds) for name, s in cacheds.items()}
        sides.update({name: wrk_side("http://127.0.0.1:%d" % port, workers[name], script, c, seconds)
                      for name, port in servers.items()})
        got = interleave(sides, bench.runs)
        heads = {n: statistics.median((x["bytes"] - x["requests"] * mean_body) / x["requests"] for x in got[n]) for n in got}
        # Not the heads alone here: the answers still in flight when wrk stops are mostly the 8 MiB ones,
        # so the completed ones' mix falls a little short of the cycle's mean (a few KB per answer).
        print("  large images c=%d: wrk's bytes per answer less the cycle's mean body (heads, less the bodies cut off "
              "at the end): %s" % (c, ", ".join("%s %.0f" % kv for kv in heads.items())), flush=True)
        label = "c=%d, wrk -t1, %d large rows in turn (mean %.1f MiB)" % (c, len(paths), mean_body / 1048576)
        figures = LargeFigures(got, mean_body)
        scratch_large_rows(bench, figures, label, len(workers["nginx-large-auto"]))
        if "cached-btrfs" in got:
            btrfs_large_rows(bench, figures, label)
        else:
            not_measured(bench, "http", "GET /images/{row} body MiB/s, both on btrfs, " + label,
                         "nginx static from btrfs, worker_processes 1", "at least nginx's (1 worker)")
    for side in cacheds.values():
        bench.procs.stop(side["process"])


class LargeFigures:
    """Medians of one concurrency's rounds, per side."""

    def __init__(self, got, mean_body):
        self.got, self.mean_body = got, mean_body

    def rate(self, side):
        return statistics.median(x["requests"] / x["seconds"] for x in self.got[side])

    def body_mib(self, side):
        return statistics.median(x["requests"] * self.mean_body / x["seconds"] / 1048576 for x in self.got[side])

    def cpu_us(self, side):
        return statistics.median(x["cpu_s"] / x["requests"] * 1e6 for x in self.got[side])


def scratch_large_rows(bench, f, label, auto_workers):
    """The rows the table had before btrfs, under the same names."""
    measure = "GET /images/{row} body MiB/s, " + label
    bench.row("http", measure, f.body_mib("cached"), "nginx static, worker_processes 1", f.body_mib("nginx-large"),
              "higher", "at least 0.8 x nginx's (1 worker)", lambda o, p: o >= 0.8 * p)
    bench.row("http", "GET /images/{row} req/s, " + label, f.rate("cached"), "nginx static, worker_processes 1",
              f.rate("nginx-large"), "higher", "(reported)")
    bench.row("http", measure + " (reference)", f.body_mib("cached"), "nginx, worker_processes auto (%d)" % auto_workers,
              f.body_mib("nginx-large-auto"), "higher", "(reference: more workers)")
    bench.row("http", "CPU us per request, large images, " + label, f.cpu_us("cached"),
              "nginx's worker, worker_processes 1", f.cpu_us("nginx-large"), "lower", "(reported)")


def btrfs_large_rows(bench, f, label):
    peer = "nginx static from btrfs, worker_processes 1"
    bench.row("http", "GET /images/{row} body MiB/s, both on btrfs, " + label, f.body_mib("cached-btrfs"), peer,
              f.body_mib("nginx-large-btrfs"), "higher", "at least nginx's (1 worker)", lambda o, p: o >= p)
    bench.row("http", "GET /images/{row} req/s, both on btrfs, " + label, f.rate("cached-btrfs"), peer,
              f.rate("nginx-large-btrfs"), "higher", "(reported)")
    bench.row("http", "CPU us per request, large images, both on btrfs, " + label, f.cpu_us("cached-btrfs"),
              "nginx's worker, from btrfs", f.cpu_us("nginx-large-btrfs"), "lower", "(reported)")
