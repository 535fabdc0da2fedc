"""The held-out-style mpi4py programs of ``examples/mpi/`` (halo2d, pipeline,
solver) keep the benchmark's protocol (``run()`` and ``--timing FILE.json``, as
``benchmarks/paper_fig1.py --program`` needs), and a traced run of the one with
rendezvous-size nonblocking messages compensates without a violation or an
overcompensated record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mpiexec
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {
    "halo2d": ["--steps", "2", "--rows", "8", "--halo", "4", "--cols", "2400"],
    "pipeline": ["--sweeps", "2", "--blocks", "3", "--block", "8"],
    "solver": ["--iterations", "5", "--cells", "20"],
}


@pytest.mark.parametrize("name", ["pipeline", "solver"])  # halo2d: traced below
def test_program_writes_its_timing(name: str, tmp_path: Path) -> None:
    timing = tmp_path / "t.json"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, str(ROOT / "examples" / "mpi" / f"{name}.py"),
         *PROGRAMS[name], "--timing", str(timing)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(timing.read_text())
    assert result["ranks"] == 2 and result["seconds"] > 0 and result["off_cpu"] >= 0


def test_traced_halo2d_compensates_cleanly(tmp_path: Path) -> None:
    """76.8 KB halos by Isend/Irecv completed by one Waitall: every message is
    matched and compensation keeps happened-before order."""
    out = tmp_path / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "200", "--", "examples/mpi/halo2d.py",
         *PROGRAMS["halo2d"], "--timing", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "t.json").read_text())["seconds"] > 0
    path = tmp_path / "summary.json"
    done = run_compensate(out, tmp_path / "out" / "traces.otf2", "--platform",
                          out.parent / "platform.json", "--overhead", "insitu",
                          "--summary", path, "--quiet", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(path.read_text())
    assert summary["overhead"]["source"] == "trace in-situ"
    assert summary["verification"]["violations"] == 0
    assert summary["overcompensated_records"] == 0
