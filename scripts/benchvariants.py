"""make bench's variants section (issue 26): image variants made by the
daemon's sandboxed helpers against Debian's `vipsthumbnail` on the same
images, and a stored variant over HTTP against nginx serving the same
bytes as a static file.

- cold: for each photo (2 MP JPEGs, made with libvips' Perlin noise so
  they compress like photographs), one `get_image` with a variant the store
  does not have yet (a new size each round: the same size for both sides),
  timed by the client from request to answer: the original read and
  verified, the job to the helper, the decode and encode, the variant's
  durable write (temp file fsync, rename, directory fsync, log append
  fsync). Against it `vipsthumbnail PHOTO -s SxS -o OUT.webp[Q=80,strip]`,
  the same size, format and quality, timed as a process (its start and
  libvips' start included: that is what a per-image CLI costs; it fsyncs
  nothing). Interleaved photo by photo, the order alternating.
- hit: wrk cycling over the stored variants, `/images/{row}?w=96&h=96&format=webp`,
  against nginx (1 worker) serving each variant's exact bytes at the same path.
- memory: the helper's peak resident memory (VmHWM) after making a variant
  of a 50-megapixel JPEG, with `vipsthumbnail`'s (`/usr/bin/time -f %M`) for
  reference.
"""
import json
import os
import shutil
import statistics
import subprocess
import time

from benchhttp import check_same_answers, export_answers, nginx_workers, wrk_script, wrk_side  # noqa: E402
from benchlib import call_socket, free_port, interleave, sh  # noqa: E402

SECTION = "variants"
PHOTOS = 8
SIZE = 96


def make_photo(path, width, height, seed, scratch):
    """A JPEG of `width` x `height` from three bands of Perlin noise."""
    bands = []
    for b in range(3):
        band = os.path.join(scratch, "band%d.v" % b)
        sh(["vips", "perlin", band, str(width), str(height), "--cell-size", str(64 + 32 * b), "--seed", str(seed * 3 + b)])
        bands.append(band)
    rgb = os.path.join(scratch, "rgb.v")
    sh(["vips", "bandjoin", " ".join(bands), rgb])
    sh(["vips", "linear", rgb, os.path.join(scratch, "u8.v"), "110", "128", "--uchar"])
    sh(["vips", "copy", os.path.join(scratch, "u8.v"), path + "[Q=90]", "--interpretation", "srgb"])


def write_origin(www, scratch):
    """PHOTOS 2 MP photos and one of 50 MP under www/variants, and their manifest."""
    root = os.path.join(www, "variants")
    os.makedirs(root, exist_ok=True)
    rows = []
    for i in range(PHOTOS):
        make_photo(os.path.join(root, "photo%d.jpg" % i), 1920, 1080, i + 1, scratch)
        rows.append({"url": "photo%d.jpg" % i, "description": "photo %d" % i})
    sh(["vips", "resize", os.path.join(root, "photo0.jpg"), os.path.join(root, "big.jpg[Q=90]"), "4.5"])  # 8640 x 4860
    rows.append({"url": "big.jpg", "description": "50 megapixels"})
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(rows, f)
    for name in os.listdir(root):
        os.chmod(os.path.join(root, name), 0o644)
    os.chmod(root, 0o755)
    return root


def ask(sock, row, size):
    """One variant through the socket; the seconds it took and its answer."""
    t = time.monotonic()
    answer = call_socket(sock, {"op": "get_image", "row": row, "variant": {"w": size, "h": size, "format": "webp"}}, timeout=120)
    took = time.monotonic() - t
    if not answer.get("ok"):
        raise SystemExit("cached answered a variant with %s" % answer)
    return took, answer["image"]["variant"]


