"""The distributed run with part of the overhead before the stamp (the platform's
``overhead_before_stamp``, compensate/engine/overheads.py): every rank's graph reads
the same event times and R1 gaps as the one-process run, so the outputs agree."""

from dataclasses import replace

import pytest

from compensate.simulate import simulate

from .test_parity import assert_parity, both

SPLIT = {"Enter": 1e-7, "MpiRecv": 3e-7, "MpiSend": 4e-7, "MpiCollectiveEnd": 2e-7,
         "ThreadFork": 3e-7, "ThreadTeamBegin": 2e-7, "ThreadJoin": 1e-7}


@pytest.mark.parametrize("bound", ["lower", "fitted"])
@pytest.mark.parametrize("name", ["collectives", "mixed", "hybrid_halo"])
def test_split_overhead_gives_the_one_process_output(name, bound):
    sim = simulate(name, ranks=4, seed=3, iterations=1)
    one, par = both(sim.measured, replace(sim.platform, before_stamp=SPLIT), bound, size=3)
    assert_parity(one, par)
