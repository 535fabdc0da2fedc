"""calibration.eztrace_costs: EZTrace's per-record costs from made-up probe measurements."""

from __future__ import annotations

import math

import pytest

from calibration import eztrace_costs as ezc


def test_each_kind_is_charged_its_gap_less_its_share_of_the_untraced_iteration():
    records = {"wait": {"Enter": 1.0, "Leave": 1.0},
               "barrier": {"Enter": 1.0, "Leave": 1.0, "MpiCollectiveBegin": 1.0,
                           "MpiCollectiveEnd": 1.0}}
    gaps = {"wait": {"Enter": 300e-9, "Leave": 100e-9},
            "barrier": {"Enter": 900e-9, "Leave": 500e-9, "MpiCollectiveBegin": 400e-9,
                        "MpiCollectiveEnd": 200e-9}}
    untraced = {"wait": 40e-9, "barrier": 400e-9}
    costs = ezc.per_kind(records, gaps, untraced)
    # Enter/Leave from the shorter untraced iteration (wait: 20 ns per gap), the
    # collective records from the barrier (100 ns per gap); a Leave's and a
    # collective end's gaps hold tracer work alone: as measured
    assert costs == pytest.approx({"Enter": 280e-9, "Leave": 100e-9,
                                   "MpiCollectiveBegin": 300e-9, "MpiCollectiveEnd": 200e-9})
    # the slopes say one wait iteration got 1.9 us longer: the gaps explain 380 ns of it
    closure = ezc.closure(records, costs, {"wait": 1.9e-6, "barrier": 0.0})
    assert closure["wait"] == pytest.approx(0.2)
    assert math.isnan(closure["barrier"])


def test_self_variant_costs_are_scaled_until_their_records_add_up_to_the_slopes():
    records = {"wait": {"Enter": 1.0, "Leave": 1.0},
               "isend": {"Enter": 3.0, "Leave": 3.0, "MpiIsend": 1.0},
               "recv": {"Enter": 3.0, "Leave": 3.0, "MpiIsend": 1.0, "MpiRecv": 1.0},
               "pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0}}
    gaps = {"Enter": 40e-9, "Leave": 40e-9, "MpiIsend": 70e-9, "MpiRecv": 30e-9}
    delta = {"wait": 100e-9, "isend": 400e-9, "recv": 430e-9, "pingpong": 1e-6}
    costs = ezc.closed_costs(records, gaps, delta)
    closure = ezc.closure(records, costs, delta)
    assert [closure[v] for v in ("wait", "isend", "recv")] == pytest.approx([1.0] * 3)
    # a Leave's and an MpiRecv's gaps hold tracer work alone: kept as measured
    assert costs["Leave"] == gaps["Leave"] and costs["MpiRecv"] == gaps["MpiRecv"]
    assert costs["Enter"] == pytest.approx(60e-9)  # 100 - 40
    assert costs["MpiIsend"] == pytest.approx(100e-9)  # 400 - 3 x 100
    # a cost is never negative, however small the slope
    assert min(ezc.closed_costs(records, gaps, {"wait": 0.0, "isend": 0.0}).values()) >= 0


def test_the_rest_of_a_hop_is_the_waiting_records_cost_before_its_stamp():
    costs = {"Enter": 40e-9, "Leave": 40e-9, "MpiRecv": 30e-9, "MpiCollectiveEnd": 30e-9,
             "MpiIsend": 80e-9, "MpiCollectiveBegin": 50e-9}
    # a round trip 440 ns longer traced: 220 ns a hop, 110 of them Enter, Leave and
    # MpiRecv after its stamp; MpiSend costs what MpiIsend does (80), so MpiRecv
    # costs the last 30 before its stamp
    out, before = ezc.path_costs(costs, {"pingpong": 440e-9, "allreduce": 200e-9})
    assert out["MpiSend"] == pytest.approx(80e-9)
    assert before["MpiRecv"] == pytest.approx(30e-9)
    assert out["MpiRecv"] == pytest.approx(60e-9)
    # allreduce: 200 - 110 = 90, the begin's 50, the end's 40 before its stamp
    assert out["MpiCollectiveBegin"] == pytest.approx(50e-9)
    assert before["MpiCollectiveEnd"] == pytest.approx(40e-9)
    records = {"pingpong": {"Enter": 2.0, "Leave": 2.0, "MpiSend": 1.0, "MpiRecv": 1.0}}
    assert ezc.closure(records, out, {"pingpong": 440e-9}) == {"pingpong": pytest.approx(1.0)}
    # a hop shorter than its records: the send takes less, nothing before a stamp
    out, before = ezc.path_costs(costs, {"pingpong": 300e-9})
    assert out["MpiSend"] == pytest.approx(40e-9) and before == {}
    assert ezc.path_costs(costs, {"pingpong": 100e-9})[0]["MpiSend"] == 0.0
    # without the self variant's kind, the send takes the whole rest, as alone
    out, before = ezc.path_costs({"Enter": 40e-9, "Leave": 40e-9, "MpiRecv": 30e-9},
                                {"pingpong": 440e-9})
    assert out["MpiSend"] == pytest.approx(110e-9) and before == {}
    assert "MpiSend" not in ezc.path_costs(costs, {})[0]


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
    before = ezc.opening_before(pairs)
    assert before == {"ThreadFork": pytest.approx(85e-9)}
    assert ezc.successor(pairs["omp"], "ThreadJoin") == "ThreadFork"
    records = {"omp": {"ThreadFork": 1.0, "ThreadJoin": 1.0},
               "wait": {"Enter": 1.0, "Leave": 1.0}}
    gaps = {"omp": {"ThreadFork": 200e-9, "ThreadJoin": 130e-9},
            "wait": {"Enter": 45e-9, "Leave": 40e-9}}
    costs = ezc.per_kind(records, gaps, {"omp": 0.0, "wait": 0.0}, pairs, before)
    assert costs["ThreadJoin"] == pytest.approx(45e-9)  # 130 - 85
    assert costs["ThreadFork"] == pytest.approx(285e-9)  # 200 after, 85 before
    # the iteration's total is that of the gaps: the cost only moves
    assert costs["ThreadJoin"] + costs["ThreadFork"] == pytest.approx(330e-9)
    assert ezc.opening_before({"wait": pairs["wait"]}) == {}


def test_a_pthread_calls_gap_holds_tracer_work_like_its_kinds():
    records = {"mutex": {"Enter@pthread_mutex_lock": 1.0, "Leave@pthread_mutex_lock": 1.0}}
    gaps = {"mutex": {"Enter@pthread_mutex_lock": 90e-9, "Leave@pthread_mutex_lock": 120e-9}}
    costs = ezc.per_kind(records, gaps, {"mutex": 20e-9})
    # a Leave's gap is tracer work alone (PURE), the Enter's holds 10 ns of the loop
    assert costs == pytest.approx({"Enter@pthread_mutex_lock": 80e-9,
                                   "Leave@pthread_mutex_lock": 120e-9})
    closed = ezc.closed_costs(records, costs, {"mutex": 500e-9})
    assert closed["Leave@pthread_mutex_lock"] == pytest.approx(120e-9)
    assert closed["Enter@pthread_mutex_lock"] == pytest.approx(380e-9)
