"""Trimmed ghosts (compensate/parallel/trim.py, ghosts.complete_trimmed): a
hand-computed three-location case whose ranks drop the calls no rule of theirs
reads, with the kept records, the times and the one exchanged value checked by
hand; which locations may be trimmed; and, on outputs broken on purpose,
verification over trimmed views reduced equals the one-process verification
(counts, the first ten examples in the one-process order, naming original
records). Thread ranks over every simulated program and bound with trimmed views:
tests/parallel/test_driver.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.matching.match import nesting
from compensate.model import COLUMNS, TraceError
from compensate.parallel.ghosts import complete_trimmed
from compensate.parallel.ownership import owners
from compensate.parallel.trim import calls_of, remap_error, remap_text
from compensate.parallel.verification import verify_rank
from compensate.simulate import simulate
from compensate.verify import verify
from tests.pipelines import assemble, run_pipeline, run_rank
from tests.threadranks import run_threads

from ..conftest import read_bundled
from .test_driver import BUNDLED, assert_same
from .test_exchange import DATA, load
from .test_verification import broken


def views(trace, size, one_call=False):
    """Every thread rank's trimmed view of ``trace``: (owner, [(view, index), ...])."""
    owner = owners(trace.definitions, list(trace.events), size)

    def body(t):
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        return complete_trimmed(trace.definitions, own, t, owner, trace.source,
                                one_call=one_call)

    return owner, run_threads(size, body)


@pytest.mark.parametrize("size", [2, 3])
def test_one_alltoall_gives_the_views_of_one_per_column(size):
    trace = simulate("stencil", ranks=4, iterations=3).measured  # (trimmed: simple)
    _, per_column = views(trace, size)
    _, one = views(trace, size, one_call=True)
    assert all(index for _, index in one)  # (every rank holds trimmed ghosts)
    for (a, ia), (b, ib) in zip(per_column, one, strict=True):
        assert sorted(ia) == sorted(ib) and sorted(a.events) == sorted(b.events)
        for loc in ia:
            np.testing.assert_array_equal(ia[loc], ib[loc])
        for loc, ev in a.events.items():
            for name, _ in COLUMNS:
                np.testing.assert_array_equal(getattr(ev, name), getattr(b.events[loc], name))
            assert ev.payload == b.events[loc].payload


def test_the_hand_case_keeps_only_the_calls_its_rules_read():
    trace, platform, expect = load("three_locations_trimmed.trace")
    keep = {}
    for line in (DATA / "three_locations_trimmed.trace").read_text().splitlines():
        if line.startswith("# keep"):
            head, idx = line[len("# keep"):].split(":")
            rank, loc = map(int, head.split())
            keep[rank, loc] = [int(x) for x in idx.split()]
    owner, got = views(trace, 2)
    assert owner == {0: 0, 1: 0, 2: 1}
    for rank, (view, index) in enumerate(got):
        assert {loc: m.tolist() for loc, m in index.items()} == {
            loc: k for (r, loc), k in keep.items() if r == rank}
        for loc, m in index.items():  # the kept records, column for column
            np.testing.assert_array_equal(view.events[loc].time, trace.events[loc].time[m])
    # the whole pipeline on the trimmed views: the hand-computed times, and the one
    # value that crosses ranks (loc 0's record 6, asked for by its original index)
    ranks = run_threads(2, lambda t: run_rank(got[t.rank][0], platform, "lower", "uniform",
                                              None, t, owner=owner, index=got[t.rank][1]))
    result = assemble(trace, ranks)[0]
    for loc, times in expect.items():
        assert result.trace.events[loc].time.tolist() == times
    info = [r.info for r in ranks]
    assert [(i["values_sent"], i["values_received"]) for i in info] == [(1, 0), (0, 1)]
    assert [i["ghost_records"] for i in info] == [5, 7]  # of 7 and 11
    assert_same(run_pipeline(trace, platform, "lower", "uniform", None),
                assemble(trace, ranks))


HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="rank 0"
location 1 group=1 name="rank 1"
region 1 "MPI_Sendrecv"
region 2 "compute"
comm 0 "MPI_COMM_WORLD" 0,1
events
"""


@pytest.mark.parametrize("events, simple", [
    ("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n3 0 Leave region=1\n",
     True),
    # a bare MPI record (its "call" would be the record before it)
    ("1 0 Enter region=2\n2 0 Leave region=2\n3 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n",
     False),
    # one call, two peers (MPI_Sendrecv between different neighbours)
    ("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n"
     "3 0 MpiRecv sender=0 comm=0 tag=0 bytes=8\n4 0 Leave region=1\n", False),
    # an MPI call inside another call that holds MPI records of its own
    ("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n3 0 Enter region=1\n"
     "4 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n5 0 Leave region=1\n6 0 Leave region=1\n",
     False),
    # ... and with the outer call's MPI record after the inner call
    ("1 0 Enter region=1\n2 0 Enter region=1\n3 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n"
     "4 0 Leave region=1\n5 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n6 0 Leave region=1\n",
     False),
    # two calls one after the other, and an MPI call inside a call without MPI records
    ("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n3 0 Leave region=1\n"
     "4 0 Enter region=2\n5 0 Enter region=1\n6 0 MpiRecv sender=1 comm=0 tag=0 bytes=8\n"
     "7 0 Leave region=1\n8 0 Leave region=2\n", True),
    ("1 0 Leave region=2\n2 0 Enter region=1\n3 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n"
     "4 0 Leave region=1\n", False),  # a Leave without its Enter
    ("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n3 0 Leave region=1\n",
     None),  # a peer location without records (left to matching)
    ("1 0 Enter region=2\n2 0 BufferFlush stop=3\n3 0 Leave region=2\n", False),
])
def test_which_locations_are_trimmed(events, simple, tmp_path):
    path = tmp_path / "one.trace"
    path.write_text(HEAD + events)
    trace = read_text(str(path))
    ev = trace.events[0]
    locations = {0} if simple is None else {0, 1}
    assert (calls_of(trace.definitions, 0, ev, locations) is not None) == bool(simple)


HEAD3 = HEAD.replace('location 1 group=1 name="rank 1"\n',
                     'location 1 group=1 name="rank 1"\nlocation 2 group=2 name="rank 2"\n'
                     ).replace("comm 0 \"MPI_COMM_WORLD\" 0,1", "comm 0 \"MPI_COMM_WORLD\" 0,1,2")

#: a location's records: an MPI send to location 1 or 2, or a call (Enter, its
#: records, Leave)
_ITEMS = st.recursive(st.sampled_from([("send", 1), ("send", 2)]),
                      lambda inner: st.lists(inner, max_size=4).map(lambda x: ("call", x)),
                      max_leaves=12)


def _flatten(items, out):
    for kind, x in items:
        if kind == "send":
            out.append(("send", x))
        else:
            out.append(("enter", None))
            _flatten(x, out)
            out.append(("leave", None))
    return out


def _calls_by_walk(records):
    """The calls of a location by a stack walk: (Enter, Leave, peer) of each call
    holding MPI records, or None where an MPI record is outside every call, a call
    holds records of two peers, or another call's MPI records lie inside one."""
    stack, inner, spans = [], [], {}
    for i, (kind, peer) in enumerate(records):
        if kind == "enter":
            stack.append(i)
        elif kind == "leave":
            spans[stack[-1]] = i
            stack.pop()
        elif not stack:
            return None
        else:
            inner.append((i, stack[-1], peer))
    calls = []
    for start in sorted({c for _, c, _ in inner}):
        end = spans[start]
        mine = [(i, c, p) for i, c, p in inner if start < i < end]
        if any(c != start for _, c, _ in mine) or len({p for _, _, p in mine}) > 1:
            return None
        calls.append((start, end, mine[0][2]))
    return calls


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(items=st.lists(_ITEMS, min_size=1, max_size=6))
def test_the_calls_found_equal_a_stack_walk(items, tmp_path):
    """:func:`calls_of` against a walk: which calls hold MPI records, their ends and
    peers, and which locations are sent whole (another call's records inside a
    call, in either order; two peers in a call; a record outside every call)."""
    records = _flatten(items, [])
    lines = []
    for i, (kind, peer) in enumerate(records):
        what = {"enter": "Enter region=1", "leave": "Leave region=1",
                "send": f"MpiSend receiver={peer} comm=0 tag=0 bytes=8"}[kind]
        lines.append(f"{i + 1} 0 {what}\n")
    path = tmp_path / "walk.trace"
    path.write_text(HEAD3 + "".join(lines))
    trace = read_text(str(path))
    got = calls_of(trace.definitions, 0, trace.events[0], {0, 1, 2})
    want = _calls_by_walk(records)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert list(zip(got.start.tolist(), got.end.tolist(), got.peer.tolist(),
                        strict=True)) == want


def _wide(events: str) -> str:
    """A trace of 70 locations: communicator 0 holds them all, 1 holds 0 and 1."""
    locs = "".join(f'location {i} group={i} name="rank {i}"\n' for i in range(70))
    return ("compensate-trace 1\ntimer_resolution 1000000000\n" + locs
            + 'region 1 "MPI_Send"\ncomm 0 "MPI_COMM_WORLD" ' + ",".join(map(str, range(70)))
            + '\ncomm 1 "pair" 0,1\nevents\n' + events)


