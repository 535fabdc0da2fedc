"""Shared test helpers: paths to the real Score-P archives and the case files, the
bundled archives read once per session and simulated runs shared between tests;
the cyclic collector's survivors frozen between test modules; the parallel run
(pytest-xdist): how many workers, and :func:`alone` for a measurement that must
not share the machine with the other workers' tests."""

import collections
import contextlib
import dataclasses
import fcntl
import functools
import gc
import os
import shutil
import sys
from collections.abc import Iterator
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


# -- compiled modules ------------------------------------------------------------------
#
# Where PYTHONDONTWRITEBYTECODE is set, every interpreter the suite starts compiles the
# project's modules from source again: ~0.45 s of the ~1.1 s CPU of a
# `python -m compensate` on a small trace, ~0.9 s of a two-rank traced run, and the
# suite starts hundreds of commands, traced runs, spawned workers and kernels. The
# session writes them to __pycache__ (ignored by git), as Python does by default,
# so that what one interpreter compiled the next one reads. (PYTHONPYCACHEPREFIX
# would keep them out of the checkout, but then every interpreter would look for
# the standard library's and the installed packages' compiled modules there too, and
# compile all of them again once per session: ~8 s of CPU in the first traced run.)


@pytest.fixture
def absurd_fit(monkeypatch):
    """Every fit (one process, streamed and in memory, reduced across ranks) times
    every transfer at 1 s: a fit the clamp check must reject."""
    import compensate.parallel.fit as pfit
    import compensate.pipeline.run as prun
    from compensate.engine.fit import FitOutcome, NetworkFit, observe_transfers

    real = prun.outcome_of

    def absurd(obs, network=None):
        o = real(obs, network)
        return FitOutcome(NetworkFit(1.0, 0.0, 100, 0.0, 8, 8, 1, "constant"), 100,
                          links=o.links, size_classes=o.size_classes)

    def absurd_try(trace, matching, platform):
        return absurd(observe_transfers(trace, matching, platform))

    monkeypatch.setattr(pfit, "outcome_of", absurd)
    monkeypatch.setattr(prun, "outcome_of", absurd)
    monkeypatch.setattr("compensate.engine.fit.try_fit", absurd_try)


@pytest.hookimpl(trylast=True)
def pytest_configure(config) -> None:
    """In the main process (the workers and every command start from its
    environment), write compiled modules where the environment says not to."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


def _freeze_survivors() -> None:
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session) -> None:
    """Freeze the imports and the collected items before the first test."""
    _freeze_survivors()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After the last test of a module (its module fixtures torn down), freeze what
    survived it. In a parallel run the test holds the machine's shared lock while
    it is set up, runs and is torn down (:func:`alone`)."""
    lock = _machine_lock(item.config)
    if lock is not None:
        lock.shared()
    try:
        result = yield
    finally:
        if lock is not None:
            lock.release()
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        _freeze_survivors()
    return result


# -- the parallel run (pytest-xdist) --------------------------------------------------
#
# setup.cfg's addopts run the suite on ``-n auto`` workers, whole modules at a time
# (``--dist loadscope``): a module's fixtures (traced mpiexec runs, calibration runs,
# compensated archives) are made once, on one worker, as in a serial run.


def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto``: one worker more than the CPUs this process may run on for the
    suite or a directory of it, none (the tests run in this process, without ~2 s
    of worker start-up) when the command line names only one or two test files or
    tests. ``-n N`` and ``PYTEST_XDIST_AUTO_NUM_WORKERS`` are taken as given.

    The extra worker runs while another waits on the commands, traced runs and
    kernels its test starts (their start-up, pipes and timers)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    args = [a for a in config.args if not a.startswith("-")]
    if args and len(args) <= 2 and all(
            "::" in a or Path(a).suffix == ".py" for a in args):
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus + 1


