"""In-situ overhead: what the tracer's records cost *in this run*, per location.

A separate calibration times the tracer's record methods back to back. In a real
run the tracer does more than that: its MPI and lock wrappers look up the
thread's buffer and the communicator, size the message, read the status, enter
and leave two extra Python frames; and all of it runs under the machine's real
load, in the program's caches. The first version's calibration saw only the
record methods: an ``Enter(MPI_Send) -> MpiSend`` gap of 1 µs in the trace was
calibrated at 0.2 µs.

So the wrappers measure themselves (docs/calibration.md, "In-situ overhead"):

* **Stamps first, work after.** A wrapper takes the timestamps of the records it
  writes before a hand-over (Enter, MpiSend, ...) back to back, then does its
  work (lookups, sizes, stores); after the MPI (or lock) call returns it stamps
  its completion record and the Leave at once and reads the status after. All of
  the tracer's work therefore lies after the last timestamp before the hand-over,
  where docs/design.md §2 charges it (to that record's kind).
* **Brackets.** When it hands control back (to the MPI library, the lock, or the
  program), the wrapper calls :meth:`Buffer.back(first)
  <calibration.tracer.buffer.Buffer.back>`: one timer read, stored with the first
  stamp of its run of records. At the end :func:`samples` turns every run into
  one sample per record: a record followed by another record of the same run
  costs the gap to it, the last record of the run costs the time to the
  hand-back plus :func:`back_cost` (the bracket's own timer read and stores,
  measured). The samples are the real per-call costs of this run, under its
  load.
* **Per location, per kind, per region.** The samples are grouped by location,
  by record kind and, for Enter/Leave, by region (``MPI_Send``'s Enter costs its
  wrapper's lookups; a function's Enter costs the decorator's). The value used
  is the **mean**: the run paid the sum of its records' costs, rare large ones
  (a cache or TLB miss, an interrupt in the tracer's code) included, and the
  mean times the count is that sum where the median leaves out the tail
  (docs/calibration.md, "Mean, not median"). It is capped by the location's
  **in-trace bound** for that key (the smallest gap after such a record,
  :mod:`calibration.tracecheck`'s bound): an overhead larger than a gap the
  trace holds would overcompensate it.
* **Residue.** The wrapper's frames before its first stamp and after its last
  hand-back lie outside every bracket; each rank measures them after its
  program (:func:`calibration.tracer.overhead.wrapper_residues`, per MPI call
  and per lock operation) and the table adds them to the wrapper region's Leave
  (:func:`residue_key`).
* **Decorator records** (Enter/Leave of the program's functions) are not
  bracketed: two more timer reads per call would add a quarter to the hot path.
  Instead one call in :data:`~calibration.tracer.functions.LAYER_PERIOD` runs
  through a second decorator layer (:func:`split_layers`): the layer's cost in
  those calls, per region (:func:`layer_value`), is split between Enter and
  Leave as the calibration splits the traced call's dilation
  (:func:`calibration.tracer.overhead.function_dilation`), what a bound cannot
  hold moved to the other part (:func:`_layer_entries`); each such record
  carries its part capped by its own gap (:func:`record_overheads`), the table
  the split that fits the smallest gaps. Regions with too few samples take the
  calibrated split itself, capped by the bounds. On a loaded host the decorator
  cost 1.2-2.5x its calibrated value in situ (docs/calibration.md, "The
  decorator measures itself").
* **Cold calls.** The decorator's cost and the residues are measured in tight
  loops; in a program, untraced work between traced calls makes the calls and
  the work after them dearer. Each rank measures that extra cost as a curve of
  the work after its program
  (:func:`calibration.tracer.overhead.cold_ladder`), and the table carries it
  under ``cold`` with the curve each entered region takes
  (:func:`cold_curve_of`); ``compensate --cold-calls`` charges it to the gap
  before each traced call's Enter (off by default: docs/calibration.md, "Cold
  calls").
* **Load.** Each rank's master thread reads ``/proc/thread-self/schedstat`` at
  the start and end of the program: CPU time and time spent runnable but
  waiting for a CPU (preemption by other processes). Written with the table, so
  that a reader can tell a loaded run (docs/realrun.md).

The table is written into the trace (:func:`location_table`, one JSON
``LocationProperty`` per location, :data:`PROPERTY`), where ``compensate`` finds it;
each bracketed record also carries its own cost (:func:`record_overheads`, the OTF2
attribute :data:`ATTRIBUTE`), which ``compensate`` takes for that record instead of
the table's value (:mod:`compensate.formats.otf2.overheads`).
"""

