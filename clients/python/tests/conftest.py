"""A real daemon for the tests: cached (the built binary) with a real nginx
as its origin, serving a copy of Examples/origin."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# Run from the tree unless testing the installed package (make test does both).
if not os.environ.get("CACHED_CLIENT_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

NGINX_CONF = """
worker_processes 1;
{user}
error_log {dir}/error.log;
pid {dir}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    types {{ application/json json; image/png png; image/jpeg jpg; image/gif gif; }}
    access_log off;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, seconds=20.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Daemon:
    """cached on a private store and socket; `restart()` keeps both."""

    def __init__(self, directory: str, origin: str) -> None:
        self.directory = directory
        self.socket = os.path.join(directory, "cached.sock")
        self.origin = origin
        self.binary = os.path.join(os.environ.get("CACHED_BIN_DIR", os.path.join(ROOT, ".build", "debug")), "cached")
        self.cachectl = os.path.join(os.path.dirname(self.binary), "cachectl")
        if not os.access(self.binary, os.X_OK):
            pytest.fail(f"{self.binary} is not built: run swift build (make test does)")
        self.process = None
        self.start()

    def start(self) -> None:
        log = open(os.path.join(self.directory, "cached.log"), "ab")
        self.process = subprocess.Popen([self.binary, "--store", os.path.join(self.directory, "store"), "--socket", self.socket,
                                         "--posts-url", self.origin + "/posts.json",
                                         "--images-url", self.origin + "/images/manifest.json"],
                                        stdout=subprocess.DEVNULL, stderr=log)
        def answers():
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                    s.sendall(b'{"op":"ping"}\n')
                    return b'"ok":true' in s.recv(4096)
            except OSError:
                return False
        if not wait_for(answers):
            raise RuntimeError("cached did not start: " + open(os.path.join(self.directory, "cached.log")).read()[-2000:])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="session")
def origin():
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(nginx, os.X_OK):
        pytest.fail("nginx is not installed: apt-get install nginx-light (make test installs it)")
    directory = tempfile.mkdtemp(prefix="cached-py-origin-")
    os.chmod(directory, 0o755)
    root = os.path.join(directory, "root")
    shutil.copytree(os.path.join(ROOT, "Examples", "origin"), root)
    os.makedirs(os.path.join(directory, "tmp"))
    port = free_port()
    conf = os.path.join(directory, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=directory, port=port, root=root, user="user root;" if os.getuid() == 0 else ""))
    process = subprocess.Popen([nginx, "-p", directory, "-c", conf, "-e", os.path.join(directory, "error.log"), "-g", "daemon off;"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def listens():
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    if not wait_for(listens):
        process.kill()
        raise RuntimeError("nginx did not start: " + open(os.path.join(directory, "error.log")).read()[-2000:])
    yield {"url": f"http://127.0.0.1:{port}", "root": root}
    process.terminate()
    process.wait(10)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture()
def daemon(origin):
    directory = tempfile.mkdtemp(prefix="cached-py-")
    d = Daemon(directory, origin["url"])
    yield d
    d.stop()
    shutil.rmtree(directory, ignore_errors=True)
