"""Integer time (compensate/engine/span.py): a trace that starts near 2^62 ticks
comes out of every way of running (in memory, streamed, distributed on thread ranks,
every bound) exactly as the same trace started at 0, shifted; a trace whose span
from its first timestamp exceeds 2^52 ticks is refused at its first record beyond,
naming the span in ticks and seconds."""

from __future__ import annotations

import numpy as np
import pytest

from compensate.engine import EngineOptions
from compensate.engine.span import MAX_SPAN
from compensate.formats import read_trace
from compensate.model import BUFFER_FLUSH, Events, Trace, TraceError
from compensate.platform import Platform
from compensate.simulate import simulate
from tests import pipelines

from ..conftest import CASES as CASES_DIR

SHIFT = 2 ** 62
SEGMENT, CHUNK = 40, 17


def shifted(trace: Trace, shift: int) -> Trace:
    """``trace`` with every timestamp (and BufferFlush stop time) ``shift`` later."""
    sizes = {}
    for loc, ev in trace.events.items():
        flush = ev.kind == BUFFER_FLUSH
        if flush.any():
            size = ev.size.copy()
            size[flush] += shift
            sizes[loc] = size
    return trace.with_times({loc: ev.time + shift for loc, ev in trace.events.items()}, sizes)


def tight(trace: Trace) -> Trace:
    """``trace`` with gaps of 1 and 1,000 ticks: each location's records squeezed
    together (order kept), so that rounding of the low bits would show."""
    times = {}
    for loc, ev in trace.events.items():
        gaps = np.diff(ev.time)
        small = np.where(gaps == 0, 0, np.where(np.arange(len(gaps)) % 2, 1, 1000))
        times[loc] = ev.time[0] + np.r_[0, np.cumsum(small)].astype(np.int64)
    return trace.with_times(times)


def streamed(trace: Trace, platform: Platform, opts: EngineOptions) -> dict[int, np.ndarray]:
    got: dict[int, list[Events]] = {}
    pipelines.compensate_stream(trace.definitions, pipelines.trace_chunks(trace, CHUNK),
                                platform, opts,
                                lambda loc, ev: got.setdefault(loc, []).append(ev),
                                segment_records=SEGMENT)
    return {loc: Events.concat(parts).time for loc, parts in got.items()}


def ways(trace: Trace, platform: Platform, bound: str) -> dict[str, dict[int, np.ndarray]]:
    """The output timestamps of every way of running, per location."""
    res = pipelines.run_pipeline(trace, platform, bound, "uniform", None)[0]
    out = {"memory": {loc: ev.time for loc, ev in res.trace.events.items()}}
    if bound != "fitted":
        out["streamed"] = streamed(trace, platform, EngineOptions(bound))
        _, events = pipelines.stream_in_threads(trace, platform, EngineOptions(bound), 2,
                                                SEGMENT, CHUNK)
        out["ranks streamed"] = {loc: ev.time for loc, ev in events.items()}
    ranks = pipelines.run_in_threads(trace, platform, bound, 2)[0]
    out["ranks"] = {loc: ev.time for loc, ev in ranks.trace.events.items()}
    return out


def assert_shifted(trace: Trace, platform: Platform, bound: str) -> None:
    ref = ways(trace, platform, bound)
    far = ways(shifted(trace, SHIFT), platform, bound)
    for way, times in ref.items():
        for loc, t in times.items():
            assert far[way][loc].dtype == np.int64
            np.testing.assert_array_equal(far[way][loc] - SHIFT, t,
                                          err_msg=f"{way}, location {loc}")


@pytest.fixture(scope="module", params=["stencil", "rma_fence"])
def program(request):
    sim = simulate(request.param, ranks=4, seed=1, iterations=3)
    return sim.measured, sim.platform


@pytest.mark.parametrize("bound", ["lower", "fitted", "none"])
def test_a_trace_near_2_to_62_comes_out_exactly_shifted(program, bound):
    trace, platform = program
    assert_shifted(trace, platform, bound)


def test_gaps_of_one_and_a_thousand_ticks_near_2_to_62_are_kept(program):
    trace, platform = program
    small = tight(trace)
    assert_shifted(small, Platform(1e-7), "lower")


@pytest.mark.parametrize("name", ["r2_m1_a1", "r6_flush", "r10_fence", "r3_nton"])
def test_text_cases_near_2_to_62(name):
    trace = read_trace(CASES_DIR / f"{name}.trace")
    assert_shifted(trace, Platform(1e-7), "lower")