@pytest.mark.parametrize("missing, simple", [(None, True), (69, False), (1, False)])
def test_a_peer_outside_the_trace_on_either_communicator_sends_the_location_whole(
        missing, simple, tmp_path):
    # location 0 sends on both communicators: to rank 1 of "pair" (its members
    # checked one by one) and to rank 69 of the world (more members than records)
    path = tmp_path / "wide.trace"
    path.write_text(_wide("1 0 Enter region=1\n2 0 MpiSend receiver=1 comm=1 tag=0 bytes=8\n"
                          "3 0 Leave region=1\n4 0 Enter region=1\n"
                          "5 0 MpiSend receiver=69 comm=0 tag=0 bytes=8\n6 0 Leave region=1\n"))
    trace = read_text(str(path))
    locations = set(range(70)) - {missing}
    calls = calls_of(trace.definitions, 0, trace.events[0], locations)
    assert (calls is not None) == simple
    if simple:
        assert calls.peer.tolist() == [1, 69] and calls.start.tolist() == [0, 3]


@pytest.mark.parametrize("program", ["stencil", "ring", "collectives", "gather"])
def test_matching_takes_the_call_structure_the_trimming_found(program):
    trace = simulate(program, ranks=4, iterations=3).measured
    nests = {}
    for loc, ev in list(trace.events.items())[::2]:  # (the others: matching finds it)
        calls = calls_of(trace.definitions, loc, ev, set(trace.events))
        if calls is not None:
            found = nesting(ev.kind, ev.region)
            np.testing.assert_array_equal(calls.nest.before, found.before)
            for got, want in ((calls.nest.enters, found.enters),
                              (calls.nest.leaves, found.leaves)):
                assert sorted(got) == sorted(want)
                for level in want:
                    np.testing.assert_array_equal(got[level], want[level])
            nests[loc] = calls.nest
    assert len(nests) == 2  # (every location of these programs is simple)
    given, found = match(trace, nests=nests), match(trace)
    assert given.counts() == found.counts()
    for name in ("send_li", "send_idx", "recv_li", "recv_idx"):
        np.testing.assert_array_equal(getattr(given.table, name), getattr(found.table, name))
    assert len(given.instances) == len(found.instances)


def test_error_lines_name_original_records():
    index = {3: np.array([0, 4, 9])}
    assert remap_text(index, "x: location 3, record 2: y (location 1, record 2)") == \
        "x: location 3, record 9: y (location 1, record 2)"


def test_an_error_is_renamed_by_its_fields():
    """A TraceError's own record is renamed through its fields; the records its
    reason names, by the regular expression; an exception without fields, by the
    regular expression over its message."""
    index = {3: np.array([0, 4, 9]), 1: np.array([5, 6, 7])}
    exc = TraceError("waits for location 1, record 2 (location 8, record 2)",
                     source="x", location=3, index=2)
    line = "x: location 3, record 9: waits for location 1, record 7 (location 8, record 2)"
    assert remap_text(index, exc) == remap_text(index, str(exc)) == line
    assert exc.record == 2  # (remap_text changes nothing)
    remap_error(index, exc)
    assert (str(exc), exc.record) == (line, 9)
    assert exc.reason == "waits for location 1, record 7 (location 8, record 2)"
    other = RuntimeError("location 3, record 1: no time computed")
    remap_error(index, other)
    assert str(other) == "location 3, record 4: no time computed"
    untouched = TraceError("y", source="x", location=3, index=5)  # (past the map: as is)
    remap_error(index, untouched)
    remap_error({}, untouched)
    assert str(untouched) == "x: location 3, record 5: y"


@pytest.fixture(scope="module", params=["stencil", "collectives", "montecarlo"])
def case(request):
    sim = simulate(request.param, ranks=4, seed=3, iterations=3)
    result, matching, _, _ = run_pipeline(sim.measured, sim.platform, "lower", "uniform", None)
    return sim.measured, broken(result.trace, 7), matching


def test_verification_over_trimmed_views_equals_one_process(case):
    measured, out, matching = case
    one = verify(out, matching, measured=measured)
    assert one.violations >= 8
    for size in (2, 3):
        owner, got = views(measured, size)
        assert any(index for _, index in got)  # something was trimmed

        def body(t, owner=owner, got=got):
            view, index = got[t.rank]
            mine = {loc: out.events[loc].time for loc in out.events if owner[loc] == t.rank}
            return verify_rank(t, owner, view, match(view), mine, index=index)

        ranks = run_threads(size, body)
        assert ranks[0][1].to_dict() == one.to_dict(), size


