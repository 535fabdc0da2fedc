"""Running out of memory (compensate/pipeline/memory.py): a MemoryError anywhere in
a run, in memory or streamed, ends in one line, exit 3, and nothing at OUT or
beside it (no temporary left), never an internal error's "please report it"."""

from __future__ import annotations

import pytest

import compensate.pipeline.run as pipeline_run
from tests.inprocess import run_compensate

from ..conftest import CASES

TRACE = CASES / "r2_m1_a1.trace"


def out_of_memory(*args, **kwargs):
    raise MemoryError


def assert_one_line(proc, doing: str, tmp_path) -> None:
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines == [f"compensate: error: out of memory while {doing}; nothing written; "
                     f"try without --in-memory / with fewer records per segment "
                     f"(--segment-records)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no temporary


@pytest.mark.parametrize("out", ["out/traces.otf2", "out.trace"])
def test_in_memory_run_out_of_memory(tmp_path, monkeypatch, out):
    monkeypatch.setattr(pipeline_run, "run_segment", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / out, "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "compensating", tmp_path)


def test_matching_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_run, "match", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out.trace", "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "matching", tmp_path)


def test_streamed_run_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_run, "_stream_segment", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out" / "traces.otf2", "--overhead", "100ns")
    assert_one_line(proc, "streaming the trace", tmp_path)


def test_out_of_memory_outside_the_run(tmp_path, monkeypatch):
    """Reading (the command's own step): the same line, saying less."""
    import compensate.cli.compensate as command

    monkeypatch.setattr(command, "read_blocks", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out.trace", "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "running", tmp_path)