from __future__ import annotations

import json
from array import array
from typing import Any

import numpy as np

from calibration.tracer import buffer as tb

#: Name of the OTF2 LocationProperty holding a location's table (a JSON string);
#: ``compensate`` reads it (:mod:`compensate.insitu`), other OTF2 tools ignore it.
PROPERTY = "COMPENSATE::INSITU_OVERHEAD"
FORMAT = 1
_SCHEDSTAT = "/proc/thread-self/schedstat"


def sched_now() -> tuple[int, int] | None:
    """(CPU ns, run-queue wait ns) of the calling thread so far, None where the
    kernel does not say (no ``/proc/thread-self/schedstat``)."""
    try:
        with open(_SCHEDSTAT) as f:
            cpu, wait = f.read().split()[:2]
        return int(cpu), int(wait)
    except (OSError, ValueError):
        return None


def back_cost(calls: int = 2000, repeats: int = 15) -> float:
    """Nanoseconds one :meth:`Buffer.back` costs: the median spacing of the
    timestamps of ``calls`` back-to-back calls (median over ``repeats``
    samples of their medians: robust to preemption)."""
    meds = []
    for _ in range(repeats):
        back = tb.Buffer().back
        for _ in range(calls):
            back(0)
        t = np.array(back.__self__.backs[1::2], dtype=np.int64)
        meds.append(float(np.median(np.diff(t))))
    return float(round(np.median(meds)))  # whole ns, as the clock


def record_keys(codes: np.ndarray) -> np.ndarray:
    """Grouping key per record: the code (kind and region) of an Enter/Leave, the
    kind of any other record."""
    kinds = codes & tb.KIND_MASK
    return np.where((kinds == tb.ENTER) | (kinds == tb.LEAVE), codes, kinds)


def samples(times: np.ndarray, backs: np.ndarray, back_ns: float) -> np.ndarray:
    """Per record, its in-situ cost in ns, or -1 if it was not bracketed (see the
    module docstring). ``times``: the location's record times (non-decreasing);
    ``backs``: (first stamp, hand-back time) pairs from :meth:`Buffer.back`."""
    n = len(times)
    out = np.full(n, -1.0)
    if n == 0 or len(backs) < 2:
        return out
    pairs = np.asarray(backs, dtype=np.int64).reshape(-1, 2)
    i0 = np.searchsorted(times, pairs[:, 0], "left")
    i1 = np.searchsorted(times, pairs[:, 1], "right") - 1
    ok = i1 >= i0
    i0, i1, tback = i0[ok], i1[ok], pairs[ok, 1]
    mark = np.zeros(n + 1, dtype=np.int64)
    np.add.at(mark, i0, 1)
    np.add.at(mark, i1, -1)
    inside = np.cumsum(mark)[:n] > 0  # followed by a record of the same run
    if n > 1:
        gaps = np.diff(times).astype(np.float64)
        idx = np.flatnonzero(inside[:-1])
        out[idx] = gaps[idx]
    out[i1] = (tback - times[i1]).astype(np.float64) + back_ns
    return out


#: Columns of :func:`split_layers`' array, one row per sampled call.
LAYER_COLUMNS = ("enter", "post", "pre_ns", "post_ns", "region")
#: A region's layer samples set its table value only from this many on: the
#: mean of fewer is at the mercy of one interrupted sample.
LAYER_MIN_SAMPLES = 8
#: Samples above this many times their median are clipped to it before the mean
#: (a layer that took longer was interrupted, not dearer).
LAYER_CLIP = 4.0


