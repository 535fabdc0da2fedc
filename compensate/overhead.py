"""Which tracer overhead ``compensate`` removes, and where it came from.

In order of precedence (docs/compensation.md, "Which overhead"):

1. ``--overhead DURATION`` (``overhead=``): one value for every record
   (source ``command line``), with the platform file's copy cost if one is given;
2. ``--platform FILE``: the platform file's per-kind overhead (``platform file``),
   unless the file says ``prefer_insitu`` and the trace carries in-situ tables
   (then 3. with the file's copy cost); ``--overhead platform`` forces the file's;
3. the trace's own in-situ tables, when neither is given (``trace in-situ``,
   :mod:`compensate.insitu`): per location, per kind and per region;
   ``--overhead insitu`` asks for them explicitly (with ``--platform`` only
   the platform's copy cost is then used);
4. ``--overhead estimate``: an estimate from the trace's records alone
   (:func:`estimate`), for traces that carry no measurement (Score-P).

Without any of these the command stops (exit 2) as before. The summary's
``overhead`` object says which one was used (``source``), from where, and what
it was overridden by or estimated from; the one-line summary names the source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import compensate.insitu as insitu
from compensate.formats.otf2.overheads import ATTRIBUTE
from compensate.model import BUFFER_FLUSH, KIND_CODE, KIND_NAMES, Definitions, Events, Trace
from compensate.platform import Platform

#: ``--overhead`` words that are no duration.
KEYWORDS = ("insitu", "estimate", "platform")
#: Kinds whose in-trace bound enters the estimate need at least this many gaps.
MIN_GAPS = 10
#: What the summary says of per-record overheads under the trace's in-situ tables.
PER_RECORD = (f"a record's own {ATTRIBUTE} attribute where it carries one "
              "(the tracer's cost after it, measured in the run), else its location's table "
              "(a traced function's Enter/Leave: its sampled decorator layers where the "
              "table measured them, name/Layer)")


def choose(platform: Platform | None, overhead: Any,
           definitions: Callable[[], Definitions],
           estimated: Callable[[Platform | None], tuple[Platform, dict[str, Any]]],
           needed: bool, cold_calls: bool = False,
           speed: Callable[[Platform], tuple[Platform, dict[str, Any]]] | None = None
           ) -> tuple[Platform | None, dict[str, Any]]:
    """The platform to compensate with and the summary's ``overhead`` object.

    ``platform``: what ``--platform``/``--overhead DURATION`` resolved to (None if
    neither, or if ``overhead`` is a keyword); ``overhead``: the ``--overhead``
    value as given; ``definitions`` reads the input's definitions when needed,
    ``estimated(platform)`` estimates the overhead from the trace (:func:`estimate`,
    or a stream's :func:`estimate_from`); ``needed``: the bound removes overhead
    (False for ``none``).

    A platform file with ``prefer_insitu`` (the mpi4py tracer's, written beside its
    trace) gives way to the trace's in-situ tables where there are any;
    ``--overhead platform`` forces the file's overhead. Where the file's overhead
    is used and the trace carries tables, the object says so (``insitu_tables``:
    how many locations have one) and the summary line mentions it.
    ``cold_calls``: also charge the tables' cold-call curves
    (:meth:`Platform.cold_charge <compensate.platform.Platform.cold_charge>`;
    ``--cold-calls``, off by default: docs/calibration.md, "Cold calls").
    ``speed(platform)``: the file's overhead scaled to the trace's speed and the
    object's ``speed`` entry (:func:`compensate.speed.at_trace_speed`), asked for
    where the file's overhead is used and the file has a ``speed_reference``;
    None (``--speed platform``): the file's overhead as it is."""
    keyword = overhead if isinstance(overhead, str) and overhead in KEYWORDS else None
    if keyword is None and overhead is not None:
        return platform, {"source": "command line", "seconds": platform.event_overhead}
    if keyword == "estimate":
        est_platform, info = estimated(platform)
        return est_platform, {"source": "estimate", **info}
    if keyword == "platform" and platform is None:
        raise ValueError("--overhead platform needs --platform FILE (the platform file "
                         "whose overhead to use)")
    if platform is not None and keyword in (None, "platform") and needed:
        defs = definitions()
        tables = len(defs.insitu)
        if keyword is None and platform.prefer_insitu and tables:
            found = insitu.platform_of(defs, platform, use_cold=cold_calls)
            return found, {"source": "trace in-situ", "locations": tables,
                           "preferred_by": "platform file (prefer_insitu)",
                           "per_record": PER_RECORD,
                           "by_location": insitu.describe(found)}
        info: dict[str, Any] = {"source": "platform file"}
        if keyword == "platform":
            info["forced"] = "--overhead platform"
        if tables:
            info["insitu_tables"] = tables
        if speed is not None and platform.speed_reference:
            platform, info["speed"] = speed(platform)
        return platform, info
    if keyword is None and platform is not None:
        return platform, {"source": "platform file"}
    if keyword == "insitu" or needed:
        defs = definitions()
        found = insitu.platform_of(defs, platform, use_cold=cold_calls)
        if found is not None:
            return found, {"source": "trace in-situ",
                           "locations": len(defs.insitu),
                           "per_record": PER_RECORD,
                           "by_location": insitu.describe(found)}
        if keyword == "insitu":
            raise ValueError("--overhead insitu: the trace carries no in-situ overhead "
                             f"(no {insitu.PROPERTY} location property)")
    return platform, {"source": "none" if platform is None else "platform file"}


def phrase(info: dict[str, Any]) -> str:
    """The one-line summary's words for the overhead used."""
    source = info.get("source", "none")
    if source == "estimate":
        lo, hi = info["interval_s"]
        return (f"overhead estimated from the trace {info['seconds'] * 1e9:.4g} ns "
                f"(interval {lo * 1e9:.4g}..{hi * 1e9:.4g} ns)")
    if source == "command line":
        return f"overhead {info['seconds'] * 1e9:.4g} ns from the command line"
    if info.get("preferred_by"):
        return f"overhead from {source} (the platform file prefers it)"
    scale = info.get("speed")
    if scale is not None and "why" not in scale:
        return f"overhead from {source} x{scale['factor']:.3g} (the trace's speed)"
    if scale is not None:
        return f"overhead from {source} (not scaled to the trace's speed)"
    if source == "platform file" and info.get("insitu_tables"):
        return (f"overhead from {source} (the trace's in-situ tables unused: "
                f"--overhead insitu)")
    return f"overhead from {source}"


def kind_bounds(trace: Trace) -> dict[str, tuple[float, int]]:
    """Per record kind: (smallest gap after such a record on its location, in
    seconds; number of gaps). The in-trace bound of ``calibrate check``
    (calibration/tracecheck.py): O(kind) cannot exceed it without R1
    overcompensating that gap. A BufferFlush's own interval is taken off first."""
    gaps = KindGaps(trace.definitions)
    for loc, ev in trace.events.items():
        gaps.add(loc, ev)
    return gaps.bounds()


class KindGaps:
    """:func:`kind_bounds` of records handed on location by location in pieces (a
    stream's chunks, each location's in order): the same bounds as the whole
    trace's, the gap from a piece's last record to the next piece's first too."""

    def __init__(self, defs: Definitions) -> None:
        self.defs = defs
        self.best: dict[int, tuple[float, int]] = {}
        self.last: dict[int, tuple] = {}  # location: (time, kind, size) of its last record

    def add(self, loc: int, ev: Events) -> None:
        """Take the next records ``ev`` of location ``loc``."""
        info = self.defs.locations.get(loc)
        if not len(ev) or info is not None and not info.is_cpu:
            return
        time, kind, size = continued(self.last, loc, ev.time, ev.kind, ev.size)
        if time.size < 2:
            return
        res = float(self.defs.timer_resolution)
        gaps = np.diff(time).astype(np.float64)
        kinds = kind[:-1]
        flush = kinds == BUFFER_FLUSH
        if flush.any():
            gaps[flush] -= (size[:-1][flush] - time[:-1][flush]).astype(np.float64)
        found = {}
        for code in np.unique(kinds).tolist():
            sel = kinds == code
            found[code] = (float(gaps[sel].min()) / res, int(sel.sum()))
        self.merge(found)

    def merge(self, best: dict[int, tuple[float, int]]) -> None:
        """Take in another part's :attr:`best` (a piece of records, or other
        locations': a distributed rank's own): each kind's smallest gap over both,
        their numbers summed."""
        for code, (g, n) in best.items():
            old = self.best.get(code)
            self.best[code] = (min(g, old[0]), old[1] + n) if old else (g, n)

    def bounds(self) -> dict[str, tuple[float, int]]:
        """The bounds so far, by kind name (as :func:`kind_bounds`)."""
        return {KIND_NAMES[k]: v for k, v in sorted(self.best.items())}


@dataclass
class ShortestTransfer:
    """:func:`transfer_of` over the parts of a trace (a stream's segments, the
    ranks' shares): the shortest transfer found, unknown (None) once a part
    found a receive stamped before its send (NaN)."""

    best: float | None = None
    skewed: bool = False

    def add(self, found: float | None) -> None:
        """Take one part's :func:`transfer_of`."""
        if found is not None and np.isnan(found):
            self.skewed = True
        elif found is not None and (self.best is None or found < self.best):
            self.best = found

    def merge(self, other: ShortestTransfer) -> None:
        """Take in another part's findings (a distributed rank's)."""
        self.skewed |= other.skewed
        self.add(other.best)

    @property
    def value(self) -> float | None:
        """The shortest transfer, None where none bounds anything."""
        return None if self.skewed else self.best


def continued(last: dict[int, tuple], loc: int, *columns: np.ndarray
              ) -> tuple[np.ndarray, ...]:
    """The columns of a location's next piece of records (not empty) with the
    previous piece's last record in front where ``last`` holds one; ``last`` then
    holds this piece's. Pieces of one location handed in order so give the gaps of
    the whole location, the one across each cut too."""
    prev = last.get(loc)
    if prev is not None:
        columns = tuple(np.concatenate(([p], c)) for p, c in zip(prev, columns, strict=True))
    last[loc] = tuple(c[-1] for c in columns)
    return columns


def observed_transfers(trace: Trace) -> float | None:
    """The shortest observed transfer (seconds): of the matched point-to-point
    messages whose receiver was already waiting in its receive call when the send
    was recorded, the least time from send record to receive record. The send's
    overhead lies inside it (the message leaves after the send record's O), so
    it bounds O(send) from above across locations. None without such messages,
    and where a receive is stamped before its send: the processes' clocks disagree,
    and aligning them (:mod:`compensate.matching.clocks`) makes the tightest
    transfer between two processes a tick by construction, which bounds nothing."""
    from compensate.matching import match

    try:
        matching = match(trace)
    except Exception:  # noqa: BLE001 - an estimate, not a check: no bound then
        return None
    found = transfer_of(trace, matching)
    return None if found is not None and np.isnan(found) else found


def transfer_of(trace: Trace, matching: Any, receivers: set[int] | None = None
                ) -> float | None:
    """:func:`observed_transfers` of ``trace`` given its matching; a NaN where a
    receive is stamped before its send (no bound, whatever else is found).
    ``receivers``: of the messages (and orders) whose receive is on one of these
    locations only (a distributed rank's own)."""
    from compensate.matching.clocks import inversions

    table = matching.table
    if not len(table.send_li):
        return None
    if inversions(trace, table, matching.instances, receivers)[0]:
        return float("nan")
    locs = list(table.loc_ids)
    t = {li: trace.events[loc].time for li, loc in enumerate(locs)}
    res = float(trace.definitions.timer_resolution)
    best = None
    for sl, si, rl, ri, ei in zip(table.send_li.tolist(), table.send_idx.tolist(),
                                  table.recv_li.tolist(), table.recv_idx.tolist(),
                                  table.recv_enter_idx.tolist(), strict=True):
        if ei < 0 or receivers is not None and locs[rl] not in receivers:
            continue
        send_t, recv_t, enter_t = t[sl][si], t[rl][ri], t[rl][ei]
        if enter_t <= send_t:  # the receiver waited: the transfer was observed
            d = (recv_t - send_t) / res
            best = d if best is None or d < best else best
    return best


def estimate(trace: Trace, base: Platform | None = None) -> tuple[Platform, dict[str, Any]]:
    """An overhead from the trace's records alone, with an interval.

    Every gap after a record of kind k holds O(k) plus whatever the program did
    before its next record, so the smallest such gap bounds O(k) from above
    (:func:`kind_bounds`); for the kinds that send a message, the shortest observed
    transfer (a receiver that was already waiting) bounds it too
    (:func:`observed_transfers`). A tracer writes every record by much the same
    path, so a common O lies below the smallest bound of the kinds with at least
    :data:`MIN_GAPS` gaps (a kind whose bound is 0 -- a Metric stamped with its
    event's time -- is left out and costs nothing). The trace gives no lower limit:
    the interval is [0, that bound]. The estimate is the bound itself, the largest
    overhead the trace admits (``calibrate check``'s bound): exact where the trace
    holds back-to-back records (an MPI adapter's Enter and MpiSend), too large by
    the program's least work between two records otherwise. Each kind gets
    min(estimate, its own bound): R1 overcompensates nothing."""
    return estimate_from(kind_bounds(trace), observed_transfers(trace), base)


def estimate_from(bounds: dict[str, tuple[float, int]], transfer: float | None,
                  base: Platform | None = None) -> tuple[Platform, dict[str, Any]]:
    """:func:`estimate` from the kind bounds and the shortest observed transfer
    (a stream's, :func:`compensate.pipeline.run.estimate_pass`)."""
    bounds = dict(bounds)
    if transfer is not None:
        for kind in ("MpiSend", "MpiIsend"):
            if kind in bounds:
                g, n = bounds[kind]
                bounds[kind] = (min(g, max(transfer, 0.0)), n)
    frequent = sorted(g for g, n in bounds.values() if n >= MIN_GAPS and g > 0)
    if not frequent:
        frequent = sorted(g for g, _ in bounds.values() if g > 0) or [0.0]
    common = float(frequent[0])
    by_kind = {k: min(common, g) for k, (g, _) in bounds.items()}
    info = {"seconds": common, "interval_s": [0.0, common],
            "by_kind": by_kind, "bounds_s": {k: g for k, (g, _) in bounds.items()},
            "observed_transfer_s": transfer,
            "method": "the smallest in-trace bound of the frequent kinds; each kind "
                      "capped by its own bound (docs/compensation.md)"}
    if base is None:
        return Platform(common, by_kind), info
    return Platform(common, by_kind, base.copy_bytes, base.copy_seconds,
                    network=base.network, rma_release=base.rma_release), info


# -- a copy table that contradicts the trace ------------------------------------------

#: Point-to-point records whose ``size`` is the message's bytes: a send's buffer copy
#: lies in the gap after its record (after the send's own overhead), a receive's in
#: the gap before its record (after the record before it and that record's overhead):
#: docs/design.md §2.
COPY_SENDS = ("MpiSend", "MpiIsend")
COPY_RECEIVES = ("MpiRecv", "MpiIrecv", "MpiMrecv", "MpiImrecv")


def copy_contradictions(definitions: Definitions, chunks, platform: Platform
                        ) -> dict[str, Any]:
    """The message records whose measured gap cannot hold the platform's buffer copy.

    In the measurement model (docs/design.md §2) a send's copy ``C(s)·s`` follows
    its record and its overhead, and a receive's copy precedes its record, after
    the record before it and that record's overhead. Where the measured gap is
    shorter than overhead plus copy, the platform's copy table (or overhead)
    contradicts the trace: the rules then place the receive a whole copy after
    the receiver was ready, later than it was measured, and the compensated trace
    can come out longer than the measured one. ``chunks``: the input's records
    (:func:`compensate.formats.read_chunks`, location by location in order).
    Returns ``records`` (how many), ``by_kind``, ``max_s`` (the largest shortfall,
    seconds) and ``worst`` (``{"kind", "bytes", "copy_s", "gap_s", "location",
    "record"}`` of the record with that shortfall), ``checked`` (message records
    looked at). A send whose gap does not even hold its overhead is R1
    overcompensation (its next record is clamped and counted), not counted here."""
    res = float(definitions.timer_resolution)
    sends = np.array([KIND_CODE[k] for k in COPY_SENDS])
    recvs = np.array([KIND_CODE[k] for k in COPY_RECEIVES])
    found: dict[str, Any] = {"records": 0, "by_kind": {}, "max_s": 0.0, "worst": None,
                             "checked": 0}
    last: dict[int, tuple] = {}  # loc -> (time, overhead, kind, size) of its last record
    seen: dict[int, int] = {}
    for chunk in chunks:
        for loc, ev in chunk.items():
            info = definitions.locations.get(loc)
            if info is not None and not info.is_cpu or not len(ev):
                continue
            o = np.asarray(platform.location_overheads(loc, ev.kind, ev.region,
                                                       names=definitions.regions), float)
            start = seen.get(loc, 0)
            t, o, kind, size = continued(last, loc, ev.time.astype(np.int64), o, ev.kind,
                                         ev.size)  # (with the record before this chunk's)
            base = start - (len(t) - len(ev))
            _gaps_short(found, loc, base, t, o, kind, size, sends, recvs, platform, res)
            seen[loc] = start + len(ev)
    return found


def _gaps_short(found: dict, loc: int, base: int, t: np.ndarray, o: np.ndarray,
                kind: np.ndarray, size: np.ndarray, sends: np.ndarray, recvs: np.ndarray,
                platform: Platform, res: float) -> None:
    """:func:`copy_contradictions` for one run of a location's records (``base``: the
    location's index of the first); adds to ``found``."""
    if len(t) < 2:
        return
    gap = np.diff(t).astype(np.float64) / res - o[:-1]  # what R1 leaves of each gap, s
    after = np.isin(kind[:-1], sends)  # gap k follows record k (a send)
    before = np.isin(kind[1:], recvs)  # gap k precedes record k + 1 (a receive)
    at = np.concatenate((np.flatnonzero(after), np.flatnonzero(before)))
    if not at.size:
        return
    rec = np.concatenate((np.flatnonzero(after), np.flatnonzero(before) + 1))
    msg = np.maximum(size[rec], 0)
    copy = np.atleast_1d(np.asarray(platform.copy_time(msg.astype(np.float64)), float))
    tick = 1.0 / res  # a shortfall of a tick or less is the timer's rounding
    g = gap[at]
    short = copy - np.maximum(g, 0.0)
    # a send whose overhead alone does not fit its gap is R1 overcompensation, counted
    # as such (its next record is clamped): not counted twice
    owned = ~((np.arange(at.size) < np.count_nonzero(after)) & (g < -tick))
    found["checked"] += int(at.size)
    bad = np.flatnonzero((short > tick) & owned)
    if not bad.size:
        return
    found["records"] += int(bad.size)
    for k in kind[rec[bad]].tolist():
        name = KIND_NAMES[k]
        found["by_kind"][name] = found["by_kind"].get(name, 0) + 1
    w = int(bad[np.argmax(short[bad])])
    if short[w] > found["max_s"]:
        found["max_s"] = float(short[w])
        found["worst"] = {"kind": KIND_NAMES[int(kind[rec[w]])], "bytes": int(msg[w]),
                          "copy_s": float(copy[w]), "gap_s": float(max(gap[at[w]], 0.0)),
                          "location": int(loc), "record": int(base + rec[w])}
