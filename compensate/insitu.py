"""The tracer overhead a trace carries itself: in-situ tables, read and applied.

The project's mpi4py tracer measures what its records cost while the program
runs (``calibration/tracer/insitu.py``, docs/calibration.md "In-situ overhead")
and writes one table per location into the trace: in OTF2 a ``LocationProperty``
named :data:`PROPERTY` whose value is a JSON string (other OTF2 tools show or
ignore it), in the ``.trace`` format the location line's ``insitu="..."`` field
(docs/trace-format.md). The JSON::

    {"format": 1,
     "by_kind":   {"Enter": 1.7e-7, "MpiSend": 1.6e-6, ...},     # seconds per record
     "by_region": {"MPI_Recv": {"Enter": 7.9e-7, "Leave": 1.1e-6}, ...},
     ...}                                   # measured, source, sched: for people

``by_kind`` gives the overhead of every record of that kind on the location;
``by_region`` overrides it for the Enter/Leave records of the named regions.
Kinds the table does not name cost nothing there (the tracer names every kind
it wrote). Optional (issue #22; a reader that does not know it ignores it)::

     "cold": {"w_s": [0, 1.6e-6, 3.2e-6, ...],         # untraced work, increasing
              "extra_s": {"function": [0, 7e-8, ...],  # seconds per traced call
                          "mpi": [...], "lock": [...]},
              "regions": {"relax": "function", "MPI_Send": "mpi", ...}}

the extra cost of a traced call (the Enter of a region named in ``regions``)
after ``w`` seconds of untraced work since the previous record, per curve,
linear in between, flat beyond the last point (docs/calibration.md, "Cold
calls"): with ``--cold-calls`` (``use_cold``; off by default: it removed
0.1-0.3 % of the dilation in the real runs and once took a run's span below
its uninstrumented time) the gap before such an Enter is charged it
(:meth:`Platform.cold_charge <compensate.platform.Platform.cold_charge>`).
Other keys are carried but not used.

:func:`parse` checks one table (a clear one-line :class:`TraceError` naming the
location otherwise); :func:`platform_of` turns a trace's tables into the
per-location :class:`~compensate.platform.Platform` the engine applies
(:meth:`Platform.location_overheads`). Which overhead ``compensate`` uses when
(docs/compensation.md "Which overhead"): ``--overhead`` or ``--platform`` first,
then the trace's tables, else ``--overhead estimate`` (:mod:`compensate.estimate`).
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from typing import Any

from compensate.model import KIND_CODE, Definitions, TraceError
from compensate.platform import Platform

#: The OTF2 LocationProperty name of a location's table.
PROPERTY = "COMPENSATE::INSITU_OVERHEAD"
FORMATS = (1,)


def _seconds(value: Any, where: str, source: str, loc: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise TraceError(f"location {loc}: {PROPERTY}: {where} must be seconds >= 0, "
                         f"got {value!r}", source=source)
    return float(value)


def parse(text: str, source: str, loc: int) -> dict[str, Any]:
    """One location's table from its JSON text (TraceError if it is not one)."""
    try:
        table = json.loads(text)
    except (json.JSONDecodeError, ValueError) as exc:
        raise TraceError(f"location {loc}: {PROPERTY} is not JSON ({exc})",
                         source=source) from None
    except RecursionError:
        raise TraceError(f"location {loc}: {PROPERTY} is JSON nested too deeply",
                         source=source) from None
    if not isinstance(table, dict) or table.get("format") not in FORMATS:
        raise TraceError(f"location {loc}: {PROPERTY} must be a JSON object with "
                         f'"format": 1', source=source)
    by_kind = table.get("by_kind", {})
    by_region = table.get("by_region", {})
    if not isinstance(by_kind, dict) or not isinstance(by_region, dict):
        raise TraceError(f"location {loc}: {PROPERTY}: by_kind and by_region must be "
                         f"objects", source=source)
    for kind, v in by_kind.items():
        if kind not in KIND_CODE:
            raise TraceError(f"location {loc}: {PROPERTY}: unknown record kind {kind!r} "
                             f"in by_kind", source=source)
        _seconds(v, f"by_kind.{kind}", source, loc)
    for region, entry in by_region.items():
        if not isinstance(entry, dict) or not set(entry) <= {"Enter", "Leave"}:
            raise TraceError(f"location {loc}: {PROPERTY}: by_region.{region} must be "
                             f'{{"Enter": s, "Leave": s}}', source=source)
        for kind, v in entry.items():
            _seconds(v, f"by_region.{region}.{kind}", source, loc)
    if "cold" in table:
        _check_cold(table["cold"], source, loc)
    return table


