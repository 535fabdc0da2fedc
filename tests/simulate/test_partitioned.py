"""The simulator's partitioned ops (:mod:`compensate.simulate.partitioned`) and
compensation of its partitioned programs against ground truth."""

import pytest

from compensate.engine import EngineOptions, compensate
from compensate.matching import match
from compensate.simulate import SimulationError, default_platform, run_program, simulate
from compensate.simulate import programs as P
from compensate.simulate.validation import accuracy


@pytest.mark.parametrize("name", ["partitioned", "partitioned_poll"])
def test_partitioned_programs_compensate(name):
    """Lower bound: >= 99 % of the dilation removed, 0 violations; the upper bound
    keeps the measured intervals and removes less (the partitions' transfers are
    hidden behind the sender's work)."""
    sim = simulate(name, ranks=4, iterations=4, overhead=1e-6)
    m = match(sim.measured)
    assert m.partitioned.counts()["transfers"] == 16 and m.partitioned.unobserved == 0
    removed = {}
    for bound in ("lower", "upper"):
        r = compensate(sim.measured, sim.platform, EngineOptions(bound), m)
        acc = accuracy(sim.truth, sim.measured, r.trace)
        assert acc.violations == 0
        removed[bound] = acc.removed_total
    assert removed["lower"] >= 0.99 > removed["upper"]


def test_same_records_in_both_runs():
    sim = simulate("partitioned_poll", ranks=3, iterations=2)
    for loc, ev in sim.truth.events.items():
        assert (ev.kind == sim.measured.events[loc].kind).all()
        assert (ev.size_recv == sim.measured.events[loc].size_recv).all()


def test_a_poll_after_the_data_arrived_is_refused():
    """A ptest (MPI_Parrived returning false) placed after the data arrived is a
    program the simulator cannot run as written."""
    ops = [[P.psend_init(1, 64, 1, 0, "s"), P.pstart("s"), P.pready("s", 0), P.pwait("s")],
           [P.precv_init(0, 64, 1, 0, "r"), P.pstart("r"), P.compute(1e-3),
            P.ptest("r", 0), P.pwait("r")]]
    with pytest.raises(SimulationError, match="after its data arrived"):
        run_program(P.Program("late_poll", ops), default_platform(0.0))


def test_pready_twice_is_refused():
    ops = [[P.psend_init(1, 64, 2, 0, "s"), P.pstart("s"), P.pready("s", 0),
            P.pready("s", 0)], [P.precv_init(0, 64, 2, 0, "r")]]
    with pytest.raises(SimulationError, match="pready of partition 0"):
        run_program(P.Program("twice", ops), default_platform(0.0))


def test_without_r11_the_output_breaks_happened_before():
    """The partitioned rules are what keeps the output right: with the partition
    messages left out (every partitioned record local), receives complete before
    their data was made ready."""
    from compensate.matching.partitioned import PartitionedDeps
    from compensate.verify import verify

    sim = simulate("partitioned_poll", ranks=4, iterations=4, overhead=1e-6)
    m = match(sim.measured)
    m_local = match(sim.measured)
    m_local.partitioned = PartitionedDeps()
    out = compensate(sim.measured, sim.platform, EngineOptions("lower"), m_local).trace
    assert verify(out, m).partitioned > 0
