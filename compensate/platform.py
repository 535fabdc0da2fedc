"""Platform constants: per-record tracer overhead ``O(kind)`` and buffer copy cost ``C(s)·s``.

The platform file is JSON (documented field by field in docs/platform-file.md)::

    {"format": 1,
     "event_overhead": 1e-6,                       # seconds per record
     "event_overhead_by_kind": {"Metric": 2e-6},   # optional, OTF2 record kind -> seconds
     "device_overhead": 0.0,                       # optional, seconds per accelerator record
     "overhead_before_stamp": {"MpiRecv": 5e-8},   # optional, kind -> seconds (below)
     "event_overhead_by_region": {"pthread_mutex_lock": {"Enter": 2.1e-7}},  # (below)
     "overhead_before_stamp_by_region": {...},     # optional, the same shape (below)
     "copy_time": [{"bytes": 64, "seconds": 2e-8}, ...],
     "network": {"latency": 1e-6, "per_byte": 2e-10},  # optional (R2f, below)
     "rma": {"release": "after_completion"},            # optional (R10, below)
     "device": {"launch": 4e-6, "synchronize": 1e-6},   # optional (R9, below)
     "prefer_insitu": true,                             # optional (below)
     "tracer": "record"}                                # optional (below)

``overhead_before_stamp``: per kind, the part of its overhead the tracer spends
before it reads the clock for the record (EZTrace stamps MpiRecv only after its own
work once PMPI_Recv returned), at most the kind's overhead, default 0; how R1 and
the dependency rules read it: :mod:`compensate.engine.overheads`.

``event_overhead_by_region``: region name (as the trace's region definition
names it) -> ``{"Enter": s, "Leave": s}``, either optional: the overhead of an
Enter/Leave record of every region of that name on a CPU location, in place of
its kind's (EZTrace's Pthread wrappers write an attribute with each record and
cost more than its plain ones). ``overhead_before_stamp_by_region``: the same
shape, the part before the stamp of those records, in place of the kind's (at
most the overhead the file gives the record). A location's in-situ table still
takes precedence (:meth:`Platform.location_overheads`); how names become the
trace's region ids: :mod:`compensate.regioncosts`.

``network``: the platform's network model, ``latency + bytes · per_byte`` seconds
for one message's transfer (without the two buffer copies), measured by a
ping-pong (:mod:`calibration.network`). ``--bound fitted`` uses it where the
trace's own observations cannot separate latency from bandwidth
(:func:`compensate.engine.fit.outcome_of`); no other bound reads it.

``rma``: the MPI library's one-sided protocol, a platform property like the
network's latency (not MPI's semantics, not visible in a trace). ``release``:
``"eager"`` (what MPI allows at least: the lock's release may leave MPI_Win_unlock
while a fetched result is still on its way back; the default, also where the entry
is absent) or ``"after_completion"`` (the release leaves only once the epoch's
operations completed at the origin, as MPICH's ch4 does), measured by
:mod:`calibration.rma`. Under ``after_completion`` the next conflicting lock grant
also follows each fetching operation's round trip (R10 "Release after completion"
in docs/compensation.md).

``device``: accelerator latencies a user measured, seconds (``launch``: launch
record -> kernel start; ``synchronize``: kernel end -> the call's return), used
where the trace shows none (:mod:`compensate.engine.kinds.devices`).

``prefer_insitu``: true where the file was written beside a trace by a tracer that
also writes in-situ overhead tables into it (the project's mpi4py tracer,
``calibration.record``): those tables (per location, per kind, per region, measured
in the run itself) then take precedence over the file's overhead, the file still
giving the copy cost, network and one-sided protocol; ``--overhead platform``
forces the file's overhead (docs/compensation.md "Which overhead"). Without tables
in the trace the file's overhead is used as always.

``speed_reference``: per pair of consecutive record kinds ``"a>b"`` whose gap
holds the tracer's work alone, its median in seconds when the overhead was
measured (``python -m calibration.eztrace`` writes it). Where a file has one,
the overhead is scaled to the trace's own speed (:mod:`compensate.speed`).

``tracer``: the tracer whose per-record overhead the file holds (:data:`TRACERS`;
``calibrate`` and ``calibration.record`` write it). Overheads differ by an order of
magnitude between tracers, so the command line warns once where the trace's
producer, read from its OTF2 anchor file's creator (:func:`trace_producer`), is a
different known tracer (:func:`tracer_warning`).

One schema describes the file: ``compensate/platform.schema.json`` (JSON Schema
2020-12, shipped in the package). :func:`validate` checks a file against it field
by field without the ``jsonschema`` package (a runtime dependency for one small
file would be too much): a small interpreter of the keywords the schema uses, which
refuses a schema with any other keyword, plus the two rules JSON Schema cannot
state: numbers are finite (``NaN``/``Infinity`` are not JSON, but Python's parser
reads them) and ``x-increasing``: the ``copy_time`` sizes increase.
tests/test_platform.py checks that it and ``jsonschema`` agree. The first
problem found is reported in one line: ``FILE: FIELD.PATH: what is wrong``.
Besides the platform fields the schema names the keys ``calibrate`` (and the
project's mpi4py tracer) write; any other key is refused (a misspelt
``event_overheads`` would otherwise be silently ignored) unless it starts with
an underscore (``"_comment"``).

Why one module (over 600 lines): the platform file is one contract, and its
dataclass, its reading and the schema interpreter that checks it state the same
fields and bounds; apart, each field's rules would live in two places.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from compensate.errors import Refusal
from compensate.model import KIND_CODE, KIND_NAMES
from compensate.regioncosts import RECORDS, RegionCosts, bind
from compensate.smallfile import NotRegular, TooLarge, read_small

SUPPORTED_FORMATS = (1,)
#: The bounds of what a machine can be (docs/platform-file.md, "Bounds"): a record's
#: overhead, one buffer copy and a message's latency last at most an hour; a network
#: or a copy moves at least 1 byte per second; a buffer holds at most 2^53 bytes (a
#: float64 counts them exactly). The schema states the same as its ``maximum`` values.
MAX_SECONDS = 3600.0
MAX_SECONDS_PER_BYTE = 1.0
MAX_BYTES = 2 ** 53
BOUNDS_WHY = "beyond what a machine can be: docs/platform-file.md, Bounds"
#: Names of the ``tracer`` field: the project's mpi4py tracer (``calibration.record``),
#: Score-P, EZTrace, the otf2 Python writer (``calibrate run --tracer python-writer``),
#: any other.
#: the directions of a ``device`` entry (module docstring)
DEVICE_LINKS = ("launch", "synchronize")
TRACERS = ("record", "scorep", "eztrace", "python-writer", "other")
#: the file's keys of per-region costs (module docstring)
BY_REGION, BEFORE_BY_REGION = "event_overhead_by_region", "overhead_before_stamp_by_region"


class PlatformError(Refusal):
    """A platform file or overhead value that cannot be used (one-line message; a
    :class:`~compensate.errors.Refusal`, whose reason is the whole message)."""


def _kind_table(by_kind: dict[str, float], default: float) -> np.ndarray:
    """Seconds per record kind code: ``by_kind``'s value where it names the kind."""
    table = np.full(len(KIND_NAMES), default, dtype=float)
    for name, v in by_kind.items():
        table[KIND_CODE[name]] = v
    return table


