"""compensate.pipeline.channels: the channels of the records matching drops or
leaves unpaired, as the cutter's exact check counts them."""

from __future__ import annotations

import numpy as np

from compensate.model import Comm, Definitions, Location
from compensate.pipeline.channels import dropped_keys

_DEFS = Definitions(timer_resolution=10**9,
                    locations={i: Location(i, f"rank {i}", i) for i in (10, 11, 12)},
                    comms={0: Comm(0, "MPI_COMM_WORLD", (10, 11, 12)),
                           1: Comm(1, "MPI_COMM_SELF", ())})


def test_a_dropped_records_channel_names_its_peer_by_location():
    dropped = [(5, 10, (0, 1, 7)),    # rank 1 of the world: location 11
               (9, 12, (0, 0, 3)),    # at the cut: not before it
               (2, 12, (0, 5, 3)),    # rank 5 of three: no location
               (3, 11, (1, 0, 4)),    # MPI_COMM_SELF: the location itself
               (4, 11, (8, 0, 4)),    # an undefined communicator: no location
               (1, 12, (0, 2, 6))]    # rank 2: location 12
    sends = dropped_keys(_DEFS, dropped, 9, -1)  # the location sends
    assert sends.tolist() == [[10, 12, 11, 11, 12],
                              [11, -1, 11, -1, 12],
                              [0, 0, 1, 8, 0],
                              [7, 3, 4, 4, 6]]
    receives = dropped_keys(_DEFS, dropped, 9, 1)  # the location receives
    assert np.array_equal(receives, sends[[1, 0, 2, 3]])


def test_nothing_before_the_cut_is_none():
    assert dropped_keys(_DEFS, [(9, 10, (0, 1, 7))], 9, 1) is None
    assert dropped_keys(_DEFS, [], 9, -1) is None
