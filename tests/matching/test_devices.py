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


def test_synchronize_after_work_that_ended_before_it(tmp_path):
    """A synchronize call waits for the device work that ended before it returned, also
    when that work ended before the call began (ground truth: the host may have got
    there first without the tracer); per stream only the last such Leave, and only
    those after the thread's previous synchronize call returned."""
    trace = read_text(str(CASES / "r9_sync_done.trace"))
    sync = [(s.recv, s.sends) for s in match_devices(trace).syncs if s.kind == "synchronize"]
    assert sync == [((0, 10), [(1, 2)])]
    text = (CASES / "r9_launch_sync.trace").read_text()
    # a second device synchronize after the first: nothing ended in between, no link
    text = text.replace("6000 0 Leave region=1",
                        "6000 0 Leave region=1\n6100 0 Enter region=1\n6200 0 Leave region=1")
    (tmp_path / "two.trace").write_text(text)
    sync = [(s.recv, s.sends) for s in match_devices(read_text(str(tmp_path / "two.trace"))).syncs
            if s.kind == "synchronize"]
    assert sync == [((0, 7), [(1, 5)])]


def test_synchronize_names():
    assert is_synchronize("hipEventSynchronize") and is_synchronize("cudaDeviceSynchronize")
    assert is_synchronize("cuCtxSynchronize") and not is_synchronize("hipLaunchKernel")