def two_locations(last: int) -> Trace:
    """A message from location 0 to 1 whose last record lies ``last`` ticks after
    the first, the whole trace shifted to start at 2^62."""
    text = (CASES_DIR / "r2_m1_a1.trace").read_text()
    trace = read_trace(CASES_DIR / "r2_m1_a1.trace")
    assert "MpiRecv" in text
    ev = trace.events[1]
    times = ev.time.copy()
    times[-1] = min(int(e.time[0]) for e in trace.events.values()) + last
    return shifted(trace.with_times({0: trace.events[0].time, 1: times}), SHIFT)


def test_a_span_beyond_2_to_52_is_refused_at_its_record():
    trace = two_locations(2 ** 53 + 1000)
    last = len(trace.events[1]) - 1
    for run in (lambda: pipelines.run_pipeline(trace, Platform(1e-7), "lower", "uniform", None),
                lambda: streamed(trace, Platform(1e-7), EngineOptions("lower"))):
        with pytest.raises(TraceError) as err:
            run()
        msg = str(err.value)
        assert f"location 1, record {last}:" in msg
        span = 2 ** 53 + 1000
        assert f"{span:,} ticks" in msg and "s at 1e+09 ticks/s" in msg
        assert "\n" not in msg


def test_a_span_of_2_to_52_is_accepted_and_a_copy_has_no_limit():
    trace = two_locations(MAX_SPAN)
    near = shifted(trace, -SHIFT)
    assert near.events[1].time[-1] == MAX_SPAN + 1000  # (t0 1000)
    got, ref = (pipelines.run_pipeline(t, Platform(1e-7), "lower", "uniform", None)[0]
                for t in (trace, near))
    for loc, ev in ref.trace.events.items():
        np.testing.assert_array_equal(got.trace.events[loc].time - SHIFT, ev.time)
    # the long gap lost the MpiRecv's overhead (100 ticks): exact to the tick
    out, measured = got.trace.events[1].time, trace.events[1].time
    assert out[-1] - out[-2] == measured[-1] - measured[-2] - 100
    far = two_locations(2 ** 53 + 1001)
    copy = pipelines.run_pipeline(far, Platform(1e-7), "none", "uniform", None)[0]
    np.testing.assert_array_equal(copy.trace.events[1].time, far.events[1].time)


def test_the_fit_observes_the_same_transfers_near_2_to_62(program):
    """R2f's observations (point to point, collective and RMA) are differences of
    measured times: near 2^62 a float64 of an absolute timestamp is 1,024 ticks
    coarse and the observed network times would be noise."""
    from compensate.engine.fit import observe_transfers
    from compensate.matching import match

    trace, platform = program
    far = shifted(trace, SHIFT)
    ref = observe_transfers(trace, match(trace), platform)
    got = observe_transfers(far, match(far), platform)
    assert ref.sizes.size > 0
    np.testing.assert_array_equal(got.sizes, ref.sizes)
    np.testing.assert_array_equal(got.seconds, ref.seconds)
    assert (got.p2p, got.collective, got.rma) == (ref.p2p, ref.collective, ref.rma)


@pytest.mark.parametrize("suffix", ["trace", "otf2"])
def test_the_command_near_2_to_62_and_beyond_2_to_52(tmp_path, suffix):
    """The command, streamed and --in-memory, on a text trace and an OTF2 archive
    written near 2^62: its output is the output of the trace at 0, shifted; a span
    of 2^53 + 1,000 ticks: exit 3, one line, nothing written."""
    from compensate.formats import write_trace
    from tests.inprocess import run_compensate

    trace = read_trace(CASES_DIR / "r5_gather.trace")

    def written(t: Trace, name: str) -> str:
        path = tmp_path / name / "traces.otf2" if suffix == "otf2" else tmp_path / f"{name}.trace"
        write_trace(t, str(path))
        return str(path)

    near, far = written(trace, "near"), written(shifted(trace, SHIFT), "far")
    for mode in ([], ["--in-memory"]):
        outs = []
        for src in (near, far):
            out = tmp_path / f"out{len(outs)}{''.join(mode)}.trace"
            proc = run_compensate(src, out, "--overhead", "100ns", "--quiet", *mode)
            assert proc.returncode == 0, proc.stderr
            outs.append(read_trace(out))
        for loc, ev in outs[0].events.items():
            np.testing.assert_array_equal(outs[1].events[loc].time - SHIFT, ev.time)
    beyond = written(two_locations(2 ** 53 + 1000), "beyond")
    for mode in ([], ["--in-memory"]):
        out = tmp_path / "refused.trace"
        proc = run_compensate(beyond, out, "--overhead", "100ns", *mode)
        assert proc.returncode == 3, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "location 1, record 2: timestamp" in lines[0]
        assert "9,007,199,254,741,992 ticks (9.0072e+06 s at 1e+09 ticks/s)" in lines[0]
        assert not out.exists()
