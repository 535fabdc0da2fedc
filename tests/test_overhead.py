"""Which overhead compensate uses (compensate/overhead.py): precedence of the
sources, what the summary and the one-line summary say, and the estimate for
traces without an in-situ measurement, checked against the simulator's truth."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import compensate as c
from compensate.cli.compensate import main
from compensate.overhead import estimate, kind_bounds
from compensate.simulate import simulate
from tests.test_insitu import _text_trace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def traced(tmp_path: Path) -> Path:
    return _text_trace(tmp_path)


def _summary(tmp_path: Path, src: Path, *args: str) -> tuple[int, dict]:
    out, s = tmp_path / "out.trace", tmp_path / "s.json"
    code = main([str(src), str(out), "--summary", str(s), "--quiet", "--force", *args])
    return code, (json.loads(s.read_text()) if code == 0 else {})


def test_precedence_command_line_platform_file_trace(tmp_path: Path, traced: Path) -> None:
    pf = tmp_path / "platform.json"
    pf.write_text(json.dumps({"event_overhead": 50e-9, "copy_time": []}))
    _, s = _summary(tmp_path, traced)
    assert s["overhead"]["source"] == "trace in-situ"
    assert s["overhead"]["by_location"]["0"]["by_region"] == {"1": {"Enter": 3e-7,
                                                                    "Leave": None}}
    _, s = _summary(tmp_path, traced, "--platform", str(pf))
    assert s["overhead"]["source"] == "platform file"
    assert s["approximated_span_s"] == pytest.approx(3000e-9 - 3 * 50e-9)
    _, s = _summary(tmp_path, traced, "--platform", str(pf), "--overhead", "10ns")
    assert s["overhead"] == {"source": "command line", "seconds": pytest.approx(1e-8)}
    _, s = _summary(tmp_path, traced, "--platform", str(pf), "--overhead", "insitu")
    assert s["overhead"]["source"] == "trace in-situ"


def test_platform_file_that_prefers_insitu(tmp_path: Path, traced: Path, capsys) -> None:
    """The tracer's file says prefer_insitu: the trace's tables win over the file's
    O (the file still gives the rest); --overhead platform forces the file's; a
    file without it is used as before, and the summary notes the unused tables."""
    pf = tmp_path / "platform.json"
    pf.write_text(json.dumps({"event_overhead": 50e-9, "copy_time": [],
                              "prefer_insitu": True}))
    _, s = _summary(tmp_path, traced, "--platform", str(pf))
    assert s["overhead"]["source"] == "trace in-situ"
    assert s["overhead"]["preferred_by"] == "platform file (prefer_insitu)"
    # location 0 by its table (100+300+200 ns), location 1 by the file (3 x 50 ns)
    assert s["approximated_span_s"] == pytest.approx(3000e-9 - 3 * 50e-9)
    _, s = _summary(tmp_path, traced, "--platform", str(pf), "--overhead", "platform")
    assert s["overhead"] == {"source": "platform file", "forced": "--overhead platform",
                             "insitu_tables": 1}
    assert main([str(traced), str(tmp_path / "o.trace"), "--force", "--platform",
                 str(pf), "--overhead", "platform"]) == 0
    assert "(the trace's in-situ tables unused: --overhead insitu)" in \
        capsys.readouterr().out
    assert main([str(traced), str(tmp_path / "o.trace"), "--force", "--platform",
                 str(pf)]) == 0
    assert "overhead from trace in-situ (the platform file prefers it)" in \
        capsys.readouterr().out
    (tmp_path / "plain").mkdir()
    plain = _text_trace(tmp_path / "plain", None)
    _, s = _summary(tmp_path, plain, "--platform", str(pf))  # no tables: the file's O
    assert s["overhead"] == {"source": "platform file"}
    assert s["approximated_span_s"] == pytest.approx(3000e-9 - 3 * 50e-9)
    # --overhead platform without a file: one line, exit 2
    assert main([str(traced), str(tmp_path / "o.trace"), "--force", "--overhead",
                 "platform"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overhead platform needs --platform" in err[0]


def test_insitu_missing_is_a_usage_error(tmp_path: Path, capsys) -> None:
    plain = _text_trace(tmp_path, None)
    assert main([str(plain), str(tmp_path / "o.trace"), "--overhead", "insitu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "carries no in-situ overhead" in err[0]
    assert main([str(plain), str(tmp_path / "o.trace")]) == 2  # nothing to use: as before
    assert "no platform" in capsys.readouterr().err


def test_one_line_summary_names_the_source(tmp_path: Path, traced: Path, capsys) -> None:
    assert main([str(traced), str(tmp_path / "o.trace"), "--force"]) == 0
    assert "overhead from trace in-situ" in capsys.readouterr().out
    assert main([str(traced), str(tmp_path / "o.trace"), "--force", "--overhead",
                 "estimate"]) == 0
    assert "overhead estimated from the trace" in capsys.readouterr().out


def test_estimate_hand_computed(traced: Path) -> None:
    """Gaps after Enter: 1000, 1000 (twice per location); after Leave: 1000: every
    bound is 1000 ns, too few gaps for MIN_GAPS, so the smallest positive one."""
    trace = c.read(traced)
    assert kind_bounds(trace) == {"Enter": (pytest.approx(1e-6), 4),
                                  "Leave": (pytest.approx(1e-6), 2)}
    plat, info = estimate(trace)
    assert info["seconds"] == pytest.approx(1e-6)
    assert info["interval_s"] == [0.0, pytest.approx(1e-6)]


def test_estimate_against_the_simulator() -> None:
    """A simulated ring with O = 1 µs per record: the interval holds the truth, the
    estimate is the truth (the ring has back-to-back records), and compensating
    with it overcompensates nothing and verifies."""
    sim = simulate("ring", ranks=3, iterations=3, overhead=1e-6)
    plat, info = estimate(sim.measured)
    lo, hi = info["interval_s"]
    assert lo <= 1e-6 <= hi + 1e-9
    assert info["seconds"] == pytest.approx(1e-6, abs=2e-9)
    r = c.compensate(sim.measured, overhead="estimate")
    assert r.summary["overhead"]["source"] == "estimate"
    assert r.summary["overcompensated_records"] == 0


# -- copy_contradictions: a copy table that contradicts the trace ----------------------

def _contradictions(path, platform, chunk):
    from compensate.formats import read_chunks
    from compensate.overhead import copy_contradictions
    defs, chunks = read_chunks(path, chunk)
    return copy_contradictions(defs, chunks, platform)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 18])
def test_copy_contradictions_do_not_depend_on_the_chunks(chunk):
    """Gaps across chunk boundaries are those of the whole location: every chunk size
    finds the same records, and a copy that fits finds none."""
    trace = ROOT / "examples" / "pingpong.trace"
    slow = c.Platform(1e-6, {}, [64.0], [1e-6])
    found = _contradictions(trace, slow, chunk)
    assert found == _contradictions(trace, slow, 1 << 18)
    assert (found["records"], found["checked"]) == (16, 16)
    assert found["worst"] == {"kind": "MpiSend", "bytes": 8192, "copy_s": pytest.approx(1.28e-4),
                              "gap_s": pytest.approx(2.248e-6), "location": 0, "record": 21}
    fits = c.Platform(1e-6, {}, [64.0], [1.6e-8])
    assert _contradictions(trace, fits, chunk)["records"] == 0


def _send_recv_trace(tmp_path):
    """A 64-byte message: the send 1 us after its Enter, then 10 us to its Leave;
    the receive 3 us after its Enter, then 1 us to its Leave."""
    trace = tmp_path / "t.trace"
    trace.write_text(
        "compensate-trace 1\ntimer_resolution 1000000000\n"
        "location 0 group=0\nlocation 1 group=1\n"
        'region 1 "MPI_Send"\nregion 2 "MPI_Recv"\ncomm 0 "w" 0,1\nevents\n'
        "0 0 Enter region=1\n1000 0 MpiSend receiver=1 comm=0 tag=0 bytes=64\n"
        "11000 0 Leave region=1\n"
        "0 1 Enter region=2\n3000 1 MpiRecv sender=0 comm=0 tag=0 bytes=64\n"
        "4000 1 Leave region=2\n")
    return trace


def test_copy_contradiction_by_hand(tmp_path):
    """A receive 3 us after the record before it (1 us of that record's overhead)
    cannot hold a 5 us copy: short by 3 us; the send's gap after it (10 us, 1 us
    overhead) holds it."""
    trace = _send_recv_trace(tmp_path)
    found = _contradictions(trace, c.Platform(1e-6, {}, [64.0], [5e-6]), 1 << 18)
    assert (found["records"], found["by_kind"], found["checked"]) == (1, {"MpiRecv": 1}, 2)
    assert found["max_s"] == pytest.approx(3e-6)
    assert found["worst"]["location"] == 1 and found["worst"]["record"] == 1


def test_copy_contradiction_reads_a_regions_own_overhead(tmp_path):
    """The receive's gap (3 us after Enter MPI_Recv) holds a 1.5 us copy after the
    Enter's 1 us of overhead by kind, not after the region's 2 us: short by 0.5 us."""
    trace = _send_recv_trace(tmp_path)
    kinds = c.Platform(1e-6, {}, [64.0], [1.5e-6])
    assert _contradictions(trace, kinds, 1 << 18)["records"] == 0
    regions = dataclasses.replace(kinds, overhead_by_region={"MPI_Recv": {"Enter": 2e-6}})
    found = _contradictions(trace, regions, 2)
    assert (found["records"], found["by_kind"]) == (1, {"MpiRecv": 1})
    assert found["max_s"] == pytest.approx(0.5e-6)


@pytest.mark.parametrize("program", ["ring", "nonblocking", "pingpong"])
def test_simulated_copies_never_contradict_their_platform(program):
    """The simulator copies every message with the platform's own C(s)·s (docs/design.md
    §2): its measured trace holds every copy, so the check finds nothing; the same
    trace against a table 10^4 times slower finds its message records."""
    from compensate.overhead import copy_contradictions
    sim = simulate(program, ranks=4)
    defs = sim.measured.definitions
    found = copy_contradictions(defs, [sim.measured.events], sim.platform)
    assert found["checked"] > 0 and found["records"] == 0
    p = sim.platform
    slow = c.Platform(p.event_overhead, dict(p.overhead_by_kind), p.copy_bytes,
                      p.copy_seconds * 1e4)
    assert copy_contradictions(defs, [sim.measured.events], slow)["records"] > 0


def test_on_clocks_of_their_own_a_transfer_bounds_no_kind(tmp_path: Path) -> None:
    """The ping-pong of tests/matching/test_clocks.py, rank 1 stamping 500 ticks
    early: its first message looks received 400 ticks before it was sent. That is
    no bound on the send's overhead (it gave MpiSend 0 s); the estimate takes
    the send's own gaps instead, as for every other kind."""
    from compensate.overhead import observed_transfers
    from tests.matching.test_clocks import HEAD, SKEWED

    path = tmp_path / "t.trace"
    path.write_text(HEAD + SKEWED)
    trace = c.read(path)
    assert observed_transfers(trace) is None
    _, info = estimate(trace)
    assert info["observed_transfer_s"] is None
    assert info["by_kind"]["MpiSend"] == info["seconds"] > 0


