"""EZTrace 2.0 archives (tests/data/eztrace/, see its README) are read on both
paths (the ``otf2`` package's and the C path), written back with the same
definitions and the same records per location (as ``otf2-print`` shows them:
every field but the time), and compensated; a program traced by EZTrace here
(where it is installed) too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import compensate.formats.otf2.native as native
from calibration.eztrace import MPICC, MPIRUN
from compensate.cli import main
from compensate.formats import read_chunks, read_trace
from compensate.formats.otf2 import Otf2EventWriter, read_otf2, write_otf2
from compensate.formats.otf2.read import read_otf2_chunks
from compensate.matching import match
from compensate.model import ENTER, KIND_CODE, NONE

from ...conftest import ROOT
from ...otf2print import OTF2_PRINT, listing, needs_print

DATA = ROOT / "tests" / "data" / "eztrace"
ARCHIVES = sorted(DATA.glob("*/eztrace_log.otf2"))
#: archives refused with one line (the tests below say why), kept apart
REFUSED = sorted(DATA.glob("refused/*/eztrace_log.otf2"))
EZTRACE = shutil.which("eztrace")


def records(anchor: Path) -> dict[str, list[str]]:
    """Each location's records as ``otf2-print`` lists them, without the time
    (its attribute lines included)."""
    out: dict[str, list[str]] = defaultdict(list)
    last = None
    for line in listing(anchor).events.splitlines()[3:]:
        m = re.match(r"^(\S+)\s+(\d+)\s+\d+\s*(.*)$", line)
        if m:
            last = m.group(2)
            out[last].append(f"{m.group(1)} {m.group(3)}")
        elif line.strip() and last is not None:
            out[last][-1] += " | " + line.strip()
    return dict(out)


def definitions(anchor: Path) -> list[str]:
    """``otf2-print -G``'s definition lines, but the location's event counts
    and the clock properties (which describe the output)."""
    lines = listing(anchor).definitions.split("-" * 80, 1)[1].splitlines()
    return [re.sub(r"# Events: \d+", "# Events: N", ln) for ln in lines
            if ln.strip() and not ln.startswith("CLOCK_PROPERTIES")]


def clock(anchor: Path) -> tuple[int, int]:
    text = listing(anchor).definitions
    m = re.search(r"Global Offset: (\d+), Length: (\d+)", text)
    return int(m.group(1)), int(m.group(2))


def write_native(src: Path, out: Path) -> None:
    """Read ``src`` by the C path and write it back (its records copied by C)."""
    defs, chunks = read_otf2_chunks(str(src), None, payload=False)
    assert defs.otf2.native_source == str(src)
    writer = Otf2EventWriter(str(out), defs)
    for chunk in chunks:
        for loc, ev in chunk.items():
            writer.write(loc, ev)
    writer.close()


def test_the_archives_are_there_and_small():
    assert {p.parent.name for p in ARCHIVES} == {"ring", "halo", "mutex", "omp", "hybrid",
                                                  "comms", "procnull", "requests", "sync",
                                                  "trylock", "mpiio", "waits", "ringf",
                                                  "memory", "ompt", "commthread",
                                                  "commp2p", "twothreads", "single", "nested",
                                                  "ibarrier", "procnull-openmpi", "gaps",
                                                  "clockring", "statuses"}
    assert {p.parent.name for p in REFUSED} == {"mtmpi", "intercomm"}
    for anchor in ARCHIVES + REFUSED:
        size = sum(f.stat().st_size for f in anchor.parent.rglob("*") if f.is_file())
        assert size < 100_000, anchor


@pytest.mark.parametrize("anchor", ARCHIVES + REFUSED, ids=lambda p: p.parent.name)
def test_both_paths_read_the_same_columns(anchor):
    whole = read_otf2(str(anchor))
    defs, chunks = read_otf2_chunks(str(anchor), None, payload=False)
    chunk = next(chunks, {})
    chunks.close()
    assert defs.locations == whole.definitions.locations
    assert len(whole.events) >= 2
    for loc, ev in whole.events.items():
        assert len(ev) > 2  # (each declares 2 records: not damage, EZTrace's habit)
        for column in ("time", "kind", "region", "comm", "peer", "tag", "size"):
            assert np.array_equal(getattr(chunk[loc], column), getattr(ev, column)), column


@needs_print
@pytest.mark.parametrize("path", ["python", "native"])
@pytest.mark.parametrize("anchor", ARCHIVES + REFUSED, ids=lambda p: p.parent.name)
def test_written_back_the_same_definitions_and_records(tmp_path, anchor, path):
    if path == "native" and not native.available():
        pytest.skip("the OTF2 C path cannot be built")
    out = tmp_path / "o" / "traces.otf2"
    if path == "python":
        write_otf2(read_otf2(str(anchor)), str(out))
    else:
        write_native(anchor, out)
    assert records(out) == records(anchor)
    assert definitions(out) == definitions(anchor)


@needs_print
@pytest.mark.parametrize("anchor, mode", [(a, []) for a in ARCHIVES] +
                         [(DATA / "ring" / "eztrace_log.otf2", ["--in-memory"])],
                         ids=[a.parent.name for a in ARCHIVES] + ["ring-in-memory"])
def test_compensated_with_the_same_records_and_its_own_clock(tmp_path, anchor, mode):
    out, summary = tmp_path / "o" / "traces.otf2", tmp_path / "s.json"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet", "--summary",
                 str(summary), *mode]) == 0
    assert records(out) == records(anchor)
    assert definitions(out) == definitions(anchor)
    back = read_otf2(str(out))
    first = min(int(ev.time[0]) for ev in back.events.values())
    last = max(int(ev.time[-1]) for ev in back.events.values())
    assert clock(out) == (first, last - first)
    # the input's is longer (its overhead); where the processes' clocks were aligned,
    # the input with its clocks aligned (procnull-openmpi: its ranks started 35 ms
    # apart, beyond the span EZTrace's clock properties give)
    aligned = json.loads(summary.read_text()).get("clock_alignment", {}).get("aligned_span_s")
    limit = clock(anchor)[1] if aligned is None else aligned * back.definitions.timer_resolution
    assert clock(out)[1] < limit


RING = """#include <mpi.h>
int main(int argc, char **argv) {
    int rank, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 5; i++) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


