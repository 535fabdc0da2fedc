"""Shared test helpers: paths to the real Score-P archives and the case files."""

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
