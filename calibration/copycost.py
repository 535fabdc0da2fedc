"""Copy cost ``C(s)·s``: the time to copy an ``s``-byte buffer, 64 B to 64 MiB.

What is timed (docs/calibration.md explains the choices):

* The copy is ``dst[:] = src`` on ``memoryview`` slices of large numpy buffers,
  which CPython performs as one ``memcpy`` -- the same routine an MPI library
  uses for an eager message. ``--copy-method numpy`` times
  ``np.copyto(dst, src)`` instead (numpy adds a size-dependent dispatch cost of
  ~60 ns from 512 B up on this kind of machine, which is not part of an MPI copy).
* **size classes**: a table size ``s`` stands for the messages "of about ``s``
  bytes", so every sample copies its own variant: a size drawn log-uniformly
  within half a grid step of ``s`` (its time scaled by ``s / size``, i.e. the
  per-byte cost of the neighbourhood), from and to 16-byte aligned offsets drawn
  uniformly in the source and destination buffers (16 B is what ``malloc`` and
  numpy guarantee; real message buffers sit anywhere in a page and a cache line).
  With one fixed buffer pair, the pair's addresses decide the result: on this
  machine's AMD EPYC the fixed pair copied 1-8 KiB 1.7-2.7x slower in 7 of 16
  fresh processes (L1-resident copies running at L2 speed: which address pairs
  do that changes from process to process), so the table showed the luck of one
  placement, not the cost of a message (docs/calibration.md has the numbers).
* **warm**: the same buffers copied over and over; whatever fits stays in cache,
  so the per-byte cost shows the cache levels as steps. Before a sample whose
  buffers do not fit the L1 cache, ``warmup_bytes`` (the last-level cache's
  capacity) are copied untimed, so that the sample sees the steady state of
  repeated copies rather than whatever the previous sample (an eviction, a
  64 MiB copy) left in L2/L3: after one, 0.5-2 MiB copies were still 1.2-1.9x
  slower than in the steady state after 2k untimed copies. Copies are timed in
  batches of ``k`` calls (``k`` so that a batch lasts ~0.1-0.2 ms) and paired with
  a batch of 1-byte copies; the sample is ``(batch(s) - batch(1 B)) / k``, which removes the Python
  call overhead (~60 ns, larger than a 64 B memcpy) and the timer read, and cancels
  slow drift. Batches are timed with the thread's CPU clock
  (``time.thread_time_ns``), so that time the scheduler gives to other processes on
  a shared machine does not count (on this 2-core VM under load, wall-clock medians
  of 64 MiB copies doubled, CPU-time medians did not).
* **fresh**: before each sample a buffer of twice the last-level cache is
  rewritten, evicting ``src``/``dst`` and their page-table entries; the Python
  objects describing them are touched again, then one copy is timed (wall clock,
  ``perf_counter_ns``: one copy is too short for the CPU clock's ~0.6 µs read) and
  the warm single-call overhead subtracted. Fresh copies include cache and TLB
  misses.

Every size is repeated until its median is stable (relative standard error of
the median below a tolerance) or its sample or time budget is spent, in passes
over all sizes, in several fresh processes whose samples are pooled (the median
of their medians; see :mod:`calibration.workers` for why).
"""

from __future__ import annotations

import dataclasses
import glob
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from calibration.stats import Summary, median_rel_se, summarize_groups
from calibration.timer import TimerCalibration
from calibration.units import fmt_bytes

MiB = 1 << 20
#: A size enters the table only if its median is known to +-25 % (95 % CI half-width) ...
RESOLVE_REL = 0.25
#: ... and is at least 10 ns: shorter copies (a few dozen cycles, up to ~1 KiB here) are
#: within the run-to-run variation of the ~60 ns Python call that carries them (a busy
#: hyper-thread sibling, clock frequency): repeated runs disagreed by up to 2x there.
MIN_RESOLVED_SECONDS = 10e-9
COPY_METHODS = ("memoryview", "numpy")
Progress = Callable[[float, str], None]
#: ``batch(dst, src, k, clock) -> ns``: time ``k`` copies of ``src`` into ``dst``.
Batch = Callable[..., int]


