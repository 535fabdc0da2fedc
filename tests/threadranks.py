"""Test scaffolding: the distributed run's ranks as threads of this process, so
that the tests check it without ``mpiexec``.

:class:`ThreadTransport` implements :class:`compensate.parallel.transport.Transport`
over ``P`` threads with a barrier (the collective calls) and one mail queue per
rank under one condition variable (the point-to-point calls; a wave is a shared
running sum that completes once every rank added its counters);
:func:`run_threads` runs a body on ``P`` such ranks. The product runs its ranks
over MPI (:class:`compensate.parallel.transport.MpiTransport`); nothing in
``compensate/`` uses these.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from compensate.parallel.transport import Traffic, Transport, Wave, payload_bytes

#: seconds a thread rank waits for the others in one collective call
BARRIER_TIMEOUT = 120.0


class _Shared:
    """The slots and barrier ``P`` :class:`ThreadTransport` ranks share."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots: list[Any] = [None] * size
        # a rank that skips a collective the others call (a bug) breaks the barrier
        # after BARRIER_TIMEOUT instead of hanging the test suite
        self.barrier = threading.Barrier(size, timeout=BARRIER_TIMEOUT)
        # point to point: each rank's arrived messages (source, buffer), in order;
        # the waves' running sums ([sum, ranks joined]); one condition for all
        self.mail: list[deque] = [deque() for _ in range(size)]
        self.waves: dict[int, list] = {}
        self.cond = threading.Condition()
        self.aborted = False
        # per rank: when it last called the transport, and whether it waits in it now
        # (a waiting rank answers, as an MPI rank answers pings in its wait loops)
        self.seen = [time.monotonic()] * size
        self.waiting = [False] * size

    def abort(self) -> None:
        """A rank failed: wake every rank that waits (they raise)."""
        self.aborted = True  # (before the barrier breaks: a waiter tells failure from stall)
        self.barrier.abort()
        with self.cond:
            self.cond.notify_all()


class _ThreadWave(Wave):
    def __init__(self, t: ThreadTransport, values: np.ndarray) -> None:
        t.traffic.waves += 1
        sh, self._sh, self._t = t.shared, t.shared, t
        t.beat()
        self._n = t._waves
        t._waves += 1
        with sh.cond:
            slot = sh.waves.setdefault(self._n, [np.zeros(len(values), np.int64), 0, 0])
            slot[0] = slot[0] + values
            slot[1] += 1
            if slot[1] == sh.size:
                sh.cond.notify_all()

    def _done(self) -> bool:  # (under the condition)
        slot = self._sh.waves[self._n]
        if slot[1] < self._sh.size:
            return False
        self.result = slot[0].copy()
        slot[2] += 1
        if slot[2] == self._sh.size:  # every rank has its copy
            del self._sh.waves[self._n]
        return True

    def test(self) -> bool:
        if self.result is None:
            with self._sh.cond:
                self._done()
        return self.result is not None

    def wait(self) -> np.ndarray:
        if self.result is None:
            sh, t = self._sh, self._t
            with sh.cond, t.waiting_in():
                if not sh.cond.wait_for(lambda: sh.aborted or self._done(),
                                        timeout=t.limit()) or sh.aborted:
                    raise t.broken("a wave of the replay")
        return self.result