def vipsthumbnail(photo, size, out):
    t = time.monotonic()
    subprocess.run(["vipsthumbnail", photo, "-s", "%dx%d" % (size, size), "-o", out + "[Q=80,strip]"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def header(path):
    """width x height as vipsheader reads them."""
    w = sh(["vipsheader", "-f", "width", path]).split()[-1]
    h = sh(["vipsheader", "-f", "height", path]).split()[-1]
    return "%sx%s" % (w, h)


def cold(bench, sock, root):
    """Median seconds per image, cached and vipsthumbnail, same sizes, interleaved."""
    ours, theirs = [], []
    out = os.path.join(bench.tmp, "vt.webp")
    for r in range(bench.runs):
        size = SIZE + 1 + r  # a size the store has not made yet: a cold variant every round
        for i in range(PHOTOS):
            photo = os.path.join(root, "photo%d.jpg" % i)
            if (r + i) % 2 == 0:
                took, v = ask(sock, i, size)
                peer = vipsthumbnail(photo, size, out)
            else:
                peer = vipsthumbnail(photo, size, out)
                took, v = ask(sock, i, size)
            ours.append(took)
            theirs.append(peer)
            if r == 0 and i == 0 and header(v["path"]) != header(out):
                raise SystemExit("cached made %s, vipsthumbnail %s: not the same thumbnail" % (header(v["path"]), header(out)))
    return statistics.median(ours), statistics.median(theirs)


def helper_pids(daemon_pid):
    out = subprocess.run(["pgrep", "-P", str(daemon_pid), "cached-variant"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def peak_memory(bench, root):
    """VmHWM of a fresh helper after a variant of the 50 MP JPEG, and vipsthumbnail's max RSS, in KiB."""
    sock = os.path.join(bench.tmp, "variants-mem.sock")
    p = bench.start_cached(os.path.join(bench.tmp, "store-variants-mem"), sock, "--variant-helpers", "1",
                           "--images-url", bench.nginx_url("variants/manifest.json"))
    try:
        ask(sock, PHOTOS, SIZE)
        pids = helper_pids(p.pid)
        if len(pids) != 1:
            raise SystemExit("expected one helper, found %s" % pids)
        with open("/proc/%d/status" % pids[0]) as f:
            hwm = [int(line.split()[1]) for line in f if line.startswith("VmHWM:")][0]
    finally:
        bench.procs.stop(p)
    t = subprocess.run(["/usr/bin/time", "-f", "%M", "vipsthumbnail", os.path.join(root, "big.jpg"), "-s", "%dx%d" % (SIZE, SIZE),
                        "-o", os.path.join(bench.tmp, "big.webp[Q=80,strip]")], capture_output=True, text=True, check=True)
    return hwm, int(t.stderr.split()[-1])


def run(bench):
    print("== variants: cached's helpers vs vipsthumbnail (cold, per image) and nginx (a stored variant over HTTP)", flush=True)
    if not shutil.which("vipsthumbnail") or not shutil.which("vips"):
        for m in ("cold variant", "variant hit over HTTP"):
            bench.not_measured(SECTION, m, "vipsthumbnail / nginx", "-", "libvips-tools is not installed")
        return
    www = bench.nginx_www()
    scratch = os.path.join(bench.tmp, "photos")
    os.makedirs(scratch, exist_ok=True)
    root = write_origin(www, scratch)
    sock = os.path.join(bench.tmp, "variants.sock")
    port = free_port()
    cached = bench.start_cached(os.path.join(bench.tmp, "store-variants"), sock, "--http-listen", "127.0.0.1:%d" % port,
                                "--images-url", bench.nginx_url("variants/manifest.json"))
    bench.cachectl(sock, "prefetch", "images")
    for i in range(PHOTOS):  # the helpers started and warm, as in a running daemon
        ask(sock, i, SIZE)
    ours, theirs = cold(bench, sock, root)
    label = "%d px webp of a 2 MP JPEG (%d photos), ms per image" % (SIZE, PHOTOS)
    bench.row(SECTION, "cold variant, " + label + ", incl. the store's fsyncs", ours * 1000, "vipsthumbnail CLI, same image and size",
              theirs * 1000, "lower", "at most 1.1 x vipsthumbnail's time", lambda o, p: o <= 1.1 * p)

    base = "http://127.0.0.1:%d" % port
    paths = {"images": ["/images/%d?w=%d&h=%d&format=webp" % (i, SIZE, SIZE) for i in range(PHOTOS)]}
    static = os.path.join(bench.tmp, "static-variants")
    files = {"images": ["/images/%d" % i for i in range(PHOTOS)]}
    types, bodies = export_answers(base, paths, static + "-q")
    os.makedirs(os.path.join(static, "images"))
    for q, f in zip(paths["images"], files["images"]):  # nginx serves /images/N?... from the file /images/N
        with open(static + f, "wb") as out:
            out.write(bodies[q])
    os.chmod(static, 0o755)
    servers = {"nginx": bench.start_static_nginx("nginx-variants", static, "1", {f: types[q] for q, f in zip(paths["images"], files["images"])})}
    check_same_answers(servers, paths["images"], bodies, types)
    workers = {"nginx": nginx_workers(bench.tmp, "nginx-variants")}
    script, mean_body = bench.wrk_cycle("variants", paths["images"], bodies)
    seconds = 5 if not bench.quick else 1
    for c in (16, 64):
        sides = {"cached": wrk_side(base, [cached.pid], script, c, seconds),
                 "nginx": wrk_side("http://127.0.0.1:%d" % servers["nginx"], workers["nginx"], script, c, seconds)}
        got = interleave(sides, bench.runs)
        rate = {n: statistics.median(x["requests"] / x["seconds"] for x in got[n]) for n in got}
        cpu = {n: statistics.median(x["cpu_s"] / x["requests"] * 1e6 for x in got[n]) for n in got}
        lbl = "c=%d, wrk -t1, %d variants in turn (mean %d bytes)" % (c, PHOTOS, mean_body)
        bench.row(SECTION, "GET /images/{row}?w=&h=&format= (stored variant) req/s, " + lbl, rate["cached"],
                  "nginx static, worker_processes 1", rate["nginx"], "higher", "at least nginx's (1 worker)", lambda o, p: o >= p)
        bench.row(SECTION, "CPU us per request, stored variant, " + lbl, cpu["cached"], "nginx's worker", cpu["nginx"], "lower", "(reported)")
    bench.procs.stop(cached)

    hwm, vt = peak_memory(bench, root)
    bench.row(SECTION, "helper peak resident memory (VmHWM), a %d px webp of a 50 MP JPEG, MiB" % SIZE, hwm / 1024,
              "vipsthumbnail's max RSS, same image", vt / 1024, "lower", "(reported)")
