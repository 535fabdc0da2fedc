"""The mpi4py tracer's further calls (issue #22: ``calibration/tracer/calls.py`` and
``calibration/tracer/requests.py``) on real MPI: one 2-rank run of
``examples/mpi/morecalls.py --every-call`` under ``mpiexec``, shared by the tests.

The records are checked against what the OTF2 / Score-P semantics demand (each
request completed exactly once, inside the call that completed it; tested and
left active: MpiRequestTest; a plain probe's MpiProbe where it found a message; the
collective operations and roots), and the archive compensates with every bound
without a violation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compensate as c
from compensate.formats.otf2 import read_otf2
from compensate.model import COLLECTIVE_OP_NAMES, COLLECTIVE_OPS, KIND_CODE, NONE, Trace
from tests.calibration.traced_runs import ROOT, assert_opens_in_otf2_print, compensate_summary
from tests.conftest import mpiexec
from tests.inprocess import run_compensate

EXAMPLE = ROOT / "examples" / "mpi" / "morecalls.py"
K = KIND_CODE
STARTS = (K["MpiIsend"], K["MpiIrecvRequest"], K["NonBlockingCollectiveRequest"],
          K["MpiImrecvRequest"])
ENDS = (K["MpiIsendComplete"], K["MpiIrecv"], K["NonBlockingCollectiveComplete"],
        K["MpiRequestCancelled"], K["MpiImrecv"])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(archive, stderr) of the traced run (200 calibration records per sample, as
    traced_runs.trace_example: the platform file only has to compensate)."""
    pytest.importorskip("mpi4py")
    out = tmp_path_factory.mktemp("calls") / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "200", "--", str(EXAMPLE), "--every-call", "--steps", "3"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "morecalls done" in proc.stdout
    return out, proc.stderr


@pytest.fixture(scope="module")
def trace(run: tuple[Path, str]) -> Trace:
    return read_otf2(str(run[0]))


def _calls(trace: Trace, loc: int) -> list[tuple[str, list[int]]]:
    """The MPI calls of a location in order: (region name, kinds of the records
    between its Enter and Leave)."""
    ev, names = trace.events[loc], trace.definitions.regions
    out, stack = [], []
    for i, k in enumerate(ev.kind.tolist()):
        if k == K["Enter"]:
            stack.append((names[int(ev.region[i])], i))
        elif k == K["Leave"]:
            name, start = stack.pop()
            if name.startswith("MPI_"):
                out.append((name, ev.kind[start + 1:i].tolist()))
    return out


def test_every_request_is_completed_once_inside_a_completion_call(trace: Trace) -> None:
    """Each request id a location starts (MpiIsend, MpiIrecvRequest,
    NonBlockingCollectiveRequest) has exactly one completion record, and it lies
    inside an MPI_Wait*/MPI_Test* call; MpiRequestTest only names started ids."""
    for loc, ev in trace.events.items():
        kinds, req = ev.kind, ev.request
        started = req[np.isin(kinds, STARTS)].tolist()
        ended = req[np.isin(kinds, ENDS)].tolist()
        assert sorted(started) == sorted(ended) and len(set(started)) == len(started), loc
        assert set(req[kinds == K["MpiRequestTest"]].tolist()) <= set(started)
        for name, inner in _calls(trace, loc):
            if any(k in ENDS for k in inner):
                assert name.startswith(("MPI_Wait", "MPI_Test")), name
    everything = np.concatenate([ev.kind for ev in trace.events.values()])
    assert np.count_nonzero(everything == K["MpiRequestCancelled"]) == 2  # Cancel and cancel
    assert np.count_nonzero(everything == K["NonBlockingCollectiveComplete"]) == 2 * 17


