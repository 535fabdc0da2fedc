"""The synchronisation object and return value of Enter/Leave records, as EZTrace's
``pthread`` module writes them (docs/eztrace.md).

EZTrace records a Pthread call as the Enter and Leave of a region named after it
(``pthread_mutex_lock``, ``pthread_spin_unlock``, ``pthread_barrier_wait``, ...),
the object's address as an additional attribute of the Enter (UINT64, named
``mutex``, ``lock`` or ``barrier``; each call site kind defines its own attribute
of that name) and, for ``pthread_mutex_trylock`` and ``pthread_spin_trylock``, the
call's return value as the attribute ``ret`` of the Leave. Matching
(:mod:`compensate.matching.pthreads`) needs both, so both readers put them into the
``request`` column, which Enter and Leave records do not otherwise use: an Enter's
object address, a Leave's return value, NONE where the record has neither. The
records themselves (and their attribute lists) are written back unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compensate.model import ENTER, LEAVE, NONE

__all__ = ["OBJECT_ATTRIBUTES", "RETURN_ATTRIBUTE", "NativeSync", "event_sync_column",
           "native_sync_column", "sync_refs", "tolerate_attribute_types"]

#: the attribute names that hold a synchronisation object's address on an Enter
OBJECT_ATTRIBUTES = frozenset({"mutex", "lock", "barrier"})
#: the attribute that holds a call's return value on a Leave
RETURN_ATTRIBUTE = "ret"
_INT64_MAX = 2**63 - 1
#: OTF2_Type code -> mask of the value's bytes (the unsigned integer types)
_MASKS = {1: 0xFF, 2: 0xFFFF, 3: 0xFFFFFFFF, 4: 0xFFFFFFFFFFFFFFFF}


def _name(attr: Any) -> str | None:
    name = getattr(attr, "name", None)
    return getattr(name, "name", name)


def sync_refs(registry: Any) -> tuple[np.ndarray, np.ndarray]:
    """The references of the archive's object attributes and of its return-value
    attributes (unsigned integers only; empty arrays if it has none)."""
    obj, ret = [], []
    for a in getattr(registry, "attributes", ()):
        name = _name(a)
        if name in OBJECT_ATTRIBUTES:
            obj.append(int(a._ref))
        elif name == RETURN_ATTRIBUTE:
            ret.append(int(a._ref))
    return np.array(obj, np.uint64), np.array(ret, np.uint64)


def native_sync_column(kind: np.ndarray, nattrs: np.ndarray, attrs: np.ndarray,
                       obj: np.ndarray, ret: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` (the ``request`` column, flat order) from the C reader's kept
    attribute lists: per record its number of attributes (``nattrs``; all ones:
    unreadable) and (reference, type, value) triples (``attrs``); an Enter's first
    object attribute, a Leave's first return-value attribute."""
    n = len(kind)
    if not n:
        return
    triples = attrs.reshape(n, -1, 3)
    slots = np.arange(triples.shape[1])
    count = nattrs.astype(np.int64)
    count[nattrs == np.iinfo(nattrs.dtype).max] = 0
    present = slots[None, :] < count[:, None]
    for code, refs in ((ENTER, obj), (LEAVE, ret)):
        if not refs.size:
            continue
        hit = np.isin(triples[:, :, 0], refs) & present & (kind == code)[:, None]
        rows = np.flatnonzero(hit.any(axis=1))
        if not rows.size:
            continue
        col = hit[rows].argmax(axis=1)
        types = triples[rows, col, 1]
        values = triples[rows, col, 2]
        mask = np.array([_MASKS.get(int(t), 0) for t in types.tolist()], np.uint64)
        values = values & mask
        ok = (mask != 0) & (values <= _INT64_MAX)
        out[rows[ok]] = values[ok].astype(np.int64)


def event_sync_column(kind: np.ndarray, events: list[Any]) -> np.ndarray | None:
    """The ``request`` values of ``otf2`` Enter/Leave event objects (their
    ``attributes`` dicts; module docstring), or None if no record has one."""
    out = None
    for i in np.flatnonzero((kind == ENTER) | (kind == LEAVE)).tolist():
        attrs = getattr(events[i], "attributes", None)
        if not attrs:
            continue
        want = OBJECT_ATTRIBUTES if kind[i] == ENTER else (RETURN_ATTRIBUTE,)
        for attr, value in attrs.items():
            if _name(attr) in want and isinstance(value, int) and 0 <= value <= _INT64_MAX:
                if out is None:
                    out = np.full(len(events), NONE, dtype=np.int64)
                out[i] = int(value)
                break
    return out


class NativeSync:
    """The C reader's part (:class:`~compensate.formats.otf2.native.NativeChunks`):
    which attribute lists to keep, and the column from them."""

    def __init__(self, obj: np.ndarray, ret: np.ndarray) -> None:
        self.obj, self.ret = obj, ret

    @classmethod
    def of(cls, registry: Any) -> NativeSync | None:
        """For an archive whose definitions hold such attributes; else None."""
        obj, ret = sync_refs(registry)
        return cls(obj, ret) if obj.size or ret.size else None

    @staticmethod
    def kept(names: list[str], keep: np.ndarray, every: Any) -> np.ndarray:
        """Per C kind index, whether to keep its records' attribute lists: all if
        ``every`` is not None (the per-record overhead attribute), else ``keep`` with
        Enter and Leave added."""
        if every is not None:
            return np.ones_like(keep)
        return keep | np.array([n in ("Enter", "Leave") for n in names], np.uint8)

    def column(self, flat: dict[str, np.ndarray]) -> np.ndarray:
        """The ``request`` column of a block of records in the C reader's order."""
        out = flat["request"].astype(np.int64)
        native_sync_column(flat["kind"], flat["nattrs"], flat["attrs"], self.obj, self.ret, out)
        return out


def tolerate_attribute_types() -> None:
    """Let the ``otf2`` package read a record whose attribute value is typed otherwise
    than the attribute's definition, as the OTF2 library and ``otf2-print`` do
    (EZTrace defines ``ret`` as UINT32 and writes its values as UINT64): the
    package asserts the two agree and fails the whole read. Where they differ, the
    value is read with the record's type and keyed by a copy of the definition with
    that type (not in any registry), so that writing the event back writes the
    record's own reference, type and value. Reads where they agree are unchanged."""
    from otf2 import attribute_value
    from otf2.attribute_list import AttributeList
    from otf2.definitions import Attribute
    from otf2.enums import Type

    original = AttributeList._construct
    if getattr(original, "tolerant", False):
        return

    def construct(cls: Any, registry: Any, attribute_list: Any) -> Any:
        try:
            return original.__func__(cls, registry, attribute_list)
        except AssertionError:
            pass
        import _otf2
        out = {}
        for i in range(_otf2.AttributeList_GetNumberOfElements(attribute_list)):
            ref, kind, raw = _otf2.AttributeList_GetAttributeByIndex(attribute_list, i)
            attr = registry.attributes[ref]
            if attr.type != kind:
                attr = Attribute(None, ref, attr.name, attr.description,
                                 Type(int(getattr(kind, "value", kind))))
            out[attr] = attribute_value.parse(registry, raw, kind)
        return out

    construct.tolerant = True  # type: ignore[attr-defined]
    AttributeList._construct = classmethod(construct)  # type: ignore[method-assign]