def split_layers(data: Any) -> tuple[Any, np.ndarray]:
    """Take the decorator's second-layer records (LayerEnter/LayerLeave,
    :func:`calibration.tracer.functions.make_decorator`) out of a buffer's (time,
    code) pairs; returns the remaining pairs (an ``array('q')``) and one row per
    sampled call (:data:`LAYER_COLUMNS`): the index of its outer Enter and of the
    last record before its outer Leave (in the returned pairs), and the layer's
    time before the body (``pre``: outer Enter stamp to inner one) and after it
    (``post``: inner Leave stamp to outer one), ns, and the region.

    ``pre + post`` is one decorator layer's whole cost in this call: the outer
    interval holds the inner layer, the inner interval holds the body, and the
    rest is the outer layer's work after its Enter stamp and before its Leave
    stamp plus the inner layer's call, stamps and return. The inner layer is also
    what the sampled call cost more than an unsampled one, and its two parts lie
    where ``pre`` and ``post`` are: :func:`record_overheads` charges them there.
    A layer pair that is not directly inside its outer Enter/Leave (a thread cut
    at the end of the run) is dropped."""
    pairs = np.asarray(data, dtype=np.int64).reshape(-1, 2)
    codes = pairs[:, 1]
    kinds = codes & tb.KIND_MASK
    lay = np.flatnonzero((kinds == tb.LAYER_ENTER) | (kinds == tb.LAYER_LEAVE))
    rows = np.zeros((0, len(LAYER_COLUMNS)), dtype=np.int64)
    if not lay.size:
        return data, rows
    keep = np.ones(len(pairs), dtype=bool)
    keep[lay] = False
    new = np.cumsum(keep) - 1
    times, n = pairs[:, 0], len(pairs)
    found, stack = [], []
    for i in lay.tolist():
        if kinds[i] == tb.LAYER_ENTER:
            stack.append(i)
            continue
        if not stack:
            continue
        e = stack.pop()
        region = int(codes[e]) >> tb.KIND_BITS
        if (int(codes[i]) >> tb.KIND_BITS != region or e < 1 or i + 1 >= n
                or codes[e - 1] != (tb.ENTER | region << tb.KIND_BITS)
                or codes[i + 1] != (tb.LEAVE | region << tb.KIND_BITS)):
            continue
        found.append((new[e - 1], new[i + 1] - 1, times[e] - times[e - 1],
                      times[i + 1] - times[i], region))
    if found:
        rows = np.array(found, dtype=np.int64)
    return array("q", pairs[keep].tobytes()), rows  # (bytes: 16x faster than a list)


def layer_rows(layers: Any) -> np.ndarray:
    """``layers`` (:func:`split_layers`' rows, or None) as an int64 array of
    :data:`LAYER_COLUMNS` columns."""
    if layers is None or not len(layers):
        return np.zeros((0, len(LAYER_COLUMNS)), dtype=np.int64)
    return np.asarray(layers, dtype=np.int64).reshape(-1, len(LAYER_COLUMNS))


def layer_costs(layers: Any) -> dict[int, np.ndarray]:
    """Region id -> the decorator layer's cost in each sampled call (ns,
    ``pre + post`` of :func:`split_layers`)."""
    rows = layer_rows(layers)
    d = rows[:, 2] + rows[:, 3]
    return {r: d[rows[:, 4] == r] for r in np.unique(rows[:, 4]).tolist()}


def layer_value(d: np.ndarray) -> float | None:
    """The cost (ns) one decorator layer adds to each call of a region, from its
    samples ``d``: their mean after clipping at :data:`LAYER_CLIP` times the
    median, None below :data:`LAYER_MIN_SAMPLES` samples."""
    if d.size < LAYER_MIN_SAMPLES:
        return None
    return float(np.minimum(d, LAYER_CLIP * max(float(np.median(d)), 0.0)).mean())


