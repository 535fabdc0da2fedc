"""The platform network model from a ping-pong (calibration.network): the copies of
the measurement model come off the one-way times, the line is fitted through the
per-size medians; the real run is in test_tracer.py (calibration.record writes the
entry on two ranks)."""

import pytest

from calibration.network import network_entry
from compensate.platform import Platform


def test_network_entry_subtracts_the_two_copies_and_fits_the_line_by_hand():
    # one way = 2 copies (1 ns per 100 bytes each) + 2 us + 0.5 ns per byte
    copy = lambda s: s * 1e-11  # noqa: E731 - seconds to copy s bytes once
    measured = [{"bytes": s, "seconds": 2e-6 + s * 5e-10 + 2 * copy(s), "n": 101}
                for s in (0, 64, 1024, 16384, 262144)]
    entry = network_entry(measured, copy)
    assert entry["latency"] == pytest.approx(2e-6, rel=1e-6)
    assert entry["per_byte"] == pytest.approx(5e-10, rel=1e-6)
    assert entry["measured"] == measured
    # without a copy table the copies stay in the network time
    assert network_entry(measured)["per_byte"] == pytest.approx(5.2e-10, rel=1e-6)
    # a platform file takes it as its network entry
    plat = Platform.from_dict({"event_overhead": 0, "copy_time": [], "network": entry})
    assert plat.network == (entry["latency"], entry["per_byte"])


def test_copies_larger_than_the_time_give_zero_not_negative():
    measured = [{"bytes": s, "seconds": 1e-6, "n": 3} for s in (0, 1024)]
    entry = network_entry(measured, lambda s: 1e-6 if s else 0.0)
    assert entry["latency"] >= 0 and entry["per_byte"] >= 0