STREAMED_ESTIMATE = sorted((ROOT / "tests" / "data").glob("traces/*/traces.otf2")) + [
    p for p in sorted((ROOT / "tests" / "data").glob("eztrace/*/eztrace_log.otf2"))
    # (its processes' clocks disagree, which a stream's first chunks show; the whole
    # trace's matching leaves all but 2 of its messages to MPI_Waitsome's wrong
    # statuses, and those 2 are in order: there the shortest transfer, 16 us, is
    # above the sends' gap bounds, so the estimate is the same: the test below)
    if p.parent.name != "procnull"]


@pytest.mark.parametrize("anchor", STREAMED_ESTIMATE, ids=lambda p: p.parent.name)
def test_the_estimate_of_a_stream_is_the_whole_trace_s(anchor: Path) -> None:
    """--overhead estimate streams (one segment at a time, however small) and finds
    what the whole trace gives: every kind's bound, the observed transfer (None
    on EZTrace's clocks of their own), the estimate."""
    from compensate.formats import read_chunks
    from compensate.overhead import estimate_from
    from compensate.pipeline import RunOptions
    from compensate.pipeline.run import estimate_pass

    whole = estimate(c.read(anchor))[1]
    defs, chunks = read_chunks(str(anchor), 97, payload=False)
    streamed = estimate_from(*estimate_pass(defs, chunks, RunOptions("lower",
                                                                   segment_records=300)))[1]
    assert streamed == whole


def test_the_estimate_of_eztrace_s_procnull_stream_is_the_whole_trace_s_per_kind() -> None:
    """The archive left out above: the observed transfer differs (None streamed,
    the whole trace's 2 messages in order), every kind's estimate does not."""
    from compensate.formats import read_chunks
    from compensate.overhead import estimate_from
    from compensate.pipeline import RunOptions
    from compensate.pipeline.run import estimate_pass

    anchor = ROOT / "tests" / "data" / "eztrace" / "procnull" / "eztrace_log.otf2"
    whole, w_info = estimate(c.read(anchor))
    defs, chunks = read_chunks(str(anchor), 97, payload=False)
    streamed, s_info = estimate_from(*estimate_pass(defs, chunks, RunOptions(
        "lower", segment_records=300)))
    assert s_info["observed_transfer_s"] is None
    assert w_info["observed_transfer_s"] > max(w_info["bounds_s"][k] for k in ("MpiSend",
                                                                             "MpiIsend"))
    assert s_info["bounds_s"] == w_info["bounds_s"]
    assert streamed.overhead_by_kind == whole.overhead_by_kind
    assert streamed.event_overhead == whole.event_overhead