def test_the_command_with_trimmed_ghosts_writes_the_one_process_output_and_summary(tmp_path):
    """The distributed command on thread ranks (a stencil, whose ranks trim every
    other rank's locations to their halo calls and collectives): the output byte
    for byte and the summary, counts of the whole trace included, as one process."""
    import json

    from compensate.cli.compensate import main
    from compensate.formats import write_trace

    from .test_command import PER_RUN, _thread_command

    sim = simulate("stencil", ranks=6, seed=4, iterations=3)
    write_trace(sim.measured, str(tmp_path / "in.trace"))
    (tmp_path / "platform.json").write_text(json.dumps(sim.platform.to_dict()))
    common = ["--platform", str(tmp_path / "platform.json"), "--quiet", "--summary"]
    assert main([str(tmp_path / "in.trace"), str(tmp_path / "one.trace"), *common,
                 str(tmp_path / "one.json"), "--in-memory"]) == 0
    one = json.loads((tmp_path / "one.json").read_text())
    for ranks in (2, 3):
        out, summary = tmp_path / f"p{ranks}.trace", tmp_path / f"p{ranks}.json"
        assert _thread_command(tmp_path, [str(tmp_path / "in.trace"), str(out), *common,
                                          str(summary)], ranks) == [0] * ranks
        assert out.read_bytes() == (tmp_path / "one.trace").read_bytes()
        par = json.loads(summary.read_text())
        assert {k: v for k, v in par.items() if k not in PER_RUN} == \
            {k: v for k, v in one.items() if k not in PER_RUN}
        held = [r + g for r, g in zip(par["parallel"]["records"],
                                      par["parallel"]["ghost_records"], strict=True)]
        assert max(held) < one["records"]  # no rank holds the whole trace


def test_an_error_on_a_trimmed_ghost_names_its_original_record(tmp_path):
    """A receive of location 2 (rank 1's) from location 0 without a send: rank 0,
    whose view of location 2 lacks its second compute region, finds it first and
    reports it as one process does, naming the original record (8; 6 in its view)."""
    from compensate.model import TraceError
    from compensate.parallel.driver import RankFailed

    text = (DATA / "three_locations_trimmed.trace").read_text()
    path = tmp_path / "bad.trace"
    path.write_text(text + "2900 2 Enter region=2\n3000 2 MpiRecv sender=0 comm=0 tag=0 "
                           "bytes=1000\n3100 2 Leave region=2\n")
    trace = read_text(str(path))
    with pytest.raises(TraceError) as one:
        match(trace)
    assert "location 2, record 8" in str(one.value)
    owner, got = views(trace, 2)
    errors = {}

    def body(t):
        try:
            run_rank(got[t.rank][0], None, "lower", "uniform", None, t, owner=owner,
                     index=got[t.rank][1])
        except (TraceError, RankFailed) as exc:
            errors[t.rank] = exc

    run_threads(2, body)
    assert isinstance(errors[0], TraceError) and str(errors[0]) == str(one.value)
    assert isinstance(errors[1], RankFailed) and errors[1].rank == 0


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.parent.name)
def test_bundled_archives_with_trimmed_ghosts(path):
    """The real archives under the lower bound on two thread ranks, with the
    locations that are simple (PAPI Metric records on MPI ranks, METRIC locations
    of GPU metrics) trimmed: the one-process output, statistics and summary counts."""
    from compensate.platform import Platform
    from tests.pipelines import run_in_threads

    trace = read_bundled(path)
    one = run_pipeline(trace, Platform(1e-7), "lower", "uniform", None)
    assert_same(one, run_in_threads(trace, Platform(1e-7), "lower", 2))


def test_a_segment_may_end_inside_calls_without_mpi_records(tmp_path):
    """A streamed segment (compensate/parallel/segments.py) ends inside ``main``
    (open across the cut): with ``open_calls`` the location is trimmed, every rank
    keeps the open Enters (the same open calls as the whole location); an MPI
    record whose call is still open keeps it whole."""
    open_main = ("1 0 Enter region=2\n2 0 Enter region=1\n"
                 "3 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n4 0 Leave region=1\n"
                 "5 0 Enter region=2\n6 0 Leave region=2\n7 0 Enter region=2\n")
    open_mpi = ("1 0 Enter region=2\n2 0 Enter region=1\n"
                "3 0 MpiSend receiver=1 comm=0 tag=0 bytes=8\n")
    for events, simple in ((open_main, True), (open_mpi, False)):
        path = tmp_path / "one.trace"
        path.write_text(HEAD + events)
        trace = read_text(str(path))
        ev = trace.events[0]
        assert calls_of(trace.definitions, 0, ev, {0, 1}) is None
        calls = calls_of(trace.definitions, 0, ev, {0, 1}, open_calls=True)
        assert (calls is not None) == simple
        if simple:
            assert calls.always.tolist() == [0, 6]  # main's Enter and the last, both open
            assert calls.start.tolist() == [1] and calls.end.tolist() == [3]
