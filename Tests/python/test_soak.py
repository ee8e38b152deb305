"""The daemon at the scale users reach, with HTTP on (soak.py's parts: a
prefetch under /events subscribers and pipeliners that never read,
listings never read under max-queued-bytes-total, descriptor exhaustion,
accept out of descriptors, silent HTTP connections, variants under a small
variant-max-size, a feed of tiny posts, a feed of many posts listed,
searched and stopped). One test per part, against one nginx origin for the
module; each part's daemons are its own. SOAK_ARGS sets the sizes (make
test: the defaults; make soak: the long run).
"""
import os
import resource
import shlex

import pytest

import soak

ARGS = soak.parser().parse_args(shlex.split(os.environ.get("SOAK_ARGS", "")))


@pytest.fixture(scope="module")
def soak_origin(module_world):
    """The soak's nginx, serving what `soak.write_www` writes; its base URL."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    www = os.path.join(module_world.path, "www")
    soak.write_www(www, ARGS)
    return module_world.origin(www).base


@pytest.mark.parametrize("part", list(soak.PARTS))
def test_soak(part, bins, module_world, soak_origin):
    soak.RESULTS.clear()
    soak.PARTS[part](bins, module_world.path, soak_origin, ARGS)
    failed = ["%s: %s" % (name, detail) if detail else name for name, ok, detail in soak.RESULTS if not ok]
    assert soak.RESULTS, "the %s part checked nothing" % part
    assert not failed, "\n".join(failed)
