"""calibration.eztrace: EZTrace's per-record cost from a traced/untraced probe pair.

The arithmetic is checked on made-up measurements; the probe itself (build, run
traced, count the records in the archive) only where EZTrace and MPICH are
installed, on a short loop.
"""

from __future__ import annotations

import math
import shutil

import pytest

from calibration import eztrace as ez
from compensate.platform import Platform


def test_otf2_print_names_become_otf2_record_kinds():
    assert ez.kind_name("MPI_IRECV_REQUEST") == "MpiIrecvRequest"
    assert ez.kind_name("MPI_COLLECTIVE_END") == "MpiCollectiveEnd"
    assert ez.kind_name("ENTER") == "Enter"


def test_the_gap_after_each_kind_is_its_median():
    kinds = ["Enter", "Leave", "Enter", "Leave", "Enter", "Leave"]
    times = [0, 100, 110, 230, 240, 9000]
    # after Enter: 100, 120, 8760 -> 120; after Leave: 10, 10 -> 10 (the last has none)
    assert ez.gap_medians(kinds, times) == {"Enter": 120.0, "Leave": 10.0}


def test_each_kind_is_charged_its_gap_less_its_share_of_the_untraced_iteration():
    records = {"wait": {"Enter": 1.0, "Leave": 1.0},
               "barrier": {"Enter": 1.0, "Leave": 1.0, "MpiCollectiveBegin": 1.0,
                           "MpiCollectiveEnd": 1.0}}
    gaps = {"wait": {"Enter": 300e-9, "Leave": 100e-9},
            "barrier": {"Enter": 900e-9, "Leave": 500e-9, "MpiCollectiveBegin": 400e-9,
                        "MpiCollectiveEnd": 200e-9}}
    untraced = {"wait": 40e-9, "barrier": 400e-9}
    costs = ez.per_kind(records, gaps, untraced)
    # Enter/Leave from the shorter untraced iteration (wait: 20 ns per gap), the
    # collective records from the barrier (100 ns per gap)
    assert costs == pytest.approx({"Enter": 280e-9, "Leave": 80e-9,
                                   "MpiCollectiveBegin": 300e-9, "MpiCollectiveEnd": 100e-9})
    # the slopes say one wait iteration got 1.8 us longer: the gaps explain 360 ns of it
    closure = ez.closure(records, costs, {"wait": 1.8e-6, "barrier": 0.0})
    assert closure["wait"] == pytest.approx(0.2)
    assert math.isnan(closure["barrier"])


def test_the_platform_file_is_one_compensate_reads():
    result = ez.ProbeResult(costs={"Enter": 7e-8, "Leave": 5e-8, "MpiIsend": 1e-7},
                            delta={"wait": 1e-7}, records={"wait": {"Enter": 1, "Leave": 1}})
    copy = {"copy_time": [{"bytes": 64, "seconds": 1.6e-8}],
            "network": {"latency": 1e-6, "per_byte": 1e-10, "measured": []}}
    data = ez.platform_dict(result, copy)
    plat = Platform.from_dict(data, "eztrace-platform.json")
    assert plat.event_overhead == pytest.approx(6e-8)  # the Enter/Leave mean
    assert data["event_overhead_by_kind"]["MpiSend"] == data["event_overhead_by_kind"]["MpiIsend"]
    assert data["network"] == {"latency": 1e-6, "per_byte": 1e-10}


@pytest.mark.skipif(ez.available() is not None, reason="needs EZTrace, MPICH and otf2-print")
def test_the_probe_counts_what_eztrace_writes_per_iteration(tmp_path):
    settings = ez.ProbeSettings(ranks=1)
    exe = ez.build(tmp_path, settings)
    records, gaps = ez.probe_records(exe, "barrier", settings, tmp_path)
    assert records == pytest.approx({"Enter": 1.0, "Leave": 1.0, "MpiCollectiveBegin": 1.0,
                                     "MpiCollectiveEnd": 1.0})
    assert set(gaps) == set(records) and all(0 < g < 1e-3 for g in gaps.values())
    assert ez.run_probe(exe, "wait", 1000, False, tmp_path, settings) > 0


def test_without_eztrace_the_command_says_what_is_missing(tmp_path, monkeypatch, capsys):
    real = shutil.which
    monkeypatch.setattr(ez.shutil, "which", lambda t: None if t == "eztrace" else real(t))
    assert ez.main([str(tmp_path / "p.json")]) == 3
    assert capsys.readouterr().err.strip() == (
        "calibration.eztrace: eztrace not found: cannot measure EZTrace")
    assert not (tmp_path / "p.json").exists()
