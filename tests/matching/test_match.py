"""Matching (compensate/matching/): the table of matchers, the class table of MPI
collective operations, and what match() links on hand-written cases."""

import pytest

from compensate.formats.text import read_text
from compensate.matching import COLLECTIVE_CLASSES, match
from compensate.matching.collectives import (
    CREATE,
    EXSCAN,
    FREE,
    N_TO_N,
    N_TO_ONE,
    ONE_TO_N,
    SCAN,
    collective_class,
)
from compensate.matching.match import (
    MATCHERS,
    match_collectives,
    match_device_syncs,
    match_messages,
    match_partitioned_ops,
    match_rma_syncs,
    match_thread_syncs,
)
from compensate.model import COLLECTIVE_OPS

from ..conftest import CASES


def test_matchers_table():
    assert MATCHERS == (match_messages, match_collectives, match_thread_syncs,
                        match_device_syncs, match_partitioned_ops, match_rma_syncs)


@pytest.mark.parametrize("op,cls", [("BARRIER", N_TO_N), ("ALLREDUCE", N_TO_N),
                                    ("BCAST", ONE_TO_N), ("SCATTERV", ONE_TO_N),
                                    ("GATHER", N_TO_ONE), ("REDUCE", N_TO_ONE),
                                    ("SCAN", SCAN), ("EXSCAN", EXSCAN),
                                    ("CREATE_HANDLE", CREATE), ("ALLOCATE", CREATE),
                                    ("CREATE_HANDLE_AND_ALLOCATE", CREATE),
                                    ("DESTROY_HANDLE", FREE), ("DEALLOCATE", FREE),
                                    ("DESTROY_HANDLE_AND_DEALLOCATE", FREE)])
def test_collective_class(op, cls):
    assert collective_class(COLLECTIVE_OPS[op]) == (cls, True)
    assert COLLECTIVE_CLASSES[op] == cls


def test_every_otf2_operation_is_known():
    """OTF2_CollectiveOp 0-22: none is an unknown operation (issue 16: Score-P 7's
    handle collectives were counted as unknown and reported as Wait at N x N)."""
    otf2 = pytest.importorskip("otf2")
    defined = otf2.CollectiveOp._names  # {code: name}, as the OTF2 library defines them
    assert len(defined) == 23
    for code, name in defined.items():
        assert COLLECTIVE_OPS[name] == code
        assert collective_class(code)[1], name


def test_handle_free_synchronises_only_if_measured_so():
    m = match(read_text(str(CASES / "r5_handles.trace")))
    create, free = m.instances
    assert (create.cls, create.synchronising) == (CREATE, True)
    assert (free.cls, free.synchronising) == (FREE, False)
    assert m.counts()["collectives"] == {"create": 1, "free (local)": 1}
    assert m.counts()["unknown_collective_ops"] == 0


def test_unknown_operation_is_n_to_n_conservatively():
    unknown = max(COLLECTIVE_OPS.values()) + 100
    assert collective_class(unknown) == (N_TO_N, False)


def test_messages_and_instances_of_cases():
    m = match(read_text(str(CASES / "r2_m1_a1.trace")))
    assert len(m.table) == 1 and not m.instances
    (msg,) = m.messages
    assert (msg.send_idx, msg.recv_idx) == (1, 1)
    m = match(read_text(str(CASES / "r5_gather.trace")))
    assert len(m.table) == 0 and len(m.instances) == 1
    (inst,) = m.instances
    assert inst.cls == N_TO_ONE and inst.root == 0 and inst.locs == [0, 1, 2]
