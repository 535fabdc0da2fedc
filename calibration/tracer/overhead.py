"""Calibrate the mpi4py tracer's own overhead and write the platform file.

``O(kind)`` (docs/design.md §2) is the time a record costs the program after its
timestamp. For the MPI and thread record kinds it is measured as the tracer's
record path called ``n`` times back to back (the
:class:`~calibration.tracer.buffer.Buffer` method the wrappers call, with the same
kinds of arguments), minus the cost of the empty loop.

Enter/Leave of the program's functions cost more than two record calls: the
decorator adds a call frame (``fn(*args, **kwargs)`` is a slow call in CPython).
So they are measured by the method of docs/design.md §6: a two-argument function is
called ``n`` times with and without ``@__compensate_record__`` (the very decorator
the run used, with its per-call lookup of the calling thread's buffer); the difference per
call is the dilation ``D`` of one Enter/Leave pair. ``O(Enter)`` is the part of
``D`` inside the call (the median Enter->Leave gap minus the untraced call's own
time) and ``O(Leave)`` the rest, so that R1 gives such a call back its
uninstrumented length and removes the whole ``D``.

Every kind gets ``repeats`` short samples (about a millisecond each). On a shared
machine other processes slow samples down in phases longer than a sample, so the
value written is the 10th percentile (:data:`STATISTIC`: the undisturbed cost, as
the experiment keeps its shortest runs), for Enter/Leave of functions the median
(:data:`FUNCTION_STATISTIC`); median, min, max and spread are kept in the file
under ``calibration``.

The copy cost table is a deliberately small numpy-copy measurement (per size the
median time of one copy, minus the cost of copying one byte). Issue #4's
``calibrate`` command measures the copy cost and the timer properly; this module
keeps only what the tracer needs to leave a usable ``platform.json`` next to every
trace it writes.
"""

from __future__ import annotations

import platform as _platform
import statistics
from collections.abc import Callable
from itertools import repeat
from time import perf_counter_ns
from typing import Any

import numpy as np

from calibration.tracer.buffer import (
    THREAD_ACQUIRE_LOCK,
    THREAD_BEGIN,
    THREAD_CREATE,
    THREAD_END,
    THREAD_RELEASE_LOCK,
    THREAD_WAIT,
    Recorder,
    prefault,
)
from calibration.tracer.functions import make_decorator
from compensate.model import COLLECTIVE_OPS
from compensate.platform import Platform

#: The statistic of the samples that becomes O: on a shared machine other processes
#: slow the samples down in phases longer than a sample, and the 10th percentile
#: estimates the undisturbed cost (as the experiment keeps its shortest runs).
STATISTIC = "p10"
#: The statistic for Enter/Leave of the program's functions (the decorator's
#: dilation, split): the median. A run pays the decorator on every call, i.e. its
#: mean cost; with the buffer prefaulted the samples' spread is small (p10 to
#: median 1-3 ns per record), and the 10th percentile, a lucky sample, fell
#: 5-10 ns per record below the whole-loop dilation of the Monte-Carlo worker's
#: loop, the median 0-5 ns (docs/calibration.md, "Buffer memory"). Load inflates
#: the median more than the p10; the in-situ tables cap every value by the
#: trace's bound.
FUNCTION_STATISTIC = "median"
COPY_SIZES = (64, 1024, 16 * 1024, 256 * 1024, 4 * 1024 * 1024, 16 * 1024 * 1024)


class _Status:
    """Stand-in for ``MPI.Status`` when mpi4py is absent (tests)."""

    def Get_source(self) -> int:
        return 1

    def Get_tag(self) -> int:
        return 0

    def Get_count(self) -> int:
        return 8


def _loop_ns(fn: Callable, args: tuple, n: int) -> int:
    t0 = perf_counter_ns()
    for _ in repeat(None, n):
        fn(*args)
    return perf_counter_ns() - t0


def _empty_ns(n: int) -> int:
    t0 = perf_counter_ns()
    for _ in repeat(None, n):
        pass
    return perf_counter_ns() - t0


def _trivial(a: Any, b: Any) -> None:
    pass