def _check_cold(cold: Any, source: str, loc: int) -> None:
    """The ``cold`` entry (module docstring), or a one-line TraceError."""
    def bad(what: str) -> TraceError:
        return TraceError(f"location {loc}: {PROPERTY}: cold: {what}", source=source)

    if not isinstance(cold, dict):
        raise bad("must be an object")
    w, extra, regions = cold.get("w_s"), cold.get("extra_s"), cold.get("regions", {})
    if not isinstance(w, list) or not w:
        raise bad("w_s must be a non-empty list of seconds")
    for i, v in enumerate(w):
        _seconds(v, f"cold.w_s[{i}]", source, loc)
    if any(b <= a for a, b in pairwise(w)):
        raise bad("w_s must increase")
    if not isinstance(extra, dict):
        raise bad("extra_s must be an object of curves")
    for name, curve in extra.items():
        if not isinstance(curve, list) or len(curve) != len(w):
            raise bad(f"extra_s.{name} must be a list as long as w_s ({len(w)})")
        for i, v in enumerate(curve):
            _seconds(v, f"cold.extra_s.{name}[{i}]", source, loc)
        if any(b < a for a, b in pairwise(curve)):
            raise bad(f"extra_s.{name} must not decrease")
    if not isinstance(regions, dict):
        raise bad("regions must be an object")
    for region, name in regions.items():
        if name not in extra:
            raise bad(f"regions.{region} names no curve of extra_s ({name!r})")


def dumps(table: dict[str, Any]) -> str:
    """A table as the compact JSON text both formats store."""
    return json.dumps(table, separators=(",", ":"), allow_nan=False)


def platform_of(defs: Definitions, base: Platform | None = None,
                use_cold: bool = False) -> Platform | None:
    """The per-location platform of a trace's in-situ tables (None if it has
    none): each table's overheads for its location, and its cold-call curves
    (``use_cold``); locations without a table (their overhead by kind and by
    region, not its parts before the stamp), and the copy cost, from ``base``
    (zero without one)."""
    if not defs.insitu:
        return None
    ids_by_name: dict[str, list[int]] = {}
    for rid, name in defs.regions.items():
        ids_by_name.setdefault(str(name), []).append(int(rid))
    by_location, cold = {}, {}
    for loc, table in defs.insitu.items():
        entry = table.get("cold")
        if use_cold and entry and entry.get("regions"):
            curves = {}
            for name, curve in entry["regions"].items():
                for rid in ids_by_name.get(name, ()):
                    curves[rid] = entry["extra_s"][curve]
            if curves:
                cold[int(loc)] = (entry["w_s"], curves)
        regions = {}
        for name, entry in table.get("by_region", {}).items():
            for rid in ids_by_name.get(name, ()):
                regions[rid] = (entry.get("Enter"), entry.get("Leave"))
        by_location[int(loc)] = (dict(table.get("by_kind", {})), regions)
    if base is None:
        return Platform(0.0, by_location=by_location, cold=cold)
    return Platform(base.event_overhead, dict(base.overhead_by_kind), base.copy_bytes,
                    base.copy_seconds, base.device_overhead, by_location=by_location,
                    network=base.network, rma_release=base.rma_release, cold=cold,
                    overhead_by_region={k: dict(v) for k, v in
                                        base.overhead_by_region.items()})


def describe(platform: Platform) -> dict[str, Any]:
    """The per-location overheads for the summary: location -> by_kind, by_region
    (region ids as strings), and where the location has cold-call curves
    ``cold``: their ``w_s`` and the charged regions' ids."""
    out = {str(loc): {"by_kind": kinds,
                      "by_region": {str(r): {"Enter": e, "Leave": lv}
                                    for r, (e, lv) in regions.items()}}
           for loc, (kinds, regions) in platform.by_location.items()}
    for loc, (w_s, curves) in platform.cold.items():
        if str(loc) in out:
            out[str(loc)]["cold"] = {"w_s": list(w_s), "regions": sorted(curves)}
    return out
