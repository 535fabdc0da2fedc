"""Shared test helpers: paths to the real Score-P archives and the case files."""

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "cases"
# copies of the real Score-P archives (origin and licence: tests/data/traces/README.md)
TRACES = Path(__file__).resolve().parent / "data" / "traces"
REAL_ARCHIVES = [TRACES / "ping-pong-otf2" / "traces.otf2",
                 TRACES / "ping-pong-otf2-papi" / "traces.otf2"]


@pytest.fixture(params=REAL_ARCHIVES, ids=lambda p: p.parent.name)
def real_archive(request) -> Path:
    if not request.param.exists():
        pytest.skip(f"{request.param} not available")
    return request.param


def mpiexec() -> str:
    """The mpiexec of the [mpi] extra's mpich wheel; the test skips without it."""
    pytest.importorskip("mpi4py", reason="the [mpi] extra is not installed",
                        exc_type=ImportError)
    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec not found (the [mpi] extra is not installed)")
    return exe
