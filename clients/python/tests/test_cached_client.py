"""cached_client against the real daemon (the built binary, nginx as origin)."""

import json
import os
import socket
import stat
import tempfile

import pytest

import cached_client
from cached_client import CachedError, Client, default_socket


def origin_file(origin, relative):
    with open(os.path.join(origin["root"], relative), "rb") as f:
        return f.read()


def manifest(origin):
    return json.loads(origin_file(origin, "images/manifest.json"))


def test_ping_and_status(daemon):
    with Client(daemon.socket) as c:
        assert c.ping()["protocol"] == 1
        s = c.status()
        assert s["posts"] == 0 and s["socket"] == daemon.socket and "ok" not in s
        # The scrub, idle at its defaults: a week between passes, 8 MiB/s, none ended yet.
        scrub = s["scrub"]
        assert scrub["state"] == "idle" and scrub["interval_s"] == 604800 and scrub["rate"] == 8 << 20
        assert scrub["last"] is None and scrub["pass"] is None and scrub["since_start"]["objects"] == 0


def test_posts_are_the_stored_dicts_in_ascending_order(daemon, origin):
    with Client(daemon.socket) as c:
        events = list(c.prefetch("posts"))
        assert events[-1]["posts"]["fetched"] == 100
        assert all(e["event"] == "progress" for e in events[:-1])
        feed = json.loads(origin_file(origin, "posts.json"))
        assert c.post(7) == next(p for p in feed if p["id"] == 7)
        posts = c.posts()
        assert [p["id"] for p in posts] == sorted(p["id"] for p in feed)
        assert [p["id"] for p in c.posts(offset=10, limit=5)] == [11, 12, 13, 14, 15]
        # A title search (list_posts query): any case, paged like the list.
        found = [p for p in feed if "qui" in p["title"].lower()]
        assert c.posts(query="QUI") == sorted(found, key=lambda p: p["id"])
        assert [p["id"] for p in c.posts(offset=1, limit=2, query="qui")] == sorted(p["id"] for p in found)[1:3]
        assert c.posts(query="no title holds this") == []
        # An integer id is found by its decimal spelling too (protocol.md, "Post ids").
        assert c.post("7") == c.post(7)
        assert c.post_ids(offset=10, limit=3) == [11, 12, 13]
        with pytest.raises(CachedError) as e:
            c.post("seven")
        assert e.value.code == "not_found"
        with pytest.raises(TypeError):
            c.post(7.0)


def test_delete_post_removes_one_post_until_its_page_changes(daemon, origin):
    with Client(daemon.socket) as c:
        list(c.prefetch("posts"))
        # The integer id is found by its spelling, as get_post finds it.
        assert c.delete_post("7") == 7
        assert 7 not in c.post_ids()
        assert len(c.post_ids()) == 99
        with pytest.raises(CachedError) as e:
            c.delete_post(7)
        assert e.value.code == "not_found"
        with pytest.raises(TypeError):
            c.delete_post(True)
        # The feed answers 304: the page stands as stored, without post 7.
        list(c.prefetch("posts"))
        assert 7 not in c.post_ids()


def test_images_read_image_data_and_open_image(daemon, origin):
    rows = manifest(origin)
    with Client(daemon.socket) as c:
        listed = c.images()
        assert len(listed) == len(rows) and all(r["hash"] is None for r in listed)
        with pytest.raises(CachedError) as e:
            c.image(3, fetch=False)
        assert e.value.code == "not_cached"
        expected = origin_file(origin, "images/" + rows[3]["url"])
        assert c.image_data(3) == expected
        row = c.image(3)
        assert row["hash"] and row["type"] == "image/png" and row["size"] == len(expected)
        assert c.read(row["hash"]) == expected
        with c.open_image(3) as f:
            assert f.read() == expected
            mode = os.fstat(f.fileno()).st_mode
            assert stat.S_ISREG(mode)
            with pytest.raises(OSError):
                os.write(f.fileno(), b"x")  # read-only
        # The connection is still in step after all of it.
        assert c.ping()["protocol"] == 1