#: the modules that take longest (CPU of a serial run, most first: interpreters and
#: mpiexec runs they start, notebooks, calibration runs; then the few-test modules
#: that wait seconds on what they start): sent to the workers first, so that the run
#: does not end with one worker busy on one of them, the others idle
HEAVY_FIRST = (
    "tests/engine/test_stream.py",
    "tests/cli/test_interrupt.py",
    "tests/test_fingerprints.py",
    "tests/test_notebooks.py",
    "tests/calibration/test_tracer_calls.py",
    "tests/calibration/test_record_program.py",
    "tests/engine/test_fit.py",
    "tests/calibration/test_tracer_reentry.py",
    "tests/calibration/test_tracer.py",
    "tests/calibration/test_calibrate.py",
    "tests/calibration/test_tracer_rma.py",
    "tests/calibration/test_tracer_threads.py",
    "tests/calibration/test_tracer_partitioned.py",
    "tests/calibration/test_insitu.py",
    "tests/parallel/test_command.py",
    "tests/examples/test_heldout.py",
    "tests/formats/otf2/test_eztrace.py",
    "tests/test_readme.py",
    "tests/parallel/test_stall.py",
    "tests/formats/otf2/test_limits.py",
    "tests/test_mkdocs.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    """In a parallel run (``--no-loadscope-reorder``: modules are handed out in this
    order), the :data:`HEAVY_FIRST` modules first, then the others by their number of
    tests, most first (what xdist's own reorder does); a serial run keeps the
    collection's order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = {it: it.nodeid.split("::", 1)[0] for it in items}
    count = collections.Counter(path.values())
    first = {name: k for k, name in enumerate(HEAVY_FIRST)}
    # sorted() is stable: a module's tests keep their order
    items[:] = sorted(items, key=lambda it: (first.get(path[it], len(first)),
                                             -count[path[it]], path[it]))


class _MachineLock:
    """The locks the workers of one parallel run share (files in the run's base
    temporary directory; each worker's own is ``<run's>/popen-gwN``). Each test
    holds ``machine`` shared while it is set up, runs and is torn down; an
    :func:`alone` block holds it exclusively. ``gate`` gives the exclusive side
    priority: a test takes it for a moment before its shared lock, an
    :func:`alone` block keeps it while it waits for the tests running to end, so
    that the other workers' next tests wait instead of starving it."""

    def __init__(self, run_dir: Path) -> None:
        self.machine = os.open(run_dir / "machine.lock", os.O_RDWR | os.O_CREAT, 0o600)
        self.gate = os.open(run_dir / "machine.gate", os.O_RDWR | os.O_CREAT, 0o600)

    def shared(self) -> None:
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.machine, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self.machine, fcntl.LOCK_UN)


def _machine_lock(config) -> _MachineLock | None:
    """This worker's :class:`_MachineLock`; None in a serial run. Kept on the
    config, so that a test module importing this one under another name still
    finds the worker's one pair of descriptors (a second pair would wait for this
    process's own shared lock)."""
    if not hasattr(config, "machine_lock"):
        config.machine_lock = None
        if os.environ.get("PYTEST_XDIST_WORKER"):
            base = config._tmp_path_factory.getbasetemp()
            config.machine_lock = _MachineLock(base.parent)
    return config.machine_lock


@contextlib.contextmanager
def alone(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the block while no other worker runs a test: for a measurement whose
    result a busy machine changes (two calibration runs that must agree within
    their spreads). In a serial run it is a plain block. Called from a test or a
    fixture (this worker holds its shared lock: it is let go first, so that two
    workers asking at once take turns instead of waiting for each other)."""
    lock = _machine_lock(request.config)
    if lock is None:
        yield
        return
    lock.release()
    fcntl.flock(lock.gate, fcntl.LOCK_EX)
    try:
        fcntl.flock(lock.machine, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.machine, fcntl.LOCK_SH)  # back to this test's shared lock
    finally:
        fcntl.flock(lock.gate, fcntl.LOCK_UN)

