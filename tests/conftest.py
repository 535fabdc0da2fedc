"""Shared test helpers: paths to the real Score-P archives and the case files, the
bundled archives read once per session and simulated runs shared between tests;
the cyclic collector's survivors frozen between test modules."""

import collections
import dataclasses
import functools
import gc
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "cases"
# copies of the real Score-P archives (origin and licence: tests/data/traces/README.md)
TRACES = Path(__file__).resolve().parent / "data" / "traces"
REAL_ARCHIVES = [TRACES / "ping-pong-otf2" / "traces.otf2",
                 TRACES / "ping-pong-otf2-papi" / "traces.otf2"]


@pytest.fixture(params=REAL_ARCHIVES, ids=lambda p: p.parent.name)
def real_archive(request) -> Path:
    if not request.param.exists():
        pytest.skip(f"{request.param} not available")
    return request.param


def mpiexec() -> str:
    """The mpiexec of the [mpi] extra's mpich wheel; the test skips without it."""
    pytest.importorskip("mpi4py", reason="the [mpi] extra is not installed",
                        exc_type=ImportError)
    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec not found (the [mpi] extra is not installed)")
    return exe


def _freeze(trace):
    """``trace`` with every column read-only (a shared trace must not change)."""
    for ev in trace.events.values():
        for f in dataclasses.fields(ev):
            value = getattr(ev, f.name)
            if hasattr(value, "flags"):
                value.flags.writeable = False
    return trace


@functools.cache
def _read_bundled(path: str):
    from compensate.formats import read_trace
    return _freeze(read_trace(path))


def read_bundled(path: Path | str):
    """A bundled archive (``tests/data/traces``) as ``read_trace`` returns it, read
    once per session: the hip archive alone takes ~0.6 s to read and a dozen tests
    only read it. Every column is read-only, so that whatever writes into the shared
    trace fails at once instead of changing what later tests see; a test that
    changes a trace must read its own."""
    return _read_bundled(str(Path(path).resolve()))


#: simulated runs kept by :func:`simulated`, least recently used first
_SIMULATED: collections.OrderedDict[str, object] = collections.OrderedDict()
SIMULATED_KEPT = 96  # the 8-rank programs at three overheads (60 runs) take ~70 MB


def simulated(program: str, **kw):
    """``simulate(program, **kw)``, shared by the tests that simulate the same program
    with the same arguments (the simulation is deterministic): the stream, order,
    regression, fit and accuracy tests simulate each program once per bound or test
    (~4 s of the suite). The truth's and the measured trace's columns are
    read-only, so that whatever writes into a shared run fails at once instead of
    changing what later tests see; a test that changes a trace must simulate its
    own. The arguments must be identified by their ``repr`` (numbers, strings,
    lists of numbers, ``Network``; not a ``Platform`` with long arrays). The
    :data:`SIMULATED_KEPT` most recently used runs are kept."""
    key = f"{program}{sorted(kw.items())!r}"
    sim = _SIMULATED.pop(key, None)
    if sim is None:
        from compensate.simulate import simulate
        sim = simulate(program, **kw)
        _freeze(sim.truth)
        _freeze(sim.measured)
    _SIMULATED[key] = sim
    while len(_SIMULATED) > SIMULATED_KEPT:
        _SIMULATED.popitem(last=False)
    return sim


# -- the cyclic collector ------------------------------------------------------------
#
# The session keeps a large heap alive: the imported libraries, the collected items,
# the bundled archives and simulated runs shared above (their payload objects) and
# the module fixtures. Every generation-2 collection rescans all of it: ~0.25 s each
# once the heap holds ~300k objects, 10 s (13 %) of a 74 s run of tests/formats,
# analysis, matching, verify and simulate. What has survived a whole module is
# long-lived; gc.freeze() moves it to the permanent generation, which the collector
# skips, so that later collections scan only what was made since. Garbage is
# collected first (gc.collect()), so only reachable objects are frozen, and
# objects the tests make are collected as before: no collection is delayed.
# gc.get_objects() leaves frozen objects out: a test that looks at every live
# object calls gc.unfreeze() first (tests/parallel/test_driver.py).


def _freeze_survivors() -> None:
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session) -> None:
    """Freeze the imports and the collected items before the first test."""
    _freeze_survivors()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After the last test of a module (its module fixtures torn down), freeze what
    survived it."""
    result = yield
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        _freeze_survivors()
    return result
