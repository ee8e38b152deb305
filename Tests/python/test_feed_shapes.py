"""The feed shapes of issues 23 and 32 (feed_shapes.py): the reference
client's reading of every fixture, then each shape's whole flow against
the daemon, then each fault and flow only these shapes make, one test
each, over one set of origins for the module (nginx and the scripted
Mastodon and API origins). FEED_SHAPES_QUICK=1 (make test) makes each
API's feed shorter (11 posts 5 to a page instead of 35 by 10).
"""
import contextlib
import os

import pytest

import feed_shapes

QUICK = os.environ.get("FEED_SHAPES_QUICK") == "1"
REPORT = os.environ.get("FEED_SHAPES_REPORT", ".build/feed-shapes-report.txt")


@pytest.fixture(scope="module")
def shapes_world(module_world):
    """The origins and the good shapes; the report of every flow at the end."""
    procs = []
    try:
        o, good = feed_shapes.build(module_world.path, procs, QUICK)
        yield o, {shape.name: shape for shape in good}
        # Per shape, the settings and the requests the origins' logs show;
        # a file, since pytest keeps the output of a passing run to itself.
        os.makedirs(".build", exist_ok=True)
        with open(REPORT, "w") as f, contextlib.redirect_stdout(f):
            feed_shapes.report(o)
        print("feed shapes: the requests of each flow in " + REPORT)
    finally:
        for p in procs:
            feed_shapes.stop(p)


def failed_checks(run):
    """Runs `run`; the checks it made that failed ("name: detail" lines)."""
    before = len(feed_shapes.RESULTS)
    run()
    made = feed_shapes.RESULTS[before:]
    assert made, "no check was made"
    return [name for name, ok in made if not ok]


def test_the_names_are_the_shapes_and_faults_built(shapes_world, bins, module_world):
    o, good = shapes_world
    assert list(good) == feed_shapes.SHAPE_NAMES
    assert list(feed_shapes.faults(bins, module_world.path, o, QUICK)) == feed_shapes.FAULT_NAMES


def test_a_reference_client_reads_every_fixture(shapes_world):
    _, good = shapes_world
    failed = failed_checks(lambda: [feed_shapes.reference_check(shape) for shape in good.values()])
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("name", feed_shapes.SHAPE_NAMES)
def test_shape(name, shapes_world, bins, module_world):
    o, good = shapes_world
    failed = failed_checks(lambda: feed_shapes.run_good_shape(bins, module_world.path, o, good[name]))
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("name", feed_shapes.FAULT_NAMES)
def test_fault(name, shapes_world, bins, module_world):
    o, _ = shapes_world
    run = feed_shapes.faults(bins, module_world.path, o, QUICK)[name]
    failed = failed_checks(lambda: feed_shapes.run_fault(name, run))
    assert not failed, "\n".join(failed)
