"""open_objects: ``open`` of many objects in one request, against the real daemon."""

import json
import os

import pytest

import cached_client
from cached_client import CachedError, Client


def cached_rows(c):
    """Every row's hash and its bytes as the origin serves them (prefetched first)."""
    list(c.prefetch("images"))
    return [(row["hash"], bytes(c.read(row["hash"]))) for row in c.images()]


def test_each_object_comes_in_order_as_its_own_file(daemon):
    with Client(daemon.socket) as c:
        rows = cached_rows(c)
        # More than one request's worth, a hash named twice among them.
        asked = [h for h, _ in rows] * 5
        assert len(asked) > cached_client.MAX_OPEN_OBJECTS
        files = c.open_objects(asked)
        try:
            assert len(files) == len(asked)
            expected = dict(rows)
            for h, f in zip(asked, files):
                assert not isinstance(f, CachedError), f
                assert f.read() == expected[h]
                assert os.fstat(f.fileno()).st_size == len(expected[h])
            assert len({f.fileno() for f in files}) == len(files), "each its own descriptor"
        finally:
            for f in files:
                f.close()
        assert c._fds == [], "no descriptor left over"
        assert c.ping()["protocol"] == 1
        assert c.open_objects([]) == []


def test_a_missing_object_among_good_ones_is_its_own_error(daemon):
    with Client(daemon.socket) as c:
        rows = cached_rows(c)
        missing = "0" * 32
        out = c.open_objects([rows[0][0], missing, rows[1][0]])
        try:
            assert out[0].read() == rows[0][1] and out[2].read() == rows[1][1]
            assert isinstance(out[1], CachedError) and out[1].code == "not_found" and missing in out[1].message
        finally:
            for f in (out[0], out[2]):
                f.close()


def test_a_request_refused_whole_raises_and_leaves_nothing_open(daemon):
    with Client(daemon.socket) as c:
        rows = cached_rows(c)
        before = len(os.listdir("/proc/self/fd"))
        # The malformed hash is in the second request: what the first opened is closed.
        asked = [rows[0][0]] * cached_client.MAX_OPEN_OBJECTS + ["NOT-A-HASH"]
        with pytest.raises(CachedError) as e:
            c.open_objects(asked)
        assert e.value.code == "bad_request" and '"hashes"[0]' in e.value.message
        assert len(os.listdir("/proc/self/fd")) == before
        assert c.ping()["protocol"] == 1


def test_the_clients_limits_are_the_swift_ones():
    assert cached_client.MAX_OPEN_OBJECTS == 64
    assert cached_client.MAX_PASSED_DESCRIPTORS == 64
    assert cached_client.MAX_PENDING_DESCRIPTORS == 256
