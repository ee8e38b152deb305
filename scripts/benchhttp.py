"""The HTTP comparisons' helpers (scripts/bench.py, scripts/benchfs.py):
fetching cached's answers, writing them as nginx's static copy, checking
every server answers the same bytes, and timing one wrk run."""
import os
import urllib.error
import urllib.request

from benchlib import sh


def http_get(url):
    """One GET with urllib: status, Content-Type and body."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def export_answers(base, paths, static):
    """The static copy: every answer body cached (at `base`) sends for the
    `paths` of each kind, written under `static` at the same path; the
    Content-Type and the body of each path."""
    types, bodies = {}, {}
    for kind in paths:
        os.makedirs(os.path.join(static, kind))
        for path in paths[kind]:
            status, ctype, body = http_get(base + path)
            if status != 200:
                raise SystemExit("cached answered %s with %d" % (path, status))
            with open(static + path, "wb") as f:
                f.write(body)
            types[path], bodies[path] = ctype, body
    os.chmod(static, 0o755)
    return types, bodies


def check_same_answers(servers, paths, bodies, types):
    """Refuses to time anything unless every URL answers the same bytes and type everywhere."""
    for name, nport in servers.items():
        for path in paths:
            status, ctype, body = http_get("http://127.0.0.1:%d%s" % (nport, path))
            if status != 200 or body != bodies[path] or ctype != types[path]:
                raise SystemExit("%s answers %s with other bytes or type than cached (%d, %s, %d bytes)" %
                                 (name, path, status, ctype, len(body)))


def wrk_side(url, pids, script, connections, seconds):
    """One side of a rotated HTTP comparison: a function running wrk against
    `url` and adding the CPU seconds the server's processes `pids` used."""
    def run():
        before = sum(sum(proc_cpu(p)) for p in pids)
        got = wrk(url, script, connections, seconds)
        got["cpu_s"] = sum(sum(proc_cpu(p)) for p in pids) - before
        return got
    return run


def nginx_workers(tmp, name):
    """The pids of the worker processes of the nginx whose files are under tmp/name."""
    master = int(open(os.path.join(tmp, name, "nginx.pid")).read())
    return [int(p) for p in sh(["pgrep", "-P", str(master)]).split()]


def proc_cpu(pid):
    """User and system CPU seconds of a process so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def wrk_script(paths):
    """A wrk script asking for `paths` in turn (the same sequence for every
    server) and printing, when done, the exact requests, bytes (heads
    included), duration and errors on one line."""
    return wrk_requests_script('\nlocal paths = {%s}\n' % ", ".join('"%s"' % p for p in paths),
                               'for k, p in ipairs(paths) do reqs[k] = wrk.format("GET", p) end')


def wrk_requests_script(preamble, init):
    """A wrk script whose `init` fills `reqs` (after `preamble`), asks for
    them in turn and prints the `BENCH` line the bench reads."""
    return preamble + """local reqs = {}
local i = 0
function init(args)
  %s
end
function request()
  i = i %% #reqs + 1
  return reqs[i]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCH %%d %%d %%d %%d %%d\\n", summary.requests, summary.bytes, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status))
end
""" % init


def wrk(url, script, connections, seconds):
    """One wrk run (one thread): requests, bytes, seconds; refused on any error."""
    out = sh(["wrk", "-t1", "-c%d" % connections, "-d%ds" % seconds, "-s", script, url])
    line = [x for x in out.splitlines() if x.startswith("BENCH ")][-1].split()
    requests, nbytes, micros, errors, status = map(int, line[1:])
    if errors or status:
        raise SystemExit("wrk against %s: %d socket errors, %d answers not 2xx/3xx" % (url, errors, status))
    return {"requests": requests, "bytes": nbytes, "seconds": micros / 1e6}