class ThreadTransport(Transport):
    """One of ``size`` ranks that are threads of this process (tests, no MPI)."""

    def __init__(self, shared: _Shared, rank: int, timeout: float | None = None) -> None:
        self.shared, self.rank, self.size = shared, rank, shared.size
        self.traffic = Traffic()
        self._waves = 0  # the waves this rank started (their number)
        self.timeout = timeout

    # -- the deadline (Transport.timeout): a stalled rank is one that neither called
    # the transport for ``timeout`` seconds nor waits in it ---------------------------
    def beat(self) -> None:
        self.shared.seen[self.rank] = time.monotonic()

    def limit(self) -> float:
        return BARRIER_TIMEOUT if self.timeout is None else self.timeout

    @contextlib.contextmanager
    def waiting_in(self):
        sh = self.shared
        self.beat()
        sh.waiting[self.rank] = True
        try:
            yield
        finally:
            sh.waiting[self.rank] = False
            self.beat()

    def silent_ranks(self) -> list[int]:
        sh, now = self.shared, time.monotonic()
        return [r for r in range(self.size) if r != self.rank and not sh.waiting[r]
                and now - sh.seen[r] >= self.limit()]

    def broken(self, what: str) -> BaseException:
        """The error of a wait that ended without its answer: a failed rank's
        (BrokenBarrierError), or with ``timeout`` set, RankStalled."""
        if self.timeout is None or self.shared.aborted:
            return threading.BrokenBarrierError()
        return self.stalled(what)

    def _exchange(self, item: Any) -> list[Any]:
        sh = self.shared
        sh.slots[self.rank] = item
        with self.waiting_in():
            try:
                sh.barrier.wait(timeout=self.timeout)
                got = list(sh.slots)
                sh.barrier.wait(timeout=self.timeout)  # all read before the slots are reused
            except threading.BrokenBarrierError:
                raise self.broken("a collective call") from None
        return got

    def alltoall(self, items: list[Any]) -> list[Any]:
        nbytes, start = self.alltoall_bytes(items), time.perf_counter()
        got = [row[self.rank] for row in self._exchange(items)]
        self.count_call(nbytes, start)
        return got

    def allgather(self, item: Any) -> list[Any]:
        nbytes, start = payload_bytes(item) * (self.size - 1), time.perf_counter()
        got = self._exchange(item)
        self.count_call(nbytes, start)
        return got

    def alltoall_array(self, send: np.ndarray) -> np.ndarray:
        send = np.asarray(send, dtype=np.int64)
        nbytes, start = self.array_bytes(send), time.perf_counter()
        got = np.stack([rows[self.rank] for rows in self._exchange(send)])  # a copy
        self.count_call(nbytes, start)
        return got

    def alltoallv_array(self, send: np.ndarray, counts: np.ndarray,
                        recv_counts: np.ndarray) -> np.ndarray:
        send, counts = np.asarray(send, dtype=np.int64), np.asarray(counts)
        nbytes, start = self.array_bytes(send, counts), time.perf_counter()
        me = self.rank
        blocks = []
        for buf, cnt in self._exchange((send, counts)):
            lo = int(np.sum(cnt[:me]))
            blocks.append(buf[lo:lo + int(cnt[me])])
        got = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)  # a copy
        if len(got) != int(np.sum(recv_counts)):
            raise ValueError("alltoallv_array: the receive counts disagree with the sends")
        self.count_call(nbytes, start)
        return got

    # -- point to point (a message is a copy put in the destination's mail) ---------
    def isend_array(self, dest: int, buf: np.ndarray) -> Any:
        self.beat()
        self.count_message(buf)
        sh = self.shared
        with sh.cond:
            sh.mail[dest].append((self.rank, np.array(buf, dtype=np.int64)))
            sh.cond.notify_all()
        return None

    def poll_arrays(self) -> list[tuple[int, np.ndarray]]:
        self.beat()
        sh = self.shared
        with sh.cond:
            mail = sh.mail[self.rank]
            out = list(mail)
            mail.clear()
        return out

    def wait_message(self, wave: Wave | None,
                     timeout: float | None = None) -> tuple[int, np.ndarray] | None:
        sh = self.shared
        mail = sh.mail[self.rank]
        with sh.cond, self.waiting_in():
            ok = sh.cond.wait_for(lambda: sh.aborted or bool(mail) or (
                wave is not None and (wave.result is not None or wave._done())),
                timeout=self.limit() if timeout is None else min(timeout, self.limit()))
            if sh.aborted or (not ok and (timeout is None or timeout > self.limit())):
                raise self.broken("the replay's messages")
            return mail.popleft() if mail else None

    def wait_sends(self, requests: list[Any]) -> None:
        return None

    def recv_array(self, source: int) -> np.ndarray:
        sh = self.shared
        mail = sh.mail[self.rank]
        with sh.cond, self.waiting_in():
            def there() -> bool:
                return sh.aborted or any(src == source for src, _ in mail)
            if not sh.cond.wait_for(there, timeout=self.limit()) or sh.aborted:
                raise self.broken("a replay message")
            i = next(i for i, (src, _) in enumerate(mail) if src == source)
            buf = mail[i][1]
            del mail[i]
            return buf

    def iallreduce_sum(self, values: np.ndarray) -> Wave:
        return _ThreadWave(self, np.asarray(values, dtype=np.int64))


def run_threads(size: int, body: Callable[[Transport], Any],
                timeout: float | None = None) -> list[Any]:
    """Run ``body(transport)`` on ``size`` thread ranks; their results by rank. An
    exception escaping a rank breaks the barrier (the others fail instead of waiting)
    and is re-raised here. ``timeout``: the transports' deadline (RankStalled)."""
    shared = _Shared(size)
    results: list[Any] = [None] * size
    errors: list[BaseException | None] = [None] * size

    def main(rank: int) -> None:
        try:
            results[rank] = body(ThreadTransport(shared, rank, timeout))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            errors[rank] = exc
            shared.abort()

    threads = [threading.Thread(target=main, args=(r,), name=f"rank{r}") for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and
                  not isinstance(e, threading.BrokenBarrierError)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