def test_array_completions_follow_score_p(trace: Trace) -> None:
    """Rank 1: Waitany completes one request (no MpiRequestTest for the one still
    active, as Score-P by default), Waitsome the ones it returns; a
    Testany/Testall/Testsome that completes nothing tests every request; the
    cancelled receive is MpiRequestCancelled."""
    calls = _calls(trace, 1)
    irecv, test = K["MpiIrecv"], K["MpiRequestTest"]
    waitany = [inner for name, inner in calls if name == "MPI_Waitany"]
    assert waitany[0] == [irecv] and waitany[1] == [irecv]  # no MpiRequestTest
    assert sum(inner.count(irecv) for name, inner in calls if name == "MPI_Waitsome") >= 2
    first = {}
    for name, inner in calls:
        first.setdefault(name, inner)
    assert first["MPI_Testany"] == [test]
    assert first["MPI_Testall"] == [test, test]  # Testall then testall on one request
    assert first["MPI_Testsome"] == [test, test]
    # Cancel() and the lower-case cancel() of an irecv, each waited for
    assert [inner for name, inner in calls if name == "MPI_Wait"].count(
        [K["MpiRequestCancelled"]]) == 2
    assert [c for c in calls if c[0] == "MPI_Cancel"] == [("MPI_Cancel", [])] * 2
    # rank 0's Waitany over two sends: one completion each, then nothing to wait for
    sends = [inner for name, inner in _calls(trace, 0) if name == "MPI_Waitany"]
    assert sends[:3] == [[K["MpiIsendComplete"]], [K["MpiIsendComplete"]], []]


def test_sends_probes_and_persistent_requests(trace: Trace) -> None:
    calls0, calls1 = _calls(trace, 0), _calls(trace, 1)
    send, isend = [K["MpiSend"]], [K["MpiIsend"]]
    assert {("MPI_Bsend", tuple(send)), ("MPI_Rsend", tuple(send)), ("MPI_Ibsend", tuple(isend)),
            ("MPI_Irsend", tuple(isend))} <= {(n, tuple(i)) for n, i in calls0}
    for calls in (calls0, calls1):
        assert ("MPI_Sendrecv_replace", [K["MpiSend"], K["MpiRecv"]]) in calls
    names1 = [n for n, _ in calls1]
    assert names1.count("MPI_Probe") == 2 and names1.count("MPI_Iprobe") >= 2
    # plain probes: MpiProbe (message id undefined) where the probe found a message:
    # every MPI_Probe, and the last MPI_Iprobe of each polling loop (flag true)
    probe = [K["MpiProbe"]]
    assert [i for n, i in calls1 if n == "MPI_Probe"] == [probe] * 2
    polled = [i for n, i in calls1 if n == "MPI_Iprobe"]
    assert polled.count(probe) == 2 and polled.count([]) == len(polled) - 2
    assert polled[-1] == probe
    ev = trace.events[1]
    plain = (ev.kind == K["MpiProbe"]) & (ev.size_recv == NONE)
    assert np.count_nonzero(plain) == 4 and set(ev.tag[plain].tolist()) == {8, 9, 10, 11}
    # matched probes: MpiProbe in the probe that took the message, then its receive
    taken = [(n, i) for n, i in calls1 if n in ("MPI_Mprobe", "MPI_Improbe") and i]
    assert taken == [("MPI_Mprobe", probe)] * 2 + [("MPI_Improbe", probe)] * 2 + [
        ("MPI_Mprobe", probe)]  # the last one by MPI.Message.probe(comm, ...)
    assert [i for n, i in calls1 if n == "MPI_Mrecv"] == [[K["MpiMrecv"]]] * 3
    assert [i for n, i in calls1 if n == "MPI_Imrecv"] == [[K["MpiImrecvRequest"]]] * 2
    ev = trace.events[1]
    probed = ev.size_recv[(ev.kind == K["MpiProbe"]) & ~plain].tolist()  # message ids
    assert sorted(probed) == sorted(ev.size_recv[np.isin(
        ev.kind, (K["MpiMrecv"], K["MpiImrecvRequest"]))].tolist())
    # persistent: two Starts and one Startall, each starting the request afresh
    assert [i for n, i in calls0 if n in ("MPI_Start", "MPI_Startall")] == [isend] * 3
    assert [i for n, i in calls1 if n in ("MPI_Start", "MPI_Startall")] == \
        [[K["MpiIrecvRequest"]]] * 3
    assert ("MPI_Send_init", []) in calls0 and ("MPI_Request_free", []) in calls1


