"""The platform file's ``tracer`` field: which tracer its per-record overhead is
for, read back by compensate, and the one warning where a trace's producer (its OTF2
creator) is another known tracer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compensate.platform import Platform, PlatformError
from compensate.producer import trace_producer, tracer_warning

from .inprocess import run_compensate

ROOT = Path(__file__).resolve().parent.parent
SCOREP = ROOT / "tests" / "data" / "traces" / "ping-pong-otf2" / "traces.otf2"
RECORD = ROOT / "examples" / "montecarlo" / "traces.otf2"


def test_the_tracer_field_is_read_written_and_checked():
    plat = Platform.from_dict({"event_overhead": 1e-7, "copy_time": [], "tracer": "scorep"})
    assert plat.tracer == "scorep" and plat.to_dict()["tracer"] == "scorep"
    assert Platform.from_dict({"event_overhead": 1e-7, "copy_time": []}).tracer is None
    assert "tracer" not in Platform(1e-7).to_dict()  # summaries stay as they were
    with pytest.raises(PlatformError, match="tracer"):
        Platform.from_dict({"event_overhead": 1e-7, "copy_time": [], "tracer": "score-p"})


def test_the_producer_comes_from_the_otf2_creator(tmp_path):
    if SCOREP.exists():
        assert trace_producer(SCOREP) == "scorep"
    if RECORD.exists():
        assert trace_producer(RECORD) == "record"
    assert trace_producer(ROOT / "examples" / "pingpong.trace") is None
    assert trace_producer(tmp_path / "missing.otf2") is None
    (tmp_path / "x.otf2").write_bytes(b"not an anchor file Score-P")
    assert trace_producer(tmp_path / "x.otf2") is None


def test_an_eztrace_archive_is_known_by_its_definitions(tmp_path):
    """EZTrace 2.0 writes an empty creator; its global definitions name a region
    "EZTrace finalize" (the head of an anchor and a .def file as it writes them)."""
    anchor = tmp_path / "eztrace_log.otf2"
    anchor.write_bytes(b"\x03BOTF2\x00\x03\x02\x03\x00\x02" + bytes(40))
    assert trace_producer(anchor) is None
    (tmp_path / "eztrace_log.def").write_bytes(b"\x00P#0T#0\x00MPI_COMM_WORLD\x00"
                                               b"EZTrace finalize\x00")
    assert trace_producer(anchor) == "eztrace"
    line = tracer_warning(Platform(1e-7, tracer="scorep"), anchor)
    assert line is not None and "'eztrace'" in line


def test_a_mismatch_is_one_warning_and_a_match_none():
    if not SCOREP.exists():
        pytest.skip(f"{SCOREP} not available")
    writer = Platform(3.6e-6, tracer="python-writer")
    line = tracer_warning(writer, SCOREP, "p.json")
    assert line.startswith("warning: p.json holds the per-record overhead of tracer "
                           "'python-writer'") and "'scorep'" in line and "\n" not in line
    assert tracer_warning(Platform(1e-7, tracer="scorep"), SCOREP) is None
    assert tracer_warning(Platform(1e-7, tracer="other"), SCOREP) is None
    assert tracer_warning(Platform(1e-7), SCOREP) is None
    assert tracer_warning(None, SCOREP) is None


def test_compensate_warns_once_where_the_platform_is_for_another_tracer(tmp_path):
    if not SCOREP.exists():
        pytest.skip(f"{SCOREP} not available")
    platform = tmp_path / "p.json"
    platform.write_text(json.dumps({"event_overhead": 1e-8, "copy_time": [],
                                    "tracer": "python-writer"}))
    proc = run_compensate(SCOREP, tmp_path / "out" / "traces.otf2", "--platform", platform,
                          "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("was written by 'scorep'") == 1, proc.stderr
    platform.write_text(json.dumps({"event_overhead": 1e-8, "copy_time": [],
                                    "tracer": "scorep"}))
    proc = run_compensate(SCOREP, tmp_path / "out2" / "traces.otf2", "--platform", platform,
                          "--quiet")
    assert proc.returncode == 0 and "written by" not in proc.stderr, proc.stderr
    # an overhead given on the command line replaces the file's: nothing to warn about
    platform.write_text(json.dumps({"event_overhead": 1e-8, "copy_time": [],
                                    "tracer": "python-writer"}))
    proc = run_compensate(SCOREP, tmp_path / "out3" / "traces.otf2", "--platform", platform,
                          "--overhead", "10ns", "--quiet")
    assert proc.returncode == 0 and "written by" not in proc.stderr, proc.stderr
