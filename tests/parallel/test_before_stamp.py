"""The distributed run with part of the overhead before the stamp (the platform's
``overhead_before_stamp``, compensate/engine/overheads.py): every rank's graph reads
the same event times and R1 gaps as the one-process run, so the outputs agree; so
with per-region costs (``event_overhead_by_region``)."""

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


REGIONS = {"MPI_Recv": {"Enter": 1.5e-6, "Leave": 2e-6}, "MPI_Send": {"Leave": 1e-7},
           "MPI_Allreduce": {"Enter": 2e-6, "Leave": 2e-6}, "MPI_Barrier": {"Enter": 8e-7}}


@pytest.mark.parametrize("bound", ["lower", "fitted"])
@pytest.mark.parametrize("name", ["collectives", "mixed", "hybrid_halo"])
def test_region_overheads_give_the_one_process_output(name, bound):
    """Per-region costs (``event_overhead_by_region``, part before the stamp too):
    every rank binds the names to the same ids and charges them alike, the fit
    (``fitted``) included; the records charged per entry summed over the ranks."""
    sim = simulate(name, ranks=4, seed=3, iterations=1)
    plat = replace(sim.platform, overhead_by_region=REGIONS,
                   before_stamp_by_region={"MPI_Recv": {"Leave": 1e-6}})
    one, par = both(sim.measured, plat, bound, size=3)
    assert_parity(one, par)
    assert one[1].stats.region_records == par[1].stats.region_records
    assert sum(one[1].stats.region_records.values()) > 0