def test_collectives_carry_their_operation_root_and_bytes(trace: Trace) -> None:
    """The blocking ones end with MpiCollectiveEnd, the nonblocking ones with
    NonBlockingCollectiveComplete, with OTF2's operation codes; the bytes by hand
    (counts [1, 2] doubles): Gatherv's root receives rank 1's 16 bytes, which rank 1
    sends, and keeps its own share out of the count."""
    end, nbc = K["MpiCollectiveEnd"], K["NonBlockingCollectiveComplete"]
    vops = {"SCAN", "EXSCAN", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "GATHERV",
            "SCATTERV", "ALLGATHERV", "ALLTOALLV", "ALLTOALLW"}
    for ev in trace.events.values():
        ops = {COLLECTIVE_OP_NAMES[int(o)] for o in ev.op[ev.kind == end]}
        assert vops <= ops
        nb = [COLLECTIVE_OP_NAMES[int(o)] for o in ev.op[ev.kind == nbc]]
        assert sorted(nb) == sorted(vops | {"BARRIER", "BCAST", "GATHER", "SCATTER",
                                            "ALLGATHER", "ALLTOALL", "REDUCE", "ALLREDUCE"})

    def first(op: str) -> list[tuple[int, int, int, int]]:
        """(location, root, bytes sent, bytes received) of the first ``op``."""
        rows = []
        for loc, ev in trace.events.items():
            i = int(np.flatnonzero((ev.kind == end) & (ev.op == COLLECTIVE_OPS[op]))[0])
            rows.append((loc, int(ev.peer[i]), int(ev.size[i]), int(ev.size_recv[i])))
        return rows

    assert first("GATHERV") == [(0, 0, 0, 16), (1, 0, 16, 0)]
    assert first("SCATTERV") == [(0, 0, 16, 0), (1, 0, 0, 16)]
    # 3 doubles reduced, rank r keeps counts[r] = r + 1 of them
    assert first("REDUCE_SCATTER") == [(0, -1, 24, 8), (1, -1, 24, 16)]
    assert first("ALLTOALLW") == [(0, -1, 16, 16), (1, -1, 16, 16)]


def test_untraced_call_warns_once_per_job(run: tuple[Path, str]) -> None:
    """Barrier_init (called twice on each of two ranks) is named once on stderr."""
    assert run[1].count("is not traced") == 1
    assert run[1].count("MPI.Comm.Barrier_init is not traced") == 1


