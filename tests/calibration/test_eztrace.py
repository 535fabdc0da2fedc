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


def test_self_variant_costs_are_scaled_until_their_records_add_up_to_the_slopes():
    records = {"wait": {"Enter": 1.0, "Leave": 1.0},
               "isend": {"Enter": 3.0, "Leave": 3.0, "MpiIsend": 1.0},
               "recv": {"Enter": 3.0, "Leave": 3.0, "MpiIsend": 1.0, "MpiRecv": 1.0},
               "pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0}}
    gaps = {"Enter": 40e-9, "Leave": 40e-9, "MpiIsend": 70e-9, "MpiRecv": 30e-9}
    delta = {"wait": 100e-9, "isend": 400e-9, "recv": 430e-9, "pingpong": 1e-6}
    costs = ez.closed_costs(records, gaps, delta)
    closure = ez.closure(records, costs, delta)
    assert [closure[v] for v in ("wait", "isend", "recv")] == pytest.approx([1.0] * 3)
    # a Leave's and an MpiRecv's gaps hold tracer work alone: kept as measured
    assert costs["Leave"] == gaps["Leave"] and costs["MpiRecv"] == gaps["MpiRecv"]
    assert costs["Enter"] == pytest.approx(60e-9)  # 100 - 40
    assert costs["MpiIsend"] == pytest.approx(100e-9)  # 400 - 3 x 100
    # a cost is never negative, however small the slope
    assert min(ez.closed_costs(records, gaps, {"wait": 0.0, "isend": 0.0}).values()) >= 0


def test_a_send_costs_what_the_hop_adds_beyond_the_other_records_on_its_path():
    costs = {"Enter": 40e-9, "Leave": 40e-9, "MpiRecv": 30e-9, "MpiCollectiveEnd": 30e-9}
    # a round trip 440 ns longer traced: 220 ns a hop, 110 of them the other records
    out = ez.path_costs(costs, {"pingpong": 440e-9, "allreduce": 200e-9})
    assert out["MpiSend"] == pytest.approx(110e-9)
    assert out["MpiCollectiveBegin"] == pytest.approx(90e-9)
    assert ez.path_costs(costs, {"pingpong": 100e-9})["MpiSend"] == 0.0
    assert "MpiSend" not in ez.path_costs(costs, {})
    records = {"pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0}}
    assert ez.closure(records, out, {"pingpong": 440e-9}) == {"pingpong": pytest.approx(1.0)}


def test_each_repetition_gives_its_own_dilation():
    ns = [1000, 2000, 1000, 2000]
    data = {True: (ns, [2e-3, 4e-3, 3e-3, 5e-3]), False: (ns, [1e-3, 2e-3, 1e-3, 2e-3])}
    assert ez.repeat_deltas(data, 2) == pytest.approx([1e-6, 1e-6])
    assert ez.repeat_deltas(data, 1) == []


def test_the_probe_times_whole_parts_of_its_loop():
    assert ez.timed(20000) == 20000 // ez.CHUNKS * ez.CHUNKS <= 20000
    assert ez.iterations(2000) == 201 + ez.timed(2000)


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


@pytest.mark.skipif(ez.available() is not None, reason="needs EZTrace, MPICH and otf2-print")
def test_the_pingpong_writes_one_message_a_hop_per_rank(tmp_path):
    settings = ez.ProbeSettings(ranks=2)
    exe = ez.build(tmp_path, settings)
    records, _ = ez.probe_records(exe, "pingpong", settings, tmp_path)
    assert records == pytest.approx({"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0,
                                     "MpiRecv": 1.0})


def test_without_eztrace_the_command_says_what_is_missing(tmp_path, monkeypatch, capsys):
    real = shutil.which
    monkeypatch.setattr(ez.shutil, "which", lambda t: None if t == "eztrace" else real(t))
    assert ez.main([str(tmp_path / "p.json")]) == 3
    assert capsys.readouterr().err.strip() == (
        "calibration.eztrace: eztrace not found: cannot measure EZTrace")
    assert not (tmp_path / "p.json").exists()
