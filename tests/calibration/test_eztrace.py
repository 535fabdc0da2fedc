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


def test_the_pthread_modules_calls_are_counted_by_region():
    line = 'ENTER    1    356026  Region: "pthread_mutex_unlock" <10>'
    assert ez.kind_name("ENTER", line) == "Enter@pthread_mutex_unlock"
    assert ez.kind_name("LEAVE", line.replace("unlock", "lock")) == "Leave@pthread_mutex_lock"
    # other regions, and other kinds, stay their kind
    assert ez.kind_name("ENTER", 'ENTER  0  1  Region: "MPI_Send" <3>') == "Enter"
    assert ez.kind_name("THREAD_BEGIN", line) == "ThreadBegin"
    assert ez.base_kind("Leave@pthread_barrier_wait") == "Leave"


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
    # collective records from the barrier (100 ns per gap); a Leave's and a
    # collective end's gaps hold tracer work alone: as measured
    assert costs == pytest.approx({"Enter": 280e-9, "Leave": 100e-9,
                                   "MpiCollectiveBegin": 300e-9, "MpiCollectiveEnd": 200e-9})
    # the slopes say one wait iteration got 1.9 us longer: the gaps explain 380 ns of it
    closure = ez.closure(records, costs, {"wait": 1.9e-6, "barrier": 0.0})
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


def test_the_rest_of_a_hop_is_the_waiting_records_cost_before_its_stamp():
    costs = {"Enter": 40e-9, "Leave": 40e-9, "MpiRecv": 30e-9, "MpiCollectiveEnd": 30e-9,
             "MpiIsend": 80e-9, "MpiCollectiveBegin": 50e-9}
    # a round trip 440 ns longer traced: 220 ns a hop, 110 of them Enter, Leave and
    # MpiRecv after its stamp; MpiSend costs what MpiIsend does (80), so MpiRecv
    # costs the last 30 before its stamp
    out, before = ez.path_costs(costs, {"pingpong": 440e-9, "allreduce": 200e-9})
    assert out["MpiSend"] == pytest.approx(80e-9)
    assert before["MpiRecv"] == pytest.approx(30e-9)
    assert out["MpiRecv"] == pytest.approx(60e-9)
    # allreduce: 200 - 110 = 90, the begin's 50, the end's 40 before its stamp
    assert out["MpiCollectiveBegin"] == pytest.approx(50e-9)
    assert before["MpiCollectiveEnd"] == pytest.approx(40e-9)
    records = {"pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0}}
    assert ez.closure(records, out, {"pingpong": 440e-9}) == {"pingpong": pytest.approx(1.0)}
    # a hop shorter than its records: the send takes less, nothing before a stamp
    out, before = ez.path_costs(costs, {"pingpong": 300e-9})
    assert out["MpiSend"] == pytest.approx(40e-9) and before == {}
    assert ez.path_costs(costs, {"pingpong": 100e-9})[0]["MpiSend"] == 0.0
    # without the self variant's kind, the send takes the whole rest, as alone
    out, before = ez.path_costs({"Enter": 40e-9, "Leave": 40e-9, "MpiRecv": 30e-9},
                                {"pingpong": 440e-9})
    assert out["MpiSend"] == pytest.approx(110e-9) and before == {}
    assert "MpiSend" not in ez.path_costs(costs, {})[0]


def test_a_forks_cost_before_its_stamp_is_told_from_the_records_before_it():
    """Join and Leave each followed by an Enter and by a fork: the fork costs 85 ns
    more before its stamp than an Enter (its gap 125-130 ns where an Enter's is
    40-45); the join, whose gap was measured before a fork, is charged it less."""
    pairs = {"omp": {"ThreadJoin>ThreadFork": (130e-9, 10), "Leave>ThreadJoin": (160e-9, 10),
                     "ThreadJoin>Enter": (17e-6, 1),
                     "ThreadFork>ThreadTeamBegin": (200e-9, 10)},
             "ompmpi": {"ThreadJoin>Enter": (45e-9, 10), "Leave>ThreadFork": (125e-9, 10),
                        "Enter>Leave": (45e-9, 10), "Leave>ThreadJoin": (160e-9, 10)},
             "wait": {"Leave>Enter": (40e-9, 10), "Enter>Leave": (45e-9, 10)}}
    before = ez.opening_before(pairs)
    assert before == {"ThreadFork": pytest.approx(85e-9)}
    assert ez.successor(pairs["omp"], "ThreadJoin") == "ThreadFork"
    records = {"omp": {"ThreadFork": 1.0, "ThreadJoin": 1.0},
               "wait": {"Enter": 1.0, "Leave": 1.0}}
    gaps = {"omp": {"ThreadFork": 200e-9, "ThreadJoin": 130e-9},
            "wait": {"Enter": 45e-9, "Leave": 40e-9}}
    costs = ez.per_kind(records, gaps, {"omp": 0.0, "wait": 0.0}, pairs, before)
    assert costs["ThreadJoin"] == pytest.approx(45e-9)  # 130 - 85
    assert costs["ThreadFork"] == pytest.approx(285e-9)  # 200 after, 85 before
    # the iteration's total is that of the gaps: the cost only moves
    assert costs["ThreadJoin"] + costs["ThreadFork"] == pytest.approx(330e-9)
    assert ez.opening_before({"wait": pairs["wait"]}) == {}


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


def test_a_pthread_calls_gap_holds_tracer_work_like_its_kinds():
    records = {"mutex": {"Enter@pthread_mutex_lock": 1.0, "Leave@pthread_mutex_lock": 1.0}}
    gaps = {"mutex": {"Enter@pthread_mutex_lock": 90e-9, "Leave@pthread_mutex_lock": 120e-9}}
    costs = ez.per_kind(records, gaps, {"mutex": 20e-9})
    # a Leave's gap is tracer work alone (PURE), the Enter's holds 10 ns of the loop
    assert costs == pytest.approx({"Enter@pthread_mutex_lock": 80e-9,
                                   "Leave@pthread_mutex_lock": 120e-9})
    closed = ez.closed_costs(records, costs, {"mutex": 500e-9})
    assert closed["Leave@pthread_mutex_lock"] == pytest.approx(120e-9)
    assert closed["Enter@pthread_mutex_lock"] == pytest.approx(380e-9)


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