@pytest.mark.parametrize("bound", ["lower", "upper", "fitted", "none"])
def test_traced_run_compensates_without_violations(run: tuple[Path, str],
                                                   bound: str) -> None:
    archive = run[0]
    out = archive.parent.parent / bound / "traces.otf2"
    summary = archive.parent.parent / f"{bound}.json"
    proc = run_compensate(archive, out, "--platform", archive.parent / "platform.json",
                          "--bound", bound, "--summary", summary, "--quiet", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(summary.read_text())
    assert s["verification"]["ok"] and s["verification"]["violations"] == 0
    assert s["unmatched_sends"] == 0 and s["unknown_collective_ops"] == 0
    assert s["collective_instances"] >= 11 + 17  # the new blocking ones, every NBC


def test_archive_opens_in_otf2_print(run: tuple[Path, str]) -> None:
    assert_opens_in_otf2_print(run[0])


# ---------------------------------------------------------------------------------
# examples/mpi/topologies.py: topologies, an intercommunicator, failing calls

TOPOLOGIES = ROOT / "examples" / "mpi" / "topologies.py"


@pytest.fixture(scope="module")
def topo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(archive, stderr) of the traced 2-rank run of ``topologies.py``."""
    pytest.importorskip("mpi4py")
    out = tmp_path_factory.mktemp("topologies") / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "200", "--", str(TOPOLOGIES)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("topologies done") == 2
    return out, proc.stderr


def _messages(trace: Trace, kind: str) -> list[tuple[int, int, int, int, int]]:
    """(location, peer, communicator, tag, bytes) of every record of ``kind``."""
    rows = []
    for loc, ev in trace.events.items():
        for i in np.flatnonzero(ev.kind == K[kind]).tolist():
            rows.append((loc, int(ev.peer[i]), int(ev.comm[i]), int(ev.tag[i]),
                         int(ev.size[i])))
    return rows


def test_topology_communicators_are_traced_and_compensate_matches_them(
        topo_run: tuple[Path, str]) -> None:
    """Sendrecv on the Cartesian ring (3), its Sub (1), the graph (1), the adjacent
    distributed graph (1) and the merged intercommunicator (1) are MpiSend/MpiRecv
    on communicators of their own, as on COMM_WORLD; the Cartesian Allreduce and
    the distributed graph's Barrier are collectives; compensate matches every
    message (the untraced one on the intercommunicator is nowhere)."""
    trace = read_otf2(str(topo_run[0]))
    sends, recvs = _messages(trace, "MpiSend"), _messages(trace, "MpiRecv")
    per_comm: dict[int, int] = {}
    for _, _, comm, tag, _ in sends:
        if tag in (0, 9):
            per_comm[comm] = per_comm.get(comm, 0) + 1
    assert sorted(per_comm.values()) == [2, 2, 2, 2, 6]  # both ranks: merged, ..., cart
    assert 0 not in per_comm  # none of them on COMM_WORLD
    assert not [s for s in sends if s[3] == 8] and not [r for r in recvs if r[3] == 8]
    summary = compensate_summary(topo_run[0])
    assert summary["messages_matched"] == len(sends) == len(recvs) == 16
    assert summary["unmatched_sends"] == 0 and summary["verification"]["ok"]
    assert summary["collective_instances"] == 4  # Allreduce, Barrier, 2 on the world
    assert_opens_in_otf2_print(topo_run[0])


def test_failed_calls_leave_no_communication_records(topo_run: tuple[Path, str]) -> None:
    """A send to rank 2 (send, Isend), an Irecv from it, a Send with an unknown
    typecode and a Bcast from root 2 raise and are caught: their MPI regions stay
    (Enter/Leave), their MpiSend/MpiIsend/MpiIrecvRequest/MpiCollectiveBegin are
    gone, so rank 1's one receive of tag 1 has one send, not two."""
    trace = read_otf2(str(topo_run[0]))
    sends = _messages(trace, "MpiSend") + _messages(trace, "MpiIsend")
    assert all(peer in (0, 1) for _, peer, _, _, _ in sends)
    assert [s for s in sends if s[3] == 3] == []
    assert len([s for s in sends if s[3] == 1]) == 1
    for loc, ev in trace.events.items():
        assert np.count_nonzero(ev.kind == K["MpiIrecvRequest"]) == 0, loc
        assert (np.count_nonzero(ev.kind == K["MpiCollectiveBegin"])
                == np.count_nonzero(ev.kind == K["MpiCollectiveEnd"]) == 4), loc
        calls = _calls(trace, loc)
        assert [n for n, _ in calls].count("MPI_Bcast") == 2
        assert ("MPI_Send", []) in calls and ("MPI_Isend", []) in calls
        assert ("MPI_Irecv", []) in calls
    assert ("MPI_Send", [K["MpiSend"]]) in _calls(trace, 0)


def test_typecode_spec_records_the_bytes_sent(topo_run: tuple[Path, str]) -> None:
    """``Send([a, 4, 'i'])`` of an 8-int buffer: 16 bytes, as the receive says."""
    trace = read_otf2(str(topo_run[0]))
    assert [s[4] for s in _messages(trace, "MpiSend") if s[3] == 2] == [16]
    assert [r[4] for r in _messages(trace, "MpiRecv") if r[3] == 2] == [16]


def test_untraced_topology_and_intercommunicator_calls_say_what_is_missing(
        topo_run: tuple[Path, str]) -> None:
    """One line per job for the neighbour collective (its communication is
    missing) and for Create_intercomm (all communication on the intercommunicator
    is); none for Free or the topology constructors."""
    lines = topo_run[1].splitlines()
    warned = [ln for ln in lines if ln.startswith("calibration.record: MPI.")]
    assert warned.count("calibration.record: MPI.Cartcomm.Neighbor_allgather is not traced: "
                        "its communication is missing from the trace and its time counts "
                        "as the program's") == 1
    assert warned.count("calibration.record: MPI.Comm.Create_intercomm returns an "
                        "intercommunicator that is not traced: all communication on it "
                        "is missing from the trace") == 1
    assert len(warned) == 2
    assert "Free" not in topo_run[1] and "Create_cart" not in topo_run[1]


UNBOUND = """
from mpi4py import MPI
from mpi4py.futures import MPICommExecutor
import numpy as np
import sys


def square(x):
    return x * x


comm = MPI.COMM_WORLD
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_WRONLY)
req = fh.Iwrite_at(comm.rank * 8, np.array([comm.rank], dtype="d"))
MPI.Request.Wait(req)  # a request the tracer did not make, through the class
fh.Close()
with MPICommExecutor(comm, root=0) as pool:  # keeps MPI.Request.test unbound
    if pool is not None:
        print("squares", sum(pool.map(square, range(20))))
print("done", comm.rank)
"""


def test_class_methods_of_requests_the_tracer_did_not_make(tmp_path: Path) -> None:
    """``MPI.Request`` is the traced class while tracing; ``MPI.Request.Wait(req)``
    on an MPI-IO request, and ``mpi4py.futures`` (which keeps ``MPI.Request.test``
    and tests an untraced intercommunicator's requests with it), raised
    AttributeError ('no attribute _wait'/'_test'): they run as untraced, recorded
    as MPI time without completion records."""
    script = tmp_path / "unbound.py"
    script.write_text(UNBOUND)
    out = tmp_path / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "0", "--", str(script), str(tmp_path / "io.bin")],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "squares 2470" in proc.stdout and proc.stdout.count("done") == 2
    trace = read_otf2(str(out))
    regions = trace.definitions.regions
    entered = [regions[int(r)] for ev in trace.events.values()
               for r in ev.region[ev.kind == KIND_CODE["Enter"]]]
    assert entered.count("MPI_Wait") >= 2
    done = run_compensate(out, tmp_path / "out" / "traces.otf2", "--quiet", cwd=ROOT)
    assert done.returncode == 0, done.stderr