def png_size(data):
    """A PNG's width and height from its IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_variant_of_an_image(daemon, origin):
    """Issue 26: image_variant names a variant made once and stored;
    variant_data reads its verified bytes; a bad size is bad_request."""
    with Client(daemon.socket) as c:
        row = c.image_variant(2, width=40, height=30, fit="cover", format="png")
        v = row["variant"]
        assert (v["width"], v["height"], v["type"]) == (40, 30, "image/png") and len(v["hash"]) == 32
        data = c.variant_data(2, width=40, height=30, fit="cover", format="png")
        assert len(data) == v["size"] and png_size(bytes(data)) == (40, 30)
        assert c.read(v["hash"]) == data
        assert c.status()["counters"]["variants_made"] == 1
        with pytest.raises(CachedError) as e:
            c.image_variant(2, width=0)
        assert e.value.code == "bad_request"
        with pytest.raises(CachedError) as e:
            c.image_variant(2, format="gif")
        assert e.value.code == "bad_request"
        assert c.ping()["protocol"] == 1


def test_prefetch_yields_progress_then_the_summary(daemon, origin):
    with Client(daemon.socket, timeout=None) as c:
        events = list(c.prefetch())
        summary = events[-1]
        assert summary["images"]["downloaded"] + summary["images"]["cached"] == len(manifest(origin))
        phases = {e["phase"] for e in events[:-1]}
        assert phases == {"posts", "images"}
        done = [e["done"] for e in events[:-1] if e["phase"] == "images"]
        assert done == sorted(done) and done[-1] == len(manifest(origin))
        assert c.verify()["corrupt"] == []


def test_leaving_a_prefetch_early_keeps_the_client_usable(daemon):
    with Client(daemon.socket, timeout=None) as c:
        for event in c.prefetch(force=True):
            break  # stop listening after the first event
        assert c.ping()["protocol"] == 1


def test_errors_carry_the_daemons_code(daemon):
    with Client(daemon.socket) as c:
        for call, code in [(lambda: c.post(123456), "not_found"), (lambda: c.image(999), "not_found"),
                           (lambda: c.read("zz"), "bad_request"), (lambda: c.call("nonsense"), "bad_request")]:
            with pytest.raises(CachedError) as e:
                call()
            assert e.value.code == code and e.value.message
        assert c.ping()["protocol"] == 1


def test_no_daemon_is_unavailable_and_a_restart_is_survived(daemon):
    c = Client(daemon.socket)
    assert c.ping()
    daemon.restart()
    assert c.ping()["protocol"] == 1  # the idle connection was closed: it connects again
    daemon.stop()
    with pytest.raises(CachedError) as e:
        c.ping()
    assert e.value.code == "unavailable"
    daemon.start()
    assert c.ping()["protocol"] == 1
    c.close()
    with pytest.raises(CachedError) as e:
        Client("/nonexistent/cached.sock").ping()
    assert e.value.code == "unavailable" and "cannot connect" in e.value.message


def test_a_socket_in_a_directory_others_can_write_is_refused():
    directory = tempfile.mkdtemp()
    os.chmod(directory, 0o777)
    try:
        with pytest.raises(CachedError) as e:
            Client(os.path.join(directory, "cached.sock")).ping()
        assert e.value.code == "unavailable" and "refusing" in e.value.message
    finally:
        os.rmdir(directory)


def test_the_default_socket_follows_cachectl():
    assert default_socket({"CACHED_SOCKET": "/x/y.sock"}) == "/x/y.sock"
    if os.getuid() == 0:
        assert default_socket({}) == "/run/cached/cached.sock"
    else:
        assert default_socket({"XDG_RUNTIME_DIR": "/run/user/5"}).startswith("/")


def test_another_call_while_a_prefetch_is_read_abandons_it_and_stays_in_step(daemon):
    with Client(daemon.socket, timeout=None) as c:
        stream = c.prefetch("posts", force=True)
        first = next(stream)
        assert first["event"] == "progress"
        assert c.status()["socket"] == daemon.socket  # its own answer, not a progress line
        with pytest.raises(CachedError) as e:
            next(stream)
        assert e.value.code == "unavailable"
        assert c.ping()["protocol"] == 1


def test_a_private_directory_owned_by_another_user_is_refused(tmp_path):
    private = f"/tmp/cached-{os.getuid()}"
    if os.path.lexists(private):
        pytest.skip(f"{private} exists already; not touching it")
    os.mkdir(private, 0o755)
    try:
        os.chown(private, 65534, 65534) if os.getuid() == 0 else None
        if os.getuid() != 0:
            pytest.skip("needs root to give the directory to another user")
        with pytest.raises(CachedError) as e:
            Client(private + "/cached.sock").ping()
        assert e.value.code == "unavailable" and "owned by uid 65534" in e.value.message
    finally:
        os.rmdir(private)


def test_the_daemon_codes_are_the_protocols():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "protocol.md")) as f:
        table = f.read().split("| code | meaning |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    documented = tuple(row.split("`")[1] for row in table.splitlines())
    assert cached_client.DAEMON_ERROR_CODES == documented
    assert not set(cached_client.CLIENT_ERROR_CODES) & set(documented)


def test_the_daemon_cannot_send_the_clients_own_codes():
    client = Client("/nonexistent/cached.sock")
    for code in cached_client.CLIENT_ERROR_CODES + ("from_a_later_daemon",):
        with pytest.raises(CachedError) as e:
            client._checked({"ok": False, "error": {"code": code, "message": "forged"}})
        assert e.value.code == "internal", code
    # An answer without the error the protocol requires is the client's to refuse.
    for answer in ({"ok": False, "error": "not an object"}, {"ok": False}, {"ok": 1}, {"posts": []}):
        with pytest.raises(CachedError) as e:
            client._checked(answer)
        assert e.value.code == "malformed", answer


def test_the_readme_example_runs_as_written(daemon, origin, tmp_path, monkeypatch, capsys):
    """The README's Python example, word for word but for its socket path."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")) as f:
        readme = f.read()
    start = readme.index("```python\nfrom cached_client import Client, CachedError\n") + len("```python\n")
    code = readme[start:readme.index("```", start)]
    assert '"/tmp/cached.sock"' in code
    with Client(daemon.socket, timeout=None) as c:  # the README's store: prefetched (cachectl prefetch)
        list(c.prefetch())
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace('"/tmp/cached.sock"', repr(daemon.socket)), "README.md", "exec"), {})
    assert (tmp_path / "row0.png").read_bytes() == origin_file(origin, "images/" + manifest(origin)[0]["url"])
    webp = (tmp_path / "row0.webp").read_bytes()
    assert webp[:4] == b"RIFF" and webp[8:12] == b"WEBP"
    assert capsys.readouterr().out.count("\n") > 1
