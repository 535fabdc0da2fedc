"""The bundled real run, ``examples/montecarlo/`` (the README's quick start): it
carries the tracer's in-situ overhead tables on every location, the command uses
them with the tracer's platform file, and the platform file names only files
that exist (examples/README.md says how it was recorded)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compensate.formats import read_trace
from tests.inprocess import run_compensate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "montecarlo"


def test_every_location_carries_an_in_situ_table() -> None:
    trace = read_trace(EXAMPLE / "traces.otf2")
    assert len(trace.events) == 4
    assert sorted(trace.definitions.insitu) == sorted(trace.events)


def test_the_quick_start_uses_the_in_situ_tables(tmp_path: Path) -> None:
    summary = tmp_path / "s.json"
    proc = run_compensate(EXAMPLE / "traces.otf2", tmp_path / "out" / "traces.otf2",
                          "--platform", EXAMPLE / "platform.json", "--summary", summary)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(summary.read_text())
    assert s["overhead"]["source"] == "trace in-situ"
    assert s["overhead"]["locations"] == 4
    assert s["overcompensated_records"] == 0 and s["verification"]["ok"]


def test_the_platform_file_names_only_files_that_exist() -> None:
    text = (EXAMPLE / "platform.json").read_text(encoding="utf-8")
    named = set(re.findall(r"\b((?:calibration|compensate|examples|benchmarks|docs)/[\w/.-]+"
                           r"\.(?:py|md|c))\b", text))
    assert named, "the platform file no longer says where its calibration comes from"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"examples/montecarlo/platform.json names missing files: {missing}"
