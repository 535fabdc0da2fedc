"""Record kinds whose model view the OTF2 C path builds beyond its columns.

:mod:`compensate.formats.otf2.native` reads every record's arguments in C; two
families need more than a per-argument conversion to read as they do on the
``otf2`` package path:

* **MPI-4 partitioned records** (:mod:`compensate.formats.partitioned`) are
  ``ParameterUnsignedInt`` records whose parameter is named ``compensate:Mpi*``
  and whose attribute list carries the call's arguments. The C callback keeps the
  attribute list of every ``ParameterUnsignedInt`` (reference, type, value); here
  the records of a partitioned parameter become their model kinds with the columns
  :func:`~compensate.formats.partitioned.columns_of_event` gives. The C writer
  copies such a record with its input attribute list, while the ``otf2`` package
  path rebuilds it from the columns (:func:`~compensate.formats.partitioned.
  make_event`): the two archives are the same exactly when the input is in the
  form that function writes. So an archive whose partitioned definitions are not
  in that form (a parameter that is not UINT64, a missing attribute definition) is
  routed to the ``otf2`` package path (:func:`unsuitable`), and a record whose
  attribute list is not (other attributes, another order) is a one-line error
  saying how to read it (``COMPENSATE_NATIVE=0``). Archives written by compensate
  are always in that form.
* **RMA records** (:mod:`compensate.formats.rma`): their payload is their
  normalised fields under the text names (:func:`rma_fields`), the values
  :func:`~compensate.formats.fields.fields_of` gives for the ``otf2`` event
  object; ``members`` needs the group's location ids from the definitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compensate.formats.fields import rma_field
from compensate.formats.partitioned import TEXT_FIELDS, attribute_of, kind_of_parameter
from compensate.formats.rma import OTF2_NAME, RMA_FIELDS
from compensate.model import NONE, TraceError

__all__ = ["Partitioned", "rma_fields", "unsuitable"]

# OTF2_Type codes (otf2.enums.Type)
_UINT32, _UINT64, _COMM = 3, 4, 17
_PARAMETER_UINT64 = 2  # OTF2_PARAMETER_TYPE_UINT64
_UNDEF32 = 0xFFFFFFFF


def _type_of(column: str) -> int:
    """The OTF2 type make_event gives a partitioned record's attribute."""
    return _COMM if column == "comm" else _UINT32 if column in ("peer", "tag") else _UINT64


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


class Partitioned:
    """The partitioned parameters and attributes of an archive's definitions."""

    def __init__(self, registry: Any) -> None:
        #: parameter reference -> model kind
        self.kind_of: dict[int, int] = {}
        self.param_type: dict[int, int] = {}
        for par in getattr(registry, "parameters", ()):
            kind = kind_of_parameter(getattr(par, "name", None))
            if kind is not None:
                self.kind_of[int(par._ref)] = kind
                self.param_type[int(par._ref)] = _code(par.parameter_type)
        attrs: dict[tuple, int] = {}  # (name, description, type) -> ref (the last, as otf2)
        for a in getattr(registry, "attributes", ()):
            attrs[(a.name, a.description, _code(a.type))] = int(a._ref)
        #: kind -> ((attribute ref, type, column), ...) in make_event's order; None:
        #: an attribute definition is missing
        self.expected: dict[int, tuple | None] = {}
        for kind in set(self.kind_of.values()):
            row = []
            for _key, column in TEXT_FIELDS[kind]:
                if column == "request":
                    continue
                name, description = attribute_of(kind, column)
                ref = attrs.get((name, description, _type_of(column)))
                if ref is None:
                    row = None
                    break
                row.append((ref, _type_of(column), column))
            self.expected[kind] = None if row is None else tuple(row)

    def convert(self, cols: dict[str, np.ndarray], pos: np.ndarray, args: np.ndarray,
                nattrs: np.ndarray, attrs: np.ndarray, where: Any) -> np.ndarray:
        """Turn the ``ParameterUnsignedInt`` records at ``pos`` (their arguments,
        attribute counts and (ref, type, value) triples alongside) that stand for
        partitioned records into their model kinds and columns, as
        formats/otf2/columns.py does; returns the positions converted.
        ``where(p)``: the TraceError keywords naming the record at position ``p``."""
        done = []
        for p, row, n, triples in zip(pos.tolist(), args.tolist(), nattrs.tolist(),
                                      attrs.tolist(), strict=True):
            kind = self.kind_of.get(row[0])
            if kind is None:
                continue
            expected = self.expected[kind]
            got = tuple((triples[3 * j], triples[3 * j + 1]) for j in range(min(n, 8)))
            if expected is None or n != len(expected) or \
                    got != tuple((ref, t) for ref, t, _ in expected):
                raise TraceError("partitioned record whose attributes are not as compensate "
                                 "writes them; COMPENSATE_NATIVE=0 reads it through the otf2 "
                                 "package", **where(p))
            cols["kind"][p] = kind
            cols["request"][p] = row[1] - 2**64 if row[1] >= 2**63 else row[1]
            for j, (_ref, t, column) in enumerate(expected):
                v = triples[3 * j + 2]
                if t == _COMM:
                    v &= _UNDEF32
                    v = NONE if v == _UNDEF32 else v
                elif t == _UINT32:
                    v &= _UNDEF32
                elif v >= 2**63:
                    v -= 2**64
                cols[column][p] = v
            done.append(p)
        return np.array(done, np.int64)


def unsuitable(registry: Any) -> str | None:
    """Why the C path must not read an archive with these definitions (its
    partitioned records would be written differently from the otf2 package path),
    or None."""
    part = Partitioned(registry)
    for ref, kind in part.kind_of.items():
        if part.param_type[ref] != _PARAMETER_UINT64:
            return f"partitioned parameter {ref} is not UINT64"
        if part.expected[kind] is None:
            return f"partitioned parameter {ref} lacks an attribute definition"
    return None


def rma_fields(registry: Any, kind_name: str, fields: dict, raw: dict[str, int]) -> dict:
    """The normalised fields of an RMA record read by the C path, under their text
    names (:mod:`compensate.formats.rma`), as :func:`compensate.formats.fields.
    fields_of` gives them for the ``otf2`` event object: ``fields`` are the
    record's converted arguments by ``otf2`` attribute name (a definition as its
    reference, absent if undefined; an enum by name), ``raw`` the unconverted ones
    (``op`` is the operation's code, ``members`` the group's location ids from the
    definitions). A field the record lacks is left out and a value that does not
    normalise is kept as it is: fields_of then raises its one-line error naming the
    record when matching reads it, as for the ``otf2`` object."""
    out: dict[str, Any] = {}
    for name in RMA_FIELDS[kind_name]:
        if name == "op":
            v = raw.get("collective_op")
        elif name == "members":
            v = _members(registry, raw.get("group", _UNDEF32))
        else:
            v = fields.get(OTF2_NAME.get(name, name))
        if v is None:
            continue
        try:
            out[name] = rma_field(name, v)
        except (ValueError, TypeError, KeyError):
            out[name] = v
    return out


def _members(registry: Any, ref: int) -> tuple[int, ...] | None:
    """The location ids of group ``ref`` of the definitions, None if it is undefined."""
    if ref == _UNDEF32:
        return None
    try:
        group = registry.groups[ref]
    except (KeyError, IndexError, TypeError):
        return None  # as an undefined group: fields_of says the field is missing
    members = getattr(group, "members", None) or ()
    return tuple(int(getattr(m, "_ref", m)) for m in members)
