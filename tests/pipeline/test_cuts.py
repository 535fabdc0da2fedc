"""The stream cutter (compensate.pipeline.cuts) on real EZTrace archives: cut as
finely as the records allow, the output and the dependencies are those of the
whole trace in memory. EZTrace writes each thread's ThreadBegin/ThreadEnd with an
UNDEFINED contingent (a Pthread span nothing opens) and sends to MPI_PROC_NULL (a
message no one receives): neither may let a cut fall inside an open span."""

import json
from pathlib import Path

import numpy as np
import pytest

from compensate.formats import read_chunks, read_trace
from compensate.model import KIND_CODE
from compensate.pipeline.cuts import Cutter
from tests.inprocess import run_compensate

DATA = Path(__file__).resolve().parents[1] / "data" / "eztrace"
ARCHIVES = sorted(DATA.glob("*/eztrace_log.otf2"))


@pytest.mark.parametrize("anchor", ARCHIVES, ids=lambda p: p.parent.name)
def test_small_segments_give_the_in_memory_output(tmp_path, anchor):
    got = {}
    for mode in (["--in-memory"], ["--segment-records", "4"]):
        name = mode[0].strip("-")
        out, summary = tmp_path / name / "traces.otf2", tmp_path / f"{name}.json"
        done = run_compensate(anchor, out, "--overhead", "40ns", "--summary", summary,
                              "--quiet", *mode)
        assert done.returncode == 0, done.stderr
        got[name] = (read_trace(str(out)), json.loads(summary.read_text()))
    (one, s_one), (cut, s_cut) = got["in-memory"], got["segment-records"]
    for loc, ev in one.events.items():
        assert np.array_equal(ev.time, cut.events[loc].time), loc
    assert s_one["dependencies"] == s_cut["dependencies"]
    if anchor.parent.name == "omp":  # (three parallel regions: the cutter cuts between)
        assert s_cut["segments"]["count"] > 1


def test_a_chunk_of_metric_samples_adds_no_step_and_keeps_the_open_calls():
    """A location's chunk of only Metric samples skips the busy function's steps:
    over the hip archive (most of its chunks are such), the busy function, the
    calls left open and the pending send calls are those of the cutter that takes
    the steps of every chunk."""
    anchor = DATA.parent / "traces" / "hip-two-gpu-metrics" / "traces.otf2"
    defs, chunks = read_chunks(str(anchor), 997, payload=False)
    fast, full = Cutter(defs, 1 << 30), Cutter(defs, 1 << 30)
    inert = 0
    for chunk in chunks:
        for loc, ev in chunk.items():
            fast.feed(loc, ev)
            full.take(loc, ev)
            full._steps(loc, ev)
            inert += bool(np.all(ev.kind == KIND_CODE["Metric"]))
    assert inert > 100
    (ft, fd), (ut, ud) = fast.busy(), full.busy()
    assert sorted(zip(ft.tolist(), fd.tolist(), strict=True)) == \
        sorted(zip(ut.tolist(), ud.tolist(), strict=True))
    assert {k: v for k, v in fast.open_regions.items() if v} == \
        {k: v for k, v in full.open_regions.items() if v}
    assert {k: v for k, v in fast.send_calls.items() if v} == \
        {k: v for k, v in full.send_calls.items() if v}


@pytest.mark.parametrize("bound", ["lower", "fitted"])
def test_sends_never_received_are_cut_after_by_reading_ahead(tmp_path, bound):
    """EZTrace writes no receive for an MPI_Irecv completed in MPI_Waitall: the
    halo's 20 Isends are never received, and without reading ahead the cutter
    held everything after the first one (2 segments, the largest 271 of 274
    records). Reading ahead, it cuts as often as the records allow, with the
    in-memory output; under ``--bound fitted`` the second pass replays the fit
    pass's cuts."""
    anchor = DATA / "halo" / "eztrace_log.otf2"
    got = {}
    for mode in (["--in-memory"], ["--segment-records", "16"]):
        name = mode[0].strip("-")
        out, summary = tmp_path / name / "traces.otf2", tmp_path / f"{name}.json"
        done = run_compensate(anchor, out, "--overhead", "40ns", "--bound", bound,
                              "--summary", summary, "--quiet", *mode)
        assert done.returncode == 0, done.stderr
        got[name] = (read_trace(str(out)), json.loads(summary.read_text()))
    (one, s_one), (cut, s_cut) = got["in-memory"], got["segment-records"]
    assert s_cut["unmatched_sends"] == 20
    assert s_one["dependencies"] == s_cut["dependencies"]
    assert s_cut["segments"]["count"] >= 10 and s_cut["segments"]["largest"] < 100
    for loc, ev in one.events.items():
        assert np.array_equal(ev.time, cut.events[loc].time), loc
