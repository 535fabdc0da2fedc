"""How ranks talk: the collective and point-to-point operations the distributed run needs.

:class:`Transport` is the interface (rank, size, ``alltoall``, ``allgather`` of
Python objects; ``alltoall_array``, ``alltoallv_array`` of int64 buffers; the
forward replay's point-to-point messages ``isend_array``, ``poll_arrays``,
``wait_message``, ``wait_sends`` and its nonblocking sum ``iallreduce_sum``);
:class:`MpiTransport` implements it over mpi4py's ``COMM_WORLD`` (the ``[mpi]``
extra: the MPICH wheel, no system MPI). The test suite's ranks are threads of one
process (``ThreadTransport`` in tests/threadranks.py), so that it checks the
distributed run without ``mpiexec``; an implementation counts its calls in
``traffic`` with the base class's ``count_*`` methods.

Two kinds of call. The object calls (``alltoall``, ``allgather``) take Python
objects, which mpi4py pickles (protocol 5): used once per phase (ghost columns,
statuses, the summary's counts). The buffer calls take numpy int64 arrays and go
through mpi4py's buffer API (``Alltoall``, ``Alltoallv``), nothing pickled: the
forward replay's setup step (:mod:`compensate.parallel.exchange`), where pickling
would cost more than the data.

The point-to-point calls: the forward replay
(:mod:`compensate.parallel.exchange`) sends each batch of values to the rank that
asked for them as one nonblocking message of an int64 buffer (``Isend``, its
request kept until completed), and a blocked rank takes whatever arrived from any
rank (``Iprobe`` / ``Recv`` from ``MPI_ANY_SOURCE``); whether every rank is done,
blocked for good (a dependency cycle) or failed is decided by *waves*, nonblocking
sums of a few counters (``Iallreduce``) that a rank joins only when it has nothing
to compute, so no rank waits in a collective step while it could work.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import numpy as np


def payload_bytes(obj: Any) -> int:
    """The bytes of ``obj``'s data as the distributed run sends it: numpy arrays'
    ``nbytes``, strings' and bytes' length, 8 per number, containers summed (the
    pickle framing not counted). Cheap next to the pickling itself."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(payload_bytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(payload_bytes(k) + payload_bytes(v) for k, v in obj.items())
    if isinstance(obj, (str, bytes)):
        return len(obj)
    if isinstance(obj, (int, float, np.generic)):
        return 8
    return 0