#: Name of the OTF2 attribute that carries a bracketed record's own in-situ
#: cost (:func:`record_overheads`, ns, UINT64); other OTF2 tools ignore it
#: (``compensate.formats.otf2.overheads.ATTRIBUTE``, the reader's, is the same).
ATTRIBUTE = "COMPENSATE::OVERHEAD"


def record_costs(data: Any, backs: Any, back_ns: float) -> np.ndarray:
    """Per record of a buffer (its (time, code) pairs ``data`` and brackets
    ``backs``), its in-situ cost in ns, -1 where not bracketed (:func:`samples`)."""
    times = np.asarray(data, dtype=np.int64).reshape(-1, 2)[:, 0]
    return samples(times, np.asarray(backs, dtype=np.int64), back_ns)


def record_overheads(data: Any, backs: Any, back_ns: float, region_names: list[str],
                     residues: dict[str, float] | None = None, layers: Any = None,
                     table: dict[str, Any] | None = None) -> np.ndarray:
    """Per record of a buffer, what :data:`ATTRIBUTE` says: the record's own
    in-situ cost (:func:`record_costs`) plus, on a wrapper's Leave, the wrapper
    residue (:func:`residue_key`), capped by the gap to the next record and
    rounded to whole ns; -1 where the record was not bracketed. These are the
    samples the table's means are made of, record by record (docs/calibration.md,
    "Mean, not median").

    With the location's ``table`` (:func:`location_table`), the Enter and Leave
    of a function the decorator's sampled layers valued carry their part of the
    layer's cost (``measured[name/Layer]["per_record"]``), each capped by its own
    gap: a cost that varies from call to call is charged where the gaps hold it,
    where the table's one value per key must fit the smallest gap of all. And
    with ``layers`` (:func:`split_layers`), a sampled call's outer Enter and the
    last record before its outer Leave also carry the second layer's ``pre`` and
    ``post`` time, on top of their own cost or, unbracketed, their table value:
    the sampled call paid one layer more than the others."""
    pairs = np.asarray(data, dtype=np.int64).reshape(-1, 2)
    codes = pairs[:, 1]
    cost = record_costs(data, backs, back_ns)
    out = np.full(len(cost), -1, dtype=np.int64)
    if residues:
        leaves = np.flatnonzero((cost >= 0) & ((codes & tb.KIND_MASK) == tb.LEAVE))
        extra = {region: _residue_ns(_region_name(region_names, region), residues)
                 for region in np.unique(codes[leaves] >> tb.KIND_BITS).tolist()}
        cost[leaves] += [extra[r] for r in (codes[leaves] >> tb.KIND_BITS).tolist()]
    rows = layer_rows(layers)
    if table is not None:  # the layered functions' records: their part, capped below
        parts = _layer_parts(table, codes, region_names)
        free = (cost < 0) & (parts >= 0)
        cost[free] = parts[free]
    if rows.size and table is not None:  # the sampled calls' second layer on top
        more = np.zeros(len(cost))
        np.add.at(more, rows[:, 0], rows[:, 2])
        np.add.at(more, rows[:, 1], rows[:, 3])
        hit = np.zeros(len(cost), dtype=bool)
        hit[rows[:, 0]] = hit[rows[:, 1]] = True
        base = table_ns(table, codes[hit], region_names)
        cost[hit] = np.where(cost[hit] >= 0, cost[hit], base) + more[hit]
    have = cost >= 0
    if not have.any():
        return out
    gap = np.full(len(cost), np.inf)
    gap[:-1] = np.diff(pairs[:, 0])
    out[have] = np.rint(np.minimum(cost[have], gap[have])).astype(np.int64)
    return out


def _layer_parts(table: dict[str, Any], codes: np.ndarray,
                 region_names: list[str]) -> np.ndarray:
    """Per record, the per-record part (ns) of its function's sampled layer
    (``measured[name/Layer]["per_record"]``, :func:`_layer_entries`) if it is an
    Enter/Leave of such a function, else -1."""
    out = np.full(len(codes), -1.0)
    measured = table.get("measured", {})
    kinds = codes & tb.KIND_MASK
    el = np.flatnonzero((kinds == tb.ENTER) | (kinds == tb.LEAVE))
    if not el.size:
        return out
    regions = codes[el] >> tb.KIND_BITS
    for region in np.unique(regions).tolist():
        name = _region_name(region_names, region)
        part = measured.get(f"{name}/Layer", {}).get("per_record")
        if not part:
            continue
        sel = el[regions == region]
        out[sel] = np.where(kinds[sel] == tb.ENTER, part["Enter"], part["Leave"]) * 1e9
    return np.rint(out)


