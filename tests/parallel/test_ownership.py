"""Ownership (compensate/parallel/ownership.py): whole processes, contiguous
balanced blocks in process id order, idle ranks beyond the process count."""

from __future__ import annotations

import pytest

from compensate.model import ACCELERATOR_STREAM, METRIC_LOCATION, Definitions, Location
from compensate.parallel.ownership import owners


def defs(groups: list[int]) -> Definitions:
    return Definitions(10**9, {i: Location(i, group=g) for i, g in enumerate(groups)})


def test_blocks_are_contiguous_and_balanced():
    d = defs([0, 1, 2, 3, 4])
    assert owners(d, [0, 1, 2, 3, 4], 2) == {0: 0, 1: 0, 2: 0, 3: 1, 4: 1}
    assert owners(d, [0, 1, 2, 3, 4], 3) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2}


def test_more_ranks_than_processes_leaves_ranks_idle():
    assert owners(defs([7, 3]), [0, 1], 4) == {0: 1, 1: 0}  # groups in id order: 3, 7


def test_a_process_is_never_split():
    """Threads, metric locations and the accelerator context a process created go
    with it (R8/R9 and metric mapping stay inside one rank)."""
    locs = {0: Location(0, group=10), 1: Location(1, group=10),
            2: Location(2, group=10, type=METRIC_LOCATION),
            3: Location(3, group=20, type=ACCELERATOR_STREAM, group_type="ACCELERATOR",
                        group_creator=10),
            4: Location(4, group=11)}
    got = owners(Definitions(10**9, locs), [0, 1, 2, 3, 4], 2)
    assert got == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1}


def test_no_ranks_is_refused():
    with pytest.raises(ValueError):
        owners(defs([0]), [0], 0)


def test_record_counts_balance_the_blocks():
    """With every location's record count the blocks balance records (a process
    goes where its middle record falls), still contiguous and whole processes."""
    d = defs([0, 1, 2, 3])
    assert owners(d, [0, 1, 2, 3], 2, {0: 90, 1: 5, 2: 3, 3: 2}) == {0: 0, 1: 1, 2: 1, 3: 1}
    assert owners(d, [0, 1, 2, 3], 2, {0: 10, 1: 10, 2: 10, 3: 10}) == \
        owners(d, [0, 1, 2, 3], 2)
    # a heavy process leaves a rank idle rather than split
    assert owners(d, [0, 1, 2, 3], 3, {0: 1, 1: 1000, 2: 1, 3: 1}) == {0: 0, 1: 1, 2: 2, 3: 2}
    # an unknown count (a text trace): by process count
    assert owners(d, [0, 1, 2, 3], 2, {0: 90, 1: None, 2: 3, 3: 2}) == owners(d, [0, 1, 2, 3], 2)
    # threads of one process add up
    d2 = defs([5, 5, 6])
    assert owners(d2, [0, 1, 2], 2, {0: 10, 1: 10, 2: 15}) == {0: 0, 1: 0, 2: 1}
