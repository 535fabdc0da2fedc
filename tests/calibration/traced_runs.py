"""Shared steps of the tests that trace an example under ``mpiexec`` with
``python -m calibration.record`` and compensate the archive (partitioned, RMA)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import mpiexec
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parents[2]


def trace_example(example: Path, out: Path, args: list[str], done: str,
                  ranks: int = 2) -> Path:
    """Run ``example`` on ``ranks`` ranks under the tracer into ``out``; the example
    must succeed and print ``done``. The calibration at the end takes 200 records
    per sample (2000 by default, ~0.7 s more a run): these tests check the records
    and that the platform file compensates, not how precise its O is (that is
    test_tracer.py's, with the default)."""
    proc = subprocess.run(
        [mpiexec(), "-n", str(ranks), sys.executable, "-m", "calibration.record", "-o",
         str(out), "--calibration-records", "200", "--", str(example), *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert done in proc.stdout
    return out


def assert_opens_in_otf2_print(archive: Path) -> None:
    """The reference reader accepts the archive with warnings as errors (skipped
    where otf2-print is not installed)."""
    if shutil.which("otf2-print"):
        printed = subprocess.run(["otf2-print", "-Werror", "--silent", str(archive)],
                                 capture_output=True, text=True, timeout=60)
        assert printed.returncode == 0, printed.stderr


def compensate_summary(traced: Path) -> dict:
    """Compensate a traced archive with the tracer's platform file beside it; the
    command must succeed; its ``--summary``."""
    out = traced.parent.parent / "out" / "traces.otf2"
    summary = traced.parent.parent / "summary.json"
    proc = run_compensate(traced, out, "--platform", traced.parent / "platform.json",
                          "--summary", summary, "--quiet", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(summary.read_text())


def assert_verified_with(traced: Path, kind: str) -> None:
    """compensate accepts the archive and verifies it: no violation, none among
    the ``kind`` dependencies (``rma``, ``partitioned``, ...)."""
    s = compensate_summary(traced)
    assert s["verification"]["ok"] and s["verification"][kind] == 0
    assert s["verification"]["violations"] == 0
