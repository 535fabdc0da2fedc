"""The anchor exchange (compensate/parallel/exchange.py): a hand-computed case
whose exchanged values are checked by hand, and the cycle a trace can hold."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from compensate.engine.exchange import AnchorExchange
from compensate.engine.run import EngineOptions, approximate
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import TraceError
from compensate.parallel import exchange
from compensate.parallel.exchange import Exchange, RemoteFailure, ghost_pins
from compensate.parallel.ownership import owners
from compensate.platform import Platform
from tests.threadranks import run_threads

DATA = Path(__file__).parent / "data"


class Recording(Exchange):
    """An exchange that notes the anchor values its rank takes from each message:
    (source rank, this rank, (location, record), value)."""

    def __init__(self, transport, owner, log: list) -> None:
        super().__init__(transport, owner)
        self.log = log

    def _take(self, msgs, A):  # (request id, value) pairs
        g = self._graph
        for src, buf in msgs:
            for ident, v in buf.view(np.float64).reshape(-1, 2).tolist():
                k = self._wanted[int(ident)]
                loc, idx = g.loc_ids[int(g.anchor_loc[k])], int(g.anchor_rec[k])
                self.log.append((src, self.transport.rank, (loc, idx), v))
        return super()._take(msgs, A)


def load(name: str):
    path = DATA / name
    trace = read_text(str(path))
    line = next(x for x in path.read_text().splitlines() if x.startswith("# platform:"))
    platform = Platform.from_dict(json.loads(line.split(":", 1)[1]))
    expect = {}
    for x in path.read_text().splitlines():
        if x.startswith("# expect any"):
            head, times = x[len("# expect any"):].split(":")
            expect[int(head)] = [int(t) for t in times.split()]
    return trace, platform, expect


def test_the_exchange_is_what_the_engine_needs():
    """Exchange has every member of the engine's AnchorExchange protocol, each
    method with the protocol's parameters (the engine knows the exchange only
    through the protocol, so a renamed method would fail only at run time)."""
    members = [name for name in vars(AnchorExchange) if not name.startswith("_")]
    assert {"ghosts", "start", "computed", "flush", "round", "reduce",
            "check_first_waiting"} <= set(members)
    for name in members:
        want = getattr(AnchorExchange, name)
        got = getattr(Exchange, name)
        assert list(inspect.signature(got).parameters) == \
            list(inspect.signature(want).parameters), name
    assert "finished" in AnchorExchange.__annotations__
    assert hasattr(Exchange(_OneRank(), {}), "finished")


class _OneRank:
    """The least transport an Exchange can be built on (only its size is read)."""

    rank, size = 0, 1


def test_three_locations_on_two_ranks_exchange_the_hand_computed_values():
    trace, platform, expect = load("three_locations.trace")
    owner = owners(trace.definitions, list(trace.events), 2)
    assert owner == {0: 0, 1: 0, 2: 1}
    matching = match(trace)
    opts = EngineOptions(bound="lower")
    one, t0, _ = approximate(trace, platform, opts, matching)
    for loc, times in expect.items():  # the case itself, in one process
        np.testing.assert_array_equal(np.rint(one[loc]) + t0, times)
    log: list = []

    def body(t):
        ex = Recording(t, owner, log)
        ghosts = ghost_pins(trace, owner, t.rank)
        approx, _, _ = approximate(trace, platform, opts, matching, pins=ghosts, exchange=ex)
        return {loc: approx[loc] for loc in trace.events if owner[loc] == t.rank}, ex

    parts = run_threads(2, body)
    for part, _ in parts:
        for loc, times in part.items():
            np.testing.assert_array_equal(times, one[loc])  # bit for bit
    # what each rank's rules read of the other's locations, in float ticks from t0:
    # loc 0's receive reads loc 2's first send (record 1, 1000 -> 0.0), loc 2's
    # receive loc 0's send (record 4: 1300 -> 300.0), loc 1's receive loc 2's second
    # send (record 7: 1600 -> 600.0)
    assert sorted(log) == [(0, 1, (0, 4), 300.0), (1, 0, (2, 1), 0.0), (1, 0, (2, 7), 600.0)]
    assert [(ex.expected, ex.received, ex.sent) for _, ex in parts] == [(2, 2, 1), (1, 1, 2)]


CYCLE = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
location 1 group=1 name="rank 1"
region 1 "MPI_Send"
region 2 "MPI_Recv"
comm 0 "MPI_COMM_WORLD" 0,1
events
1000 0 Enter region=2
1000 1 Enter region=2
1100 0 MpiRecv sender=1 comm=0 tag=0 bytes=8
1100 1 MpiRecv sender=0 comm=0 tag=0 bytes=8
1200 0 Leave region=2
1200 1 Leave region=2
1300 0 Enter region=1
1300 1 Enter region=1
1400 0 MpiSend receiver=1 comm=0 tag=0 bytes=8
1400 1 MpiSend receiver=0 comm=0 tag=0 bytes=8
1500 0 Leave region=1
1500 1 Leave region=1
"""