class Traffic:
    """What one rank's calls cost (docs/parallel.md, the summary's ``parallel``):
    of its collective calls how many, the bytes of data it sent to the other ranks
    (:func:`payload_bytes`: an ``alltoall``'s items for the others, an
    ``allgather``'s item once per other rank) and the seconds spent inside them
    (transfer and waiting for the slowest rank); of its point-to-point messages how
    many and their bytes; the waves it joined (their time is spent waiting for
    messages, not counted)."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes_sent = 0
        self.seconds = 0.0
        #: point-to-point messages this rank sent and their bytes (the replay's values)
        self.messages = 0
        self.message_bytes = 0
        #: of them, those the engine's C loop sent itself (:meth:`Transport.wire_path`)
        self.wire_messages = 0
        #: nonblocking sums (the replay's waves) this rank joined
        self.waves = 0
        #: times the replay waited for values (nothing runnable, nothing arrived) and
        #: the seconds of those waits
        self.waits = 0
        self.wait_seconds = 0.0

    def snapshot(self) -> tuple[int, int, float, int, int, int]:
        return (self.calls, self.bytes_sent, self.seconds, self.messages,
                self.message_bytes, self.waves)


class Wave:
    """A nonblocking sum in flight (:meth:`Transport.iallreduce_sum`): ``test()``
    is True once it completed, then ``result`` holds the sum (int64, by position)."""

    result: np.ndarray | None = None

    def test(self) -> bool:
        raise NotImplementedError

    def wait(self) -> np.ndarray:
        raise NotImplementedError




class RankStalled(Exception):
    """No progress for ``seconds`` in ``what``: ``ranks`` did not answer (stopped,
    e.g. by SIGSTOP, or hung). Not agreed between ranks (the silent ones cannot take
    part): the command ends the job (:mod:`compensate.parallel.command`)."""

    def __init__(self, ranks: list[int], seconds: float, what: str) -> None:
        self.ranks, self.seconds, self.what = list(ranks), seconds, what
        names = ", ".join(str(r) for r in self.ranks) or "unknown"
        super().__init__(
            f"rank(s) {names} did not answer for {seconds:g} s ({what}): stopped or hung; "
            f"ending the job, nothing written (--rank-timeout SECONDS, 0: wait forever)")


class Transport:
    """``rank`` of ``size`` ranks; every operation but the point-to-point ones
    (``isend_array``, ``poll_arrays``, ``wait_message``, ``wait_sends``) is
    collective (all ranks call it in the same order; ``iallreduce_sum`` too).

    ``timeout`` (seconds, None: forever): a wait that sees no progress for that
    long raises :class:`RankStalled` naming the ranks that do not answer
    (:meth:`silent_ranks`)."""

    rank: int = 0
    size: int = 1
    timeout: float | None = None
    #: this rank's collective calls so far (set by the implementations)
    traffic: Traffic

    def silent_ranks(self) -> list[int]:
        """The other ranks that do not answer now (default: all of them)."""
        return [r for r in range(self.size) if r != self.rank]

    def stalled(self, what: str) -> RankStalled:
        """The error of a wait that saw no progress for ``timeout`` seconds."""
        return RankStalled(self.silent_ranks(), float(self.timeout or 0.0), what)

    def alltoall(self, items: list[Any]) -> list[Any]:
        """Send ``items[r]`` to rank ``r``; return what each rank sent to this one."""
        raise NotImplementedError

    def allgather(self, item: Any) -> list[Any]:
        """Every rank's ``item``, by rank."""
        raise NotImplementedError

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        """``send`` int64 of shape (size, k): row ``r`` goes to rank ``r``. Returns
        the (size, k) rows the ranks sent to this one, by rank (every rank the same
        ``k``)."""
        raise NotImplementedError

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        """``send`` 1-D int64, the blocks for rank 0, 1, ... one after the other,
        ``counts[r]`` items for rank ``r``; returns the blocks from each rank, by
        rank, concatenated (``recv_counts[r]`` items from rank ``r``: the counts the
        ranks sent beforehand, e.g. with :meth:`alltoall_array`)."""
        raise NotImplementedError

    def isend_array(self, dest: int, buf: np.ndarray) -> Any:
        """Send the int64 buffer ``buf`` to rank ``dest`` without waiting; returns a
        request for :meth:`wait_sends` (``buf`` must not change until then).
        Messages from one rank to another arrive in the order sent."""
        raise NotImplementedError

    def poll_arrays(self) -> list[tuple[int, np.ndarray]]:
        """The messages that have arrived, (source rank, int64 buffer), without
        waiting (none: an empty list)."""
        raise NotImplementedError

    def wait_message(self, wave: Wave | None,
                     timeout: float | None = None) -> tuple[int, np.ndarray] | None:
        """Wait until a message arrives (returned as in :meth:`poll_arrays`), ``wave``
        completes or ``timeout`` seconds have passed (None)."""
        raise NotImplementedError

    def wait_sends(self, requests: list[Any]) -> None:
        """Wait until the sends of :meth:`isend_array` have completed."""
        raise NotImplementedError

    def recv_array(self, source: int) -> np.ndarray:
        """Wait for the next message from ``source`` and return it."""
        raise NotImplementedError

    def iallreduce_sum(self, values: np.ndarray) -> Wave:
        """Start the sum over all ranks of the int64 vector ``values`` (every rank
        the same length); collective, but nonblocking."""
        raise NotImplementedError

    def wire_path(self) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]] | None:
        """Where the engine's C loop may send and take the replay's messages itself
        (:class:`compensate.engine.exchange.Wire`): the addresses of the MPI
        library's ``MPI_Isend``, ``MPI_Iprobe``, ``MPI_Recv``, ``MPI_Get_count`` and
        the handles (communicator, int64 datatype, the replay's tag,
        ``MPI_ANY_SOURCE``); None where the messages go through this object (the
        default)."""
        return None

    def requests_of(self, handles: list[int]) -> list[Any]:
        """The requests of sends the C loop made (their handles), for
        :meth:`wait_sends`."""
        return []

    # -- for the implementations: what their calls add to ``traffic`` ---------------
    def count_call(self, nbytes: int, start: float) -> None:
        """Count one collective call that sent ``nbytes`` of data to the other ranks
        and started at ``start`` (``time.perf_counter()``)."""
        t = self.traffic
        t.calls += 1
        t.bytes_sent += nbytes
        t.seconds += time.perf_counter() - start

    def count_message(self, buf: np.ndarray) -> None:
        """Count one point-to-point message of the buffer ``buf``."""
        self.traffic.messages += 1
        self.traffic.message_bytes += int(buf.nbytes)

    def alltoall_bytes(self, items: list[Any]) -> int:
        """The bytes of an ``alltoall``'s items for the other ranks."""
        return sum(payload_bytes(x) for r, x in enumerate(items) if r != self.rank)

    def array_bytes(self, send: np.ndarray, counts: np.ndarray | None = None) -> int:
        """The bytes of a buffer call's data for the other ranks."""
        if counts is None:  # one row per rank
            return int(send.nbytes - send[self.rank].nbytes)
        return int((int(np.sum(counts)) - int(counts[self.rank])) * send.itemsize)


