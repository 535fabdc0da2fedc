"""compensate.pipeline.channels: the channels of the records matching drops or
leaves unpaired, as the cutter's exact check counts them."""

from __future__ import annotations

import numpy as np

from compensate.model import Comm, Definitions, Location
from compensate.pipeline.channels import Dropped

_DEFS = Definitions(timer_resolution=10**9,
                    locations={i: Location(i, f"rank {i}", i) for i in (10, 11, 12)},
                    comms={0: Comm(0, "MPI_COMM_WORLD", (10, 11, 12)),
                           1: Comm(1, "MPI_COMM_SELF", ())})

#: (time, location, (communicator, peer rank, tag))
_RECORDS = [(5, 10, (0, 1, 7)),    # rank 1 of the world: location 11
            (9, 12, (0, 0, 3)),    # at the cut: not before it
            (2, 12, (0, 5, 3)),    # rank 5 of three: no location
            (3, 11, (1, 0, 4)),    # MPI_COMM_SELF: the location itself
            (4, 11, (8, 0, 4)),    # an undefined communicator: no location
            (1, 12, (0, 2, 6))]    # rank 2: location 12


def _dropped(sign: int, records=_RECORDS) -> Dropped:
    """``records`` taken as the cutter takes them: some as a block, some one by one."""
    d = Dropped(sign)
    head, tail = records[:3], records[3:]
    for t, loc, channel in head:
        d.add_one(t, loc, channel)
    for t, loc, (c, p, tag) in tail:
        d.add(np.array([t]), loc, np.array([c]), np.array([p]), np.array([tag]))
    return d


def test_a_dropped_records_channel_names_its_peer_by_location():
    sends = _dropped(-1).keys(_DEFS, 9)  # the location sends
    assert sends.tolist() == [[10, 12, 11, 11, 12],
                              [11, -1, 11, -1, 12],
                              [0, 0, 1, 8, 0],
                              [7, 3, 4, 4, 6]]
    receives = _dropped(1).keys(_DEFS, 9)  # the location receives
    assert np.array_equal(receives, sends[[1, 0, 2, 3]])


def test_the_peers_looked_up_stay_right_as_records_come_and_go():
    d = _dropped(-1, _RECORDS[:3])
    assert d.keys(_DEFS, 6).tolist() == [[10, 12], [11, -1], [0, 0], [7, 3]]  # (3 looked up)
    for t, loc, channel in _RECORDS[3:]:
        d.add_one(t, loc, channel)
    d.drop_before(3)  # (the rows at 2 and 1 go: one looked up, one not)
    assert len(d) == 4
    assert sorted(d.tuples()) == sorted(r for r in _RECORDS if r[0] >= 3)
    assert d.keys(_DEFS, 10).tolist() == [[10, 12, 11, 11],
                                          [11, 10, 11, -1],
                                          [0, 0, 1, 8],
                                          [7, 3, 4, 4]]


def test_nothing_before_the_cut_is_none():
    assert _dropped(1, [(9, 10, (0, 1, 7))]).keys(_DEFS, 9) is None
    assert Dropped(-1).keys(_DEFS, 9) is None
    assert len(Dropped(1)) == 0 and Dropped(1).columns().shape == (5, 0)

