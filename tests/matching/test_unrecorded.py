"""Calls a tracer did not record the communication of (compensate.matching.unrecorded,
and match's collectives with a Begin but no End): counted, kept local, and the
run verifies; an End without its Begin is still refused."""

import numpy as np
import pytest

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.collectives import collective_pairs
from compensate.model import KIND_CODE, TraceError
from tests.inprocess import run_compensate

B, E = KIND_CODE["MpiCollectiveBegin"], KIND_CODE["MpiCollectiveEnd"]
X, L = KIND_CODE["Enter"], KIND_CODE["Leave"]

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
location 1 group=1 name="rank 1"
region 1 "MPI_Sendrecv"
region 2 "MPI_Ibcast"
region 3 "MPI_Barrier"
region 4 "MPI_Wait"
region 5 "compute"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""
#: per rank: an MPI_Sendrecv with no record inside (EZTrace 2.0), an MPI_Ibcast
#: with a Begin only, its MPI_Wait with nothing, a barrier, and a call of a region
#: that is not MPI with nothing inside
BODY = """{t0} {r} Enter region=1
{t1} {r} Leave region=1
{t2} {r} Enter region=2
{t3} {r} MpiCollectiveBegin
{t4} {r} Leave region=2
{t5} {r} Enter region=4
{t6} {r} Leave region=4
{t7} {r} Enter region=3
{t8} {r} MpiCollectiveBegin
{t9} {r} MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0
{t10} {r} Leave region=3
{t11} {r} Enter region=5
{t12} {r} Leave region=5
"""


def _text(tmp_path, body):
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    return path


def _ranks(shift: int = 0) -> str:
    return "".join(BODY.format(r=r, **{f"t{i}": 100 * (i + 1) + r * shift for i in range(13)})
                   for r in (0, 1))


@pytest.mark.parametrize("kinds, begins, ends, orphans, stray", [
    ([B, E, B, E], [0, 2], [1, 3], 0, -1),
    ([B, X, B, E], [2], [3], 1, -1),  # the first Begin: another before any End
    ([B, E, B], [0], [1], 1, -1),  # the last Begin: no End follows
    ([E, B, E], [1], [2], 0, 0),  # an End before any Begin
    ([B, E, E], [0], [1], 0, 2),  # an End whose Begin the End before took
])
def test_each_end_pairs_with_the_latest_begin_after_the_end_before(kinds, begins, ends,
                                                                   orphans, stray):
    b, e, o, s = collective_pairs(np.array(kinds, dtype=np.int8))
    assert (b.tolist(), e.tolist(), o, s) == (begins, ends, orphans, stray)


def test_a_begin_and_an_end_in_different_calls_do_not_pair():
    """Enter(Ibcast) Begin Leave Enter(Barrier) End Leave: levels 0 1 1 0 1 1."""
    kinds = np.array([X, B, L, X, E, L], dtype=np.int8)
    level = np.array([0, 1, 1, 0, 1, 1])
    b, e, o, s = collective_pairs(kinds, level)
    assert (b.tolist(), e.tolist(), s) == ([], [], 4)
    b, e, o, s = collective_pairs(kinds)  # without the levels, by order alone
    assert (b.tolist(), e.tolist(), s) == ([1], [4], -1)


def test_calls_without_records_are_counted_by_name_and_begins_without_end_stay_local(
        tmp_path):
    m = match(read_text(str(_text(tmp_path, _ranks()))))
    counts = m.counts()
    assert counts["unrecorded_calls"] == {"MPI_Sendrecv": 2}  # not MPI_Wait, not compute
    assert counts["collective_begins_without_end"] == 2
    assert len(m.instances) == 1  # the barrier alone
    assert m.instances[0].begin_idx == [8, 8]  # the record after Enter(MPI_Barrier)


def test_the_run_verifies_and_says_what_it_did_not_model(tmp_path):
    path = _text(tmp_path, _ranks(shift=30))
    run = run_compensate(path, tmp_path / "o.trace", "--overhead", "10ns")
    assert run.returncode == 0, run.stderr
    assert "verified" in run.stdout + run.stderr
    err = run.stderr
    assert "2 MpiCollectiveBegin records have no MpiCollectiveEnd" in err
    assert "2 MPI calls hold no record of their communication (MPI_Sendrecv 2)" in err


def test_an_end_without_its_begin_is_refused_naming_the_record(tmp_path):
    """Rank 0's barrier lost its Begin: the Ibcast's Begin, in another call, does
    not stand in for it."""
    body = _ranks().replace("900 0 MpiCollectiveBegin\n", "")
    with pytest.raises(TraceError, match="MpiCollectiveEnd without its MpiCollectiveBegin"):
        match(read_text(str(_text(tmp_path, body))))


def test_communicator_creation_without_records_is_counted_but_not_a_free(tmp_path):
    """MPI_Comm_split and MPI_Comm_dup (the members exchange colours and agree on
    a context id) with nothing inside are counted; MPI_Comm_free, which MPI lets
    an implementation do locally, is not."""
    head = HEAD.replace('region 5 "compute"', 'region 5 "MPI_Comm_split"\n'
                        'region 6 "MPI_Comm_dup"\nregion 7 "MPI_Comm_free"')
    body = "".join(f"{100 * i + r} {r} {k} region={g}\n" for r in (0, 1)
                   for i, (k, g) in enumerate([("Enter", 5), ("Leave", 5), ("Enter", 6),
                                               ("Leave", 6), ("Enter", 7), ("Leave", 7)]))
    path = tmp_path / "t.trace"
    path.write_text(head + body)
    assert match(read_text(str(path))).counts()["unrecorded_calls"] == {
        "MPI_Comm_dup": 2, "MPI_Comm_split": 2}
