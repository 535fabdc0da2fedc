"""calibration.eztrace: EZTrace's per-record cost from a traced/untraced probe pair.

The arithmetic is checked on made-up measurements; the probe itself (build, run
traced, count the records in the archive) only where EZTrace and MPICH are
installed, on a short loop.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from calibration import eztrace as ez
from calibration import eztrace_costs as ezc
from compensate.platform import Platform


def test_mpichs_own_tool_names_are_taken_where_they_exist():
    """``NAME.mpich`` (Debian's MPICH whatever the alternatives select), else
    ``/usr/bin/NAME``."""
    assert ez.mpich_tool("no-such-mpi-tool") == "/usr/bin/no-such-mpi-tool"
    own = Path("/usr/bin/mpicc.mpich")
    assert ez.mpich_tool("mpicc") == (str(own) if own.exists() else "/usr/bin/mpicc")
    assert ez.ProbeSettings().mpicc == ez.MPICC and ez.ProbeSettings().mpirun == ez.MPIRUN


def test_otf2_print_names_become_otf2_record_kinds():
    assert ez.kind_name("MPI_IRECV_REQUEST") == "MpiIrecvRequest"
    assert ez.kind_name("MPI_COLLECTIVE_END") == "MpiCollectiveEnd"
    assert ez.kind_name("ENTER") == "Enter"


def test_the_pthread_modules_calls_are_counted_by_region():
    line = 'ENTER    1    356026  Region: "pthread_mutex_unlock" <10>'
    assert ez.kind_name("ENTER", line) == "Enter@pthread_mutex_unlock"
    assert ez.kind_name("LEAVE", line.replace("unlock", "lock")) == "Leave@pthread_mutex_lock"
    # other regions, and other kinds, stay their kind
    assert ez.kind_name("ENTER", 'ENTER  0  1  Region: "MPI_Send" <3>') == "Enter"
    assert ez.kind_name("THREAD_BEGIN", line) == "ThreadBegin"
    assert ezc.base_kind("Leave@pthread_barrier_wait") == "Leave"


def test_the_gap_after_each_kind_is_its_median():
    kinds = ["Enter", "Leave", "Enter", "Leave", "Enter", "Leave"]
    times = [0, 100, 110, 230, 240, 9000]
    # after Enter: 100, 120, 8760 -> 120; after Leave: 10, 10 -> 10 (the last has none)
    assert ez.gap_medians(kinds, times) == {"Enter": 120.0, "Leave": 10.0}


def test_solve_gives_each_part_before_a_stamp_at_most_its_kinds_cost():
    records = {"wait": {"Enter": 1.0, "Leave": 1.0},
               "recv": {"Enter": 3.0, "Leave": 3.0, "MpiIsend": 1.0, "MpiRecv": 1.0},
               "pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0},
               "omp": {"ThreadFork": 1.0, "ThreadJoin": 1.0},
               "ompmpi": {"ThreadFork": 1.0, "ThreadJoin": 1.0, "Enter": 1.0, "Leave": 1.0}}
    gaps = {"wait": {"Enter": 45e-9, "Leave": 40e-9},
            "recv": {"Enter": 60e-9, "Leave": 40e-9, "MpiIsend": 80e-9, "MpiRecv": 40e-9},
            "pingpong": {}, "omp": {"ThreadFork": 200e-9, "ThreadJoin": 130e-9},
            "ompmpi": {}}
    pairs = {"wait": {"Leave>Enter": (40e-9, 9), "Enter>Leave": (45e-9, 9)},
             "recv": {}, "pingpong": {},
             "omp": {"ThreadJoin>ThreadFork": (130e-9, 9), "ThreadFork>ThreadJoin": (200e-9, 9)},
             "ompmpi": {"ThreadJoin>Enter": (45e-9, 9), "Leave>ThreadFork": (125e-9, 9)}}
    base = {"wait": 0.0, "recv": 0.0, "omp": 0.0}
    delta = {"wait": 85e-9, "recv": 480e-9, "pingpong": 800e-9, "omp": 330e-9}
    result = ez.solve(records, gaps, pairs, base, delta)
    assert "ompmpi" not in result.records  # gaps only
    assert set(result.before) == {"ThreadFork", "MpiRecv"}
    assert all(0 < v <= result.costs[k] for k, v in result.before.items())
    assert result.closure["pingpong"] == pytest.approx(1.0)
    data = ez.platform_dict(result, None)
    plat = Platform.from_dict(data, "eztrace-platform.json")
    assert plat.before_stamp == data["overhead_before_stamp"] == result.before


def test_a_dilation_the_load_decided_is_refused():
    assert ez.too_busy("wait", 90e-9, [88e-9, 90e-9, 91e-9, 95e-9, 89e-9]) is None
    assert "-193 ns" in ez.too_busy("allreduce", -193e-9, [])
    msg = ez.too_busy("pingpong", 539e-9, [-3e-6, 100e-9, 539e-9, 2e-6, 11e-6])
    assert "quartiles of 5 repetitions" in msg and "around 539 ns" in msg
    assert ez.too_busy("pingpong", 539e-9, [-3e-6, 539e-9, 11e-6]) is None  # too few to tell


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


def test_region_costs_go_to_the_platforms_by_region_entries():
    result = ez.ProbeResult(
        costs={"Enter": 7e-8, "Leave": 5e-8, "Enter@pthread_mutex_lock": 2.7e-7,
               "Leave@pthread_mutex_lock": 1.2e-7, "Leave@pthread_barrier_wait": 0.0},
        delta={"wait": 1e-7, "mutex": 8e-7},
        records={"wait": {"Enter": 1, "Leave": 1},
                 "mutex": {"Enter@pthread_mutex_lock": 1, "Leave@pthread_mutex_lock": 1}},
        before={"Leave@pthread_mutex_lock": 2e-8})
    data = ez.platform_dict(result, None)
    assert data["event_overhead_by_kind"] == {"Enter": 7e-8, "Leave": 5e-8}
    assert data["event_overhead"] == pytest.approx(6e-8)  # the MPI module's Enter/Leave only
    assert data["event_overhead_by_region"] == {
        "pthread_mutex_lock": {"Enter": 2.7e-7, "Leave": 1.2e-7}}  # (a zero is left out)
    assert data["overhead_before_stamp_by_region"] == {"pthread_mutex_lock": {"Leave": 2e-8}}
    assert "overhead_before_stamp" not in data
    plat = Platform.from_dict(data, "eztrace-platform.json")
    assert plat.overhead_by_region == data["event_overhead_by_region"]


def test_the_speed_reference_is_the_median_over_variants_of_pure_tracer_pairs():
    pairs = {"isend": {"Enter>MpiIsend": (50e-9, 1000), "MpiIsend>Leave": (90e-9, 1000)},
             "recv": {"Enter>MpiIsend": (56e-9, 1000), "MpiRecv>Leave": (44e-9, 1000)},
             "pingpong": {"Enter>MpiIsend": (80e-9, 1000), "MpiRecv>Leave": (3e-6, 1)},
             "wait": {"Enter>Leave": (40e-9, 1000)}}
    ref = ez.speed_reference(pairs)
    # MpiIsend>Leave holds the library's work, Enter>Leave (MPI_Wait) its wait: not pure;
    # a pair seen once (start-up) does not count
    assert ref == {"Enter>MpiIsend": pytest.approx(56e-9), "MpiRecv>Leave": pytest.approx(44e-9)}
    result = ez.ProbeResult(costs={"Enter": 7e-8, "Leave": 5e-8}, delta={"wait": 1e-7},
                            records={"wait": {"Enter": 1, "Leave": 1}}, pairs=pairs)
    data = ez.platform_dict(result, None)
    assert Platform.from_dict(data, "eztrace-platform.json").speed_reference == ref


def test_the_reference_of_a_variant_is_the_median_over_its_repetitions():
    seen = [{"Enter>MpiSend": (100e-9, 500), "MpiRecv>Leave": (40e-9, 500)},
            {"Enter>MpiSend": (130e-9, 500)},
            {"Enter>MpiSend": (90e-9, 400), "MpiRecv>Leave": (60e-9, 100)}]
    got = ez.repeated_gaps(seen)
    assert got == {"Enter>MpiSend": (pytest.approx(100e-9), 1400),
                   "MpiRecv>Leave": (pytest.approx(50e-9), 600)}
    assert ez.repeated_gaps([]) == {}


def test_a_runs_reference_gaps_are_read_as_compensate_reads_a_trace():
    """tests/data/eztrace/ring: each rank's 20 MpiSend follow their Enter; the median
    gap is otf2-print's over both ranks (to the 1 ns bins compensate.speed counts in)."""
    archive = Path(__file__).resolve().parents[1] / "data" / "eztrace" / "ring" / \
        "eztrace_log.otf2"
    got = ez.reference_gaps(archive)
    gaps = []
    for kinds, times in ez.read_records(archive).values():
        gaps += [times[i + 1] - times[i] for i in range(len(kinds) - 1)
                 if (kinds[i], kinds[i + 1]) == ("Enter", "MpiSend")]
    tick = 1.0 / ez.ticks_per_second(archive)
    assert got["Enter>MpiSend"][1] == len(gaps) == 40
    assert got["Enter>MpiSend"][0] == pytest.approx(float(np.median(gaps)) * tick, abs=1e-9)
    assert set(got) <= set(ez.REFERENCE_PAIRS)


@pytest.mark.skipif(ez.available() is not None, reason="needs EZTrace, MPICH and otf2-print")
def test_the_probe_counts_what_eztrace_writes_per_iteration(tmp_path):
    settings = ez.ProbeSettings(ranks=1)
    exe = ez.build(tmp_path, settings)
    records, gaps, pairs = ez.probe_records(exe, "barrier", settings, tmp_path)
    assert records == pytest.approx({"Enter": 1.0, "Leave": 1.0, "MpiCollectiveBegin": 1.0,
                                     "MpiCollectiveEnd": 1.0})
    assert set(gaps) == set(records) and all(0 < g < 1e-3 for g in gaps.values())
    assert pairs["MpiCollectiveBegin>MpiCollectiveEnd"][1] > 1000
    assert ez.run_probe(exe, "wait", 1000, False, tmp_path, settings) > 0


@pytest.mark.skipif(ez.available() is not None, reason="needs EZTrace, MPICH and otf2-print")
def test_the_pingpong_writes_one_message_a_hop_per_rank(tmp_path):
    settings = ez.ProbeSettings(ranks=2)
    exe = ez.build(tmp_path, settings)
    records, _, _ = ez.probe_records(exe, "pingpong", settings, tmp_path)
    assert records == pytest.approx({"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0,
                                     "MpiRecv": 1.0})


@pytest.mark.skipif(ez.available() is not None, reason="needs EZTrace, MPICH and otf2-print")
def test_the_pthread_probe_writes_one_call_of_each_region_per_iteration(tmp_path):
    settings = ez.ProbeSettings()
    exe = ez.build(tmp_path, settings)
    records, gaps, _ = ez.probe_records(exe, "mutex", settings, tmp_path)
    assert records == pytest.approx({f"{k}@pthread_mutex_{r}": 1.0 for k in ("Enter", "Leave")
                                     for r in ("lock", "unlock")})
    assert set(gaps) == set(records)
    records, _, _ = ez.probe_records(exe, "pbarrier", settings, tmp_path)
    assert records == pytest.approx({"Enter@pthread_barrier_wait": 1.0,
                                     "Leave@pthread_barrier_wait": 1.0})
    assert ez.run_probe(exe, "mutex", 1000, False, tmp_path, settings) > 0


def test_without_eztrace_the_command_says_what_is_missing(tmp_path, monkeypatch, capsys):
    real = shutil.which
    monkeypatch.setattr(ez.shutil, "which", lambda t: None if t == "eztrace" else real(t))
    assert ez.main([str(tmp_path / "p.json")]) == 3
    assert capsys.readouterr().err.strip() == (
        "calibration.eztrace: eztrace not found: cannot measure EZTrace")
    assert not (tmp_path / "p.json").exists()
