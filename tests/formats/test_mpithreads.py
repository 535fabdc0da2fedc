"""A rank whose MPI records lie on another thread of its process than the one the
communicators list is that thread (compensate.formats.mpithreads): hand cases,
the reading that stops at the first MPI record, and the property that moving a
rank's records to another thread of its process changes nothing but where they
lie, on every path (in memory, streamed, distributed on thread ranks)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.cli import main
from compensate.formats import mpithreads, read_trace, write_trace
from compensate.formats.mpithreads import first_mpi, rank_threads
from compensate.model import Comm, Definitions, Events, Location, Trace
from compensate.simulate import simulate


def test_a_rank_is_the_one_thread_that_holds_its_mpi_records():
    candidates = {0: [1, 2], 10: [11], 20: [21, 22], 30: [31]}
    with_mpi = {1,  # process 0: only thread 1 -> the rank
                10, 11,  # process 10: the listed thread and another: as listed
                21, 22,  # process 20: two other threads: as listed
                }  # process 30: no MPI record anywhere: as listed
    assert rank_threads(candidates, with_mpi) == {0: 1}


def test_communicators_list_the_thread_and_keep_the_listed_location():
    defs = Definitions(timer_resolution=10**9,
                       locations={i: Location(i, group=i // 10) for i in (0, 1, 10, 11)},
                       comms={0: Comm(0, "world", (0, 10)), 1: Comm(1, "self", (10,)),
                              2: Comm(2, "unrelated", (11,))})
    assert mpithreads.other_threads(defs) == {0: [1], 10: [11], 11: [10]}
    out = mpithreads.renamed(defs, {0: 1})
    assert out.comms[0].members == (1, 10) and out.comms[0].written == (0, 10)
    assert out.comms[1] == defs.comms[1] and out.comms[2] == defs.comms[2]
    again = mpithreads.renamed(out, {0: 1})  # (renaming what was renamed: the same)
    assert again.comms == out.comms
    assert mpithreads.renamed(out, {}).comms[0] == defs.comms[0]


def _chunk(kinds: list[int]) -> Events:
    return Events.from_rows([(t, k, 0, 0, 0, 0, 0, 0, 0, 0) for t, k in enumerate(kinds)])


def test_reading_stops_at_the_chunk_where_every_location_showed_an_mpi_record():
    from compensate.model import ENTER, LEAVE, SEND
    taken = []

    def read(locations):
        for k, chunk in enumerate([{0: _chunk([ENTER, LEAVE]), 1: _chunk([SEND])},
                                   {0: _chunk([ENTER, SEND])},
                                   {0: _chunk([SEND]), 1: _chunk([SEND])}]):
            taken.append(k)
            yield {loc: ev for loc, ev in chunk.items() if loc in locations}

    assert first_mpi(read, {0, 1}) == {0, 1} and taken == [0, 1]
    taken.clear()
    assert first_mpi(read, {0, 2}) == {0} and taken == [0, 1, 2]  # (2: read to the end)


def moved(trace: Trace, rank: int) -> tuple[Trace, int]:
    """``trace`` with every record of ``rank``'s location moved to a new CPU thread
    of the same process (the listed location left empty), and the new id."""
    defs = trace.definitions
    m = defs.comms[0].members[rank]
    new = max(defs.locations) + 1
    loc = dataclasses.replace(defs.locations[m], id=new, name=f"{defs.locations[m].name} T1")
    events = dict(trace.events)
    events[new] = events[m]
    events[m] = events[m].slice(0, 0)
    return Trace(dataclasses.replace(defs, locations={**defs.locations, new: loc}), events,
                 trace.source), new


def _times(path) -> dict[int, np.ndarray]:
    return {loc: ev.time for loc, ev in read_trace(path).events.items()}


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.sampled_from(["ring", "collectives", "nonblocking", "stencil"]),
       rank=st.integers(0, 2), seed=st.integers(0, 3))
def test_a_rank_moved_to_another_thread_is_compensated_as_where_it_was(
        tmp_path_factory, program, rank, seed):
    from tests.parallel.test_command import _thread_command

    tmp = tmp_path_factory.mktemp("moved")
    sim = simulate(program, ranks=3, overhead=1e-6, seed=seed)
    m = sim.measured.definitions.comms[0].members[rank]
    write_trace(sim.measured, tmp / "a.trace")
    there, new = moved(sim.measured, rank)
    write_trace(there, tmp / "b.trace")
    assert read_trace(tmp / "b.trace").definitions.comms[0].members[rank] == new
    assert main([str(tmp / "a.trace"), str(tmp / "a.out.trace"), "--overhead", "1us",
                 "--quiet"]) == 0
    want = _times(tmp / "a.out.trace")
    for mode in ([], ["--in-memory"], ["--segment-records", "64"]):
        out = tmp / f"b{len(mode)}.out.trace"
        assert main([str(tmp / "b.trace"), str(out), "--overhead", "1us", "--quiet",
                     "--force", *mode]) == 0
        got = _times(out)
        assert np.array_equal(got[new], want[m]) and len(got[m]) == 0
        assert all(np.array_equal(got[k], want[k]) for k in want if k != m)
        assert read_trace(out).definitions.comms[0].written == \
            sim.measured.definitions.comms[0].members
    par = tmp / "par.trace"
    argv = [str(tmp / "b.trace"), str(par), "--overhead", "1us", "--quiet", "--force"]
    assert _thread_command(tmp, argv, 2, streamed=True) == [0, 0]
    got = _times(par)
    assert np.array_equal(got[new], want[m])
    assert all(np.array_equal(got[k], want[k]) for k in want if k != m)
    # an OTF2 archive: the scan by the C path, the streamed run copying records by C
    write_trace(there, tmp / "b" / "traces.otf2")
    out = tmp / "o" / "traces.otf2"
    assert main([str(tmp / "b" / "traces.otf2"), str(out), "--overhead", "1us",
                 "--quiet"]) == 0
    got = _times(out)
    assert np.array_equal(got[new], want[m])
    assert all(np.array_equal(got[k], want[k]) for k in want if k != m)


def test_thread_teams_and_accelerator_communicators_are_never_renamed():
    """Score-P defines an OpenMP thread team's and a CUDA context's communicators
    beside the MPI ones (their members in one process): a hybrid archive's ranks
    call MPI from their master threads, and every communicator reads as listed."""
    from tests.conftest import TRACES
    anchor = TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2"
    defs = read_trace(anchor).definitions
    assert not defs.is_rank_comm(defs.comms[1])  # (master + OMP thread 1)
    assert all(c.listed is None for c in defs.comms.values())
    team = Definitions(timer_resolution=1, locations={i: Location(i, group=0) for i in (0, 1)},
                       comms={0: Comm(0, "team", (0, 1))})
    assert mpithreads.other_threads(team) == {}
    assert mpithreads.renamed(team, {0: 1}).comms == team.comms
