"""R11 (:mod:`compensate.engine.kinds.partitioned`) on random partitioned
exchanges: any partition counts, work per partition and polling, against the
simulator's ground truth (the hand-computed case is tests/cases/r11_partitioned.trace)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.matching import match
from compensate.simulate import default_platform, run_program
from compensate.simulate import programs as P
from compensate.simulate.validation import accuracy


def _exchange(s, r, works, poll):
    """Rank 0 sends an s-partition buffer to rank 1 (r partitions), each partition
    made ready after its work; rank 1 optionally observes each with MPI_Parrived."""
    send = [P.psend_init(1, 4096, s, 3, "s")]
    recv = [P.precv_init(0, 4096, r, 3, "r")]
    for it in range(2):
        send.append(P.pstart("s"))
        recv.append(P.pstart("r"))
        for i in range(s):
            send += [P.call("work", works[(i + it) % len(works)]), P.pready("s", i)]
        send.append(P.pwait("s"))
        if poll:
            recv += [P.parrived("r", j) for j in range(r)]
        recv += [P.call("other", 2e-6), P.pwait("r")]
        send.append(P.barrier())
        recv.append(P.barrier())
    return P.Program("exchange", [send, recv])


@settings(max_examples=25, deadline=None)
@given(s=st.integers(1, 5), r=st.integers(1, 5), poll=st.booleans(),
       works=st.lists(st.floats(1e-6, 3e-5), min_size=1, max_size=5),
       overhead=st.sampled_from([2e-7, 1e-6, 4e-6]))
def test_r11_against_ground_truth(s, r, poll, works, overhead):
    """One message per overlapping pair of partitions and round; both bounds keep
    happened-before (0 violations), and the true run time is not above the upper
    bound's, which is not below the lower bound's. (The lower bound is no bound on
    the truth: a partition whose observing call began after the Pready call ended
    is timed without network time, and where the observing call began just before
    it ended, R2's observed interval holds the receiver's own lateness too.)"""
    sim = run_program(_exchange(s, r, works, poll), default_platform(overhead))
    m = match(sim.measured)
    pairs = {(i, j) for j in range(r) for i in range(s)
             if i * r < (j + 1) * s and j * s < (i + 1) * r}
    assert len(m.partitioned.messages) == 2 * len(pairs)
    span = {}
    for bound in ("lower", "upper"):
        out = compensate(sim.measured, sim.platform, EngineOptions(bound), m).trace
        assert accuracy(sim.truth, sim.measured, out).violations == 0
        span[bound] = out.span_seconds
    slack = 2e-9 * sim.measured.record_count  # rounding: a tick per record at most
    assert span["lower"] <= span["upper"] + slack
    assert sim.truth.span_seconds <= span["upper"] + slack
