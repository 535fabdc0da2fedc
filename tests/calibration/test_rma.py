"""The platform's one-sided protocol (calibration.rma): when MPI_Win_unlock sends the
lock's release, decided from the delay a fetch adds to the next grant; the real run
is in test_tracer.py (calibration.record writes the entry on two ranks)."""

from calibration.rma import decide, rma_entry
from compensate.platform import Platform


def measured(empty, fetch, rt, put=None):
    return {"empty_s": empty, "put_s": empty if put is None else put, "fetch_s": fetch,
            "round_trip_s": rt, "n": 201}


def test_a_fetch_that_delays_the_grant_by_its_round_trip_is_after_completion():
    # medians measured with the mpich wheel (MPICH 5.0.2, ch4, one node), in us
    assert decide(measured(9.42e-6, 11.81e-6, 3.02e-6, 10.8e-6)) == "after_completion"
    # the release leaves at once: the result's way back overlaps the release's
    assert decide(measured(9.4e-6, 9.6e-6, 3.0e-6)) == "eager"
    # the threshold: more than half the remaining round trip
    assert decide(measured(10e-6, 11.6e-6, 3e-6)) == "after_completion"
    assert decide(measured(10e-6, 11.4e-6, 3e-6)) == "eager"


def test_the_entry_is_a_valid_rma_entry_of_a_platform_file():
    entry = rma_entry(measured(9.42e-6, 11.81e-6, 3.02e-6))
    assert entry["release"] == "after_completion"
    plat = Platform.from_dict({"event_overhead": 0, "copy_time": [],
                               "rma": {**entry, "mpi": "MPICH Version: 5.0.2"}})
    assert plat.rma_release == "after_completion"
