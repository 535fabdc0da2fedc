"""A record's payload fields as plain Python values: the one reader of payloads.

Each reader hands every record's payload on with its columns: an ``otf2`` event
object (OTF2 read through the ``otf2`` package, which the OTF2 writer writes back),
a :class:`Fields` dict of values already normalised (OTF2 read by the C path,
:mod:`compensate.formats.otf2.native`), or the ``key=value`` strings of a
``.trace`` line (a dict of strings, definitions under ``name_ref``). Matching, the
engine, the distributed run, verification and analysis read a field only through
the functions here, so none of them knows a reader's objects, imports ``otf2`` or
reads its enum internals; a new reader only has to hand over something these
functions read.

Normalised values (:func:`field_of`): a definition as its reference number; an
enum member by its OTF2 name in upper case (``OPENMP``, ``EXCLUSIVE``); a number
as an int; None for a field the record does not have (or an undefined definition
on the C path). RMA records (:func:`fields_of`): the normalised dict of
:mod:`compensate.formats.rma`, or a one-line TraceError naming the record.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compensate.formats.rma import (
    OTF2_NAME,
    RMA_FIELDS,
    SYNC_MEMORY,
    SYNC_PROCESS,
    UINT32_UNDEF,
    UINT64_UNDEF,
)
from compensate.model import COLLECTIVE_OP_NAMES, COLLECTIVE_OPS, TraceError

__all__ = ["Fields", "enum_name", "enum_names", "field_of", "fields_of", "metric_of",
           "rma_field"]


class Fields(dict):
    """A payload that is already the record's normalised fields (``{name: value}``
    under the names :func:`field_of` and :func:`fields_of` are asked for, values as
    they return them): read as it is, with no conversion."""

    __slots__ = ()


def enum_names(cls: Any) -> dict[int, str] | None:
    """``{code: member name}`` of an ``otf2`` enum class (the ``_otf2`` EnumBase
    table), None for anything else."""
    names = getattr(cls, "_names", None)
    return names if isinstance(names, dict) else None


def enum_name(v: Any) -> str | None:
    """The OTF2 member name of an ``otf2`` enum value (as the library spells it), or
    None if ``v`` is not one or its code has no name."""
    names = enum_names(type(v))
    if names is not None and getattr(v, "value", None) in names:
        return str(names[v.value])
    return None


def field_of(payload: Any, name: str) -> Any:
    """Field ``name`` of a record (thread, lock, task and parameter records, ...):
    from an OTF2 event object (a definition as its reference number, an enum by
    name), a :class:`Fields` dict as it is, or a ``.trace`` field dict (``name`` or
    ``name_ref``; numbers as ints, other text upper case). None if absent."""
    if isinstance(payload, Fields):
        return payload.get(name)
    if isinstance(payload, dict):
        v = payload.get(name, payload.get(name + "_ref"))
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                return v.upper()
        return v
    v = getattr(payload, name, None)
    if v is None:
        return None
    if hasattr(v, "_ref"):
        return int(v._ref)
    member = enum_name(v)
    if member is not None:
        return member.upper()
    if isinstance(getattr(v, "name", None), str):  # a Python enum
        return v.name.upper()
    return int(v) if isinstance(v, (int, np.integer)) else v


def _int(v: Any) -> int:
    if isinstance(v, str):
        v = v.strip()
        if v in ("-", ""):
            return -1
        return int(v)
    v = int(getattr(v, "value", v))
    return -1 if v in (UINT32_UNDEF, UINT64_UNDEF) else v


def _sync_level(v: Any) -> int:
    if isinstance(v, str):
        if v.strip().lstrip("-").isdigit():
            return int(v)
        bits = {"NONE": 0, "PROCESS": SYNC_PROCESS, "MEMORY": SYNC_MEMORY}
        return sum(bits[p.strip().upper()] for p in v.split("|") if p.strip())
    return int(getattr(v, "value", v))


def _name(v: Any) -> str:
    if isinstance(v, str):
        return v.strip().upper()
    member = enum_name(v)
    if member is not None:
        return member.upper()
    name = getattr(v, "name", None)
    return name.upper() if isinstance(name, str) else str(v).upper()


def _op(v: Any) -> str:
    if isinstance(v, str):
        v = v.strip().upper()
        return v if v in COLLECTIVE_OPS else COLLECTIVE_OP_NAMES.get(int(v), v)
    code = int(getattr(v, "value", v))
    return COLLECTIVE_OP_NAMES.get(code, str(code))


def _members(v: Any) -> tuple[int, ...]:
    if isinstance(v, str):
        v = v.strip()
        return () if v in ("-", "") else tuple(int(x) for x in v.split(","))
    if isinstance(v, list | tuple):
        return tuple(int(getattr(m, "_ref", m)) for m in v)
    members = getattr(v, "members", None) or ()  # an OTF2 Group of locations
    return tuple(int(getattr(m, "_ref", m)) for m in members)


def _raw(payload: Any, name: str) -> Any:
    if isinstance(payload, dict):
        return payload.get(name, payload.get(name + "_ref"))
    v = getattr(payload, OTF2_NAME.get(name, name), None)
    if name == "win" and v is not None:
        return int(getattr(v, "_ref", v))
    return v


def rma_field(name: str, v: Any) -> Any:
    """The normalised value of RMA field ``name`` (a text name,
    :mod:`compensate.formats.rma`) from what a payload holds: text, an ``otf2``
    value, or a value already normalised (which it returns unchanged).
    ValueError, TypeError or KeyError for a malformed one."""
    if name == "members":
        return _members(v)
    if name == "sync_level":
        return _sync_level(v)
    if name == "op":
        return _op(v)
    if name in ("lock_type", "sync_type", "type"):
        return _name(v)
    return _int(v)


def fields_of(kind_name: str, payload: Any, *, source: str = "", location: int | None = None,
              index: int | None = None) -> dict[str, Any]:
    """The normalised fields of an RMA record (:mod:`compensate.formats.rma`);
    TraceError (one line, naming the record) for a missing or malformed field."""
    out: dict[str, Any] = {}
    for name in RMA_FIELDS[kind_name]:
        v = _raw(payload, name)
        if v is None:
            raise TraceError(f"{kind_name} without its {name} field", source=source,
                             location=location, index=index)
        try:
            out[name] = rma_field(name, v)
        except (ValueError, TypeError, KeyError) as exc:
            raise TraceError(f"{kind_name}: bad {name} field {v!r} ({exc})", source=source,
                             location=location, index=index) from exc
    return out


def metric_of(payload: Any) -> tuple[str, list[tuple[str, Any]]] | None:
    """(counter name, ``[(member, value)]``) of a Metric record: from an OTF2 event
    object, its metric class's member names (``value i`` when they do not match the
    values) and values; from a ``.trace`` field dict (``metric_ref=3
    values=1523,88``), ``metric 3`` and the values as text. None for a payload
    without values (the C path's, or a text record without ``values``)."""
    metric = getattr(payload, "metric", None)
    values = getattr(payload, "values", None)
    if metric is not None and values is not None:
        # (not getattr(m, "name", str(m)): the default is built for every member of
        # every record, and str() of an otf2 definition formats all its fields)
        members = [m.name if hasattr(m, "name") else str(m)
                   for m in getattr(metric, "members", ())]
        if len(members) != len(values):
            members = [f"value {i}" for i in range(len(values))]
        return ", ".join(members) or "Metric", list(zip(members, values, strict=True))
    if isinstance(payload, dict) and payload.get("values"):
        nums = str(payload["values"]).split(",")
        ref = payload.get("metric_ref", "")
        return f"metric {ref}".strip(), [(f"value {i}", v) for i, v in enumerate(nums)]
    return None