def _traced_2(script: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """``script`` traced on 2 ranks (no calibration) into run/traces.otf2 beside it;
    the run must succeed."""
    out = script.parent / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "0", "--", str(script)], capture_output=True, text=True,
        timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc, out

def _traced_source(tmp_path: Path, source: str) -> tuple[subprocess.CompletedProcess, Path]:
    """:func:`_traced_2` of a program with this ``source`` (tmp_path/prog.py)."""
    script = tmp_path / "prog.py"
    script.write_text(source)
    return _traced_2(script)


FILE_AND_RMA = """
import sys
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r = comm.Get_rank()
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at_all(r * 16, np.full(4, r, 'i'))
out = np.empty(4, 'i')
fh.Read_at_all(r * 16, out)
fh.Close()
mem = np.zeros(8)
win = MPI.Win.Create(mem, 8, comm=comm)
win.Lock_all()
win.Rput(np.full(4, float(r)), 1 - r).Wait()
win.Flush_all()
win.Unlock_all()
win.Free()
lines = comm.gather((r, isinstance(fh, MPI.File), out.tolist(), mem[:4].tolist()), root=0)
if r == 0:
    print(lines)
"""


def test_mpi_io_and_request_rma_say_they_are_not_traced(tmp_path: Path) -> None:
    """MPI-IO and the request-based RMA calls are not traced: each says so once per
    rank, and the program runs as untraced (the file is an ``MPI.File``)."""
    script = tmp_path / "prog.py"
    script.write_text(FILE_AND_RMA)
    cmd = [sys.executable, str(script), str(tmp_path / "data.bin")]
    untraced = subprocess.run([mpiexec(), "-n", "2", *cmd], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
    traced = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-m", "calibration.record", "-o",
         str(tmp_path / "run" / "traces.otf2"), "--calibration-records", "0", "--",
         *cmd[1:]], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert untraced.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == untraced.stdout == (
        "[(0, True, [0, 0, 0, 0], [1.0, 1.0, 1.0, 1.0]), "
        "(1, True, [1, 1, 1, 1], [0.0, 0.0, 0.0, 0.0])]\n")
    assert traced.stderr.count("calibration.record: MPI.File.Open (MPI-IO) is not traced: "
                               "the time of the file's calls counts as the program's") == 1
    assert traced.stderr.count("calibration.record: MPI.Win.Rput is not traced") == 1