class MpiTransport(Transport):
    """mpi4py's ``COMM_WORLD`` (imported only when a distributed run starts)."""

    def __init__(self, timeout: float | None = None) -> None:
        from mpi4py import MPI

        self.MPI = MPI  # (an import inside a method costs a microsecond a call)
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.traffic = Traffic()
        self.timeout = timeout or None
        self._pongs: list[Any] = []  # answers to the other ranks' pings, in flight
        self._wire_path: tuple | None = None
        self._wire_found = False
        self._status = MPI.Status()  # (one, reused by every poll)
        # (bound once: an attribute lookup per message is a measurable part of it)
        self._i64, self._any = MPI.INT64_T, MPI.ANY_SOURCE
        self._isend, self._iprobe, self._recv_into = \
            self.comm.Isend, self.comm.Iprobe, self.comm.Recv

    # -- waiting with a deadline (``timeout``) ----------------------------------------
    def wait(self, request: Any, what: str) -> None:
        """Wait for the MPI request ``request`` (forever without ``timeout``; else
        testing it, answering pings, until :class:`RankStalled`)."""
        if self.timeout is None:
            request.Wait()
            return
        self.wait_until(request.Test, what)

    def wait_until(self, done: Any, what: str) -> None:
        """Poll ``done()`` until it is True; RankStalled after ``timeout`` seconds."""
        now = time.monotonic()
        end, ping = now + (self.timeout or 0.0), now
        while not done():
            now = time.monotonic()
            if now >= ping:  # (every PING_EVERY: an Iprobe at every poll costs more
                self._answer_pings()  # than the poll)
                ping = now + PING_EVERY
            if self.timeout is not None and now >= end:
                raise self.stalled(what)
            os.sched_yield()

    def _answer_pings(self) -> None:
        MPI = self.MPI

        status = MPI.Status()
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=PING_TAG, status=status):
            src = status.Get_source()
            self.comm.recv(source=src, tag=PING_TAG)
            self._pongs.append(self.comm.isend(self.rank, dest=src, tag=PONG_TAG))

    def silent_ranks(self) -> list[int]:
        """Ping every other rank and wait a few seconds for the answers (a waiting
        rank answers in its wait loop): the ranks that gave none."""
        MPI = self.MPI

        others = [r for r in range(self.size) if r != self.rank]
        pings = [self.comm.isend(self.rank, dest=r, tag=PING_TAG) for r in others]
        answered: set[int] = set()
        status = MPI.Status()
        end = time.monotonic() + min(PING_SECONDS, self.timeout or PING_SECONDS)
        while len(answered) < len(others) and time.monotonic() < end:
            self._answer_pings()
            if self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=PONG_TAG, status=status):
                answered.add(int(self.comm.recv(source=status.Get_source(), tag=PONG_TAG)))
            else:
                time.sleep(0.001)
        del pings  # (the job ends: never completed by a stopped rank)
        return [r for r in others if r not in answered]

    def _objects(self, blocks: list[bytes], what: str, to_all: bool) -> list[bytes]:
        """Nonblocking exchange of pickled objects: ``blocks[r]`` to rank ``r``
        (``to_all``: ``blocks[0]`` to every rank); the blocks each rank sent here."""
        MPI = self.MPI

        size = self.size
        lengths = np.array([len(b) for b in blocks], dtype=np.int64)
        got = np.empty(size, dtype=np.int64)
        if to_all:
            self.wait(self.comm.Iallgather([lengths, MPI.INT64_T], [got, MPI.INT64_T]), what)
            send = np.frombuffer(blocks[0], dtype=np.uint8)
        else:
            self.wait(self.comm.Ialltoall([lengths, MPI.INT64_T], [got, MPI.INT64_T]), what)
            send = np.frombuffer(b"".join(blocks), dtype=np.uint8)
        recv = np.empty(int(got.sum()), dtype=np.uint8)
        rdispls = np.concatenate(([0], np.cumsum(got)[:-1])).tolist()
        if to_all:
            req = self.comm.Iallgatherv([send, MPI.BYTE],
                                        [recv, (got.tolist(), rdispls), MPI.BYTE])
        else:
            displs = np.concatenate(([0], np.cumsum(lengths)[:-1])).tolist()
            req = self.comm.Ialltoallv([send, (lengths.tolist(), displs), MPI.BYTE],
                                       [recv, (got.tolist(), rdispls), MPI.BYTE])
        self.wait(req, what)
        return [recv[a:a + n].tobytes() for a, n in zip(rdispls, got.tolist(), strict=True)]

    def alltoall(self, items: list[Any]) -> list[Any]:
        nbytes, start = self.alltoall_bytes(items), time.perf_counter()
        if self.timeout is None:
            got = self.comm.alltoall(items)
        else:
            blocks = [pickle.dumps(x, protocol=5) for x in items]
            got = [pickle.loads(b) for b in self._objects(blocks, "alltoall", False)]
        self.count_call(nbytes, start)
        return got

    def allgather(self, item: Any) -> list[Any]:
        nbytes, start = payload_bytes(item) * (self.size - 1), time.perf_counter()
        if self.timeout is None:
            got = self.comm.allgather(item)
        else:
            block = pickle.dumps(item, protocol=5)
            got = [pickle.loads(b) for b in self._objects([block], "allgather", True)]
        self.count_call(nbytes, start)
        return got

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        MPI = self.MPI

        send = np.ascontiguousarray(send, dtype=np.int64)
        recv = np.empty_like(send)
        nbytes, start = self.array_bytes(send), time.perf_counter()
        if self.timeout is None:
            self.comm.Alltoall([send, MPI.INT64_T], [recv, MPI.INT64_T])
        else:
            self.wait(self.comm.Ialltoall([send, MPI.INT64_T], [recv, MPI.INT64_T]),
                      "alltoall")
        self.count_call(nbytes, start)
        return recv

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        MPI = self.MPI

        send = np.ascontiguousarray(send, dtype=np.int64)
        counts, recv_counts = np.asarray(counts), np.asarray(recv_counts)
        recv = np.empty(int(recv_counts.sum()), dtype=np.int64)
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rdispls = np.concatenate(([0], np.cumsum(recv_counts)[:-1]))
        nbytes, start = self.array_bytes(send, counts), time.perf_counter()
        bufs = ([send, (counts.tolist(), displs.tolist()), MPI.INT64_T],
                [recv, (recv_counts.tolist(), rdispls.tolist()), MPI.INT64_T])
        if self.timeout is None:
            self.comm.Alltoallv(*bufs)
        else:
            self.wait(self.comm.Ialltoallv(*bufs), "alltoallv")
        self.count_call(nbytes, start)
        return recv

    # -- point to point (the forward replay) -----------------------------------------
    def isend_array(self, dest: int, buf: np.ndarray) -> Any:
        self.count_message(buf)
        return self._isend([buf, self._i64], dest, REPLAY_TAG)

    def _recv(self, status: Any) -> tuple[int, np.ndarray]:
        i64 = self._i64
        src = status.Get_source()
        buf = np.empty(status.Get_count(i64), dtype=np.int64)
        self._recv_into([buf, i64], src, REPLAY_TAG)
        return src, buf

    def poll_arrays(self) -> list[tuple[int, np.ndarray]]:
        status, probe, anyone = self._status, self._iprobe, self._any
        if not probe(anyone, REPLAY_TAG, status):
            return []  # (the frequent answer, with one call)
        out = [self._recv(status)]
        while probe(anyone, REPLAY_TAG, status):
            out.append(self._recv(status))
        return out

    def wait_message(self, wave: Wave | None,
                     timeout: float | None = None) -> tuple[int, np.ndarray] | None:
        status, probe, anyone, pause = self._status, self._iprobe, self._any, os.sched_yield
        now = time.perf_counter()
        end = None if timeout is None else now + timeout
        stall = None if self.timeout is None else now + self.timeout
        ping = now + PING_EVERY
        while True:  # (MPI has no wait for "a message or this request": poll both,
            # yielding the core between polls, which matters when ranks share cores)
            if probe(anyone, REPLAY_TAG, status):
                return self._recv(status)
            if wave is not None and wave.test():
                return None
            if end is not None or stall is not None:
                now = time.perf_counter()
                if end is not None and now >= end:
                    return None
                if stall is not None and now >= ping:  # (not at every poll: a value's
                    if now >= stall:  # latency is a few polls)
                        raise self.stalled("the replay's messages")
                    self._answer_pings()
                    ping = now + PING_EVERY
            pause()

    def wait_sends(self, requests: list[Any]) -> None:
        MPI = self.MPI

        if requests and self.timeout is None:
            MPI.Request.Waitall(requests)
        elif requests:
            self.wait_until(lambda: MPI.Request.Testall(requests), "the replay's sends")

    def recv_array(self, source: int) -> np.ndarray:
        MPI = self.MPI

        status = MPI.Status()
        if self.timeout is None:
            self.comm.Probe(source=source, tag=REPLAY_TAG, status=status)
        else:
            self.wait_until(lambda: self.comm.Iprobe(source=source, tag=REPLAY_TAG,
                                                     status=status), "a replay message")
        return self._recv(status)[1]

    def iallreduce_sum(self, values: np.ndarray) -> Wave:
        return _MpiWave(self, np.ascontiguousarray(values, dtype=np.int64))

    def wire_path(self) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]] | None:
        """The C loop's message path (:meth:`Transport.wire_path`) where the MPI
        library is one whose ABI loop.c knows (:func:`mpich_functions`) and
        ``COMPENSATE_MPI_WIRE`` is not 0; found once."""
        if not self._wire_found:
            self._wire_found = True
            if os.environ.get(WIRE_SWITCH, "1").strip().lower() not in ("0", "no", "off",
                                                                        "false"):
                functions = mpich_functions(self.MPI)
                if functions is not None:
                    self._wire_path = (functions, (self.comm.handle, self._i64.handle,
                                                   REPLAY_TAG, self._any))
        return self._wire_path

    def requests_of(self, handles: list[int]) -> list[Any]:
        return [self.MPI.Request.fromhandle(h) for h in handles]