def _seconds(name: str, value: float, most: float = MAX_SECONDS) -> None:
    """A platform value in seconds: finite, >= 0 and at most ``most`` (the bounds of
    a machine); PlatformError naming it otherwise."""
    try:
        ok = 0 <= value <= most
    except TypeError:
        ok = False
    if not ok:
        raise PlatformError(f"{name} must be a finite number >= 0 and <= {most:g}, got "
                            f"{value!r} ({BOUNDS_WHY})")


@dataclass
class Platform:
    """Per-record overhead (seconds) and a copy-time table (bytes -> seconds).

    ``by_location`` (from a trace's in-situ tables, :mod:`compensate.insitu`):
    location id -> (seconds per kind name, region id -> (Enter s, Leave s), either
    None to use the kind's); a location listed there takes its overheads from it
    alone (kinds it does not name cost 0), see :meth:`location_overheads`."""

    event_overhead: float
    overhead_by_kind: dict[str, float] = field(default_factory=dict)
    copy_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    copy_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: seconds per record on an accelerator stream (R9; 0: device activity is not
    #: dilated by host tracing, whatever the record kind)
    device_overhead: float = 0.0
    by_location: dict[int, tuple[dict[str, float], dict[int, tuple]]] = \
        field(default_factory=dict)
    #: the platform network model ``(latency s, seconds per byte)`` of the file's
    #: optional ``network`` entry (module docstring); None: the file has none
    network: tuple[float, float] | None = None
    #: the ``rma`` entry's ``release`` (module docstring); None: the file has no
    #: ``rma`` entry (the same as ``"eager"``)
    rma_release: str | None = None
    #: the file's ``prefer_insitu``: a trace's in-situ tables take precedence over
    #: this platform's overhead (module docstring, :func:`compensate.overhead.choose`)
    prefer_insitu: bool = False
    #: cold-call curves of a trace's in-situ tables (:mod:`compensate.insitu`):
    #: location id -> (work seconds ``w``, region id -> extra seconds per point),
    #: see :meth:`cold_charge`
    cold: dict[int, tuple[list[float], dict[int, list[float]]]] = \
        field(default_factory=dict)
    #: the file's ``tracer`` (module docstring); None: the file does not say
    tracer: str | None = None
    #: the ``device`` entry (module docstring): direction -> seconds; None: none
    device: dict[str, float] | None = None
    #: the file's ``overhead_before_stamp`` (module docstring): kind name -> seconds
    before_stamp: dict[str, float] = field(default_factory=dict)
    #: the file's ``speed_reference`` (module docstring): ``"a>b"`` -> seconds
    speed_reference: dict[str, float] = field(default_factory=dict)
    #: the file's ``event_overhead_by_region`` (module docstring): region name ->
    #: {"Enter"/"Leave": seconds}
    overhead_by_region: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the file's ``overhead_before_stamp_by_region``: the same shape
    before_stamp_by_region: dict[str, dict[str, float]] = field(default_factory=dict)
    #: :meth:`region_costs` bound to each trace's region names seen (by the id of
    #: the names' dict, which it keeps: the id cannot be reused meanwhile)
    _bound: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _seconds("event_overhead", self.event_overhead)
        _seconds("device_overhead", self.device_overhead)
        for k, v in self.overhead_by_kind.items():
            if k not in KIND_CODE:
                raise PlatformError(f"event_overhead_by_kind: unknown record kind {k!r}")
            _seconds(f"event_overhead_by_kind[{k!r}]", v)
        table = self.overhead_table()
        for k, v in self.before_stamp.items():
            if k not in KIND_CODE:
                raise PlatformError(f"overhead_before_stamp: unknown record kind {k!r}")
            _seconds(f"overhead_before_stamp[{k!r}]", v)
            if v > table[KIND_CODE[k]]:
                raise PlatformError(f"overhead_before_stamp[{k!r}] = {v:g} s is more than "
                                    f"the kind's overhead, {table[KIND_CODE[k]]:g} s")
        self._check_regions(table)
        for k, v in self.speed_reference.items():
            if reference_pair(k) is None:
                raise PlatformError(f"speed_reference: {k!r} is not two OTF2 record kinds "
                                    f"joined by '>'")
            _seconds(f"speed_reference[{k!r}]", v)
        b = np.asarray(self.copy_bytes, dtype=float)
        s = np.asarray(self.copy_seconds, dtype=float)
        if b.shape != s.shape or b.ndim != 1:
            raise PlatformError("copy_time: bytes and seconds must pair up")
        if np.any(b <= 0) or np.any(s < 0) or not np.all(np.isfinite(s)):
            raise PlatformError("copy_time: bytes must be > 0 and seconds >= 0")
        if np.any(b > MAX_BYTES) or np.any(s > MAX_SECONDS) \
                or np.any(s > MAX_SECONDS_PER_BYTE * b):
            raise PlatformError(f"copy_time: bytes must be <= 2^53, seconds <= "
                                f"{MAX_SECONDS:g} and a copy at least 1 byte per second "
                                f"({BOUNDS_WHY})")
        if self.network is not None:
            lat, per_byte = (float(x) for x in self.network)
            _seconds("network.latency", lat)
            _seconds("network.per_byte", per_byte, MAX_SECONDS_PER_BYTE)
            self.network = (lat, per_byte)
        if self.device is not None:
            for k, v in self.device.items():
                if k not in DEVICE_LINKS:
                    raise PlatformError(f"device: unknown direction {k!r}")
                _seconds(f"device.{k}", v)
            self.device = {k: float(v) for k, v in self.device.items()}
        if self.rma_release not in (None, "eager", "after_completion"):
            raise PlatformError(f"rma.release must be \"eager\" or \"after_completion\", "
                                f"got {self.rma_release!r}")
        order = np.argsort(b)
        b, s = b[order], s[order]
        if np.any(np.diff(b) == 0):
            raise PlatformError("copy_time: duplicate sizes")
        self.copy_bytes, self.copy_seconds = b, s
        # per-byte cost C(s) at the table points, interpolated log-log in between
        self._per_byte = s / b

    def _check_regions(self, table: np.ndarray) -> None:
        """The by-region entries (module docstring): Enter/Leave seconds each, and
        no part before a stamp more than the overhead the file gives that record."""
        pre_table = self.before_stamp_table()
        for key, given in ((BY_REGION, self.overhead_by_region),
                           (BEFORE_BY_REGION, self.before_stamp_by_region)):
            for name, entry in given.items():
                for k, v in entry.items():
                    if k not in RECORDS:
                        raise PlatformError(f"{key}.{name}: {_unknown(k, RECORDS)}")
                    _seconds(f"{key}.{name}.{k}", v)
        for name in sorted(set(self.overhead_by_region) | set(self.before_stamp_by_region)):
            for k in RECORDS:
                o = self.overhead_by_region.get(name, {}).get(k)
                what = f"{BY_REGION}.{name}.{k}"
                if o is None:
                    o, what = float(table[KIND_CODE[k]]), f"the kind's overhead ({k})"
                pre = self.before_stamp_by_region.get(name, {}).get(k)
                if pre is not None and pre > o:
                    raise PlatformError(f"{BEFORE_BY_REGION}.{name}.{k} = {pre:g} s is more "
                                        f"than the record's overhead, {what} = {o:g} s")
                if pre is None and pre_table[KIND_CODE[k]] > o:
                    raise PlatformError(
                        f"overhead_before_stamp[{k!r}] = {pre_table[KIND_CODE[k]]:g} s is more "
                        f"than {what} = {o:g} s (state the region's own part in "
                        f"{BEFORE_BY_REGION}.{name}.{k})")

    # -- overhead ---------------------------------------------------------------
    def overhead_table(self) -> np.ndarray:
        """Seconds of overhead per record kind code (index = kind code)."""
        return _kind_table(self.overhead_by_kind, self.event_overhead)

    def before_stamp_table(self) -> np.ndarray:
        """Seconds of each kind's overhead before its stamp, per kind code (0: unnamed)."""
        return _kind_table(self.before_stamp, 0.0)

    @property
    def has_regions(self) -> bool:
        """Whether the file states costs per region (``event_overhead_by_region`` or
        ``overhead_before_stamp_by_region``)."""
        return bool(self.overhead_by_region or self.before_stamp_by_region)

    def region_costs(self, names: Mapping[int, str] | None) -> RegionCosts | None:
        """The by-region entries bound to a trace's region ``names`` (id -> name,
        ``Definitions.regions``), built once per names' dict
        (:mod:`compensate.regioncosts`); None where the file states none."""
        if not self.has_regions:
            return None
        if names is None:
            raise ValueError("a platform with per-region overheads needs the trace's "
                             "region names (Definitions.regions)")
        cached = self._bound.get(id(names))
        if cached is not None and cached[0] is names and cached[1] == len(names):
            return cached[2]
        if len(self._bound) >= 4:  # a few traces' definitions at a time at most
            self._bound.clear()
        bound = bind(self.overhead_by_region, self.before_stamp_by_region, names)
        self._bound[id(names)] = (names, len(names), bound)
        return bound

    def file_overheads(self, kinds: np.ndarray, regions: np.ndarray,
                       names: Mapping[int, str] | None = None) -> np.ndarray:
        """Seconds of overhead of each record (its kind codes and region ids) as the
        platform file states it: :meth:`overhead_table` by kind, an Enter/Leave
        of a region named in ``event_overhead_by_region`` that entry's value
        (``names``: the trace's region names, needed where the file has such
        entries). No in-situ table is read."""
        o = self.overhead_table()[kinds]
        bound = self.region_costs(names)
        return o if bound is None else bound.apply(o, kinds, regions, "cost")

    def record_before_stamp(self, kinds: np.ndarray, regions: np.ndarray,
                            names: Mapping[int, str] | None = None) -> np.ndarray:
        """Seconds of each record's overhead before its stamp as the file states
        it: ``overhead_before_stamp`` by kind (0: unnamed), an Enter/Leave of a
        region named in ``overhead_before_stamp_by_region`` that entry's value."""
        pre = self.before_stamp_table()[kinds]
        bound = self.region_costs(names)
        return pre if bound is None else bound.apply(pre, kinds, regions, "pre")

    def location_overheads(self, loc: int, kinds: np.ndarray, regions: np.ndarray,
                           own: np.ndarray | None = None,
                           names: Mapping[int, str] | None = None) -> np.ndarray:
        """Seconds of overhead of each record of location ``loc`` (its kind codes
        and region ids): :meth:`file_overheads` (by kind, by region name where the
        file has ``event_overhead_by_region``: ``names``, the trace's region names),
        or the location's in-situ table where :attr:`by_location` has one (its
        Enter/Leave per region). ``own``: the records' ``overhead`` column (ns
        measured in the run, NONE: none, :mod:`compensate.formats.otf2.overheads`);
        where a location has an in-situ table, a record's own value replaces the
        table's. A platform without in-situ tables (``--platform`` or
        ``--overhead`` chosen over the trace's own) ignores it, so that those
        options keep meaning what they say."""
        entry = self.by_location.get(loc)
        if entry is None:
            return self.file_overheads(kinds, regions, names)
        o = self._table_overheads(entry, kinds, regions)
        if own is not None:
            have = own >= 0
            if have.any():
                o[have] = own[have] * 1e-9
        return o

    def _table_overheads(self, entry: tuple, kinds: np.ndarray,
                         regions: np.ndarray) -> np.ndarray:
        """:meth:`location_overheads` from the location's in-situ table alone."""
        by_kind, regions_table = entry
        table = np.zeros(len(KIND_NAMES), dtype=float)
        for name, v in by_kind.items():
            table[KIND_CODE[name]] = v
        o = table[kinds]
        if regions_table:
            el = (kinds == KIND_CODE["Enter"]) | (kinds == KIND_CODE["Leave"])
            idx = np.flatnonzero(el)
            if idx.size:
                ids = np.array(sorted(regions_table), dtype=np.int64)
                nan = float("nan")
                enter = np.array([nan if regions_table[i][0] is None else regions_table[i][0]
                                  for i in ids.tolist()])
                leave = np.array([nan if regions_table[i][1] is None else regions_table[i][1]
                                  for i in ids.tolist()])
                r = np.asarray(regions)[idx].astype(np.int64)
                pos = np.clip(np.searchsorted(ids, r), 0, len(ids) - 1)
                hit = ids[pos] == r
                val = np.where(kinds[idx] == KIND_CODE["Enter"], enter[pos], leave[pos])
                use = hit & ~np.isnan(val)
                o[idx[use]] = val[use]
        return o

    def cold_charge(self, loc: int, kinds: np.ndarray, regions: np.ndarray,
                    gap: np.ndarray, res: float) -> np.ndarray:
        """Ticks to take off each R1 gap of location ``loc`` for its cold calls
        (docs/calibration.md, "Cold calls"): the gap before the Enter of a region
        with a curve (``gap``: what R1 left of it, ticks; ``res``: ticks per
        second) holds the untraced program work ``w`` since the record before,
        plus the extra cost ``extra(w)`` that this work and the traced call cost
        more than they would without the tracer. ``w`` is solved from
        ``w + extra(w) = gap`` (one solution: ``extra`` is non-decreasing and
        linear between its points, flat beyond them), and the charge is
        ``gap - w``: never more than the gap, zero for a gap <= 0, zero without a
        curve. The charge belongs to the previous record's after-interval
        (docs/design.md §2) and only moves the R1 gap: the rules' record
        overheads (:meth:`location_overheads`) are unchanged."""
        out = np.zeros(len(gap))
        entry = self.cold.get(loc)
        if entry is None or not len(gap):
            return out
        w_s, curves = entry
        w = np.asarray(w_s, dtype=np.float64) * res
        enter = np.flatnonzero((kinds == KIND_CODE["Enter"]) & (gap > 0))
        if not enter.size:
            return out
        rid = np.asarray(regions)[enter].astype(np.int64)
        for region, extra_s in curves.items():
            sel = enter[rid == region]
            if not sel.size:
                continue
            e = np.asarray(extra_s, dtype=np.float64) * res
            y = w + e  # the traced gap at each point: strictly increasing
            g = gap[sel]
            work = np.where(g <= y[-1], np.interp(g, y, w), g - e[-1])
            out[sel] = np.clip(g - work, 0.0, g)
        return out

    # -- copy cost --------------------------------------------------------------
    def copy_time(self, nbytes):
        """``C(s)·s``: seconds to copy ``nbytes`` (scalar or array).

        C is interpolated log-log between table sizes and held constant beyond the
        table ends (never extrapolated, never negative). No table means zero cost.
        """
        s = np.asarray(nbytes, dtype=float)
        if self._per_byte.size == 0:
            out = np.zeros_like(s)
        else:
            pos = s > 0
            out = np.zeros_like(s)
            if np.any(pos):
                x = np.log(np.where(pos, s, 1.0))
                lb = np.log(self.copy_bytes)
                pb = self._per_byte
                if np.any(pb == 0):
                    # log of zero cost is undefined: interpolate linearly in C instead
                    c = np.interp(x, lb, pb)
                else:
                    c = np.exp(np.interp(x, lb, np.log(pb)))
                out = np.where(pos, c * s, 0.0)
        return float(out) if np.ndim(out) == 0 else out

    # -- JSON -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str = "<platform>") -> Platform:
        """The platform of a parsed platform file (PlatformError, one line, if invalid)."""
        validate(data, source)
        by_kind = {str(k): float(v) for k, v in (data.get("event_overhead_by_kind") or {}).items()}
        b = [float(e["bytes"]) for e in data["copy_time"]]
        s = [float(e["seconds"]) for e in data["copy_time"]]
        net = data.get("network")
        network = None if net is None else (float(net["latency"]), float(net["per_byte"]))
        rma = data.get("rma")
        try:
            return cls(float(data["event_overhead"]), by_kind, np.array(b), np.array(s),
                       float(data.get("device_overhead", 0.0)), network=network,
                       rma_release=None if rma is None else str(rma["release"]),
                       prefer_insitu=bool(data.get("prefer_insitu", False)),
                       tracer=data.get("tracer"), device=data.get("device"),
                       before_stamp={str(k): float(v) for k, v in
                                     (data.get("overhead_before_stamp") or {}).items()},
                       speed_reference={str(k): float(v) for k, v in
                                        (data.get("speed_reference") or {}).items()},
                       overhead_by_region=_by_region(data.get(BY_REGION)),
                       before_stamp_by_region=_by_region(data.get(BEFORE_BY_REGION)))
        except PlatformError as exc:  # not reached for a valid file; kept as a guard
            raise PlatformError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Platform:
        """The platform of the file ``path`` (PlatformError, one line, if it cannot be
        read or is not a valid platform file: :func:`read_json`, :func:`validate`)."""
        return cls.from_dict(read_json(path), str(path))

    def to_dict(self) -> dict:
        out = {
            "format": 1,
            "event_overhead": self.event_overhead,
            "event_overhead_by_kind": dict(self.overhead_by_kind),
            "device_overhead": self.device_overhead,
            "copy_time": [{"bytes": int(b), "seconds": float(s)}
                          for b, s in zip(self.copy_bytes, self.copy_seconds, strict=True)],
        }
        if self.network is not None:  # only where given: summaries stay as they were
            out["network"] = {"latency": self.network[0], "per_byte": self.network[1]}
        if self.rma_release is not None:  # likewise
            out["rma"] = {"release": self.rma_release}
        if self.prefer_insitu:  # likewise
            out["prefer_insitu"] = True
        if self.tracer is not None:  # likewise
            out["tracer"] = self.tracer
        if self.device is not None:  # likewise
            out["device"] = dict(self.device)
        if self.before_stamp:  # likewise
            out["overhead_before_stamp"] = dict(self.before_stamp)
        if self.speed_reference:  # likewise
            out["speed_reference"] = dict(self.speed_reference)
        if self.overhead_by_region:  # likewise
            out[BY_REGION] = {k: dict(v) for k, v in self.overhead_by_region.items()}
        if self.before_stamp_by_region:  # likewise
            out[BEFORE_BY_REGION] = {k: dict(v) for k, v in self.before_stamp_by_region.items()}
        return out


def _by_region(given: Any) -> dict[str, dict[str, float]]:
    """A by-region entry of a (valid) platform file as the dataclass holds it."""
    return {str(name): {str(k): float(v) for k, v in entry.items()}
            for name, entry in (given or {}).items()}


def reference_pair(pair: str) -> tuple[int, int] | None:
    """The kind codes of a ``speed_reference`` pair ``"a>b"`` (module docstring), or
    None where it is not two OTF2 record kinds joined by '>'."""
    a, sep, b = pair.partition(">")
    return (KIND_CODE[a], KIND_CODE[b]) if sep and a in KIND_CODE and b in KIND_CODE \
        else None


def read_json(path: str | Path) -> Any:
    """The parsed JSON of the platform file ``path``, not yet validated.

    Only a regular file of at most 16 MiB is read (:mod:`compensate.smallfile`: a
    FIFO or ``/dev/zero`` would wait or read without end), and JSON nested too deeply
    for the parser is refused; each problem is a one-line :class:`PlatformError`."""
    path = Path(path)
    try:
        data = read_small(path)
        return json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise PlatformError(f"{path}: platform file not found") from None
    except NotRegular as exc:
        if exc.kind == "a directory":
            raise PlatformError(f"{path}: is a directory, not a platform file") from None
        raise PlatformError(f"{path}: is {exc.kind}, not a platform file (a regular "
                            f"file)") from None
    except TooLarge as exc:
        raise PlatformError(f"{path}: {exc}: not a platform file") from None
    except UnicodeDecodeError:
        raise PlatformError(f"{path}: not a text (UTF-8) file") from None
    except json.JSONDecodeError as exc:
        raise PlatformError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} "
                            f"column {exc.colno}") from None
    except RecursionError:
        raise PlatformError(f"{path}: not a platform file: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal of more than 4300 digits
        raise PlatformError(f"{path}: cannot read platform file ({exc})") from None
    except OSError as exc:
        raise PlatformError(f"{path}: cannot read platform file "
                            f"({exc.strerror or exc})") from None


# -- the schema and its validator -----------------------------------------------------

SCHEMA_PATH = Path(__file__).with_name("platform.schema.json")

#: Keywords :func:`validate` interprets; annotations it ignores; anything else in the
#: schema is refused (a keyword silently skipped would make the two validators differ).
_KEYWORDS = frozenset({"type", "enum", "minimum", "exclusiveMinimum", "maximum", "required",
                       "properties", "patternProperties", "additionalProperties",
                       "propertyNames", "items", "x-increasing", "x-per-byte-maximum"})
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description"})


@cache
def schema() -> dict:
    """The platform file's JSON Schema (``compensate/platform.schema.json``)."""
    doc = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    _check_keywords(doc, "#")
    return doc


def _check_keywords(node: Any, where: str) -> None:
    if not isinstance(node, dict):
        raise ValueError(f"{SCHEMA_PATH}: {where} is not a schema object")
    unknown = set(node) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError(f"{SCHEMA_PATH}: {where}: keyword(s) {sorted(unknown)} are not "
                         f"supported by compensate.platform.validate")
    for key in ("properties", "patternProperties"):
        for name, sub in node.get(key, {}).items():
            _check_keywords(sub, f"{where}/{key}/{name}")
    for key in ("items", "propertyNames", "additionalProperties"):
        if isinstance(node.get(key), dict):
            _check_keywords(node[key], f"{where}/{key}")


def validate(data: Any, source: str = "<platform>") -> None:
    """Check a parsed platform file against :func:`schema`; raise :class:`PlatformError`
    with ``SOURCE: FIELD.PATH: what is wrong`` for the first problem found."""
    problem = first_problem(data)
    if problem is not None:
        path, what = problem
        raise PlatformError(f"{source}: {path}: {what}" if path else f"{source}: {what}")


def first_problem(data: Any) -> tuple[str, str] | None:
    """The first problem of ``data`` as (field path, message), or None if it is valid."""
    try:
        _check(data, schema(), "")
    except _Invalid as exc:
        return exc.path, exc.what
    return None


class _Invalid(Exception):
    def __init__(self, path: str, what: str) -> None:
        self.path, self.what = path, what


_TYPES = {"object": "an object", "array": "a list", "string": "a string",
          "number": "a number", "integer": "an integer (a whole number)",
          "boolean": "true or false", "null": "null"}


def _is_type(value: Any, name: str) -> bool:
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool,
                              "null": type(None)}[name])