def _ring(n: int) -> str:
    """``n`` locations, each receiving first from the next one (in a ring) and then
    sending to the previous one: every receive waits for a later send."""
    head = ["compensate-trace 1", "timer_resolution 1000000000"]
    head += [f'location {i} group={i} name="rank {i}"' for i in range(n)]
    head += ['region 1 "MPI_Send"', 'region 2 "MPI_Recv"',
             f'comm 0 "MPI_COMM_WORLD" {",".join(str(i) for i in range(n))}', "events"]
    rows = []
    for i in range(n):
        rows += [(1000, i, "Enter region=2"),
                 (1100, i, f"MpiRecv sender={(i + 1) % n} comm=0 tag=0 bytes=8"),
                 (1200, i, "Leave region=2"), (1300, i, "Enter region=1"),
                 (1400, i, f"MpiSend receiver={(i - 1) % n} comm=0 tag=0 bytes=8"),
                 (1500, i, "Leave region=1")]
    return "\n".join(head + [f"{t} {i} {x}" for t, i, x in sorted(rows)]) + "\n"


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("text, ranks", [(CYCLE, 2), (_ring(3), 3), (_ring(5), 2),
                                         (_ring(5), 3)])
def test_a_cycle_across_ranks_is_the_one_process_error(tmp_path, monkeypatch, native, text,
                                                       ranks):
    """Receives waiting for each other's later sends, across 2 and 3 ranks (two
    locations on two ranks; rings of 3 and 5 locations): no value ever moves; the
    waves find every rank passive with nothing in transit, the rank of the first
    waiting location raises the one-process run's error, the others stop
    (RemoteFailure: the driver's agreement reports the error once) — with the
    engine's scheduling in C (``native`` 1) and in Python (0)."""
    monkeypatch.setenv("COMPENSATE_NATIVE", native)
    path = tmp_path / "cycle.trace"
    path.write_text(text)
    trace = read_text(str(path))
    matching = match(trace)
    opts = EngineOptions(bound="lower")
    with pytest.raises(TraceError) as one:
        approximate(trace, Platform(1e-8), opts, matching)
    owner = owners(trace.definitions, list(trace.events), ranks)
    errors = {}

    def body(t):
        ghosts = ghost_pins(trace, owner, t.rank)
        try:
            approximate(trace, Platform(1e-8), opts, matching, pins=ghosts,
                        exchange=Exchange(t, owner))
        except (TraceError, RemoteFailure) as exc:
            errors[t.rank] = exc

    run_threads(ranks, body)
    assert isinstance(errors[0], TraceError) and str(errors[0]) == str(one.value)
    assert all(isinstance(errors[r], RemoteFailure) and errors[r].rank == 0
               for r in range(1, ranks))