@dataclass(frozen=True)
class CopySettings:
    """How thoroughly to measure; see :data:`calibration.modes.MODES` for presets."""

    min_bytes: int = 64
    max_bytes: int = 64 * MiB
    points_per_octave: int = 4
    rel_tol: float = 0.02            # stop when rel. standard error of the median is below
    min_samples: int = 9
    max_samples: int = 61
    size_budget: float = 0.3         # seconds per size (warm), once min_samples are in
    fresh: bool = True
    fresh_min_samples: int = 7
    fresh_max_samples: int = 15
    fresh_budget: float = 0.15       # seconds per size (fresh)
    batch_ns: float = 200_000.0      # target duration of one warm batch
    method: str = "memoryview"
    evict_bytes: int | None = None   # None: twice the last-level cache (>= 64 MiB)
    n_resamples: int = 1999
    seed: int = 0
    step_threshold: float = 0.20     # per-byte cost jump that counts as a cache step
    processes: int = 3               # fresh processes to pool samples from (1: this one)
    size_class: bool = True          # vary size (within the bin) and placement per sample
    align: int = 16                  # placement granularity of the size-class variants
    warmup: bool = True              # warm samples beyond L1: copy an LLC's worth first


@dataclass
class CopyPoint:
    """Measurements for one buffer size (seconds per copy)."""

    nbytes: int
    warm: Summary
    fresh: Summary | None = None
    batch: int = 1

    @property
    def resolved(self) -> bool:
        """Whether the warm median is a usable measurement (see :func:`is_resolved`)."""
        return is_resolved(self.warm)


def is_resolved(s: Summary) -> bool:
    """Median >= MIN_RESOLVED_SECONDS with a 95 % CI within +-RESOLVE_REL of it.

    Copies of a few hundred bytes cost about a nanosecond on top of the call that
    carries them; Python-level timing cannot tell that apart reproducibly.
    """
    return (s.median >= MIN_RESOLVED_SECONDS and s.ci_low > 0
            and (s.ci_high - s.ci_low) / 2 <= RESOLVE_REL * s.median)


@dataclass
class CopyResult:
    """All sizes, the detected cache steps and how they were measured."""

    points: list[CopyPoint]
    steps: list[dict] = field(default_factory=list)
    call_overhead: float = 0.0       # seconds, warm single copy of 1 byte (subtracted)
    evict_bytes: int = 0
    method: str = "memoryview"
    seconds: float = 0.0             # wall time of the measurement
    passes: int = 0                  # passes over all sizes, summed over processes
    processes: int = 1               # fresh processes the samples were pooled from
    points_per_octave: int = 4       # grid density (a size class spans one grid step)
    size_class: bool = False         # samples varied size and placement within the class
    align: int = 1                   # placement granularity of the variants, bytes
    warmup_bytes: int = 0            # untimed copying before a warm sample beyond L1

    def resolved(self) -> list[CopyPoint]:
        """Points whose warm copy time is resolved (see :attr:`CopyPoint.resolved`)."""
        return [p for p in self.points if p.resolved]

    def unresolved(self) -> list[CopyPoint]:
        """Points whose copy time could not be told from the call overhead and noise."""
        return [p for p in self.points if not p.resolved]


# ---------------------------------------------------------------------------
# sizes and buffers