def describe(value: Any) -> str:
    """How a JSON value reads in a message: ``the string "1e-6"``, ``the number -1``."""
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {_num(value)}"
    return "a list" if isinstance(value, list) else "an object"


def _finite(x: float) -> bool:
    try:
        return math.isfinite(x)  # an int beyond a float's range overflows here
    except OverflowError:
        return False


def _num(x: float) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if x != x else "Infinity" if x > 0 else "-Infinity"
    if isinstance(x, int) and len(str(abs(x))) > 20:
        return f"{str(x)[:12]}... ({len(str(abs(x)))} digits)"
    return repr(x) if isinstance(x, float) else str(x)


def _field(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(value: Any, node: dict, path: str) -> None:
    """Raise :class:`_Invalid` for the first keyword of ``node`` that ``value`` fails."""
    types = node.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is_type(value, t) for t in types):
            want = " or ".join(_TYPES[t] for t in types)
            raise _Invalid(path, f"expected {want}, got {describe(value)}")
    if types is not None and _is_type(value, "number") and not _finite(value):
        raise _Invalid(path, f"expected a finite number, got {_num(value)}")
    if "enum" in node and not any(_same(value, e) for e in node["enum"]):
        allowed = ", ".join(json.dumps(e) for e in node["enum"])
        raise _Invalid(path, f"unsupported value {json.dumps(value)} (expected {allowed})")
    if _is_type(value, "number"):
        if "minimum" in node and value < node["minimum"]:
            raise _Invalid(path, f"must be >= {node['minimum']}, got {_num(value)}")
        if "exclusiveMinimum" in node and value <= node["exclusiveMinimum"]:
            raise _Invalid(path, f"must be > {node['exclusiveMinimum']}, got {_num(value)}")
        if "maximum" in node and value > node["maximum"]:
            raise _Invalid(path, f"must be <= {_num(node['maximum'])}, got {_num(value)} "
                                 f"({BOUNDS_WHY})")
    if isinstance(value, dict):
        _check_object(value, node, path)
        if "x-per-byte-maximum" in node:
            _check_per_byte(value, node["x-per-byte-maximum"], path)
    if isinstance(value, list):
        if "items" in node:
            for i, item in enumerate(value):
                _check(item, node["items"], f"{path}[{i}]")
        key = node.get("x-increasing")
        if key is not None:
            for i in range(1, len(value)):
                a, b = value[i - 1][key], value[i][key]
                if not b > a:
                    raise _Invalid(f"{path}[{i}].{key}",
                                   f"sizes must increase ({_num(b)} after {_num(a)})")


