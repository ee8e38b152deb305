"""The pytest suite's one daemon-and-origin fixture (issue 35, point 3):
the built `cached` on a store of its own, a real nginx as the origin, and
the scratch directory both live in, each stopped and removed at the end.

The binaries are CACHED_BIN_DIR's (make test sets it to the debug build,
make soak and make browser-scale to the release build). A module's tests
start origins and daemons through `module_world`'s factories, and every
process they start is stopped, and the scratch directory removed, when the
module ends (CACHED_PYTEST_KEEP=1 keeps the directory).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from world import Daemon, Origin, Processes, Scratch, free_port  # noqa: E402


def bin_dir():
    """CACHED_BIN_DIR, or why the suite cannot run."""
    d = os.environ.get("CACHED_BIN_DIR")
    if not d or not os.access(os.path.join(d, "cached"), os.X_OK):
        pytest.exit("CACHED_BIN_DIR must name the directory of the built cached and cachectl (make test sets it); got %r" % d, 2)
    return os.path.abspath(d)


@pytest.fixture(scope="session")
def bins():
    return bin_dir()


@pytest.fixture(scope="module")
def module_world(bins):
    """A module's processes and scratch directory: `world.origin(www)`,
    `world.daemon(store, ...)`, `world.path`."""
    procs = Processes()
    scratch = procs.add(Scratch("cached-pytest-"))

    class World:
        path = scratch.path

        @staticmethod
        def origin(www, name="origin"):
            return procs.add(Origin(os.path.join(scratch.path, name), www))

        @staticmethod
        def daemon(store, name="daemon", http=False, extra=()):
            return procs.add(Daemon(bins, store, os.path.join(scratch.path, name + ".sock"), free_port() if http else None, extra))

    try:
        yield World
    finally:
        procs.stop_all()
