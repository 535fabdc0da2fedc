"""Writer probe: per-record cost of writing OTF2 records through the ``otf2`` package.

The paper's calibration: write ``N`` records back to back and divide by ``N``.
Here the records go through ``otf2.writer`` event writers (Python bindings over
the OTF2 C library), one record kind at a time: Enter, Leave, MpiSend, MpiRecv,
MpiCollectiveBegin, MpiCollectiveEnd, Metric.

What one sample is: a fresh location (its own event buffer, so no buffer flush
falls into the timed loop -- flushes are BufferFlush records, compensated
separately) in a scratch archive per repetition (an open archive keeps ~6 MiB per
location until it is closed), ``warmup`` untimed records, then ``N`` timed records. The per-record
cost is ``(elapsed - timer read) / N`` minus the same loop calling a no-op of the
same shape (the probe's own loop, not the tracer's cost). ``elapsed`` is the
thread's CPU time: a sample lasts milliseconds, long enough for the scheduler of
a shared machine to run other processes in between, which would count in wall
time (the wall-clock medians are kept too, under ``wall_seconds``). Repetitions are
interleaved over kinds (rep 1 of every kind, then rep 2, ...) so that slow drift
of a noisy machine spreads over all kinds instead of biasing one.

The repetitions are shared out over several fresh processes (``processes``, run
one after another). The per-record cost is a property of the process as much as
of the machine: on this VM the medians of ten processes spread over 3.23-3.39 µs
(sd 1.4 %) while the repetitions within one process agreed within ~0.3 %. So a
kind's median is the median of the process medians and its 95 % CI the
order-statistic interval over those process medians
(:func:`calibration.stats.summarize_rounds`): it says how well one run pins the
number down, and two runs' intervals overlap unless the machine changed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from calibration.stats import MIN_ROUNDS, Summary, summarize, summarize_rounds
from calibration.timer import TimerCalibration

PROBE_KINDS: tuple[str, ...] = ("Enter", "Leave", "MpiSend", "MpiRecv",
                                "MpiCollectiveBegin", "MpiCollectiveEnd", "Metric")
#: Kinds whose pooled median becomes ``event_overhead`` (the plain function event).
BASE_KINDS = ("Enter", "Leave")
CHUNK_BYTES = 4 << 20  # event chunk per location: holds every probe's records
DEF_CHUNK_BYTES = 256 << 10  # definition chunk per location (OTF2 minimum): memory at close
MAX_RECORDS = 100_000  # so that N records (<= ~40 B each) fit into one chunk
Progress = Callable[[float, str], None]


class WriterProbeError(Exception):
    """The probe could not run (one-line message)."""


@dataclass(frozen=True)
class WriterSettings:
    """Records per sample, samples per kind, and statistics settings."""

    records: int = 20_000
    repetitions: int = 12            # in all, shared out over the processes
    warmup: int = 200
    kinds: tuple[str, ...] = PROBE_KINDS
    n_resamples: int = 1999
    seed: int = 0
    processes: int = 6               # fresh processes (1: this one, CI within it only)


@dataclass
class WriterProbeResult:
    """Seconds per record for each kind; the harness loop already subtracted."""

    kinds: dict[str, Summary]
    event_overhead: Summary          # pooled over BASE_KINDS
    harness: Summary                 # the empty loop, per iteration (subtracted)
    records: int
    repetitions: int
    flushes: int = 0                 # buffer flushes during timed loops (should be 0)
    seconds: float = 0.0
    samples: dict[str, list[float]] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)  # wall-clock medians, seconds
    processes: int = 1               # fresh processes the repetitions were shared out over
    process_medians: list[float] = field(default_factory=list)  # event_overhead, per process

    def by_kind(self) -> dict[str, float]:
        """``event_overhead_by_kind`` for the platform file (median per kind)."""
        return {k: s.median for k, s in self.kinds.items()}

    def to_dict(self) -> dict:
        """Platform-file form (key ``writer_probe``)."""
        import otf2

        return {
            "method": "otf2 Python writer, N records back to back per fresh location",
            "clock": "thread CPU time (time.thread_time_ns)",
            "otf2_version": getattr(otf2, "__version__", "unknown"),
            "records_per_sample": self.records,
            "samples_per_kind": self.repetitions,
            "processes": self.processes,
            "ci": ("order-statistic 95 % interval of the median over the process medians"
                   if self.processes >= MIN_ROUNDS else
                   "95 % bootstrap interval of the median within the process(es)"),
            "event_overhead_process_medians": list(self.process_medians),
            "harness_seconds_per_record": self.harness.median,
            "flushes_during_timing": self.flushes,
            "event_overhead_from": list(BASE_KINDS),
            "event_overhead": self.event_overhead.to_dict(),
            "kinds": {k: s.to_dict() for k, s in self.kinds.items()},
            "wall_seconds": dict(self.wall),
            "seconds": self.seconds,
        }


class _Archive:
    """A scratch OTF2 archive with the definitions every probe record refers to."""

    def __init__(self, directory: str) -> None:
        import otf2
        from otf2.enums import GroupType, Paradigm

        self.flushes = 0
        self._ctx = otf2.writer.open(os.path.join(directory, "probe"), timer_resolution=10**9,
                                     chunk_size_events=CHUNK_BYTES,
                                     chunk_size_definitions=DEF_CHUNK_BYTES,
                                     pre_flush=self._pre_flush)
        self.writer = self._ctx.__enter__()
        defs = self.writer.definitions
        root = defs.system_tree_node("calibrate")
        self.group = defs.location_group("probe process", system_tree_parent=root)
        self.region = defs.region("probe_function")
        first = defs.location("probe main", group=self.group)
        members = defs.group("probe comm locations", group_type=GroupType.COMM_LOCATIONS,
                             paradigm=Paradigm.MPI, members=[first])
        self.comm = defs.comm("MPI_COMM_WORLD", group=members, parent=None)
        self.metric = defs.metric("PAPI_TOT_INS", unit="#")
        self._count = 0

    def _pre_flush(self, user_data, file_type, location, caller_data, final):
        """Count flushes that happen while records are written (not at close)."""
        from otf2.enums import FlushType

        if not final:  # a full buffer (closing the archive flushes with final set)
            self.flushes += 1
        return FlushType.FLUSH

    def new_writer(self):
        """An event writer of a new location: empty buffer, no flush pending."""
        self._count += 1
        loc = self.writer.definitions.location(f"probe {self._count}", group=self.group)
        return self.writer.event_writer_from_location(loc)

    def close(self) -> None:
        self._ctx.__exit__(None, None, None)


def _open_archive(directory: str) -> _Archive:
    """A scratch archive in ``directory`` (WriterProbeError if the library refuses)."""
    try:
        return _Archive(directory)
    except Exception as exc:  # noqa: BLE001 - the otf2 library raises many kinds
        raise WriterProbeError(f"writer probe: cannot open an OTF2 archive in {directory}: "
                               f"{exc}") from None


def _record_function(kind: str, w, a: _Archive) -> Callable[[int], None]:
    """``f(t)`` writing one record of ``kind`` at time ``t`` through event writer ``w``."""
    from otf2.enums import CollectiveOp

    region, comm, metric = a.region, a.comm, a.metric
    table: dict[str, Callable[[int], None]] = {
        "Enter": lambda t: w.enter(t, region),
        "Leave": lambda t: w.leave(t, region),
        "MpiSend": lambda t: w.mpi_send(t, 0, comm, 7, 1024),
        "MpiRecv": lambda t: w.mpi_recv(t, 0, comm, 7, 1024),
        "MpiCollectiveBegin": lambda t: w.mpi_collective_begin(t),
        "MpiCollectiveEnd": lambda t: w.mpi_collective_end(t, CollectiveOp.ALLREDUCE, comm,
                                                           0, 8, 8),
        "Metric": lambda t: w.metric(t, metric, [12345]),
    }
    if kind not in table:
        raise WriterProbeError(f"writer probe: no probe for record kind {kind!r} "
                         f"(available: {', '.join(table)})")
    return table[kind]


def _time_loop(fn: Callable[[int], None], start: int, n: int) -> tuple[int, int]:
    """(wall ns, thread CPU ns) for ``fn(t)`` with ``t = start .. start+n-1``."""
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    w0, c0 = wall(), cpu()
    for t in range(start, start + n):
        fn(t)
    c1, w1 = cpu(), wall()
    return w1 - w0, c1 - c0


def _noop(t: int) -> None:
    """The harness: same call shape as a record function, no work."""


def probe_samples(timer: TimerCalibration, cfg: WriterSettings,
                  progress: Progress | None = None) -> dict:
    """Raw samples of this process, ns per record: ``{"per": {kind: [ns]}, "wall":
    {kind: [ns]}, "harness": [ns], "flushes": n}`` for ``cfg.repetitions`` repetitions."""
    per: dict[str, list[float]] = {k: [] for k in cfg.kinds}
    wall: dict[str, list[float]] = {k: [] for k in cfg.kinds}
    harness: list[float] = []
    flushes = 0
    with tempfile.TemporaryDirectory(prefix="calibrate-probe-") as tmp:
        for rep in range(cfg.repetitions):
            if progress:
                progress(rep / cfg.repetitions, f"repetition {rep + 1}/{cfg.repetitions}")
            archive = _open_archive(os.path.join(tmp, f"rep{rep}"))
            try:
                _time_loop(_noop, 0, cfg.warmup)
                hw, hc = _time_loop(_noop, 0, cfg.records)
                h = timer.correct_cpu(hc) / cfg.records
                h_wall = timer.correct(hw) / cfg.records
                harness.append(h)
                for kind in cfg.kinds:
                    fn = _record_function(kind, archive.new_writer(), archive)
                    _time_loop(fn, 0, cfg.warmup)
                    ew, ec = _time_loop(fn, cfg.warmup, cfg.records)
                    per[kind].append(timer.correct_cpu(ec) / cfg.records - h)
                    wall[kind].append(timer.correct(ew) / cfg.records - h_wall)
            finally:
                flushes += archive.flushes
                archive.close()
    return {"per": per, "wall": wall, "harness": harness, "flushes": flushes}


def run_writer_probe(timer: TimerCalibration, cfg: WriterSettings | None = None,
                     progress: Progress | None = None) -> WriterProbeResult:
    """Time N records per kind, ``repetitions`` times in all, interleaved over kinds,
    shared out over ``processes`` fresh processes (one after another)."""
    cfg = cfg or WriterSettings()
    if not 1 <= cfg.records <= MAX_RECORDS:
        raise WriterProbeError(f"writer probe: records per sample must be 1..{MAX_RECORDS}")
    if cfg.repetitions < 1:
        raise WriterProbeError("writer probe: need at least one repetition")
    started = time.perf_counter()
    if cfg.processes <= 1:
        raws = [probe_samples(timer, cfg, progress)]
    else:
        from calibration.workers import run_in_fresh_process

        p = cfg.processes
        share = dataclasses.replace(cfg, processes=1, repetitions=math.ceil(cfg.repetitions / p))
        raws = []
        for i in range(p):
            def relay(f: float, msg: str, i: int = i) -> None:
                if progress:
                    progress((i + f) / p, f"process {i + 1}/{p}, {msg}")
            raws.append(run_in_fresh_process(probe_samples, (timer, share), relay))
    return _summarize_probe(raws, cfg, time.perf_counter() - started)


def _summarize_probe(raws: list[dict], cfg: WriterSettings, seconds: float) -> WriterProbeResult:
    """Per-kind summaries in seconds over the processes' samples (median of the
    process medians, CI over them with enough processes); ``event_overhead`` pools
    Enter and Leave within each process."""
    def summary(groups: list[list[float]], seed: int) -> Summary:
        arrays = [np.asarray(g) * 1e-9 for g in groups]
        if len(arrays) == 1:
            return summarize(arrays[0], cfg.n_resamples, seed)
        return summarize_rounds(arrays, cfg.n_resamples, seed)

    kinds = {k: summary([r["per"][k] for r in raws], cfg.seed + i)
             for i, k in enumerate(cfg.kinds)}
    base_kinds = [k for k in BASE_KINDS if k in cfg.kinds] or list(cfg.kinds)
    base = [[x for k in base_kinds for x in r["per"][k]] for r in raws]
    harness = [x for r in raws for x in r["harness"]]
    return WriterProbeResult(
        kinds=kinds, event_overhead=summary(base, cfg.seed),
        harness=summarize(np.asarray(harness) * 1e-9, cfg.n_resamples),
        records=cfg.records, repetitions=sum(len(r["harness"]) for r in raws),
        flushes=sum(r["flushes"] for r in raws), seconds=seconds,
        samples={k: [x * 1e-9 for r in raws for x in r["per"][k]] for k in cfg.kinds},
        wall={k: float(np.median([x for r in raws for x in r["wall"][k]])) * 1e-9
              for k in cfg.kinds},
        processes=len(raws), process_medians=[float(np.median(np.asarray(g) * 1e-9)) for g in base])