def _stats(samples: list[float]) -> dict[str, float]:
    q = np.percentile(samples, [10, 25, 75])
    return {"p10": float(q[0]), "median": statistics.median(samples), "min": min(samples),
            "max": max(samples), "iqr": float(q[2] - q[1])}


def _call_loop_ns(fn: Callable, calls: int) -> int:
    t0 = perf_counter_ns()
    for i in range(calls):
        fn(i, calls)
    return perf_counter_ns() - t0


def _empty_call_loop_ns(calls: int) -> int:
    t0 = perf_counter_ns()
    for i in range(calls):  # noqa: B007 - the loop of _call_loop_ns without the call
        pass
    return perf_counter_ns() - t0


def function_dilation(calls: int = 100000, repeats: int = 5,
                      threaded: bool = False) -> list[tuple[float, float]]:
    """Per repeat: (D, O_enter) in seconds. ``D`` is what one traced call of a
    two-argument function costs more than an untraced one (the buffer grows over
    all repeats, as in a real run). ``O_enter`` is the part of ``D`` that lies
    between the Enter and the Leave record: the median Enter->Leave gap minus the
    time the untraced call itself takes, so that R1 gives that gap its
    uninstrumented length back. The buffer's memory is touched before each
    sample (:func:`~calibration.tracer.buffer.prefault`), as the run's is.
    ``threaded``: time the decorator's multi-threaded path (the per-call lookup
    of the thread's buffer) instead of the single-threaded one."""
    rec = Recorder()
    if threaded:
        rec.go_threaded()
    traced = make_decorator(rec)(_trivial)
    out = []
    for _ in range(repeats):
        empty = _empty_call_loop_ns(calls)
        plain = _call_loop_ns(_trivial, calls)
        start = len(rec.main)
        prefault(rec.main.data, 4 * calls)  # the run's buffers are touched ahead too
        wrapped = _call_loop_ns(traced, calls)
        d = max(wrapped - plain, 0) / calls
        times = np.frombuffer(rec.main.data, dtype=np.int64)[2 * start::2].copy()
        inside = float(np.median(times[1::2] - times[0::2]))
        call = max(plain - empty, 0) / calls
        out.append((d * 1e-9, min(max(inside - call, 0.0), d) * 1e-9))
    return out


def record_path_costs(n: int = 2000, repeats: int = 31, status: Any = None,
                      calls: int | None = None,
                      threaded: bool = False) -> dict[str, dict[str, float]]:
    """Seconds per record of each kind (p10, median, min, max, iqr over
    ``repeats``); ``calls`` (default ``n``) traced calls per function-call sample,
    whose dilation is split into Enter and Leave (:func:`function_dilation`) on
    the decorator's path the run used (``threaded``); both paths' dilations are
    kept as ``function_call_single`` and ``function_call_threaded``."""
    status = status if status is not None else _Status()
    rec = Recorder()
    buf = rec.main
    allreduce = COLLECTIVE_OPS["ALLREDUCE"]

    def sizes(*_: Any) -> tuple[int, int]:
        return 8, 8

    paths: dict[str, tuple[Callable, tuple]] = {
        "MpiSend": (buf.send, (1, 0, 0, 8)),
        "MpiRecv": (buf.recv, (0, status)),
        "MpiIsend": (buf.isend, (1, 0, 0, 8, 1)),
        "MpiIrecvRequest": (buf.irecv_request, (1,)),
        "MpiIrecv": (buf.irecv, (0, status, 1)),
        "MpiIsendComplete": (buf.isend_complete, (1,)),
        "MpiRequestTest": (buf.request_test, (1,)),
        "MpiCollectiveBegin": (buf.coll_begin, ()),
        "MpiCollectiveEnd": (buf.coll_end, (allreduce, 0, -1, sizes)),
        "ThreadCreate": (buf.thread_record, (THREAD_CREATE, 1)),
        "ThreadBegin": (buf.thread_record, (THREAD_BEGIN, 1)),
        "ThreadEnd": (buf.thread_record, (THREAD_END, 1)),
        "ThreadWait": (buf.thread_record, (THREAD_WAIT, 1)),
        "ThreadAcquireLock": (buf.lock_record, (THREAD_ACQUIRE_LOCK, 1, 1)),
        "ThreadReleaseLock": (buf.lock_record, (THREAD_RELEASE_LOCK, 1, 1)),
        "enter_call": (buf.enter, (0,)),
    }
    out: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(repeats):
        empty = _empty_ns(n)
        for kind, (fn, args) in paths.items():
            out[kind].append(max(_loop_ns(fn, args, n) - empty, 0) / n * 1e-9)
            buf.clear()
    result = {k: _stats(v) for k, v in out.items()}
    paths = {}
    for path in (not threaded, threaded):  # the used path last, nearest the others
        paths[path] = function_dilation(calls or n, repeats, threaded=path)
    samples = paths[threaded]
    result["function_call"] = _stats([d for d, _ in samples])
    result["function_call_single"] = _stats([d for d, _ in paths[False]])
    result["function_call_threaded"] = _stats([d for d, _ in paths[True]])
    result["Enter"] = _stats([e for _, e in samples])
    result["Leave"] = _stats([d - e for d, e in samples])
    return result


