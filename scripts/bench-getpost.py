#!/usr/bin/env python3
"""get_post of two builds of cached and Redis, in one run (issue 34, point 5).

  scripts/bench-getpost.py BASE_BIN_DIR NEW_BIN_DIR [--runs N] [--pipeline P] [--connections 1,8,64]

Both daemons hold the same posts (Examples/origin/posts.json from one nginx);
beside each, a Redis holds that build's exact answer lines (a later build's
answer carries the id too). One client, NEW's `cached-bench load`, drives all
four, the order rotated from round to round, at C = 1, 8 and 64; the table
gives medians and each build's ratio to its Redis (ops/s: >1 is cached
faster; p99: at most 1.2x Redis's is the goal), and each server's CPU time
per request, user and system apart (/proc/PID/stat): on two shared cores the
ops/s of one run move by 20% and more; the user CPU a request costs, the
server's own code, much less. A benchmark: it prints figures and asserts nothing.
"""
import argparse, json, os, shutil, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (its nginx, Redis and process helpers)
from benchlib import interleave, request_answer, sh  # noqa: E402


def cpu_seconds(pid):
    """A process's CPU time so far, every thread (/proc/PID/stat): (user, system)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--connections", default="1,8,64", help="the C of each row, comma-separated")
    a = ap.parse_args()
    b = bench.Bench(a.new, a.runs, False)
    try:
        www = b.nginx_www()
        with open(os.path.join(bench.ROOT, "Examples", "origin", "posts.json"), "rb") as src, open(os.path.join(www, "posts.json"), "wb") as dst:
            dst.write(src.read())
        socks, pids = {}, {}
        for name, bin_dir in (("base", a.base), ("new", a.new)):
            sock = os.path.join(b.tmp, name + ".sock")
            b.bin = bin_dir  # start_cached and cachectl use this build's
            pids[name] = b.start_cached(os.path.join(b.tmp, "store-" + name), sock, "--posts-url", b.nginx_url("posts.json")).pid
            b.cachectl(sock, "prefetch", "posts")
            socks[name] = sock
        b.bin = a.new
        # The builds' answers may differ (a later one adds the id): each build
        # is compared with a Redis holding its own exact answer lines.
        rsocks = {}
        for name in socks:
            rsocks[name] = os.path.join(b.tmp, "redis-%s.sock" % name)
            pids["redis-" + name] = b.procs.start(["redis-server", "--port", "0", "--unixsocket", rsocks[name], "--save", "",
                                                   "--appendonly", "no"]).pid
            if not bench.wait_for(lambda: os.path.exists(rsocks[name])):
                raise SystemExit("redis-server did not start")
            lines = bench.load_redis_with_answers(socks[name], rsocks[name], range(1, 101))
            print("%s: Redis holds its %d answer lines (%d to %d bytes)" % (name, len(lines), min(map(len, lines)), max(map(len, lines))))
        client = os.path.join(a.new, "cached-bench")
        print("| C | base ops/s | new ops/s | Redis ops/s (base's lines / new's) | base/Redis | new/Redis | new/base | p99 us base / new / Redis (base's / new's) | server user CPU us a request, the same four | server system CPU us a request |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for c in [int(x) for x in a.connections.split(",")]:
            n = (20000 if c == 1 else 200000) * (1 if a.pipeline == 1 else 4)
            load = [client, "load", "--connections", str(c), "--requests", str(n), "--pipeline", str(a.pipeline)]
            def side(name, target, *extra):
                # The server's CPU per request, user and system apart (every
                # thread): less moved by how the two cores were shared than ops/s.
                def run():
                    before = cpu_seconds(pids[name])
                    got = json.loads(sh(load + ["--socket", target] + list(extra)))
                    after = cpu_seconds(pids[name])
                    got["cpu_us"] = (after[0] - before[0]) * 1e6 / n
                    got["sys_us"] = (after[1] - before[1]) * 1e6 / n
                    return got
                return run
            sides = {"base": side("base", socks["base"]), "new": side("new", socks["new"]),
                     "redis-base": side("redis-base", rsocks["base"], "--redis"),
                     "redis-new": side("redis-new", rsocks["new"], "--redis")}
            got = interleave(sides, a.runs)
            for name, runs in got.items():
                if sum(x["errors"] for x in runs):
                    raise SystemExit("%s answered other bytes than primed" % name)
            med = {s: (statistics.median(x["ops"] for x in got[s]), statistics.median(x["p99_us"] for x in got[s]),
                       statistics.median(x["cpu_us"] for x in got[s]), statistics.median(x["sys_us"] for x in got[s])) for s in got}
            # The rounds' own ratios too: each round ran the four within seconds of each other.
            own = lambda s, t: statistics.median(x["ops"] / y["ops"] for x, y in zip(got[s], got[t]))
            print("| %d | %.0f | %.0f | %.0f / %.0f | %.2fx (rounds' %.2fx) | %.2fx (rounds' %.2fx) | %.2fx | %.0f / %.0f / %.0f / %.0f | %.2f / %.2f / %.2f / %.2f | %.2f / %.2f / %.2f / %.2f |" % (
                c, med["base"][0], med["new"][0], med["redis-base"][0], med["redis-new"][0],
                med["base"][0] / med["redis-base"][0], own("base", "redis-base"),
                med["new"][0] / med["redis-new"][0], own("new", "redis-new"), med["new"][0] / med["base"][0],
                med["base"][1], med["new"][1], med["redis-base"][1], med["redis-new"][1],
                med["base"][2], med["new"][2], med["redis-base"][2], med["redis-new"][2],
                med["base"][3], med["new"][3], med["redis-base"][3], med["redis-new"][3]), flush=True)
    finally:
        b.procs.stop_all()
        shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
