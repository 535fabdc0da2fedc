"""Ghost locations (compensate/parallel/ghosts.py): each rank's own locations make
the whole trace on every rank, and the distributed run on it equals one process."""

from __future__ import annotations

import numpy as np
import pytest

from compensate.model import COLUMNS
from compensate.parallel.ghosts import complete_trace
from compensate.parallel.ownership import owners
from compensate.platform import Platform
from compensate.simulate import simulate
from tests.pipelines import assemble, run_pipeline, run_rank
from tests.threadranks import run_threads

from ..conftest import read_bundled
from .test_driver import BUNDLED, assert_same

CASES = [("hybrid_halo", "fitted"), ("rma_lock_counter", "lower"), ("pthreads", "upper"),
         ("gpu", "lower")]


@pytest.mark.parametrize("name, bound", CASES)
def test_own_locations_complete_to_the_whole_trace_and_the_same_output(name, bound):
    """Simulated traces whose matching reads payloads (thread teams, locks, RMA,
    kernel launches): the stand-ins suffice."""
    sim = simulate(name, ranks=3, seed=4, iterations=1)
    check(sim.measured, sim.platform, bound)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.parent.name)
def test_bundled_archives_complete_from_their_owners(path):
    """The real archives (OTF2 event objects as payloads: threads, tasks, parameters,
    metrics) under the fitted bound (the fit, or the lower bound where too few
    transfers were observed, with R8/R9 links fitted), P = 2 and 3. An archive of
    one process runs on rank 0 and the other rank matches the whole trace from
    stand-ins alone: P = 2 is enough for it."""
    trace = read_bundled(path)
    processes = {trace.definitions.process_of(loc) for loc in trace.events}
    for ranks in (2, 3) if len(processes) > 1 else (2,):
        check(trace, Platform(1e-7), "fitted", ranks)


def check(trace, platform, bound, ranks=2):
    one = run_pipeline(trace, platform, bound, "uniform", None)

    def body(t):
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        whole = complete_trace(trace.definitions, own, t, trace.source)
        assert list(whole.events) == list(trace.events)
        for loc, ev in whole.events.items():
            for name, _ in COLUMNS:
                np.testing.assert_array_equal(getattr(ev, name), getattr(trace.events[loc], name))
            assert (ev.payload is trace.events[loc].payload) == (loc in own)
        return run_rank(whole, platform, bound, "uniform", None, t)

    assert_same(one, assemble(trace, run_threads(ranks, body)))