def _check_per_byte(value: dict, most: float, path: str) -> None:
    """``x-per-byte-maximum``: a copy-table entry's ``seconds / bytes`` (its per-byte
    cost, 1 / bandwidth) is at most ``most`` seconds: held beyond the table's last
    size, a larger one would make a trace's large messages cost more than ticks hold."""
    b, s = value["bytes"], value["seconds"]  # present and in range: checked before
    if s > most * b:
        raise _Invalid(f"{path}.seconds", f"{_num(s)} s to copy {_num(b)} bytes is slower "
                                          f"than {1 / most:g} byte per second ({BOUNDS_WHY})")


def _check_object(value: dict, node: dict, path: str) -> None:
    props = node.get("properties", {})
    patterns = node.get("patternProperties", {})
    extra = node.get("additionalProperties", True)
    names = node.get("propertyNames")
    for key, item in value.items():
        if names is not None:
            try:
                _check(key, names, path)
            except _Invalid:
                what = names.get("description")
                close = _unknown(key, names.get("enum", ())).partition(" (")[2]
                raise _Invalid(path, f"{key!r} is not {what}" + (f" ({close}" if close else "")
                               if what else _unknown(key, names.get("enum", ()))) from None
        matched = False
        if key in props:
            _check(item, props[key], _field(path, key))
            matched = True
        for pattern, sub in patterns.items():
            if re.search(pattern, key):
                _check(item, sub, _field(path, key))
                matched = True
        if not matched:
            if extra is False:
                raise _Invalid(path, _unknown(key, props))
            if isinstance(extra, dict):
                _check(item, extra, _field(path, key))
    for key in node.get("required", ()):  # after the keys: a misspelt one is named first
        if key not in value:
            what = props.get(key, {}).get("description")
            raise _Invalid(path, f"missing required field {key!r}" + (f" ({what})" if what else ""))


def _unknown(key: str, known) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f"unknown field {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def _same(a: Any, b: Any) -> bool:
    """JSON equality for ``enum`` (1 == 1.0, but true is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
#: Decimal exponent of each unit: the value is scaled in decimal and rounded once,
#: so that "100ns" is exactly the float 1e-7 (100 * 1e-9 is 1.0000000000000001e-07,
#: which made a platform given as --overhead 100ns differ from one with 1e-7).
_UNIT = {None: 0, "s": 0, "ms": -3, "us": -6, "µs": -6, "ns": -9}


def parse_duration(text: str) -> float:
    """Parse ``250ns``, ``1.5us``, ``2e-6`` (seconds) into seconds."""
    m = _DURATION.match(str(text))
    if not m:
        raise PlatformError(f"cannot parse duration {text!r} (examples: 250ns, 1.5us, 2e-6)")
    return float(Decimal(m.group(1)).scaleb(_UNIT[m.group(2)]))
