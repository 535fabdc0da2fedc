"""R9, accelerators (compensate/engine/kinds/devices.py): properties on random
host + device traces (hypothesis) and the bundled HIP archive."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.devices import DeviceDeps
from compensate.model import ENTER, LEAVE
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import TRACES, read_bundled

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gpu_traces(draw) -> str:
    """One host thread launching kernels on one or two streams (callsite parameter
    inside hipLaunchKernel, the kernel starts after it, queued behind the stream's
    previous kernel) and sometimes waiting in hipDeviceSynchronize until every
    stream is idle."""
    streams = draw(st.integers(1, 2))
    lines = []
    t = {0: 1000}
    busy = {1 + s: 0 for s in range(streams)}
    callsite = 0

    def rec(loc, time, text):
        lines.append((time, loc, len(lines), f"{time} {loc} {text}"))

    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()) or not callsite:
            s = 1 + draw(st.integers(0, streams - 1))
            callsite += 1
            t[0] += draw(st.integers(1, 200))
            rec(0, t[0], "Enter region=0")
            t[0] += draw(st.integers(0, 100))
            rec(0, t[0], f"ParameterUnsignedInt parameter_ref=0 value={callsite % 3}")
            start = max(busy[s], t[0]) + draw(st.integers(1, 300))
            rec(s, start, "Enter region=2")
            rec(s, start, f"ParameterUnsignedInt parameter_ref=0 value={callsite % 3}")
            busy[s] = start + draw(st.integers(1, 2000))
            rec(s, busy[s], "Leave region=2")
            t[0] += draw(st.integers(1, 100))
            rec(0, t[0], "Leave region=0")
        else:
            t[0] += draw(st.integers(1, 200))
            rec(0, t[0], "Enter region=1")
            t[0] = max([t[0]] + list(busy.values())) + draw(st.integers(1, 100))
            rec(0, t[0], "Leave region=1")
    head = ["compensate-trace 1", "timer_resolution 1000000000", "location 0 group=0"]
    head += [f"location {s} group={s} type=ACCELERATOR_STREAM group_type=ACCELERATOR "
             f"group_creator=0" for s in busy]
    head += ['region 0 "hipLaunchKernel"', 'region 1 "hipDeviceSynchronize"',
             'region 2 "kernel"', "events"]
    return "\n".join(head + [x[3] for x in sorted(lines)]) + "\n"


def _read(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "t.trace"
    path.write_text(text)
    return read_text(str(path))


def _kernel_durations(trace):
    out = {}
    for loc, ev in trace.events.items():
        if trace.definitions.locations[loc].is_device:
            out[loc] = (ev.time[ev.kind == LEAVE] - ev.time[ev.kind == ENTER]).tolist()
    return out


@SETTINGS
@given(gpu_traces(), st.sampled_from(["lower", "upper", "fitted"]), st.floats(0.0, 3e-6))
def test_device_dependencies_hold(tmp_path_factory, text, bound, overhead):
    """After compensation no kernel starts before its launch, no synchronize returns
    before a kernel that ended during it, and every kernel keeps its duration
    (``fitted``: as the command runs it without a network to fit, the lower bound
    with the links' fitted and learned device latencies)."""
    trace = _read(text, tmp_path_factory)
    m = match(trace)
    assert verify(trace, m).ok  # the generator makes valid traces
    launches = sum(len(ev) for loc, ev in trace.events.items() if loc) // 3
    assert m.devices.counts()["launch"] == launches and m.devices.unmatched == 0
    opts = EngineOptions("lower", fit_links=True) if bound == "fitted" else EngineOptions(bound)
    result = compensate(trace, Platform(overhead), opts, m)
    check = verify(result.trace, m)
    assert check.ok and check.devices == 0, check.examples
    assert _kernel_durations(result.trace) == _kernel_durations(trace)


@SETTINGS
@given(gpu_traces(), st.sampled_from(["lower", "upper"]))
def test_no_overhead_is_identity(tmp_path_factory, text, bound):
    trace = _read(text, tmp_path_factory)
    result = compensate(trace, Platform(0.0), EngineOptions(bound, "per-process"))
    for loc, ev in trace.events.items():
        assert np.array_equal(result.trace.events[loc].time, ev.time)


def _violations(trace, m) -> dict:
    time = {loc: ev.time for loc, ev in trace.events.items()}
    out = {"launch": 0, "synchronize": 0}
    for s in m.devices.syncs:
        out[s.kind] += any(time[s.recv[0]][s.recv[1]] <= time[loc][i] for loc, i in s.sends)
    return out


@pytest.mark.parametrize("overhead", [1e-7, 3e-6])
def test_hip_archive(overhead):
    """Issue 17 on hip-two-gpu-metrics: no kernel starts before its launch, no
    hipEventSynchronize returns before its kernel ended (checked here directly, not
    through the verifier), kernel durations unchanged. Without the device
    dependencies (R1 on each stream alone, the code before R9) both
    synchronizes return too early at 3 us per record."""
    trace = read_bundled(TRACES / "hip-two-gpu-metrics" / "traces.otf2")
    m = match(trace)
    assert m.devices.counts() == {"launch": 2, "synchronize": 2, "unmatched": 0}
    for bound in ("lower", "upper"):
        out = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m).trace
        assert _violations(out, m) == {"launch": 0, "synchronize": 0}, bound
        assert _kernel_durations(out) == _kernel_durations(trace)
        assert verify(out, m).ok
    if overhead == 3e-6:
        bare = match(trace)
        bare.devices = DeviceDeps()
        out = compensate(trace, Platform(overhead), EngineOptions(bound="lower"), bare).trace
        assert _violations(out, m)["synchronize"] == 2


