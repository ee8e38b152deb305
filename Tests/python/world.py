"""What the pytest suite starts: the built `cached` on a store of its own,
a real nginx as the origin, and scratch directories (the suite's one
daemon-and-origin fixture is conftest.py's `module_world`, made of these).
"""
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Fixtures", "browser"))
from benchlib import call_socket, free_port, nginx_conf, stop, wait_for  # noqa: E402


class Origin:
    """nginx serving `www` on 127.0.0.1 and a free port, from `tmp`."""

    def __init__(self, tmp, www):
        self.port = free_port()
        self.tmp = tmp
        os.makedirs(tmp + "/ntmp", exist_ok=True)
        with open(tmp + "/nginx.conf", "w") as f:
            user = "user root;" if os.getuid() == 0 else ""
            f.write(nginx_conf(tmp, self.port, www).replace("worker_processes 1;", "worker_processes 1; " + user))
        self.p = subprocess.Popen(["/usr/sbin/nginx", "-p", tmp, "-c", tmp + "/nginx.conf", "-e", tmp + "/nginx-error.log"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = "http://127.0.0.1:%d" % self.port
        if not wait_for(lambda: subprocess.run(["curl", "-sf", self.base + "/", "-o", "/dev/null"]).returncode in (0, 22), 10):
            self.stop()
            raise RuntimeError("nginx did not start: " + open(tmp + "/nginx-error.log").read()[-1000:])

    def stop(self):
        stop(self.p)


class Daemon:
    """`cached` on `store` and the socket `sock`, started when it answers
    `cachectl ping`: with the HTTP front-end on `http_port` when given
    (its admin routes on unless `admin` is false), standard error into
    `log` when given, RLIMIT_NOFILE `nofile` when given, and `extra`
    arguments."""

    def __init__(self, bins, store, sock, http_port=None, extra=(), log=None, nofile=None, admin=True, log_level="warning"):
        self.bins, self.store, self.sock, self.port, self.log = bins, store, sock, http_port, log
        self.cachectl = bins + "/cachectl"
        args = [bins + "/cached", "--store", store, "--socket", sock, "--log-level", log_level]
        if http_port:
            args += ["--http-listen", "127.0.0.1:%d" % http_port] + (["--http-allow-admin", "true"] if admin else [])
        args += list(extra)

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(log, "ab") if log else subprocess.DEVNULL,
                                  preexec_fn=limit if nofile else None)
        if not wait_for(lambda: self.ctl("ping").returncode == 0, 60):
            self.stop()
            raise RuntimeError("cached did not start" + (": " + open(log).read()[-2000:] if log else ""))

    def ctl(self, *args, timeout=600):
        """`cachectl` on this daemon's socket."""
        return subprocess.run([self.bins + "/cachectl", "--socket", self.sock] + list(args),
                              capture_output=True, text=True, timeout=timeout)

    def call(self, request):
        """One request over the socket; its answer line as JSON."""
        return call_socket(self.sock, request)

    def alive(self):
        return self.p.poll() is None

    def log_bytes(self):
        return os.path.getsize(self.log)

    def http_get(self, path, timeout=10):
        """GET `path` over the HTTP front-end; the status (0 for no answer)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % path).encode())
            data = b""
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break  # the answer may have come before the reset
                if not b:
                    break
                data += b
            return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
        finally:
            s.close()

    def stop(self):
        stop(self.p)


class Scratch:
    """A directory others may traverse (nginx's workers), removed at the end."""

    def __init__(self, prefix):
        self.path = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.path, 0o755)

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Processes:
    """What a test or module started, stopped in reverse order at its end."""

    def __init__(self):
        self.started = []

    def add(self, thing):
        self.started.append(thing)
        return thing

    def stop_all(self):
        for thing in reversed(self.started):
            try:
                thing.stop() if hasattr(thing, "stop") else thing.remove()
            except Exception as e:  # a teardown goes on with the rest
                print("teardown of %r: %s" % (thing, e), file=sys.stderr)
