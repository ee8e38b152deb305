"""What the bench scripts share: running a command, waiting for a condition,
a free TCP port, stopping a process, rotated rounds, loading a sibling script,
a feed of posts, a process's /proc/PID/status figures."""
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    """Runs `cmd` (a list, or a string for the shell); its stdout, or an exception."""
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, capture_output=True, text=True, **kw).stdout


def status_kib(pid, field):
    """A figure of /proc/PID/status in KiB (`VmRSS`, `VmHWM`, ...); 0 when absent."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fsync_dir(path):
    """fsync of a directory (what makes a rename or a new entry in it durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def wait_for(cond, seconds=30, step=0.02):
    """True once `cond()` is, False after `seconds`."""
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop(p, timeout=10):
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def nginx_conf(tmp, port, www, gzip=False):
    """An nginx configuration serving `www` on 127.0.0.1:`port`, everything it writes under `tmp`;
    with `gzip`, bodies compressed for clients that ask (as a feed's origin usually does: with
    no mime.types here, a .json file is served as text/plain)."""
    return """
worker_processes 1; daemon off; pid %(t)s/nginx.pid; error_log %(t)s/nginx-error.log;
events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;%(g)s
  client_body_temp_path %(t)s/ntmp; proxy_temp_path %(t)s/ntmp; fastcgi_temp_path %(t)s/ntmp;
  uwsgi_temp_path %(t)s/ntmp; scgi_temp_path %(t)s/ntmp;
  server { listen 127.0.0.1:%(p)d; root %(w)s; } }
""" % {"t": tmp, "p": port, "w": www, "g": " gzip on; gzip_types text/plain application/json;" if gzip else ""}


def quiet(args):
    """A process with its output discarded."""
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_origin(procs, origin_script, root, tmp):
    """Examples/origin-server.py serving `root` on a free port; its base URL."""
    port_file = os.path.join(tmp, "port")
    procs.append(quiet([sys.executable, origin_script, "--root", root, "--port-file", port_file]))
    if not wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip()):
        raise SystemExit("the origin did not start")
    return "http://127.0.0.1:%d" % int(open(port_file).read())


def start_cached(procs, bin_dir, store, sock, *args):
    """The daemon on `store` and `sock` with `args`, once it answers `ping`; cachectl's path."""
    procs.append(quiet([os.path.join(bin_dir, "cached"), "--store", store, "--socket", sock, "--log-level", "warning"] + list(args)))
    cachectl = os.path.join(bin_dir, "cachectl")
    if not wait_for(lambda: subprocess.run([cachectl, "--socket", sock, "ping"], capture_output=True).returncode == 0):
        raise SystemExit("cached did not start")
    return cachectl


def call_socket(path, request, timeout=None):
    """One request over cached's Unix socket at `path`; its answer line as JSON."""
    import json
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            b = s.recv(1 << 20)
            if not b:
                break
            data += b
    finally:
        s.close()
    return json.loads(data)


def request_answer(sock_path, line):
    """One request line to cached, its whole answer line back (with `\\n`)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall(line)
    out = b""
    while not out.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("cached closed the connection")
        out += chunk
    s.close()
    return out


def interleave(sides, runs):
    """Runs every side once per round, the order rotating each round (A B C,
    B C A, ...), and returns each side's results: like with like, in one run."""
    names = list(sides)
    got = {n: [] for n in names}
    for r in range(runs):
        for n in names[r % len(names):] + names[:r % len(names)]:
            got[n].append(sides[n]())
    return got


def load_script(name):
    """One of the standalone bench scripts beside this one (their names have hyphens)."""
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), os.path.join(ROOT, "scripts", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORDS = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna "
         "aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo").split()


def post_title(i):
    """Post i's title: 8 of WORDS, the same for every i of the same remainder by len(WORDS) (33 titles in all)."""
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9))


def post_json(i):
    """Post i as write_posts writes it, shaped like jsonplaceholder's (about 280 bytes)."""
    body = "\n".join(" ".join(WORDS[(i + k * j) % len(WORDS)] for k in range(1, 8)) for j in range(1, 5))
    return json.dumps({"userId": i // 10 + 1, "id": i, "title": post_title(i), "body": body})


def write_posts(path, n):
    """A feed of posts 1...n as one bare JSON array, each post_json(i); its size in bytes."""
    with open(path, "w") as f:
        f.write("[")
        for i in range(1, n + 1):
            f.write(("," if i > 1 else "") + post_json(i))
        f.write("]")
    return os.path.getsize(path)
