"""R10 invariants (compensate/verify/rma.py) catch outputs that break them."""

from compensate.engine import EngineOptions, compensate
from compensate.formats.text import read_text
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import CASES


def _run(name):
    t = read_text(str(CASES / name))
    r = compensate(t, Platform(1e-7), EngineOptions("lower"))
    return r


def _shift(trace, loc, i, to):
    ev = trace.events[loc]
    times = ev.time.copy()
    times[i:] = times[i:] - times[i] + to  # keep the location's own order
    return trace.with_times({lc: (times if lc == loc else e.time)
                             for lc, e in trace.events.items()})


def test_wait_before_complete_is_a_violation():
    r = _run("r10_pscw.trace")
    assert verify(r.trace, r.matching).ok
    bad = _shift(r.trace, 1, 5, int(r.trace.events[0].time[8]))  # wait's Leave = complete
    v = verify(bad, r.matching)
    assert v.rma >= 1 and any("MPI_Win_complete was called" in e for e in v.examples)


def test_leaving_a_fence_early_is_a_violation():
    r = _run("r10_fence.trace")
    bad = _shift(r.trace, 1, 6, int(r.trace.events[1].time[5]))  # before location 0 entered
    v = verify(bad, r.matching)
    assert v.rma >= 1 and any("left a fence" in e for e in v.examples)


def test_lock_before_release_is_a_violation():
    r = _run("r10_lock.trace")
    bad = _shift(r.trace, 1, 2, int(r.trace.events[0].time[3]) - 1)
    v = verify(bad, r.matching)
    assert v.rma >= 1 and any("lock granted" in e for e in v.examples)


def test_lock_before_the_previous_epochs_put_is_a_violation():
    r = _run("r10_lock_deposit.trace")
    assert verify(r.trace, r.matching).ok
    put = int(r.trace.events[1].time[4])  # location 1's RmaPut
    bad = _shift(r.trace, 2, 6, put)  # location 2's lock Leave at the put's time
    v = verify(bad, r.matching)
    assert v.rma >= 1 and any("operation of the previous conflicting epoch" in e
                              for e in v.examples)


def test_a_fence_is_counted_only_by_the_verification_that_owns_its_location():
    """A fence end not after its own begin is one violation of the location's
    owner: a distributed rank that does not own the location neither counts it
    (which doubled the count over the ranks) nor reads its times."""
    r = _run("r10_fence.trace")
    bad = _shift(r.trace, 1, 2, int(r.trace.events[1].time[1]))  # the end at its begin
    whole = verify(bad, r.matching)
    parts = [verify(bad, r.matching, own={loc}) for loc in (0, 1)]
    assert whole.rma >= 1
    assert parts[0].rma == 0 and parts[1].rma == whole.rma