@needs_print
@pytest.mark.skipif(EZTRACE is None or not os.access(MPICC, os.X_OK)
                    or not os.access(MPIRUN, os.X_OK),
                    reason="EZTrace with Debian's MPICH is not installed")
def test_a_ring_traced_here_by_eztrace_is_compensated(tmp_path):
    (tmp_path / "ring.c").write_text(RING)
    subprocess.run([MPICC, "-O2", "ring.c", "-o", "ring"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    subprocess.run([MPIRUN, "-n", "2", EZTRACE, "-t", "mpich", "./ring"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    anchor = tmp_path / "ring_trace" / "eztrace_log.otf2"
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet"]) == 0
    assert records(out) == records(anchor)
    assert sum(len(r) for r in records(out).values()) > 40


def test_hybrid_thread_teams_pair_per_rank_and_the_estimate_verifies(tmp_path):
    """MPI+OpenMP (hybrid/): EZTrace numbers each rank's thread teams 1, 2, ...
    in the id space of the MPI communicators (MPI_COMM_1 and team 1 share Comm
    1): the collectives use the MPI communicators, each rank's forks and joins
    pair with its own team's begins and ends, and ``--overhead estimate``
    verifies."""
    anchor = DATA / "hybrid" / "eztrace_log.otf2"
    trace = read_otf2(str(anchor))
    assert trace.definitions.comms[1].name == "MPI_COMM_1"
    assert trace.definitions.comms[1].members == (0, 1073741823)
    counts = match(trace).threads.counts()
    assert (counts["fork"], counts["join"], counts["unmatched"]) == (8, 8, 0)
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet"]) == 0


def test_nested_teams_pair_per_rank_with_a_team_never_defined(tmp_path):
    """nested/: EZTrace's openmp module numbers nested teams in one id space with
    the MPI communicators and leaves one undefined: every rank's outer and inner
    teams pair their forks and joins (3 iterations × 3 teams × 2 ranks), and the
    run is accepted and verifies on the whole trace and in small segments."""
    anchor = DATA / "nested" / "eztrace_log.otf2"
    assert 5 not in read_otf2(str(anchor)).definitions.comms
    counts = match(read_otf2(str(anchor))).threads.counts()
    assert (counts["fork"], counts["join"], counts["unmatched"]) == (18, 18, 0)
    for mode in ([], ["--segment-records", "16"]):
        out = tmp_path / f"o{len(mode)}" / "traces.otf2"
        assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet", *mode]) == 0
        assert records(out) == records(anchor)


def test_lone_collective_begins_let_the_stream_cut(tmp_path):
    """ibarrier/: every MPI_Ibarrier is a MpiCollectiveBegin with no End. The
    stream cutter counted it open for good and held the rest of the trace as one
    segment (at 64 records a segment: 2 segments, the largest 1,809 of 1,812); its
    look-ahead now closes such a Begin where it opens: many small segments, on
    ranks too, and the in-memory output."""
    from tests.parallel.test_command import _thread_command
    anchor = DATA / "ibarrier" / "eztrace_log.otf2"
    outs = {}
    for name, extra in (("whole", ["--in-memory"]), ("one", ["--segment-records", "64"]),
                        ("ranks", ["--segment-records", "64"])):
        out, summary = tmp_path / name / "traces.otf2", tmp_path / f"{name}.json"
        argv = [str(anchor), str(out), "--overhead", "10ns", "--quiet", "--summary",
                str(summary), *extra]
        if name == "ranks":
            assert _thread_command(tmp_path, argv, 2, streamed=True) == [0, 0]
        else:
            assert main(argv) == 0
        outs[name] = (records(out), json.loads(summary.read_text()).get("segments"))
    assert outs["one"][0] == outs["whole"][0] == outs["ranks"][0]
    for name in ("one", "ranks"):
        assert outs[name][1]["count"] > 20 and outs[name][1]["largest"] < 400, outs[name]


def test_calls_eztrace_records_nothing_of_are_counted_and_the_run_verifies(tmp_path):
    """comms/: EZTrace 2.0 writes no record inside MPI_Sendrecv, MPI_Scan and
    MPI_Comm_split, and only a Begin for MPI_Ibcast and MPI_Iallreduce: the run
    verifies what it models (the reversed-rank communicator's rooted collectives,
    the MPI_Ssend after MPI_Iprobe) and counts what it cannot."""
    anchor = DATA / "comms" / "eztrace_log.otf2"
    counts = match(read_otf2(str(anchor))).counts()
    assert counts["unrecorded_calls"] == {"MPI_Comm_split": 2, "MPI_Scan": 6,
                                          "MPI_Sendrecv": 6}
    assert counts["collective_begins_without_end"] == 12
    assert counts["messages"] == 3 and counts["synchronous"] == 3
    assert counts["collectives"] == {"1-to-n": 3, "n-to-1": 3, "n-to-n": 6}
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet"]) == 0


@pytest.mark.parametrize("fast", ["1", "0"])
def test_pthread_objects_are_read_on_both_paths_and_kept_in_a_text_copy(tmp_path, monkeypatch,
                                                                        fast):
    """sync/: each Pthread call's object address (the Enter's ``mutex``, ``lock`` or
    ``barrier`` attribute) is in the request column on both OTF2 paths, and a .trace
    copy (C or Python formatter and parser) keeps it as ``object=``."""
    from compensate.formats.text import read_text, write_text
    anchor = DATA / "sync" / "eztrace_log.otf2"
    whole = read_otf2(str(anchor))
    _, chunks = read_otf2_chunks(str(anchor), None, payload=False)
    native_cols = {loc: ev.request for chunk in chunks for loc, ev in chunk.items()}
    names = whole.definitions.regions
    for loc, ev in whole.events.items():
        assert np.array_equal(ev.request, native_cols[loc])
        enters = ev.kind == ENTER
        calls = enters & np.isin(ev.region, [r for r, n in names.items()
                                             if n.startswith("pthread_") and "create" not in
                                             n and "join" not in n])
        assert (ev.request[calls] > 0).all() and (ev.request[~calls] == -1).all()
    monkeypatch.setenv("COMPENSATE_NATIVE", fast)
    write_text(whole, str(tmp_path / "t.trace"))
    copy = read_text(str(tmp_path / "t.trace"))
    assert all(np.array_equal(whole.events[loc].request, copy.events[loc].request)
               for loc in whole.events)
    assert match(copy).threads.counts() == match(whole).threads.counts()


@pytest.mark.parametrize("mode", [[], ["--in-memory"], ["--segment-records", "100"]])
def test_mpi_io_with_posixio_reads_its_scopes_and_dangling_handles(tmp_path, mode):
    """mpiio/ (``-t "mpich posixio"``): the posixio module writes each process's
    I/O scope as Group and Comm 0 and 1 (one member), the ids of MPI_COMM_WORLD
    and MPI_COMM_1; its handles name files it never defines, and rank 1's records
    name handles only rank 1 knew (``otf2-print``: ``INVALID``). The MPI records
    keep the MPI communicators, the I/O records stay local, and every path
    verifies."""
    anchor = DATA / "mpiio" / "eztrace_log.otf2"
    trace = read_otf2(str(anchor))
    comms = trace.definitions.comms
    assert (comms[0].name, comms[0].members) == ("MPI_COMM_WORLD", (0, 1073741823))
    assert (comms[1].name, comms[1].members) == ("MPI_COMM_1", (0, 1073741823))
    assert match(trace).counts()["collectives"] == {"1-to-n": 3, "n-to-n": 6}
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet", *mode]) == 0
    if OTF2_PRINT:
        assert records(out) == records(anchor)
        assert definitions(out) == definitions(anchor)


def compensated_and_verified(tmp_path: Path, anchor: Path, mode: list[str]) -> None:
    """``anchor`` compensated (``--overhead estimate``, the path ``mode`` says) with
    0 violations, and written back with the same records and definitions."""
    out = tmp_path / "o" / "traces.otf2"
    summary = tmp_path / "s.json"
    assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet",
                 "--summary", str(summary), *mode]) == 0
    assert json.loads(summary.read_text())["verification"]["violations"] == 0
    if OTF2_PRINT:
        assert records(out) == records(anchor)
        assert definitions(out) == definitions(anchor)


@pytest.mark.parametrize("mode", [[], ["--in-memory"], ["--segment-records", "8"]])
@pytest.mark.parametrize("name", ["commthread", "commp2p"])
def test_a_rank_calling_mpi_from_one_other_thread_is_that_thread(tmp_path, name, mode):
    """commthread/, commp2p/: every MPI call from one Pthread per rank
    (MPI_THREAD_SERIALIZED; EZTrace's MPI_COMM_WORLD lists the main threads):
    the reader names the thread as the rank, on every path, so the thread's
    collectives and messages match; the definitions written back list the main
    threads, as the input does."""
    anchor = DATA / name / "eztrace_log.otf2"
    trace = read_trace(anchor)
    world = trace.definitions.comms[0]
    assert world.listed == (0, 1073741823) and world.written == world.listed
    assert world.members == (1, 1073741824)  # (each process's second thread)
    counts = match(trace).counts()
    expected = {"commthread": (0, {"1-to-n": 5, "n-to-n": 10}),
                "commp2p": (8, {"n-to-n": 4})}[name]
    assert (counts["messages"], counts["collectives"]) == expected
    defs, chunks = read_chunks(anchor, payload=False)
    chunks.close()
    assert defs.comms[0].members == world.members
    compensated_and_verified(tmp_path, anchor, mode)


@pytest.mark.parametrize("mode", [[], ["--in-memory"], ["--segment-records", "8"]])
@pytest.mark.parametrize("name", ["twothreads", "single"])
def test_a_ranks_collectives_from_two_threads_are_its_own(tmp_path, name, mode):
    """twothreads/: each rank's main thread calls MPI_Barrier, a Pthread then
    MPI_Allreduce and MPI_Bcast; single/: MPI_Allreduce in ``omp single``, rank 1's
    from both its threads (MPI_THREAD_SERIALIZED). A rank's collectives are its
    instances in the time order of its process's calls, on every path; the
    definitions stay as listed."""
    anchor = DATA / name / "eztrace_log.otf2"
    trace = read_trace(anchor)
    assert trace.definitions.comms[0].members == (0, 1073741823)
    m = match(trace)
    expected = {"twothreads": {"1-to-n": 3, "n-to-n": 5}, "single": {"n-to-n": 6}}[name]
    assert m.counts()["collectives"] == expected
    threads = {loc for inst in m.instances for loc in inst.locs} - {0, 1073741823}
    assert threads  # (some instance has a member on a thread the communicator does not list)
    for inst in m.instances:  # one member per process, the ranks in order
        assert [loc < 1073741823 for loc in inst.locs] == [True, False]
    compensated_and_verified(tmp_path, anchor, mode)


def test_mpi_from_several_threads_of_a_rank_is_refused_in_one_line(tmp_path, capsys):
    """mtmpi/ (MPI_THREAD_MULTIPLE): a receive names its sender's rank, whose
    location in MPI_COMM_WORLD (the main thread) holds no send: refused at the
    first, saying why."""
    out = tmp_path / "o" / "traces.otf2"
    capsys.readouterr()
    assert main([str(DATA / "refused" / "mtmpi" / "eztrace_log.otf2"), str(out), "--overhead",
                 "estimate", "--quiet"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and not out.exists()
    assert "has no matching send" in err and "which no MPI communicator has as a member: " \
        "messages sent or received on several threads of one rank" in err, err


def test_an_inter_communicator_written_as_an_intra_communicator_is_refused_in_one_line(
        tmp_path, capsys):
    """refused/intercomm/: EZTrace writes each side of an MPI_Intercomm_create
    communicator as an intra-communicator of its own group, so a receive's peer
    rank names a member of its own group (here itself): refused at the first such
    receive, saying so, with the same line in every way of running (the overhead
    estimated or given; small segments name the record in the whole trace)."""
    out = tmp_path / "o" / "traces.otf2"
    anchor = DATA / "refused" / "intercomm" / "eztrace_log.otf2"
    lines = set()
    for overhead in ("100ns", "estimate"):
        for extra in ([], ["--in-memory"], ["--segment-records", "16"]):
            capsys.readouterr()
            assert main([str(anchor), str(out), "--overhead", overhead, "--quiet",
                         *extra]) == 3
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and "Traceback" not in err and not out.exists()
            lines.add(err)
    assert len(lines) == 1, lines
    err = lines.pop()
    assert ": location 0, record 12: MpiRecv from location 0 (comm 5, tag 60) has no " \
        "matching send" in err
    assert "the program creates inter-communicators (MPI_Intercomm_create) and the " \
        "trace defines none" in err, err


def test_statuses_eztrace_writes_in_waitany_and_testsome_pair_with_no_send():
    """statuses/: the program passes statuses, and still every MpiIrecv EZTrace
    writes in MPI_Waitany (a persistent receive) and MPI_Testsome names no rank
    (sender 32,512-32,633) or rank 0, with an undefined length: all 13 are
    unidentified, none pairs with a send, and each of the 18 sends is unmatched."""
    anchor = DATA / "statuses" / "eztrace_log.otf2"
    trace = read_otf2(str(anchor))
    sizes = [int(ev.size[i]) for ev in trace.events.values()
             for i in np.flatnonzero(ev.kind == KIND_CODE["MpiIrecv"])]
    assert sizes == [NONE] * 13  # (2^64 - 32766: no length)
    counts = match(trace).counts()
    assert (counts["messages"], counts["unidentified_receives"]) == (0, 13)
    assert counts["unmatched_sends"] == 18


def test_completions_eztrace_does_not_record_leave_their_messages_local(tmp_path):
    """waits/: no MpiIrecv for a receive completed in MPI_Waitany, MPI_Testsome
    or MPI_Testany, nothing for MPI_Mprobe/MPI_Mrecv: their sends are unmatched
    (local); the MPI_Issend and the vector datatype's message pair with their
    MPI_Recv, with the datatype's size."""
    anchor = DATA / "waits" / "eztrace_log.otf2"
    trace = read_otf2(str(anchor))
    m = match(trace)
    counts = m.counts()
    assert (counts["messages"], counts["unmatched_sends"]) == (6, 78)
    assert counts["collective_begins_without_end"] == 12
    assert counts["unrecorded_calls"] == {"MPI_Comm_split": 2}
    assert sorted(msg.size for msg in m.messages) == [64] * 3 + [128] * 3
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "estimate", "--quiet"]) == 0
