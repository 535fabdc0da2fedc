"""compensate.engine.graph: R1 overcompensation is counted for real shortfalls only;
the overhead removed is counted, and bounds what the upper bound can take off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.run import Stats
from compensate.model import ENTER, LEAVE, Definitions, Location, Trace
from compensate.platform import Platform
from compensate.simulate.programs import PROGRAMS
from tests.rowbuilder import RowBuilder

from ..conftest import simulated

EZTRACE = Path(__file__).resolve().parents[1] / "data" / "eztrace"


def _calls(spacing: int, n: int = 6) -> Trace:
    """One location, Enter/Leave of one region, every record ``spacing`` ns apart."""
    rows = RowBuilder()
    for i in range(n):
        rows.add(i * spacing, ENTER if i % 2 == 0 else LEAVE, region=1)
    defs = Definitions(timer_resolution=10**9, locations={0: Location(0)}, regions={1: "f"})
    return Trace(defs, {0: rows.build()})


@pytest.mark.parametrize("overhead", [1.0000000000000001e-07, 1e-7, 3e-7 / 3])
def test_a_gap_exactly_the_overhead_is_not_overcompensated(overhead):
    # the overhead in ticks is a float product (1.0000000000000001e-07 s is
    # 100.00000000000001 ticks); a 100-tick gap holds it exactly: nothing to report
    r = compensate(_calls(100), Platform(event_overhead=overhead), EngineOptions(bound="lower"))
    assert r.stats.overcompensated == 0
    assert r.trace.events[0].time.tolist() == [0] * 6


def test_a_real_shortfall_is_counted_by_kind():
    r = compensate(_calls(99), Platform(event_overhead=1e-7), EngineOptions(bound="lower"))
    assert r.stats.overcompensated == 5
    assert r.stats.overcompensated_by_kind == {"Enter": 2, "Leave": 3}
    assert r.stats.overcompensated_max_s == pytest.approx(1e-9)


# -- the fitted bound's fast path (issue #18) ---------------------------------------------

def _generic_p2p_build(graph, t, rows, shared, dep_rules):
    """The eager-message handler as it was before the fitted fast path: every row a
    :class:`~compensate.engine.kinds.p2p.P2PRecv` rule (scalar who-was-late test)."""
    from compensate.engine.kinds.p2p import P2PRecv, recv_params_of_message
    from compensate.engine.pending import Pending
    graph.fast_rows = np.zeros(0, dtype=np.int64)
    for row in np.sort(rows).tolist():
        dep_rules.setdefault((int(t.recv_li[row]), int(t.recv_idx[row])), []).append(
            Pending(P2PRecv, (recv_params_of_message(graph, row),),
                    [(int(t.send_li[row]), int(t.send_idx[row]))]))


def test_fitted_fast_path_equals_the_generic_rule(monkeypatch):
    """The fitted bound's inline receives (engine loop + vectorised who-was-late,
    ``graph.late_parties``) give the same times and case counts, bit for bit, as the
    scalar P2PRecv rule, on a jittery mixed program where the receiver-late, message-late
    and clamped cases all occur."""
    import compensate.engine.kinds as kinds
    from compensate.engine.fit import fit_network
    from compensate.engine.graph import Graph, late_parties
    from compensate.engine.run import approximate
    from compensate.matching import match
    from compensate.simulate import Network, simulate

    sim = simulate("mixed", ranks=4, iterations=20, overhead=1e-6, quantize=True,
                   network=Network(jitter=2e-6, seed=3))
    m = match(sim.measured)
    opts = EngineOptions("fitted", network_time=fit_network(sim.measured, m, sim.platform))
    fast, _, fast_stats = approximate(sim.measured, sim.platform, opts, m)
    assert fast_stats.p2p_cases["m1_receiver_late"] > 0
    assert fast_stats.p2p_cases["m2_message_late"] > 0
    assert fast_stats.p2p_cases["m2_fitted_clamped"] > 0

    g = Graph(sim.measured, sim.platform, "fitted", "uniform", opts.network_time, m, Stats())
    rows = np.arange(len(m.table))
    receiver, message = late_parties(g, rows)
    scalar = [g.who_was_late(int(g.m.recv_li[r]), int(g.m.recv_idx[r]), float(g.m.cs[r]))
              for r in rows.tolist()]
    assert [("receiver" if a else "message" if b else "unclear")
            for a, b in zip(receiver.tolist(), message.tolist(), strict=True)] == scalar
    assert {"receiver", "message", "unclear"} <= set(scalar)

    eager = kinds.MESSAGE_KINDS["eager"]
    monkeypatch.setitem(kinds.MESSAGE_KINDS, "eager",
                        kinds.MessageKind(eager.selects, eager.targets, _generic_p2p_build))
    generic, _, generic_stats = approximate(sim.measured, sim.platform, opts, m)
    assert generic_stats.p2p_cases == fast_stats.p2p_cases
    for loc in fast:
        assert np.array_equal(fast[loc], generic[loc])


def _rank_graph(trace, platform, matching, ghosts):
    """The graph a rank of the distributed run builds (compensate.engine.run._Engine)."""
    from compensate.engine.graph import Graph
    from compensate.engine.kinds import rules_of
    from compensate.engine.pending import positions

    g = Graph(trace, platform, "lower", "uniform", None, matching, Stats(), ghosts=ghosts)
    dep = g.own_rules(rules_of(g, matching))
    reads = [g.g(li, i) for li, i in positions([p for ps in dep.values() for p in ps], set())
             if g.ghost[li]]
    g.set_rules(dep, np.asarray(reads, dtype=np.int64))
    return g


@pytest.mark.parametrize(("program", "counted"), [
    ("collectives", ()), ("nonblocking_rooted", ()), ("gather", ()), ("sendrecv_ring", ()),
    ("issend", ("synchronous",)), ("mixed", ("synchronous", "nbc_bounded"))])
def test_a_rank_builds_only_its_own_rules_and_counts_its_share(program, counted):
    """A rank of the distributed run (ghosts: the other ranks' locations) builds
    the message and collective rules of its own records only, the same ones one
    process builds for them, and counts its share of the rules' case counters:
    summed over the ranks, one process's counts."""
    from compensate.engine.graph import Graph
    from compensate.engine.kinds import rules_of
    from compensate.matching import match
    from compensate.simulate import simulate

    sim = simulate(program, ranks=4, seed=3)
    trace, platform = sim.measured, sim.platform
    matching = match(trace)
    locs = list(trace.events)
    one = Stats()
    whole = rules_of(Graph(trace, platform, "lower", "uniform", None, matching, one),
                     matching)
    summed = dict.fromkeys(one.p2p_cases, 0)
    for mine in (set(locs[:1]), set(locs[1:3]), set(locs[3:])):
        stats = Stats()
        g = Graph(trace, platform, "lower", "uniform", None, matching, stats,
                  ghosts=set(locs) - mine)
        dep = rules_of(g, matching)
        assert {key: [p.cls for p in ps] for key, ps in dep.items()} == \
            {key: [p.cls for p in ps] for key, ps in whole.items() if locs[key[0]] in mine}
        for k, v in stats.p2p_cases.items():
            summed[k] += v
    assert summed == one.p2p_cases
    assert all(one.p2p_cases[k] > 0 for k in counted)


def test_ghost_locations_anchor_only_the_records_local_rules_read():
    """A rank of the distributed run (docs/parallel.md): of another rank's locations
    only the first record and the sends of the messages its own locations receive
    are anchors (a ring: each process receives from the one before it), every other
    ghost record costs none; no rule of a ghost location is built."""
    from compensate.matching import match
    from compensate.simulate import simulate

    sim = simulate("ring", ranks=4, seed=3, iterations=3)
    trace, platform = sim.measured, sim.platform
    matching = match(trace)
    locs = list(trace.events)
    mine = set(locs[:2])
    g = _rank_graph(trace, platform, matching, set(locs) - mine)
    t = matching.table
    expect = {(loc, 0) for loc in locs if loc not in mine}
    for row in range(len(t)):
        s_loc, r_loc = locs[int(t.send_li[row])], locs[int(t.recv_li[row])]
        if r_loc in mine and s_loc not in mine:
            expect.add((s_loc, int(t.send_idx[row])))
    ghost_anchors = {(g.loc_ids[int(li)], int(i)) for li, i in
                     zip(g.anchor_loc, g.anchor_rec, strict=True) if g.ghost[int(li)]}
    assert ghost_anchors == expect
    ghost_records = sum(len(trace.events[loc]) for loc in locs if loc not in mine)
    assert len(expect) < ghost_records / 4
    assert all(not g.ghost[int(g.anchor_loc[k])] for k in g.generic)
    assert not any(g.ghost[int(li)] for li in g.anchor_loc[np.asarray(g.code) != 0])


# -- the overhead removed (Stats.overhead_removed) -----------------------------------------
def test_the_overhead_removed_is_every_records_overhead():
    """Six records of 100 ns overhead each: 600 ns removed, however the gaps hold it."""
    for spacing in (100, 1000):
        r = compensate(_calls(spacing), Platform(event_overhead=1e-7), EngineOptions())
        assert r.stats.overhead_seconds(10**9) == pytest.approx(6e-7)


def _shorter_and_removed(trace, **kw) -> tuple[float, float]:
    from compensate.api import compensate as api_compensate
    from compensate.cli.compensate import span_reference
    s = api_compensate(trace, bound="upper", collective_exit="per-process", **kw).summary
    ticks = (s["messages_matched"] + s["collective_instances"] + 1) / s["timer_resolution"]
    return span_reference(s) - s["approximated_span_s"] - ticks, s["overhead_removed_s"]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_upper_per_process_shortens_by_at_most_the_overhead_on_programs(program):
    """The upper bound keeps every measured interval and per-process exits keep each
    member's exit: a run can lose no more than the overhead taken out of its
    records (docs/compensation.md, "Shorter than the overhead explains")."""
    sim = simulated(program, ranks=4, seed=3)
    shorter, removed = _shorter_and_removed(sim.measured, platform=sim.platform)
    assert removed > 0
    assert shorter <= removed * (1 + 1e-9)


@pytest.mark.parametrize("name", sorted(p.name for p in EZTRACE.iterdir() if p.is_dir()
                                        and p.name != "refused"))
def test_upper_per_process_shortens_by_at_most_the_overhead_on_eztrace(name):
    """EZTrace's archives of real runs on this machine, whose collectives' members
    left up to milliseconds apart: the upper bound with uniform exits shortens some
    by hundreds of times their overhead (the command's note), with per-process
    exits by no more than it."""
    from compensate.api import read
    anchor = next((EZTRACE / name).glob("*.otf2"))
    shorter, removed = _shorter_and_removed(read(anchor), overhead="estimate")
    assert shorter <= removed * (1 + 1e-9)
