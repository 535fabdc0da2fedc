"""Host/device matching (compensate/matching/devices.py) on the hand-computed case."""

from compensate.formats.text import read_text
from compensate.matching.devices import is_synchronize, match_devices

from ..conftest import CASES


def test_launches_and_synchronize():
    trace = read_text(str(CASES / "r9_launch_sync.trace"))
    deps = match_devices(trace)
    launch = sorted((s.recv, s.sends) for s in deps.syncs if s.kind == "launch")
    assert launch == [((1, 0), [(0, 1)]), ((1, 3), [(0, 4)])]
    sync = [(s.recv, s.sends) for s in deps.syncs if s.kind == "synchronize"]
    assert sync == [((0, 7), [(1, 5)])]  # the device's last Leave within the call
    assert deps.unmatched == 0


def test_synchronize_names():
    assert is_synchronize("hipEventSynchronize") and is_synchronize("cudaDeviceSynchronize")
    assert is_synchronize("cuCtxSynchronize") and not is_synchronize("hipLaunchKernel")
