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
it wrote). Other keys are carried but not used.

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
    return table


def dumps(table: dict[str, Any]) -> str:
    """A table as the compact JSON text both formats store."""
    return json.dumps(table, separators=(",", ":"), allow_nan=False)


def platform_of(defs: Definitions, base: Platform | None = None) -> Platform | None:
    """The per-location platform of a trace's in-situ tables (None if it has
    none): each table's overheads for its location; locations without a table, and
    the copy cost, from ``base`` (zero without one)."""
    if not defs.insitu:
        return None
    ids_by_name: dict[str, list[int]] = {}
    for rid, name in defs.regions.items():
        ids_by_name.setdefault(str(name), []).append(int(rid))
    by_location = {}
    for loc, table in defs.insitu.items():
        regions = {}
        for name, entry in table.get("by_region", {}).items():
            for rid in ids_by_name.get(name, ()):
                regions[rid] = (entry.get("Enter"), entry.get("Leave"))
        by_location[int(loc)] = (dict(table.get("by_kind", {})), regions)
    if base is None:
        return Platform(0.0, by_location=by_location)
    return Platform(base.event_overhead, dict(base.overhead_by_kind), base.copy_bytes,
                    base.copy_seconds, base.device_overhead, by_location=by_location,
                    network=base.network, rma_release=base.rma_release)


def describe(platform: Platform) -> dict[str, Any]:
    """The per-location overheads for the summary: location -> by_kind, by_region
    (region ids as strings)."""
    return {str(loc): {"by_kind": kinds,
                       "by_region": {str(r): {"Enter": e, "Leave": lv}
                                     for r, (e, lv) in regions.items()}}
            for loc, (kinds, regions) in platform.by_location.items()}