def table_ns(table: dict[str, Any], codes: np.ndarray,
             region_names: list[str]) -> np.ndarray:
    """Per record (its buffer ``codes``), the overhead ``compensate`` takes from
    the location's ``table`` (ns): an Enter/Leave its region's value where
    ``by_region`` has one, else its kind's ``by_kind`` value, 0 if neither
    (:meth:`compensate.platform.Platform.location_overheads`)."""
    by_kind, by_region = table.get("by_kind", {}), table.get("by_region", {})
    out = np.zeros(len(codes))
    for i, code in enumerate(np.asarray(codes, dtype=np.int64).tolist()):
        kind, index = code & tb.KIND_MASK, code >> tb.KIND_BITS
        kname = tb.KIND_NAMES[kind]
        v = by_kind.get(kname, 0.0)
        if kind in (tb.ENTER, tb.LEAVE):
            name = _region_name(region_names, index)
            v = by_region.get(name, {}).get(kname, v)
        out[i] = round(v * 1e9)
    return out


def _region_name(region_names: list[str], region: int) -> str:
    """The name of local region id ``region`` (its number if the rank has none)."""
    return region_names[region] if region < len(region_names) else str(region)


def _residue_ns(region: str, residues: dict[str, float]) -> float:
    """The wrapper residue (ns, at least 0) a Leave of ``region`` carries
    (:func:`residue_key`; 0 for the program's functions)."""
    key = residue_key(region)
    return max(float(residues.get(key, 0.0)), 0.0) if key else 0.0


def _stats(x: np.ndarray) -> dict[str, float]:
    q = np.percentile(x, [25, 50, 75])
    return {"n": int(x.size), "mean": float(x.mean()) * 1e-9,
            "median": float(q[1]) * 1e-9, "p25": float(q[0]) * 1e-9,
            "p75": float(q[2]) * 1e-9, "min": float(x.min()) * 1e-9}


def residue_key(region: str) -> str | None:
    """Which wrapper residue (:func:`calibration.tracer.overhead.wrapper_residues`)
    the Leave of ``region`` carries: ``mpi`` for the MPI wrappers' regions
    (``MPI_*``), ``lock`` for the lock wrappers' (``threading.*.acquire/release``),
    None for the rest (the program's functions: their whole dilation is
    calibrated)."""
    if region.startswith("MPI_"):
        return "mpi"
    if region.startswith("threading.") and region.endswith((".acquire", ".release")):
        return "lock"
    return None


def cold_curve_of(region: str) -> str | None:
    """Which cold-call curve (:func:`calibration.tracer.overhead.cold_ladder`) an
    Enter of ``region`` is charged by: ``mpi`` or ``lock`` for the wrappers
    (:func:`residue_key`), None for the thread start/join wrappers (not
    measured), ``function`` for the rest (the program's decorated functions)."""
    key = residue_key(region)
    if key:
        return key
    if region.startswith("threading."):
        return None
    return "function"