@pytest.mark.parametrize("segment_records", [40, 10**6])
def test_streamed_hip_archive_is_the_in_memory_result(segment_records):
    """Streaming never cuts inside a synchronize call (compensate/engine/stream.py),
    so the streamed times equal the in-memory ones. Chunks of 1000 records (73
    chunks; 5 segments at 40 records, as many as chunks of 7 gave): the cutter's
    cost is per location and chunk, so chunks of 7 (10^4 chunks) took 14 s per
    case; tiny chunks are covered by test_stream's random traces."""
    from .test_stream import both
    trace = read_bundled(TRACES / "hip-two-gpu-metrics" / "traces.otf2")
    ref, got, res = both(trace, Platform(3e-6), segment_records=segment_records,
                         chunk_records=1000)
    assert res.segments == 1 if segment_records > 10**5 else res.segments > 1
    assert res.verification.ok
    for loc, ev in got.items():
        np.testing.assert_array_equal(ev.time, ref.trace.events[loc].time)
    assert res.counts["devices"]["synchronize"] == 2


DEVICE_ONLY = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1 name="GPU" type=ACCELERATOR_STREAM group_type=ACCELERATOR group_creator=0
region 1 "kernel"
region 2 "main"
events
900 0 Enter region=2
1000 1 Enter region=1
1500 1 Leave region=1
2000 1 Enter region=1
2600 1 Leave region=1
3000 0 Leave region=2
"""


@pytest.mark.parametrize("device_overhead, want", [
    (0.0, [1000, 1500, 2000, 2600]),  # default: device gaps and durations kept
    # 100 ticks per device record, R1: 1000, 1000 + (500 - 100), 1400 + (500 - 100),
    # 1800 + (600 - 100)
    (1e-7, [1000, 1400, 1800, 2300]),
])
def test_device_overhead_of_the_platform_file(tmp_path, device_overhead, want):
    """R9 applies the platform file's device_overhead to accelerator records only
    (the host's records keep the host overhead, here 0)."""
    path = tmp_path / "d.trace"
    path.write_text(DEVICE_ONLY)
    trace = read_text(str(path))
    plat = Platform.from_dict({"event_overhead": 0.0, "copy_time": [],
                               "device_overhead": device_overhead})
    assert Platform.from_dict(plat.to_dict()).device_overhead == device_overhead
    out = compensate(trace, plat, EngineOptions(bound="lower"))
    assert out.trace.events[1].time.tolist() == want
    assert out.trace.events[0].time.tolist() == [900, 3000]


HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1 name="GPU" type=ACCELERATOR_STREAM group_type=ACCELERATOR group_creator=0
region 0 "hipLaunchKernel"
region 1 "hipDeviceSynchronize"
region 2 "kernel"
region 3 "work"
events
"""
# 100 ticks per host record. Launch latency 400 (kernel Enter - Parameter - O), a
# synchronize tail of 300 after the kernel's end: both shown by the first launch and
# synchronize (the stream idle, the host in the call before the kernel ended). The
# second synchronize is entered 450 after its kernel ended: the tail is not observed.
LATENCY_AND_TAIL = HEAD + """1000 0 Enter region=0
1150 0 ParameterUnsignedInt parameter_ref=0 value=1
1300 0 Leave region=0
1450 0 Enter region=1
1650 1 Enter region=2
1650 1 ParameterUnsignedInt parameter_ref=0 value=1
2650 1 Leave region=2
2950 0 Leave region=1
3100 0 Enter region=0
3250 0 ParameterUnsignedInt parameter_ref=0 value=1
3400 0 Leave region=0
3550 0 Enter region=3
3750 1 Enter region=2
3750 1 ParameterUnsignedInt parameter_ref=0 value=1
4750 1 Leave region=2
5050 0 Leave region=3
5200 0 Enter region=1
5350 0 Leave region=1
"""


def _text_trace(tmp_path, text):
    path = tmp_path / "t.trace"
    path.write_text(text)
    return read_text(str(path))


def test_learned_launch_latency_and_synchronize_tail(tmp_path):
    """Hand-computed (fitted, as the command runs it without a network to fit: the
    lower bound with the links' fitted latency; O = 100 ticks): the host's records lose 100 per
    record; kernel 1 starts 400 after its launch's Parameter (1050 + 400), kernel 2
    likewise (2850 + 400 = 3250), each keeps its duration; the first synchronize
    returns its observed 300 after kernel 1's end (2450 + 300); the second, reached
    (4400) after kernel 2's end (4250), still returns the learned tail after it:
    4250 + 300 = 4550, not its own R1 time 4450 (the answer with a latency of 0,
    the lower bound's and before the learned latencies the fitted one's too, which
    has the host return before the completion reached it)."""
    from compensate.engine.graph import Graph
    from compensate.engine.kinds.devices import learn_latencies
    from compensate.engine.run import Stats

    trace = _text_trace(tmp_path, LATENCY_AND_TAIL)
    plat = Platform(1e-7)
    m = match(trace)
    graph = Graph(trace, plat, "lower", "uniform", None, m, Stats())
    assert learn_latencies(graph, m.devices.syncs) == {
        "launch@1": 400.0, "launch@any": 400.0,
        "synchronize@1": 300.0, "synchronize@any": 300.0}
    out = compensate(trace, plat, EngineOptions("lower", fit_links=True), m).trace
    assert out.events[1].time.tolist() == [1450, 1450, 2450, 3250, 3250, 4250]
    assert out.events[0].time.tolist() == [1000, 1050, 1100, 1150, 2750, 2800, 2850,
                                           2900, 2950, 4350, 4400, 4550]
    assert verify(out, m).devices == 0
    lower = compensate(trace, plat, EngineOptions("lower"), m).trace  # R8's 0: unchanged
    assert lower.events[0].time.tolist()[-1] == 4450


# The host reaches its only synchronize 450 after the kernel ended: no tail observed.
UNOBSERVED_TAIL = HEAD + """1000 0 Enter region=0
1150 0 ParameterUnsignedInt parameter_ref=0 value=1
1300 0 Leave region=0
1450 0 Enter region=3
1650 1 Enter region=2
1650 1 ParameterUnsignedInt parameter_ref=0 value=1
2650 1 Leave region=2
2950 0 Leave region=3
3100 0 Enter region=1
3250 0 Leave region=1
"""


@pytest.mark.parametrize("device, want", [
    (None, 2650),  # no device entry: none observed, 0 (R1's own time 2600 + 50)
    ({"synchronize": 5e-7}, 2950),  # the platform's tail: 2450 + 500
    ({"synchronize": 7e-7}, 3050),  # clamped to the measured gap: 2450 + (3250 - 2650)
    ({"launch": 1e-6}, 2650),  # the launch latency is learned: the entry is not used
])
def test_platform_device_entry_is_the_fallback(tmp_path, device, want):
    """A tail the trace does not show comes from the platform file's ``device``
    entry, clamped into the measured gap; a learned latency wins over the entry."""
    trace = _text_trace(tmp_path, UNOBSERVED_TAIL)
    data = {"event_overhead": 1e-7, "copy_time": []}
    if device is not None:
        data["device"] = device
    plat = Platform.from_dict(data)
    assert Platform.from_dict(plat.to_dict()).device == device
    out = compensate(trace, plat, EngineOptions("lower", fit_links=True)).trace
    assert out.events[1].time.tolist() == [1450, 1450, 2450]
    assert out.events[0].time.tolist()[-1] == want