def copy_sizes(min_bytes: int, max_bytes: int, points_per_octave: int) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` (both included), geometric with
    ``points_per_octave`` points per doubling, rounded to whole bytes."""
    if min_bytes < 1 or max_bytes < min_bytes or points_per_octave < 1:
        raise ValueError("need 1 <= min_bytes <= max_bytes and points_per_octave >= 1")
    octaves = math.log2(max_bytes / min_bytes)
    count = int(math.floor(octaves * points_per_octave + 1e-9))
    sizes = {int(round(min_bytes * 2 ** (i / points_per_octave))) for i in range(count + 1)}
    sizes.add(int(max_bytes))
    return sorted(sizes)


def cache_sizes() -> list[dict]:
    """Data/unified caches of CPU 0 from sysfs: ``[{"level", "type", "bytes"}]``."""
    caches = []
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            p = Path(d)
            ctype = (p / "type").read_text().strip()
            level = int((p / "level").read_text())
            size = (p / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if ctype == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        try:
            nbytes = int(size.rstrip("KMG")) * mult
        except ValueError:
            continue
        caches.append({"level": level, "type": ctype, "bytes": nbytes})
    return caches


def warmup_bytes(cfg: CopySettings) -> int:
    """Bytes of untimed copying before a warm sample that does not fit the L1 cache:
    the last-level cache's capacity (half the eviction buffer), at least 32 MiB."""
    if not cfg.warmup:
        return 0
    return max(int(cfg.evict_bytes or default_evict_bytes()) // 2, 32 * MiB)


def default_evict_bytes() -> int:
    """Twice the largest cache, at least 64 MiB, at most 1 GiB."""
    largest = max((c["bytes"] for c in cache_sizes()), default=0)
    return int(min(max(2 * largest, 64 * MiB), 1 << 30))


class _Buffers:
    """Source, destination and eviction buffers, touched once so that no page
    fault lands in a timed copy."""

    def __init__(self, max_bytes: int, evict_bytes: int, method: str) -> None:
        self.src = np.empty(max_bytes, dtype=np.uint8)
        self.dst = np.empty(max_bytes, dtype=np.uint8)
        self.src.fill(1)
        self.dst.fill(2)
        words = max(evict_bytes // 8, 1)
        self.evict64 = np.zeros(words, dtype=np.uint64)
        self.evict64 += 1
        self.method = method
        if method == "memoryview":
            self.msrc, self.mdst = memoryview(self.src), memoryview(self.dst)
        else:
            self.msrc, self.mdst = self.src, self.dst

    def pair(self, nbytes: int, src_at: int = 0, dst_at: int = 0):
        """(dst, src) views of ``nbytes`` at byte offsets ``dst_at`` and ``src_at``."""
        return self.mdst[dst_at:dst_at + nbytes], self.msrc[src_at:src_at + nbytes]

    def evict(self) -> None:
        """Rewrite the eviction buffer (read-modify-write, so that the stores go
        through the cache; memset may use non-temporal stores that evict nothing)."""
        self.evict64 += 1


def _batch_memoryview(dst, src, k: int, clock=time.perf_counter_ns) -> int:
    """ns (of ``clock``) for ``k`` copies ``dst[:] = src`` (one memcpy each)."""
    t0 = clock()
    for _ in range(k):
        dst[:] = src
    return clock() - t0


def _batch_numpy(dst, src, k: int, clock=time.perf_counter_ns) -> int:
    """ns (of ``clock``) for ``k`` calls ``np.copyto(dst, src)``."""
    copyto = np.copyto
    t0 = clock()
    for _ in range(k):
        copyto(dst, src)
    return clock() - t0


_BATCH = {"memoryview": _batch_memoryview, "numpy": _batch_numpy}


# ---------------------------------------------------------------------------
# measurement


class _Series:
    """Samples of one size and one buffer state, collected over several passes."""

    def __init__(self, lo: int, hi: int, budget: float) -> None:
        self.samples: list[float] = []
        self.spent = 0.0  # seconds spent measuring
        self.lo, self.hi, self.budget = lo, hi, budget

    def done(self, rel_tol: float) -> bool:
        """Enough: the median is stable, or the sample/time budget is spent."""
        n = len(self.samples)
        if n >= self.hi:
            return True
        if n < self.lo:
            return False
        if self.spent > self.budget:
            return True
        return median_rel_se(np.asarray(self.samples)) <= rel_tol

    def take(self, measure: Callable[[], float], count: int, rel_tol: float) -> None:
        """Add up to ``count`` samples from ``measure()`` unless already done."""
        started = time.perf_counter()
        for _ in range(count):
            if self.done(rel_tol):
                break
            self.samples.append(measure())
        self.spent += time.perf_counter() - started


def _batch_size(batch: Batch, buffers: _Buffers, nbytes: int, target_ns: float) -> int:
    """Copies per warm batch so that one batch lasts about ``target_ns``."""
    dst, src = buffers.pair(nbytes)
    batch(dst, src, 1)  # warm the buffers and the code path
    per_copy = max(batch(dst, src, 8) / 8.0, 1.0)
    return int(min(max(target_ns // per_copy, 1), 100_000))


def _single_call_overhead(batch: Batch, buffers: _Buffers, timer: TimerCalibration,
                          samples: int = 301) -> float:
    """Median ns of one warm 1-byte copy, timer read removed (subtracted from fresh copies)."""
    dst, src = buffers.pair(1)
    batch(dst, src, 10)
    return float(np.median([timer.correct(batch(dst, src, 1)) for _ in range(samples)]))


Variant = tuple[int, int, int]  # (bytes, source offset, destination offset)


def size_class(nbytes: int, points_per_octave: int, limit: int) -> tuple[int, int]:
    """The bin of table size ``nbytes``: sizes within half a grid step of it (a
    factor ``2 ** (1 / (2 * points_per_octave))`` either way), capped at ``limit``."""
    half = 2.0 ** (0.5 / points_per_octave)
    return max(1, int(math.ceil(nbytes / half))), min(limit, int(nbytes * half))


def variant_picker(nbytes: int, cfg: CopySettings, limit: int,
                   rng: np.random.Generator) -> Callable[[], Variant]:
    """``f()`` -> the next variant of size ``nbytes``: with ``cfg.size_class`` a size
    drawn log-uniformly from its bin and ``cfg.align``-aligned offsets drawn uniformly
    in buffers of ``limit`` bytes; without, always ``(nbytes, 0, 0)``."""
    if not cfg.size_class:
        return lambda: (nbytes, 0, 0)
    lo, hi = size_class(nbytes, cfg.points_per_octave, limit)
    a = max(1, cfg.align)

    def pick() -> Variant:
        size = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        size = min(max(size, lo), hi)
        room = (limit - size) // a
        src_at, dst_at = (int(x) * a for x in rng.integers(0, room + 1, 2))
        return size, src_at, dst_at

    return pick


def warmup_copies(size: int, warm_bytes: int, l1_bytes: int) -> int:
    """Untimed copies before a warm sample: one while source and destination fit
    the L1 cache, else enough to move ``warm_bytes`` (the caches below reach the
    steady state of repeated copies whatever the previous sample left behind)."""
    if 2 * size <= l1_bytes or warm_bytes <= 0:
        return 1
    return max(1, -(-warm_bytes // size))


def warm_sampler(batch: Batch, buffers: _Buffers, nbytes: int, k: int,
                 timer: TimerCalibration, pick: Callable[[], Variant] | None = None,
                 warm_bytes: int = 0, l1_bytes: int = 32 << 10) -> Callable[[], float]:
    """``f()`` -> one warm sample, ns per copy of ``nbytes``: for the next variant
    (``pick()``, default ``nbytes`` at offset 0), untimed copies to bring its
    buffers into the steady state of repeated copies (:func:`warmup_copies`), then
    paired batches of ``k`` copies of the variant and of its first byte, in
    alternating order, timed in thread CPU time; the per-copy difference is scaled
    by ``nbytes / size`` (the variant's per-byte cost)."""
    pick = pick or (lambda: (nbytes, 0, 0))
    cpu, correct = time.thread_time_ns, timer.correct_cpu
    flip = [False]

    def sample() -> float:
        size, src_at, dst_at = pick()
        dst, src = buffers.pair(size, src_at, dst_at)
        bdst, bsrc = buffers.pair(1, src_at, dst_at)
        batch(dst, src, warmup_copies(size, warm_bytes, l1_bytes))  # untimed
        flip[0] = not flip[0]
        if flip[0]:
            work = correct(batch(dst, src, k, cpu))
            base = correct(batch(bdst, bsrc, k, cpu))
        else:
            base = correct(batch(bdst, bsrc, k, cpu))
            work = correct(batch(dst, src, k, cpu))
        return (work - base) / k * (nbytes / size)

    return sample


def fresh_sampler(batch: Batch, buffers: _Buffers, nbytes: int, timer: TimerCalibration,
                  overhead_ns: float,
                  pick: Callable[[], Variant] | None = None) -> Callable[[], float]:
    """``f()`` -> one cache-cold sample, ns: next variant, evict, re-warm the code
    path, time one copy (scaled to ``nbytes`` like :func:`warm_sampler`)."""
    pick = pick or (lambda: (nbytes, 0, 0))
    wdst, wsrc = buffers.pair(1)

    def sample() -> float:
        size, src_at, dst_at = pick()
        dst, src = buffers.pair(size, src_at, dst_at)
        buffers.evict()
        # re-warm the interpreter path and the view objects, not the buffers' bytes
        wdst[:] = wsrc
        _ = (len(dst), len(src))
        return (timer.correct(batch(dst, src, 1)) - overhead_ns) * (nbytes / size)

    return sample


def sample_copy_cost(timer: TimerCalibration, cfg: CopySettings, sizes: list[int], *,
                     progress: Progress | None = None) -> dict:
    """Raw samples (ns per copy) of every size in this process.

    Samples are taken in passes over all sizes (a few per size and pass) rather
    than size after size, so that a change in machine load during the run is
    spread over every size -- it widens the reported spread instead of shifting
    the sizes that happened to be measured at the time. Returns ``{"warm": {n:
    [ns]}, "fresh": {n: [ns]}, "k": {n: batch}, "overhead_ns": ..., "passes": ...}``.
    """
    evict_bytes = int(cfg.evict_bytes or default_evict_bytes())
    limit = sizes[-1] + (cfg.align if cfg.size_class else 0)  # room to move the largest
    buffers = _Buffers(limit, evict_bytes if cfg.fresh else 8, cfg.method)
    batch = _BATCH[cfg.method]
    overhead_ns = _single_call_overhead(batch, buffers, timer)
    ks = {n: _batch_size(batch, buffers, n, cfg.batch_ns) for n in sizes}
    warm = {n: _Series(cfg.min_samples, cfg.max_samples, cfg.size_budget) for n in sizes}
    fresh = {n: _Series(cfg.fresh_min_samples, cfg.fresh_max_samples, cfg.fresh_budget)
             for n in sizes} if cfg.fresh else {}
    rng = np.random.default_rng(cfg.seed)
    warm_bytes = warmup_bytes(cfg)
    l1 = min((c["bytes"] for c in cache_sizes() if c["level"] == 1), default=32 << 10)
    samplers = {n: (warm_sampler(batch, buffers, n, ks[n], timer,
                                 variant_picker(n, cfg, limit, rng), warm_bytes, l1),
                    fresh_sampler(batch, buffers, n, timer, overhead_ns,
                                  variant_picker(n, cfg, limit, rng))) for n in sizes}
    series = list(warm.values()) + list(fresh.values())
    chunk = max(2, -(-cfg.min_samples // 3))
    fresh_chunk = max(1, -(-cfg.fresh_min_samples // 3))
    passes = 0
    while not all(x.done(cfg.rel_tol) for x in series):
        passes += 1
        for i, n in enumerate(sizes):
            todo_fresh = cfg.fresh and not fresh[n].done(cfg.rel_tol)
            if warm[n].done(cfg.rel_tol) and not todo_fresh:
                continue
            if progress:
                done = sum(x.done(cfg.rel_tol) for x in series) / len(series)
                progress(done, f"pass {passes}, {fmt_bytes(n)} ({i + 1}/{len(sizes)})")
            if not warm[n].done(cfg.rel_tol):
                warm[n].take(samplers[n][0], chunk, cfg.rel_tol)
            if todo_fresh:
                fresh[n].take(samplers[n][1], fresh_chunk, cfg.rel_tol)
    return {"warm": {n: x.samples for n, x in warm.items()},
            "fresh": {n: x.samples for n, x in fresh.items()},
            "k": ks, "overhead_ns": overhead_ns, "passes": passes,
            "evict_bytes": evict_bytes if cfg.fresh else 0}


def _share(cfg: CopySettings, processes: int) -> CopySettings:
    """One process's part of the samples and budgets (the pooled total stays the same)."""
    p = processes
    return dataclasses.replace(
        cfg, processes=1, rel_tol=cfg.rel_tol * math.sqrt(p),
        min_samples=max(3, -(-cfg.min_samples // p)), max_samples=-(-cfg.max_samples // p),
        size_budget=cfg.size_budget / p,
        fresh_min_samples=max(2, -(-cfg.fresh_min_samples // p)),
        fresh_max_samples=max(2, -(-cfg.fresh_max_samples // p)),
        fresh_budget=cfg.fresh_budget / p)


def measure_copy_cost(timer: TimerCalibration, cfg: CopySettings | None = None,
                      progress: Progress | None = None) -> CopyResult:
    """Measure warm (and fresh) copy times for every size of the grid.

    With ``cfg.processes > 1`` the samples come from that many fresh processes, one
    after another, and are pooled (see :mod:`calibration.workers` for why).
    """
    cfg = cfg or CopySettings()
    if cfg.method not in COPY_METHODS:
        raise ValueError(f"unknown copy method {cfg.method!r} (use {', '.join(COPY_METHODS)})")
    sizes = copy_sizes(cfg.min_bytes, cfg.max_bytes, cfg.points_per_octave)
    t_start = time.perf_counter()
    if cfg.processes <= 1:
        raws = [sample_copy_cost(timer, cfg, sizes, progress=progress)]
    else:
        from calibration.workers import run_in_fresh_process

        share = _share(cfg, cfg.processes)
        raws = []
        for i in range(cfg.processes):
            def relay(f: float, msg: str, i: int = i) -> None:
                if progress:
                    progress((i + f) / cfg.processes, f"process {i + 1}/{cfg.processes}, {msg}")
            mine = dataclasses.replace(share, seed=cfg.seed * 1009 + i + 1)  # own variants
            raws.append(run_in_fresh_process(sample_copy_cost, (timer, mine, sizes), relay))
    return _pool(raws, cfg, sizes, time.perf_counter() - t_start)


def _pool(raws: list[dict], cfg: CopySettings, sizes: list[int], seconds: float) -> CopyResult:
    """Summaries of the pooled samples of every size, plus steps."""
    points = []
    for i, n in enumerate(sizes):
        warm = [np.asarray(r["warm"][n]) * 1e-9 for r in raws]
        k = int(np.median([r["k"][n] for r in raws]))
        point = CopyPoint(n, summarize_groups(warm, cfg.n_resamples, cfg.seed + i), batch=k)
        if cfg.fresh:
            fresh = [np.asarray(r["fresh"][n]) * 1e-9 for r in raws]
            point.fresh = summarize_groups(fresh, cfg.n_resamples, cfg.seed + i)
        points.append(point)
    result = CopyResult(points=points,
                        call_overhead=float(np.median([r["overhead_ns"] for r in raws])) * 1e-9,
                        evict_bytes=raws[0]["evict_bytes"], method=cfg.method, seconds=seconds,
                        passes=sum(r["passes"] for r in raws), processes=len(raws),
                        points_per_octave=cfg.points_per_octave, size_class=cfg.size_class,
                        align=cfg.align if cfg.size_class else 1,
                        warmup_bytes=warmup_bytes(cfg))
    result.steps = detect_steps(result.resolved(), cfg.step_threshold, cache_sizes())
    return result


# ---------------------------------------------------------------------------
# analysis


def detect_steps(points: list[CopyPoint], threshold: float = 0.20,
                 caches: list[dict] | None = None) -> list[dict]:
    """Cache-level steps: sizes where the warm per-byte cost is more than
    ``threshold`` (relative) above the cost one octave smaller, and the two
    confidence intervals do not overlap. Overlapping jumps form one step.

    Each step: ``from_bytes`` (octave below the jump), ``to_bytes`` (largest cost in
    the jump), per-byte costs, their ratio, and the cache whose capacity the
    working set (source + destination = 2 s) crosses there, if one matches.
    """
    if len(points) < 2:
        return []
    s = np.array([p.nbytes for p in points], dtype=float)
    c = np.array([p.warm.median for p in points]) / s
    lo = np.array([p.warm.ci_low for p in points]) / s
    hi = np.array([p.warm.ci_high for p in points]) / s
    logs = np.log2(s)
    jumps = []  # (index an octave below, flagged index)
    for i in range(len(s)):
        j = int(np.argmin(np.abs(logs - (logs[i] - 1.0))))
        if j >= i or abs(logs[j] - (logs[i] - 1.0)) > 0.26:
            continue
        if c[i] > (1.0 + threshold) * c[j] and lo[i] > hi[j]:
            jumps.append((j, i))
    # overlapping [below, flagged] ranges are one step
    merged: list[list[int]] = []
    for j, i in jumps:
        if merged and j <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], i)
        else:
            merged.append([j, i])
    steps = []
    for below, last in merged:
        top = max(range(below + 1, last + 1), key=lambda i: c[i])
        steps.append(_step(s, c, below, top, caches or []))
    return steps


def _step(s: np.ndarray, c: np.ndarray, below: int, above: int, caches: list[dict]) -> dict:
    """One step record, labelled with the cache whose capacity 2·s crosses there."""
    centre = math.sqrt(s[below] * s[above])
    label = None
    best = math.inf
    for cache in caches:
        crossing = cache["bytes"] / 2.0  # source + destination fill the cache
        if s[below] / 2 <= crossing <= 2 * s[above]:
            dist = abs(math.log2(crossing / centre))
            if dist < best:
                best = dist
                label = f"L{cache['level']} ({fmt_bytes(cache['bytes'])})"
    return {"from_bytes": int(s[below]), "to_bytes": int(s[above]),
            "per_byte_from": float(c[below]), "per_byte_to": float(c[above]),
            "ratio": float(c[above] / c[below]), "cache": label}


def monotone_violations(points: list[CopyPoint]) -> list[tuple[int, int]]:
    """Neighbouring sizes ``(smaller, larger)`` whose copy time decreases by more
    than the spread: the larger size's third quartile is below the smaller's first."""
    bad = []
    for a, b in zip(points, points[1:], strict=False):
        if b.warm.q3 < a.warm.q1:
            bad.append((a.nbytes, b.nbytes))
    return bad