def test_comm_self_is_traced(tmp_path: Path) -> None:
    """Messages on ``MPI.COMM_SELF`` are recorded (on a communicator of one rank
    each) and match: compensate pairs both, as untraced they were exchanged."""
    script = tmp_path / "prog.py"
    script.write_text("from mpi4py import MPI\n"
                      "q = MPI.COMM_SELF.isend('me', 0, 1)\n"
                      "print(MPI.COMM_SELF.recv(source=0, tag=1))\n"
                      "q.wait()\n")
    proc, out = _traced_2(script)
    assert proc.stdout.count("me") == 2
    trace = read_otf2(str(out))
    sends, recvs = _messages(trace, "MpiIsend"), _messages(trace, "MpiRecv")
    assert sorted((s[0], s[1], s[3]) for s in sends) == [(0, 0, 1), (1, 0, 1)]
    assert sorted((r[0], r[1], r[3]) for r in recvs) == [(0, 0, 1), (1, 0, 1)]
    assert len({s[2] for s in sends}) == 2 and 0 not in {s[2] for s in sends}  # own comms
    result = c.compensate(trace)
    assert result.summary["messages_matched"] == 2


IN_PLACE_ROOT = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
whole = np.zeros(4 * n)
if r == 0:
    comm.Gather(MPI.IN_PLACE, whole, root=0)
    comm.Scatter(whole, MPI.IN_PLACE, root=0)
else:
    comm.Gather(np.zeros(4), None, root=0)
    comm.Scatter(None, np.zeros(4), root=0)
"""


def test_in_place_gather_and_scatter_count_the_roots_bytes(tmp_path: Path) -> None:
    """Gather with ``IN_PLACE`` as the root's send buffer and Scatter with it as
    the root's receive buffer: the root receives (sends) the others' shares, 32
    bytes each here, as without ``IN_PLACE``."""
    proc, out = _traced_source(tmp_path, IN_PLACE_ROOT)
    trace = read_otf2(str(out))
    ends = {loc: [(int(ev.size[i]), int(ev.size_recv[i]))
                  for i in np.flatnonzero(ev.kind == K["MpiCollectiveEnd"])]
            for loc, ev in trace.events.items()}
    assert ends[0] == [(0, 32), (32, 0)]  # root: Gather receives, Scatter sends
    assert ends[1] == [(32, 0), (0, 32)]


PKL5 = """
import numpy as np
from mpi4py import MPI
from mpi4py.util import pkl5
world = MPI.COMM_WORLD
comm = pkl5.Intracomm(world)
r = comm.Get_rank()
if r == 0:
    comm.send(np.arange(1_000_000, dtype=np.float64), dest=1, tag=7)
    world.send("plain", dest=1, tag=8)
else:
    got = comm.recv(source=0, tag=7)
    print(got.sum(), world.recv(source=0, tag=8), isinstance(comm, MPI.Intracomm))