#: ``COMPENSATE_MPI_WIRE=0``: the replay's messages go through mpi4py even where the
#: engine's C loop could send and take them itself
WIRE_SWITCH = "COMPENSATE_MPI_WIRE"
#: MPICH's ABI (MPICH, Intel MPI, MVAPICH): ``MPI_COMM_WORLD`` and ``MPI_INT64_T``
#: are these C ints, a status is five ints
MPICH_COMM_WORLD, MPICH_INT64_T = 0x44000000, 0x4C00083A


def mpich_functions(MPI: Any) -> tuple[int, int, int, int] | None:
    """The addresses of ``MPI_Isend``, ``MPI_Iprobe``, ``MPI_Recv`` and
    ``MPI_Get_count`` in the MPI library mpi4py loaded, if its ABI is MPICH's (the
    handles are MPICH's C ints, a status twenty bytes), else None: the messages then
    go through mpi4py."""
    import ctypes

    try:
        if (MPI.COMM_WORLD.handle != MPICH_COMM_WORLD or MPI.INT64_T.handle != MPICH_INT64_T
                or MPI.Status().tomemory().nbytes != 20):
            return None
        lib = ctypes.CDLL(MPI.__file__)  # (its symbols resolve in the library it loaded)
        return tuple(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                     for name in ("MPI_Isend", "MPI_Iprobe", "MPI_Recv", "MPI_Get_count"))
    except (AttributeError, OSError, TypeError, ValueError):
        return None


#: the tag of the replay's point-to-point messages (nothing else sends point to
#: point but the pings of a stalled wait and their answers)
REPLAY_TAG = 21
PING_TAG, PONG_TAG = 22, 23
#: seconds a stalled rank waits for the answers to its pings
PING_SECONDS = 5.0
#: seconds between two looks for pings while the replay waits for a message
PING_EVERY = 0.01


class _MpiWave(Wave):
    def __init__(self, t: MpiTransport, values: np.ndarray) -> None:
        MPI = t.MPI
        t.traffic.waves += 1
        self._t = t
        self._send, self._recv = values, np.empty_like(values)
        self._req = t.comm.Iallreduce([self._send, MPI.INT64_T], [self._recv, MPI.INT64_T],
                                      op=MPI.SUM)

    def test(self) -> bool:
        if self.result is None and self._req.Test():
            self.result = self._recv
        return self.result is not None

    def wait(self) -> np.ndarray:
        if self.result is None:
            self._t.wait(self._req, "a wave of the replay")
            self.result = self._recv
        return self.result
