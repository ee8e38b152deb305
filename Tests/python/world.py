"""What the pytest suite starts: the built `cached` on a store of its own,
a real nginx as the origin, and scratch directories (the suite's one
daemon-and-origin fixture is conftest.py's `module_world`, made of these).
"""
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Fixtures", "browser"))
from benchlib import call_socket, free_port, nginx_conf, stop, wait_for  # noqa: E402


def tail(path, size=1500):
    """The end of a log file, or why there is none."""
    try:
        with open(path, errors="replace") as f:
            return f.read()[-size:]
    except OSError as e:
        return "(%s)" % e


class Origin:
    """nginx on 127.0.0.1, from `tmp`: serving `www` on a free port, or run
    with `conf`, a whole nginx.conf whose listening `ports` the caller chose
    (the feed shapes' two hosts). Started at once; waits until each port answers."""

    def __init__(self, tmp, www=None, conf=None, ports=None):
        assert (www is None) != (conf is None), "an Origin serves a www directory or runs a conf, one of the two"
        self.port = ports[0] if ports else free_port()
        self.tmp = tmp
        os.makedirs(tmp + "/ntmp", exist_ok=True)
        with open(tmp + "/nginx.conf", "w") as f:
            user = "user root;" if os.getuid() == 0 else ""
            f.write(conf if conf is not None else nginx_conf(tmp, self.port, www).replace("worker_processes 1;", "worker_processes 1; " + user))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        with open(tmp + "/nginx.out", "wb") as err:
            self.p = subprocess.Popen([nginx, "-p", tmp, "-c", tmp + "/nginx.conf", "-e", tmp + "/nginx-error.log"],
                                      stdout=subprocess.DEVNULL, stderr=err)
        self.base = "http://127.0.0.1:%d" % self.port
        for port in ports or [self.port]:
            url = "http://127.0.0.1:%d/" % port
            if not wait_for(lambda url=url: subprocess.run(["curl", "-sf", "-m", "2", "--noproxy", "*", url, "-o", "/dev/null"]).returncode in (0, 22), 10):
                self.stop()
                raise RuntimeError("nginx did not answer on port %d: %s | %s" % (port, tail(tmp + "/nginx.out"), tail(tmp + "/nginx-error.log")))

    def stop(self):
        stop(self.p)


class Daemon:
    """`cached` on `store` and the socket `sock`: with the HTTP front-end on
    `http_port` when given (its admin routes on unless `admin` is false),
    standard error appended to `log` when given, RLIMIT_NOFILE `nofile`
    when given, the configuration file `config` when given, and `extra`
    arguments. Started at once unless `start` is false (then `start()`
    starts it, and again after `stop()` or `kill()`, on the same store)."""

    def __init__(self, bins, store, sock, http_port=None, extra=(), log=None, nofile=None, admin=True,
                 log_level="warning", start=True, config=None):
        self.bins, self.store, self.sock, self.port, self.log = bins, store, sock, http_port, log
        self.cached, self.cachectl = bins + "/cached", bins + "/cachectl"
        self.extra, self.nofile, self.admin, self.log_level, self.config = list(extra), nofile, admin, log_level, config
        self.p, self.failure, self.mark = None, "", 0
        if start and not self.start():
            raise RuntimeError("cached did not start: " + self.failure)

    def argv(self):
        args = [self.cached] + (["--config", self.config] if self.config else [])
        args += ["--store", self.store, "--socket", self.sock, "--log-level", self.log_level]
        if self.port:
            args += ["--http-listen", "127.0.0.1:%d" % self.port] + (["--http-allow-admin", "true"] if self.admin else [])
        return args + self.extra

    def start(self, seconds=60):
        """True once it answers `cachectl ping`; False, the reason in
        `failure`, when it exits first or never answers (then it is stopped)."""
        self.mark = os.path.getsize(self.log) if self.log and os.path.exists(self.log) else 0
        nofile = self.nofile

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.p = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL,
                                  stderr=open(self.log, "ab") if self.log else subprocess.DEVNULL,
                                  preexec_fn=limit if nofile else None)
        up = wait_for(lambda: self.p.poll() is not None or self.ctl("ping", timeout=5).returncode == 0, seconds, 0.05)
        if up and self.p.poll() is None:
            self.failure = ""
            return True
        said = " ".join(self.stderr_since(self.mark).split())[-600:] if self.log else ""
        self.failure = "exit status %s: %s" % (self.p.poll(), said)
        self.stop()
        return False

    def stderr_since(self, mark=0):
        """What the daemon wrote to `log` after byte `mark`."""
        with open(self.log, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    def ctl(self, *args, timeout=600):
        """`cachectl` on this daemon's socket; exit status 124 when it gives no answer in `timeout` s."""
        try:
            return subprocess.run([self.cachectl, "--socket", self.sock] + list(args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, 124, "", "cachectl gave no answer in %d s" % timeout)

    def call(self, request, timeout=None):
        """One request over the socket; its answer line as JSON."""
        return call_socket(self.sock, request, timeout=timeout)

    def alive(self):
        return self.p is not None and self.p.poll() is None

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

    def kill(self):
        """SIGKILL, and waits for it to end."""
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        if self.p:
            stop(self.p)


class Scratch:
    """A directory others may traverse (nginx's workers), removed at the
    end unless CACHED_PYTEST_KEEP=1 (then its path is printed)."""

    def __init__(self, prefix):
        self.path = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.path, 0o755)

    def remove(self):
        if os.environ.get("CACHED_PYTEST_KEEP") == "1":
            print("scratch directory kept: " + self.path, file=sys.stderr)
            return
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
