"""The stream cutter (compensate.pipeline.cuts) on real EZTrace archives: cut as
finely as the records allow, the output and the dependencies are those of the
whole trace in memory. EZTrace writes each thread's ThreadBegin/ThreadEnd with an
UNDEFINED contingent (a Pthread span nothing opens) and sends to MPI_PROC_NULL (a
message no one receives): neither may let a cut fall inside an open span."""

import json
from pathlib import Path

import numpy as np
import pytest

from compensate.formats import read_trace
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