"""


def test_pkl5_messages_are_traced_on_the_communicator_they_use(tmp_path: Path) -> None:
    """``mpi4py.util.pkl5`` sends with unbound base-class calls: they are traced
    (header, pickle and out-of-band buffer messages), on the id of the
    communicator pkl5 wraps, and compensate matches every one."""
    proc, out = _traced_source(tmp_path, PKL5)
    assert proc.stdout == "499999500000.0 plain True\n"
    trace = read_otf2(str(out))
    sends = _messages(trace, "MpiSend")
    assert [s[3] for s in sends] == [7, 7, 7, 8]  # pkl5: header, pickle, buffer
    assert {s[2] for s in sends} == {0}  # all on MPI_COMM_WORLD's id
    assert sends[2][4] == 8_000_000
    assert c.compensate(trace).summary["messages_matched"] == 4


IDUP = """
import numpy as np
from mpi4py import MPI
world = MPI.COMM_WORLD
r = world.Get_rank()
new, req = world.Idup()
kinds = [isinstance(req, MPI.Request)]
req.Wait()
x = new.allreduce(r)
new.Free()  # the next Idup may reuse the handle: still a communicator of its own
again, req = world.Idup_with_info(MPI.INFO_NULL)
MPI.Request.Waitall([req])
a = np.arange(3.0) * (r == 0)
if r == 0:
    again.Send(a, 1, tag=4)
else:
    again.Recv(a, 0, tag=4)
y = again.allreduce(1)
lines = world.gather((r, x, float(a.sum()), y, kinds), root=0)
if r == 0:
    print(lines)
"""


def test_idup_communicators_are_traced_as_dup_ones(tmp_path: Path) -> None:
    """``Idup``/``Idup_with_info`` are traced as ``Dup``: no warning that anything
    is missing, the communicators' collectives and messages are recorded, each
    on a communicator of its own (the second has one even if MPI reused the
    handle of the first, freed), the request is an ``MPI.Request``, and compensate
    matches everything."""
    proc, out = _traced_source(tmp_path, IDUP)
    assert proc.stdout == "[(0, 1, 3.0, 2, [True]), (1, 1, 3.0, 2, [True])]\n"
    assert "not traced" not in proc.stderr, proc.stderr
    trace = read_otf2(str(out))
    ends = [(loc, int(ev.comm[i]), COLLECTIVE_OP_NAMES[int(ev.op[i])])
            for loc, ev in trace.events.items()
            for i in np.flatnonzero(ev.kind == K["MpiCollectiveEnd"]).tolist()
            if ev.comm[i] != 0]  # (not the world's gather)
    comms = sorted({comm for _, comm, _ in ends})
    assert len(comms) == 2 and 0 not in comms, ends
    assert sorted(ends) == [(0, comms[0], "ALLREDUCE"), (0, comms[1], "ALLREDUCE"),
                            (1, comms[0], "ALLREDUCE"), (1, comms[1], "ALLREDUCE")]
    assert [s[2:] for s in _messages(trace, "MpiSend")] == [(comms[1], 4, 24)]
    summary = c.compensate(trace).summary
    assert summary["messages_matched"] == 1 and summary["collective_instances"] == 3


SESSION = """
import numpy as np
from mpi4py import MPI
world = MPI.COMM_WORLD
r = world.Get_rank()
session = MPI.Session.Init()
group = session.Create_group("mpi://WORLD")
comm = MPI.Intracomm.Create_from_group(group, "compensate.test")
x = comm.allreduce(r + 1)
a, b = np.array([r], 'i'), np.zeros(1, 'i')
comm.Sendrecv(a, 1 - r, sendtag=5, recvbuf=b, source=1 - r, recvtag=5)
wgroup = world.Get_group()
other = world.Create_from_group(wgroup, "compensate.test2")
y = other.allreduce(1)
copy = MPI.Comm.f2py(world.py2f())
copy.Sendrecv(a, 1 - r, sendtag=6, recvbuf=b, source=1 - r, recvtag=6)
z = MPI.Comm.fromhandle(world.handle).allreduce(2)
lines = world.gather((r, x, int(b[0]), y, z, isinstance(comm, MPI.Intracomm),
                      isinstance(copy, MPI.Comm)), root=0)
