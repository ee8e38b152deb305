"""iter_posts and iter_images: listings read page by page (issue 34, point 2),
against the real daemon, and the walk's answers to a page refused as too long
against a listing answered here."""

import itertools
import json
import os
import socket
import tempfile
import threading

import pytest

from cached_client import PAGE_SIZE, CachedError, Client


def test_iter_posts_yields_every_post_once_in_order(daemon):
    with Client(daemon.socket) as c:
        list(c.prefetch("posts"))
        every = c.posts()
        assert len(every) == 100
        assert list(c.iter_posts()) == every  # one page of PAGE_SIZE
        assert list(c.iter_posts(page_size=7)) == every
        assert list(c.iter_posts(page_size=1)) == every
        assert [p["id"] for p in c.iter_posts(page_size=4, offset=10, limit=9)] == list(range(11, 20))
        assert list(c.iter_posts(page_size=4, offset=98)) == every[98:]
        assert list(c.iter_posts(offset=500)) == [] and list(c.iter_posts(limit=0)) == []
        assert list(c.iter_posts(query="QUI", page_size=3)) == c.posts(query="qui")
        assert c.ping()["protocol"] == 1  # in step after it all
    assert PAGE_SIZE == 999


def test_iter_images_yields_every_row(daemon):
    with Client(daemon.socket) as c:
        rows = c.images()
        assert len(rows) == 16
        assert list(c.iter_images(page_size=5)) == rows
        assert [r["row"] for r in c.iter_images(page_size=2, offset=3, limit=5)] == [3, 4, 5, 6, 7]


def test_a_listing_that_changes_between_pages_raises_changed(daemon):
    with Client(daemon.socket) as c, Client(daemon.socket) as other:
        list(c.prefetch("posts"))
        walk = c.iter_posts(page_size=10)
        first = list(itertools.islice(walk, 10))
        assert [p["id"] for p in first] == list(range(1, 11))
        assert other.delete_post(50) == 50
        with pytest.raises(CachedError) as e:
            next(walk)
        assert e.value.code == "changed"
        assert "100 at first, 99 now; 10 of them were read" in e.value.message
        # Read again, it is the listing as it is now.
        assert len(list(c.iter_posts(page_size=10))) == 99


class Listing:
    """A Unix socket answering list_posts over posts 1..count; a request for
    more than ``fits`` posts is refused as too long, as the daemon does."""

    def __init__(self, count, fits):
        self.count, self.fits, self.requests = count, fits, []
        self.directory = tempfile.mkdtemp()
        self.path = os.path.join(self.directory, "fake.sock")
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.path)
        self.server.listen(1)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        conn, _ = self.server.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                r = json.loads(line)
                self.requests.append((r["offset"], r["limit"]))
                ids = list(range(1, self.count + 1))[r["offset"]:r["offset"] + r["limit"]]
                if len(ids) > self.fits:
                    answer = {"ok": False, "error": {"code": "bad_request", "message": "too long", "max_limit": self.fits}}
                else:
                    answer = {"ok": True, "total": self.count, "ids": ids, "posts": [{"id": i} for i in ids]}
                f.write(json.dumps(answer).encode() + b"\n")
                f.flush()

    def close(self):
        self.server.close()
        os.unlink(self.path)
        os.rmdir(self.directory)


@pytest.mark.parametrize("fits", [64, 1])
def test_a_page_refused_as_too_long_is_asked_again_with_what_fits(fits):
    listing = Listing(200, fits)
    try:
        with Client(listing.path) as c:
            assert [p["id"] for p in c.iter_posts()] == list(range(1, 201))
        if fits == 64:
            assert listing.requests[:4] == [(0, 999), (0, 64), (63, 137), (63, 64)]
        else:  # only the repeated post fits: the next one is asked alone
            assert listing.requests[:6] == [(0, 999), (0, 1), (0, 200), (1, 1), (1, 199), (2, 1)]
    finally:
        listing.close()


def test_a_page_of_which_nothing_fits_raises_the_daemons_error():
    listing = Listing(5, 0)
    try:
        with Client(listing.path) as c, pytest.raises(CachedError) as e:
            list(c.iter_posts())
        assert e.value.code == "bad_request" and e.value.message == "too long"
    finally:
        listing.close()