def _probe_locks(rec: Recorder) -> tuple[Any, Any]:
    """(untraced RLock, traced RLock recording into ``rec``) for the probes after
    the program (the tracer's lock regions get an id, 0 in a bare process)."""
    import threading  # noqa: PLC0415

    from calibration.tracer import threads  # noqa: PLC0415 - imports nothing heavy

    for name, _ in threads._REGIONS:  # region ids of a run, or 0 in a bare process
        threads._R.setdefault(name, 0)
    rlock = threads._orig.get("RLock", threading.RLock)
    return rlock(), threads.TracedRLock(rlock(), 0, rec)


def _probe_comms(tm: Any) -> tuple[Any, Any, tuple]:
    """(untraced, traced ``COMM_SELF``, (buffer, status, ``PROC_NULL``)) for the
    probes after the program; ``tm``: the tracer's MPI module (loaded)."""
    from mpi4py import MPI  # noqa: PLC0415 - loaded by the tracer already

    plain = MPI.Intracomm(MPI.COMM_SELF)
    traced = tm.TracedIntracomm(MPI.COMM_SELF)
    traced._cid = 0
    for name in ("MPI_Send", "MPI_Recv"):
        tm._REGIONS.setdefault(name, 0)
    return plain, traced, (np.zeros(1), MPI.Status(), MPI.PROC_NULL)