if r == 0:
    print(lines)
for c in (comm, other):
    c.Free()
wgroup.Free()
group.Free()
session.Finalize()
"""


def test_create_from_group_session_and_handle_communicators_are_traced(
        tmp_path: Path) -> None:
    """``MPI.Intracomm.Create_from_group`` (MPI-4, how ``MPI.Session`` programs get
    a communicator; also called on COMM_WORLD) makes communicators traced as
    Create's, each with an id of its own; ``MPI.Comm.f2py`` and
    ``MPI.Comm.fromhandle`` give COMM_WORLD again, traced on its id; compensate
    matches everything."""
    proc, out = _traced_source(tmp_path, SESSION)
    assert proc.stdout == "[(0, 3, 1, 2, 4, True, True), (1, 3, 0, 2, 4, True, True)]\n"
    assert "not traced" not in proc.stderr, proc.stderr
    trace = read_otf2(str(out))
    by_tag = {tag: comm for _, _, comm, tag, _ in _messages(trace, "MpiSend")}
    assert len(_messages(trace, "MpiSend")) == len(_messages(trace, "MpiRecv")) == 4
    assert by_tag[6] == 0 and by_tag[5] != 0  # f2py: the world; the session's own
    colls = [sorted(int(ev.comm[i]) for i in np.flatnonzero(ev.kind == K["MpiCollectiveEnd"]))
             for ev in trace.events.values()]
    assert colls[0] == colls[1] and len(set(colls[0])) == 3 and 0 in colls[0]
    assert by_tag[5] in colls[0]
    summary = c.compensate(trace).summary
    assert summary["messages_matched"] == 4 and summary["collective_instances"] == 4


PICKLED = """
import pickle
from mpi4py import MPI
world = pickle.loads(pickle.dumps(MPI.COMM_WORLD))
me = pickle.loads(pickle.dumps(MPI.COMM_SELF))
ok = (world is MPI.COMM_WORLD, me is MPI.COMM_SELF, world.allreduce(1))
every = world.gather(ok)
print(every if world.Get_rank() == 0 else "", end="")
"""


def test_predefined_communicators_pickle_by_name(tmp_path: Path) -> None:
    """``pickle.dumps(MPI.COMM_WORLD)`` works under the tracer as untraced (mpi4py
    pickles a predefined communicator by name; the traced one failed to) and gives
    the traced object back, whose collectives are recorded."""
    proc, out = _traced_source(tmp_path, PICKLED)
    assert proc.stdout == "[(True, True, 2), (True, True, 2)]"
    ends = [ev for ev in read_otf2(str(out)).events.values()
            if np.any(ev.kind == K["MpiCollectiveEnd"])]
    assert len(ends) == 2


POLLED = """
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r = comm.Get_rank()
if r == 0:
    comm.Send(np.ones(4), dest=1, tag=3)
    comm.send("x", dest=1, tag=4)
else:
    buf = np.zeros(4)
    req = comm.Irecv(buf, source=0, tag=3)
    while not req.Get_status():
        pass
    req.Wait()
    req = comm.irecv(source=0, tag=4)
    while not req.get_status():
        pass
    print(buf.sum(), req.wait())
"""


def test_polling_with_get_status_is_mpi_time(tmp_path: Path) -> None:
    """``Request.Get_status``/``get_status`` (a non-destructive test) are recorded as
    MPI_Request_get_status with nothing inside, as Score-P; the requests complete
    in the Wait that follows, and compensate matches both messages."""
    proc, out = _traced_source(tmp_path, POLLED)
    assert proc.stdout == "4.0 x\n"
    trace = read_otf2(str(out))
    polls = [inner for name, inner in _calls(trace, 1) if name == "MPI_Request_get_status"]
    assert len(polls) >= 2 and not any(polls)
    waits = [inner for name, inner in _calls(trace, 1) if name == "MPI_Wait"]
    assert waits == [[K["MpiIrecv"]]] * 2
    assert c.compensate(trace).summary["messages_matched"] == 2
