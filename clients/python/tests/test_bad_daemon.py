"""cached_client against a daemon that misbehaves on purpose
(Tests/Fixtures/bad-daemon.py, a real process on a real Unix socket).

Each call runs in a child Python of its own, reaped with ``os.wait4`` for its
peak RSS, under a wall-clock limit after which it is killed (a failure, not
a measure: nothing here asserts speed beyond the deadline the client
promises)."""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import pytest

import cached_client

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "Tests", "Fixtures", "bad-daemon.py")
HASH = "0123456789abcdef0123456789abcdef"
RSS_BOUND = 100 << 20  # far above the client's needs, far below an unbounded buffer

CHILD = """
import json, sys
from cached_client import Client, CachedError
c = Client(sys.argv[1], timeout=float(sys.argv[2]))
try:
    value = eval(sys.argv[3])
    print(json.dumps({"code": None, "length": len(value) if isinstance(value, (bytes, bytearray)) else None}))
except CachedError as e:
    print(json.dumps({"code": e.code, "message": e.message}))
"""


@pytest.fixture()
def bad():
    """Starts bad-daemon.py in the mode given: ``bad("deep")`` is its socket."""
    directory = tempfile.mkdtemp(prefix="cached-bad-")
    started = []

    def start(mode):
        path = os.path.join(directory, f"{mode}.sock")
        p = subprocess.Popen([sys.executable, SCRIPT, path, mode], stdout=subprocess.PIPE)
        started.append(p)
        assert p.stdout.readline() == b"ready\n"
        return path

    yield start
    for p in started:
        p.kill()
        p.wait()
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


def run(sock, expression, timeout=60.0, limit=60.0):
    """``expression`` (on ``c``, a Client) in a child: (its outcome, peak RSS, seconds)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(cached_client.__file__))

    def confine():  # a client that grows without bound fails here, not the host
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    start = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", CHILD, sock, str(timeout), expression], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=confine)
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > limit:
            p.kill()
            _, status, usage = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    out, err = p.stdout.read(), p.stderr.read()
    seconds = time.monotonic() - start
    assert p.returncode == 0, f"exit {p.returncode} after {seconds:.1f} s: {err.decode()[-2000:]}"
    return json.loads(out), usage.ru_maxrss * 1024, seconds


def test_a_read_declaring_34_gigabytes_is_refused(bad):
    outcome, rss, _ = run(bad("huge-read"), f"c.read({HASH!r})")
    assert outcome["code"] == "malformed" and "34359738368" in outcome["message"], outcome
    assert rss < RSS_BOUND, rss


def test_a_read_payload_is_held_once(bad):
    # 128 MiB read whole: held once, not copied (three copies were 384 MiB).
    outcome, rss, _ = run(bad("big-read"), f"c.read({HASH!r})")
    assert outcome == {"code": None, "length": 128 << 20}, outcome
    assert rss < (128 << 20) * 3 // 2, rss


def test_an_endless_line_is_cut_at_the_answer_line_limit(bad):
    outcome, rss, _ = run(bad("endless-line"), "c.ping()")
    assert outcome["code"] == "malformed", outcome
    assert f"an answer line longer than {cached_client.MAX_ANSWER_LINE} bytes" in outcome["message"], outcome
    assert rss < RSS_BOUND, rss


def test_deep_nesting_is_malformed_not_a_recursion_error(bad):
    outcome, rss, _ = run(bad("deep"), "c.ping()")
    assert outcome["code"] == "malformed" and "nested too deeply" in outcome["message"], outcome
    assert rss < RSS_BOUND, rss
    legit, _, _ = run(bad("deep-legit"), "print(json.dumps(len(c.posts())), file=sys.stderr)")
    assert legit["code"] is None, legit


def test_an_answer_that_is_not_an_object_is_malformed(bad):
    outcome, _, _ = run(bad("array"), "c.ping()")
    assert outcome == {"code": "malformed", "message": "an answer that is not a JSON object: b'[1,2,3]'"}, outcome


@pytest.mark.parametrize("mode,why", [("devzero", "not a regular file (a character device)"),
                                      ("shortfile", "a file of 10 bytes, not the 3000000000 announced")])
def test_a_passed_descriptor_must_be_a_regular_file_of_the_announced_size(bad, mode, why):
    outcome, rss, _ = run(bad(mode), "c.open_image(0).read()")
    assert outcome["code"] == "malformed" and why in outcome["message"], outcome
    assert rss < RSS_BOUND, rss


def test_a_trickling_daemon_meets_the_total_deadline(bad):
    outcome, _, seconds = run(bad("trickle"), "c.ping()", timeout=2.0, limit=30)
    assert outcome["code"] == "unavailable" and "within 2.0 s" in outcome["message"], outcome
    assert seconds < 10, seconds  # a 2 s deadline with slack for a loaded machine; the whole answer takes 86 s


def test_descriptors_passed_without_open_answers_are_bounded(bad):
    outcome, _, _ = run(bad("fd-flood"), "c.ping()")
    assert outcome["code"] == "malformed", outcome
    assert f"more than {cached_client.MAX_PENDING_DESCRIPTORS} descriptors" in outcome["message"], outcome


@pytest.mark.parametrize("mode", ["no-ok", "no-code"])
def test_a_misshapen_answer_is_malformed_and_drops_the_connection(bad, mode):
    # Each misshapen line is followed by a stray valid one: a client that
    # kept the connection would return it as the second ping's answer.
    with cached_client.Client(bad(mode), timeout=10) as c:
        for call in (1, 2):
            with pytest.raises(cached_client.CachedError) as e:
                c.ping()
            assert e.value.code == "malformed" and "without a boolean ok and an error code" in e.value.message, (call, e.value)