def location_table(data: Any, backs: Any, region_names: list[str],
                   defaults: dict[str, float], back_ns: float,
                   sched: dict[str, float] | None = None,
                   residues: dict[str, float] | None = None,
                   cold: dict[str, Any] | None = None,
                   layers: Any = None) -> dict[str, Any]:
    """The in-situ table of one location (the JSON of :data:`PROPERTY`).

    ``data``: the buffer's (time, code) pairs; ``backs``: its brackets;
    ``region_names``: the rank's region names by local id; ``defaults``: seconds
    per kind name for records without samples (the calibration's; may be empty);
    ``back_ns``: :func:`back_cost`; ``sched``: the thread's CPU and run-queue
    time during the program, if known; ``residues``: ns per wrapper call outside
    its brackets, by :func:`residue_key`, added to the mean of that wrapper
    region's Leave (the return path lies after the Leave stamp; the call path,
    which lies before the wrapper's Enter stamp, is charged there too, so the
    total is right and only that Enter stays late by it); ``layers``: the
    decorator's sampled layers (:func:`split_layers`), which give the program's
    functions their ``by_region`` values (:func:`_layer_entries`).

    Keys: ``by_kind`` (seconds per record kind: the mean of the in-situ samples
    where there are any, else the default; each capped by the bound),
    ``by_region`` (region name -> {"Enter"/"Leave": seconds}, for regions whose
    records were bracketed), ``measured`` (per kind or ``region/Kind``: n,
    mean, median, p25, p75, min of the samples, and ``bound``, the smallest gap after
    such a record), ``source`` (per by_kind entry: ``in-situ`` or
    ``calibration``), ``back_cost_s``, ``sched``; with ``cold`` (the rank's
    :func:`~calibration.tracer.overhead.cold_ladder`) ``cold``: its ``w_s`` and
    ``extra_s`` (seconds), ``regions`` (the name of every region entered on this
    location -> its curve, :func:`cold_curve_of`; regions without one left
    out) and the raw measurement (docs/calibration.md, "Cold calls";
    :mod:`compensate.insitu`)."""
    pairs = np.asarray(data, dtype=np.int64).reshape(-1, 2)
    times, codes = pairs[:, 0], pairs[:, 1]
    keys = record_keys(codes)
    cost = record_costs(data, backs, back_ns)
    nxt = np.full(len(times), np.inf)
    if len(times) > 1:
        nxt[:-1] = np.diff(times)
    by_kind: dict[str, float] = {}
    source: dict[str, str] = {}
    by_region: dict[str, dict[str, float]] = {}
    measured: dict[str, dict[str, float]] = {}
    plain = {tb.ENTER: np.zeros(0), tb.LEAVE: np.zeros(0)}  # bounds of unbracketed E/L
    for key in np.unique(keys).tolist():
        sel = keys == key
        kind = key & tb.KIND_MASK
        kname = tb.KIND_NAMES[kind]
        s = cost[sel]
        s = s[s >= 0]
        bound = float(nxt[sel].min())
        if kind in (tb.ENTER, tb.LEAVE):
            region = key >> tb.KIND_BITS
            name = _region_name(region_names, region)
            if not s.size:
                plain[kind] = np.append(plain[kind], bound)
                continue
            label = f"{name}/{kname}"
        else:
            label = kname
            if not s.size:
                if kname in defaults:
                    by_kind[kname] = round(min(defaults[kname] * 1e9, bound)) * 1e-9
                    source[kname] = "calibration"
                continue
        st = _stats(s)
        st["bound"] = bound * 1e-9 if np.isfinite(bound) else None
        # whole clock ticks (ns): a mean falls between ticks, and an overhead of
        # a fraction of a tick rounds a receive onto its send in the output
        extra = 0.0
        if kind == tb.LEAVE and residues:
            extra = _residue_ns(name, residues)
            if extra:
                st["residue"] = extra * 1e-9
        value = round(min(float(s.mean()) + extra, bound)) * 1e-9
        st["used"] = value
        measured[label] = st
        if kind in (tb.ENTER, tb.LEAVE):
            by_region.setdefault(name, {})[kname] = value
        else:
            by_kind[kname] = value
            source[kname] = "in-situ"
    layered = _layer_entries(layers, codes, nxt, region_names, defaults, by_region,
                             measured)
    for kind, bounds in plain.items():
        kname = tb.KIND_NAMES[kind]
        if kname in defaults:
            cap = float(bounds.min()) * 1e-9 if bounds.size else float("inf")
            by_kind[kname] = round(min(defaults[kname], cap) * 1e9) * 1e-9
            source[kname] = "calibration"
    table: dict[str, Any] = {"format": FORMAT, "by_kind": by_kind, "by_region": by_region,
                             "measured": measured, "source": source,
                             "back_cost_s": back_ns * 1e-9}
    if residues:
        table["residue_s"] = {k: v * 1e-9 for k, v in residues.items()}
    if cold and cold.get("w_s"):
        entered = np.unique(codes[(codes & tb.KIND_MASK) == tb.ENTER] >> tb.KIND_BITS)
        names = {_region_name(region_names, r) for r in entered.tolist()}
        curves = cold.get("extra_s", {})
        regions = {n: c for n in sorted(names - layered)
                   if (c := cold_curve_of(n)) is not None and c in curves}
        table["cold"] = {**cold, "regions": regions}
    if sched:
        table["sched"] = sched
    return table