@pytest.mark.parametrize("inline", [True, False])
@pytest.mark.parametrize("width", [2, 3])
def test_a_step_delivers_rows_by_source_in_order_inline_or_not(width, inline, monkeypatch):
    """Exchange._step on 3 thread ranks: rank s sends rank d 3 * s * d rows (0 to 12:
    a setup step's first 6 requests fit its header inline, a round's first 4 values;
    rank 0 receives nothing but must still join the others' Alltoallv), each row
    naming (source, destination, its number); the rows sent to one rank are
    interleaved, so the stable grouping by destination is tested. Every rank gets
    its rows by source, in the order sent, whether inline or in the Alltoallv
    (``inline`` False: as above 256 ranks, no row inline, every row in it)."""
    if not inline:
        monkeypatch.setattr(exchange, "inline_words", lambda size: 0)

    def body(t):
        rows, dest = [], []
        for i in range(3 * t.rank * (t.size - 1)):
            for d in range(t.size):
                if i < 3 * t.rank * d:
                    rows.append([t.rank, d, i] if width == 3 else [t.rank, 100 * d + i])
                    dest.append(d)
        got, _ = Exchange(t, {})._step(np.array(rows, np.int64).reshape(-1, width),
                                       np.array(dest, np.int64))
        return got.tolist()

    for me, got in enumerate(run_threads(3, body)):
        assert got == [[s, me, i] if width == 3 else [s, 100 * me + i]
                       for s in range(3) for i in range(3 * s * me)]


@pytest.fixture(scope="module")
def stencil():
    from compensate.simulate import simulate

    sim = simulate("stencil", ranks=6, seed=3, iterations=3)
    return sim.measured, sim.platform, match(sim.measured)


@pytest.mark.parametrize("where", ["_take", "flush"])
def test_a_rank_failing_mid_replay_stops_every_rank(stencil, where):
    """Rank 1 of 3 raises while values travel point to point (on the first values it
    takes, or at its first send of values the others asked for: possibly with a wave
    in flight and messages on their way to it): it reports its own error, the others
    RankFailed naming it, nobody waits forever, and the replay's point-to-point
    counts balance (every message sent was taken: the drain after the failure
    wave). Then the same replay without the failure equals the one-process run."""
    from compensate.parallel.driver import RankFailed, agreed

    trace, platform, matching = stencil
    opts = EngineOptions(bound="lower")
    owner = owners(trace.definitions, list(trace.events), 3)

    class Failing(Exchange):
        calls = 0

        def hook(self, *args):
            Failing.calls += 1
            raise ValueError("rank 1 fails")

    outcome = {}

    def body(t):
        ex = Failing(t, owner) if t.rank == 1 else Exchange(t, owner)
        if t.rank == 1:
            setattr(ex, where, ex.hook)
        try:
            agreed(t, lambda: approximate(trace, platform, opts, matching, exchange=ex),
                   exchange=ex)
        except (ValueError, RankFailed) as exc:
            outcome[t.rank] = (type(exc).__name__, getattr(exc, "rank", None),
                               ex._messages_received, ex._messages_sent, ex.finished)

    run_threads(3, body)
    assert Failing.calls == 1
    assert [outcome[r][:2] for r in range(3)] == [("RankFailed", 1), ("ValueError", None),
                                                   ("RankFailed", 1)]
    assert all(o[4] for o in outcome.values())
    assert sum(o[2] for o in outcome.values()) == sum(o[3] for o in outcome.values())

    one, _, _ = approximate(trace, platform, opts, matching)

    def clean(t):
        ex = Exchange(t, owner)
        approx, _, _ = approximate(trace, platform, opts, matching, exchange=ex)
        return {loc: approx[loc] for loc in trace.events if owner[loc] == t.rank}

    for part in run_threads(3, clean):
        for loc, times in part.items():
            np.testing.assert_array_equal(times, one[loc])