def _residue(traced_loop: Callable[[], int], plain_loop: Callable[[], int], buf: Any,
             calls: int, back_ns: float, repeats: int) -> float:
    """Median over ``repeats`` of: (traced loop - plain loop) / calls - the in-situ
    samples of the traced loop's records per call, in ns."""
    from calibration.tracer import insitu  # noqa: PLC0415 - insitu imports numpy only

    out = []
    for _ in range(repeats):
        start, bstart = len(buf.data), len(buf.backs)
        prefault(buf.data, 16 * calls)
        traced = traced_loop()
        plain = plain_loop()
        times = np.frombuffer(buf.data, dtype=np.int64)[2 * (start // 2)::2].copy()
        backs = np.frombuffer(buf.backs, dtype=np.int64)[bstart:].copy()
        cost = insitu.samples(times, backs, back_ns)
        out.append((traced - plain) / calls - float(cost[cost >= 0].sum()) / calls)
        buf.clear()
    return float(statistics.median(out))


def wrapper_residues(back_ns: float, calls: int = 400,
                     repeats: int = 9) -> dict[str, float]:
    """Nanoseconds per call that a wrapper (the MPI and lock wrappers of the
    tracer) costs the program *outside* its in-situ brackets: the Python frames
    between the program's call and the wrapper's first timestamp, and between its
    last hand-back (:meth:`Buffer.back`) and the program's next instruction. No
    bracket can see them (nothing can be stamped before a function starts or
    after it returns), so the run's in-situ tables would leave them in the trace:
    0.2-0.3 µs per MPI call and 0.3-0.35 µs per lock operation here, about a
    microsecond per round of the Monte-Carlo master (docs/calibration.md,
    "Wrapper residue").

    Measured as the dilation of a traced call against the untraced one minus
    the in-situ samples of its records (:func:`calibration.tracer.insitu.samples`,
    with this rank's ``back_ns``), median of ``repeats`` loops of ``calls``
    calls: ``lock`` per acquire or release (``with`` on a traced RLock, half of
    the pair), ``mpi`` per call (``Send`` and ``Recv`` to ``MPI.PROC_NULL`` on a
    traced ``COMM_SELF``: the wrapper's frames without communication), only if
    the tracer's MPI module is loaded. Values below 0 are kept (the median of a
    noisy difference), the in-situ table clamps the sum."""
    import sys  # noqa: PLC0415

    rec = Recorder()
    buf = rec.main
    plain_lock, traced_lock = _probe_locks(rec)
    clock = perf_counter_ns

    def lock_loop(lock: Any) -> Callable[[], int]:
        def run() -> int:
            t0 = clock()
            for _ in repeat(None, calls):
                with lock:
                    pass
            return clock() - t0
        return run

    out = {"lock": _residue(lock_loop(traced_lock), lock_loop(plain_lock), buf, calls,
                            back_ns, repeats) / 2}
    tm = sys.modules.get("calibration.tracer.mpi")
    if tm is None:
        return out
    plain, traced, (data, status, null) = _probe_comms(tm)

    def mpi_loop(comm: Any) -> Callable[[], int]:
        def run() -> int:
            t0 = clock()
            for _ in repeat(None, calls):
                comm.Send(data, null, 1)
                comm.Recv(data, null, 1, status)
            return clock() - t0
        return run

    saved, tm._rec = tm._rec, rec  # the probe records into its own buffer
    try:
        out["mpi"] = _residue(mpi_loop(traced), mpi_loop(plain), buf, calls, back_ns,
                              repeats) / 2
    finally:
        tm._rec = saved
    return out


#: Units of synthetic program work after each traced call, per step of the
#: cold-call ladder (:func:`cold_ladder`); one unit is ~1-2 µs here.
COLD_UNITS = (0, 1, 2, 4, 8, 16)
#: Iterations per timed block (the first of each block is dropped: it follows
#: the other block), and pairs of (traced, untraced) blocks per ladder step.
COLD_BLOCK, COLD_BLOCKS = 16, 12


class _Work:
    """Generic untraced program work for :func:`cold_ladder`: per unit, one numpy
    ufunc call (multiply, 512 doubles into a preallocated array, cycling over 8
    arrays: 32 KiB of data, the size of the L1 data cache) and Python bytecode (a
    16-element list comprehension, a dict built and read, integer arithmetic).
    Fixed before any removal figure was looked at; not tuned to a program."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.arrays = [rng.random(512) for _ in range(8)]
        self.out = np.empty(512)

    def __call__(self, units: int) -> int:
        acc = 0
        arrays, out = self.arrays, self.out
        for j in range(units):
            np.multiply(arrays[j & 7], 1.0001, out=out)
            sq = [k * k for k in range(16)]
            d = {"a": sq[j & 15], "b": j}
            acc += d["a"] + d["b"] + len(sq)
        return acc


def _pava(y: list[float]) -> list[float]:
    """The non-decreasing sequence nearest ``y`` in least squares (pool adjacent
    violators): a monotone curve without the upward bias of a running maximum."""
    blocks: list[list[float]] = []  # [mean, weight]
    for v in y:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2 = blocks.pop()
            m1, w1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2])
    out: list[float] = []
    for m, w in blocks:
        out.extend([m] * int(w))
    return out


def _ladder_pair(work: _Work, units: int, traced: Callable, plain: Callable, per: int,
                 buf: Any, back_ns: float, block: int,
                 traced_first: bool) -> tuple[float, float]:
    """(untraced ns per iteration, traced - untraced ns per call) of one pair of
    adjacent blocks at ``units``.

    A block is ``block`` iterations of the call (``per`` traced calls) followed
    by ``work(units)``, stamped one by one (``perf_counter_ns``), so that a traced
    iteration holds the call, cold after the previous iteration's work, and the
    work slowed down after it. The first iteration of a block is dropped (it
    follows the other block). Per block the median iteration (robust to a
    preemption); for the wrappers (``buf``) each traced iteration minus the
    in-situ samples of its records first (what their brackets already charge)."""
    from calibration.tracer import insitu  # noqa: PLC0415

    clock = perf_counter_ns
    ts = [0] * (block + 1)

    def run(fn: Callable) -> np.ndarray:
        for i in range(block):
            ts[i] = clock()
            fn(i, block)
            work(units)
        ts[block] = clock()
        return np.diff(np.array(ts, dtype=np.int64))[1:].astype(np.float64)

    def traced_block() -> float:
        if buf is None:
            return float(np.median(run(traced)))
        buf.clear()
        prefault(buf.data, 64 * block)
        d = run(traced)
        times = np.frombuffer(buf.data, dtype=np.int64)[0::2].copy()
        backs = np.frombuffer(buf.backs, dtype=np.int64).copy()
        cost = np.maximum(insitu.samples(times, backs, back_ns), 0.0)
        if cost.size and cost.size % block == 0:
            d -= cost.reshape(block, -1).sum(axis=1)[1:]
        buf.clear()
        return float(np.median(d))

    if traced_first:
        t = traced_block()
        p = float(np.median(run(plain)))
    else:
        p = float(np.median(run(plain)))
        t = traced_block()
    return p, (t - p) / per


def cold_ladder(back_ns: float, threaded: bool = False, mpi: bool = True,
                units: tuple[int, ...] = COLD_UNITS, block: int = COLD_BLOCK,
                blocks: int = COLD_BLOCKS) -> dict[str, Any]:
    """The extra cost of a traced call among untraced program work, as a function
    of the work ``w`` between traced calls (docs/calibration.md, "Cold calls").

    The decorator's dilation (:func:`function_dilation`) and the wrappers'
    residues (:func:`wrapper_residues`) are measured in tight loops, where the
    tracer's code and data stay in the caches and branch predictors. In a
    program, untraced work between traced calls evicts them, and the tracer's
    code evicts the program's: the traced call and the work after it cost more.
    Per step ``u`` of ``units`` every call is followed by ``u`` units of
    :class:`_Work` (:func:`_ladder_pair`, ``blocks`` pairs per step); ``D(w)`` is
    traced - untraced per call, for the wrappers minus the in-situ samples of their records (as
    :func:`wrapper_residues`), and ``extra(w) = D(w) - D(w_0)`` made
    non-negative and non-decreasing (:func:`_pava`). ``w`` is the untraced work
    per call (the untraced iteration minus that of the first step, the bare call
    loop, whose ``w`` is 0).

    Curves: ``function`` (a traced two-argument function, the decorator path the
    run used), ``lock`` (``with`` on a traced RLock: the acquire follows the
    work, the release does not; per pair), ``mpi`` (``Send`` and ``Recv`` to
    ``PROC_NULL`` on a traced ``COMM_SELF``, the work after each; per call;
    only with ``mpi`` and the tracer's MPI module loaded). Returns
    ``{"w_s": [...], "extra_s": {curve: [...]}, "raw_ns": {curve: [D...]}, ...}``."""
    import sys  # noqa: PLC0415

    work = _Work()
    rec = Recorder()
    if threaded:
        rec.go_threaded()
    buf = rec.main
    prefault(buf.data, 1 << 16)
    curves: dict[str, tuple[Callable, Callable, int, Any]] = {}
    curves["function"] = (make_decorator(rec)(_trivial), _trivial, 1, None)

    plain_lock, traced_lock = _probe_locks(rec)

    def locker(lock: Any) -> Callable:
        def call(_i: int, _n: int) -> None:
            with lock:
                pass
        return call

    curves["lock"] = (locker(traced_lock), locker(plain_lock), 1, buf)
    tm = sys.modules.get("calibration.tracer.mpi") if mpi else None
    saved = None
    half = [0]
    if tm is not None:
        plain_c, traced_c, (data, status, null) = _probe_comms(tm)

        def caller(comm: Any) -> Callable:
            def call(_i: int, _n: int) -> None:
                comm.Send(data, null, 1)
                work(half[0])
                comm.Recv(data, null, 1, status)
            return call

        curves["mpi"] = (caller(traced_c), caller(plain_c), 2, buf)
        saved, tm._rec = tm._rec, rec  # the probe records into its own buffer
    diffs = {(k, u): [] for k in curves for u in units}
    plains: dict[int, list[float]] = {u: [] for u in units}
    try:
        # round by round every step and curve once, so that a disturbance of the
        # machine (another process, a slow phase of the host) spreads over all
        # steps instead of shifting one of them; per pair of adjacent blocks
        # traced - untraced (a phase longer than a pair cancels); medians
        for r in range(blocks):
            for u in units:
                for name, (traced, plain, per, b) in curves.items():
                    half[0] = u if name == "mpi" else 0  # each MPI call after the work
                    p, d = _ladder_pair(work, u, traced, plain, per, b, back_ns, block,
                                        (r + u) % 2 == 0)
                    diffs[name, u].append(d)
                    if name == "function":
                        plains[u].append(p)
    finally:
        if tm is not None:
            tm._rec = saved
    raw = {k: [statistics.median(diffs[k, u]) for u in units] for k in curves}
    wns = [statistics.median(plains[u]) for u in units]
    w_s = [0.0]
    for x in wns[1:]:  # strictly increasing abscissae, whole ns
        w_s.append(max(round(x - wns[0]), round(w_s[-1] * 1e9) + 1) * 1e-9)
    extra = {}
    for name, d in raw.items():
        e = _pava([x - d[0] for x in d])
        extra[name] = [round(max(v, 0.0)) * 1e-9 for v in e]
        extra[name][0] = 0.0
    return {"w_s": w_s, "extra_s": extra,
            "raw_ns": {k: [round(x, 1) for x in v] for k, v in raw.items()},
            "work_ns": [round(x, 1) for x in wns], "units": list(units),
            "block": block, "blocks": blocks}


def copy_table(sizes: tuple[int, ...] = COPY_SIZES, repeats: int = 7) -> list[tuple[int, float]]:
    """(bytes, seconds) for one numpy copy of each size (median; the cost of a
    1-byte copy, i.e. the Python call, subtracted)."""

    def one(nbytes: int) -> float:
        src = np.ones(nbytes, dtype=np.uint8)
        dst = np.empty_like(src)
        k = max(3, min(2000, (64 << 20) // max(nbytes, 1)))
        samples = []
        for _ in range(repeats):
            t0 = perf_counter_ns()
            for _ in repeat(None, k):
                np.copyto(dst, src)
            samples.append((perf_counter_ns() - t0) / k * 1e-9)
        return statistics.median(samples)

    base = one(1)
    return [(s, max(one(s) - base, 1e-12)) for s in sizes]


def calibrate(n: int = 2000, repeats: int = 31, status: Any = None,
              extra: dict[str, Any] | None = None, threaded: bool = False) -> dict[str, Any]:
    """The platform file (docs/platform-file.md) for traces of this tracer, with
    the raw measurements under extra keys (ignored by ``compensate``).
    ``threaded``: the run started threads, so its decorator took the per-thread
    path (:func:`calibration.tracer.functions.make_decorator`); O(Enter) and
    O(Leave) are that path's."""
    costs = record_path_costs(n, repeats, status, threaded=threaded)
    by_kind = {k: v[FUNCTION_STATISTIC if k in ("Enter", "Leave") else STATISTIC]
               for k, v in costs.items() if k[0].isupper()}
    table = copy_table(repeats=7)
    default = costs["function_call"][FUNCTION_STATISTIC] / 2
    plat = Platform(default, by_kind, np.array([b for b, _ in table], dtype=float),
                    np.array([s for _, s in table]))
    data = plat.to_dict()
    data["tracer"] = "record"
    data["calibration"] = {
        "by": "calibration.record (tracer record path; see calibration/tracer/overhead.py)",
        "records_per_sample": n,
        "statistic": STATISTIC,
        "function_statistic": FUNCTION_STATISTIC,
        "note": "seconds_per_record: function_call is the dilation of one traced "
                "call (an Enter/Leave pair), split into Enter (inside the call) and "
                "Leave (the rest), on the decorator path the run used "
                "(function_path); function_call_single/_threaded are both paths; "
                "enter_call is an MPI wrapper's Enter record alone",
        "function_path": "threaded" if threaded else "single",
        "repeats": repeats,
        "seconds_per_record": costs,
        "machine": _platform.node(),
        "processor": _platform.processor() or _platform.machine(),
        "python": _platform.python_version(),
    }
    if extra:
        data["calibration"].update(extra)
    return data