def _layer_entries(layers: Any, codes: np.ndarray, nxt: np.ndarray,
                   region_names: list[str], defaults: dict[str, float],
                   by_region: dict[str, dict[str, float]],
                   measured: dict[str, dict[str, Any]]) -> set[str]:
    """:func:`location_table`'s part for the decorator's sampled layers: each
    region with enough samples (:func:`layer_value`) gets ``by_region`` Enter and
    Leave values that add up to the layer's cost, each capped by the bound of its
    key; ``measured`` gets the samples' statistics under ``region/Layer``.
    Returns the names of the regions given values (their cold-call cost is in the
    samples: no curve is charged).

    The split: as the calibration splits the decorator's dilation (``defaults``'
    Enter and Leave; halves without them), and where one part exceeds the bound
    of its key the excess goes to the other, up to that one's bound. The bounds
    say where the cost can lie: in the Monte-Carlo loop the gap after
    ``get_coords``' Leave was never more than 300 ns while the layer cost
    1,080, so the call into the wrapper and its return (which lie in that gap)
    cannot hold the excess over the calibration, and the wrapper's work inside
    the call's interval must (docs/calibration.md, "The decorator measures
    itself")."""
    enter, leave = defaults.get("Enter", 0.0), defaults.get("Leave", 0.0)
    share = enter / (enter + leave) if enter > 0 and leave > 0 else 0.5
    done: set[str] = set()
    for region, d in sorted(layer_costs(layers).items()):
        name = _region_name(region_names, region)
        if name in by_region:  # bracketed: not a decorated function
            continue
        st: dict[str, Any] = {**_stats(d.astype(np.float64)), "used": None}
        value = layer_value(d)
        if value is not None:
            gaps = [nxt[codes == (kind | region << tb.KIND_BITS)]
                    for kind in (tb.ENTER, tb.LEAVE)]
            gaps = [g[np.isfinite(g)] for g in gaps]
            e = value * share
            # each record: its part, split where the typical (median) gaps leave
            # room, capped by its own gap (record_overheads)
            pe, pl = _spill(e, value - e, *(float(np.median(g)) if g.size else np.inf
                                             for g in gaps))
            # the table (records without their own value): every gap must hold it
            te, tl = _spill(e, value - e, *(float(g.min()) if g.size else np.inf
                                             for g in gaps))
            by_region[name] = {"Enter": round(te) * 1e-9, "Leave": round(tl) * 1e-9}
            st["used"] = value * 1e-9
            st["enter_share"] = share
            st["per_record"] = {"Enter": round(pe) * 1e-9, "Leave": round(pl) * 1e-9}
            done.add(name)
        measured[f"{name}/Layer"] = st
    return done


def _spill(a: float, b: float, bound_a: float, bound_b: float) -> tuple[float, float]:
    """Parts ``a`` and ``b`` of a total, each capped by its bound, what one part
    loses to its cap moved to the other as far as that one's bound allows."""
    if b > bound_b:
        a, b = a + (b - bound_b), bound_b
    if a > bound_a:
        a, b = bound_a, min(bound_b, b + (a - bound_a))
    return a, b


def to_json(table: dict[str, Any]) -> str:
    """The property value: compact JSON (finite numbers only)."""
    return json.dumps(table, separators=(",", ":"), allow_nan=False)
