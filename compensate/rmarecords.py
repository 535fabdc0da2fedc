"""The fields of MPI one-sided (RMA) records, one view for every format (R10).

RMA records stay payload-carried kinds of the model (their fields are not numpy
columns: they are few, and only matching reads them). Their payload is an OTF2
event object (OTF2 input) or the ``key=value`` strings of a ``.trace`` line; this
module turns either into one normalised dict (:func:`fields_of`), writes it as
text fields (:func:`text_fields`) and builds the OTF2 event from it for a trace
that did not come from OTF2 (:func:`otf2_event`).

Fields by kind (text names; docs/trace-format.md "RMA records"):

=========================================  ====================================================
kind                                       fields
=========================================  ====================================================
RmaWinCreate, RmaWinDestroy, RmaWaitChange ``win``
RmaCollectiveBegin                         none
RmaCollectiveEnd                           ``op sync_level win root sent received``
RmaGroupSync                               ``sync_level win members`` (location ids)
RmaRequestLock, RmaAcquireLock, RmaTryLock ``win remote lock_id lock_type``
RmaReleaseLock                             ``win remote lock_id``
RmaSync                                    ``win remote sync_type``
RmaPut, RmaGet                             ``win remote bytes matching_id``
RmaAtomic                                  ``win remote type sent received matching_id``
RmaOpComplete*, RmaOpTest                  ``win matching_id``
=========================================  ====================================================

Normalised values: ``win`` the window id; ``remote`` and ``root`` ranks in the
window's communicator, -1 for OTF2's undefined value (Score-P's "all target ranks"
of MPI_Win_lock_all); byte counts and ids ints (-1 undefined); ``lock_type``
``EXCLUSIVE``/``SHARED``; ``sync_level`` the OTF2 bit set as an int (PROCESS = 1,
MEMORY = 2; text: ``NONE``, ``PROCESS``, ``MEMORY`` or ``PROCESS|MEMORY``);
``op`` a collective operation name; ``members`` a tuple of location ids.
"""

from __future__ import annotations

from typing import Any

from compensate.model import COLLECTIVE_OP_NAMES, COLLECTIVE_OPS, KIND_CODE, TraceError

_WIN = ("win",)
_LOCK = ("win", "remote", "lock_id", "lock_type")
_XFER = ("win", "remote", "bytes", "matching_id")
_OP = ("win", "matching_id")
#: text field names of each RMA record kind, in writing order
RMA_FIELDS: dict[str, tuple[str, ...]] = {
    "RmaWinCreate": _WIN, "RmaWinDestroy": _WIN, "RmaWaitChange": _WIN,
    "RmaCollectiveBegin": (),
    "RmaCollectiveEnd": ("op", "sync_level", "win", "root", "sent", "received"),
    "RmaGroupSync": ("sync_level", "win", "members"),
    "RmaRequestLock": _LOCK, "RmaAcquireLock": _LOCK, "RmaTryLock": _LOCK,
    "RmaReleaseLock": ("win", "remote", "lock_id"),
    "RmaSync": ("win", "remote", "sync_type"),
    "RmaPut": _XFER, "RmaGet": _XFER,
    "RmaAtomic": ("win", "remote", "type", "sent", "received", "matching_id"),
    "RmaOpCompleteBlocking": _OP, "RmaOpCompleteNonBlocking": _OP,
    "RmaOpCompleteRemote": _OP, "RmaOpTest": _OP,
}
RMA_KINDS = frozenset(KIND_CODE[k] for k in RMA_FIELDS)

#: text name -> attribute of the ``otf2`` event object
_OTF2_NAME = {"op": "collective_op", "sent": "bytes_sent", "received": "bytes_received",
              "members": "group"}
_UINT32_UNDEF = 0xFFFFFFFF
_UINT64_UNDEF = 0xFFFFFFFFFFFFFFFF
SYNC_PROCESS, SYNC_MEMORY = 1, 2
_NAMED = ("lock_type", "sync_type", "type")


def _int(v: Any, what: str) -> int:
    if isinstance(v, str):
        v = v.strip()
        if v in ("-", ""):
            return -1
        return int(v)
    v = int(getattr(v, "value", v))
    return -1 if v in (_UINT32_UNDEF, _UINT64_UNDEF) else v


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
    names = getattr(type(v), "_names", None)
    if isinstance(names, dict) and getattr(v, "value", None) in names:
        return str(names[v.value]).upper()
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
    v = getattr(payload, _OTF2_NAME.get(name, name), None)
    if name == "win" and v is not None:
        return int(getattr(v, "_ref", v))
    return v


def fields_of(kind_name: str, payload: Any, *, source: str = "", location: int | None = None,
              index: int | None = None) -> dict[str, Any]:
    """The normalised fields of an RMA record (module docstring); TraceError (one
    line, naming the record) for a missing or malformed field."""
    out: dict[str, Any] = {}
    for name in RMA_FIELDS[kind_name]:
        v = _raw(payload, name)
        if v is None:
            raise TraceError(f"{kind_name} without its {name} field", source=source,
                             location=location, index=index)
        try:
            if name == "members":
                out[name] = _members(v)
            elif name == "sync_level":
                out[name] = _sync_level(v)
            elif name == "op":
                out[name] = _op(v)
            elif name in _NAMED:
                out[name] = _name(v)
            else:
                out[name] = _int(v, name)
        except (ValueError, TypeError, KeyError) as exc:
            raise TraceError(f"{kind_name}: bad {name} field {v!r} ({exc})", source=source,
                             location=location, index=index) from exc
    return out


def _sync_text(level: int) -> str:
    parts = [n for bit, n in ((SYNC_PROCESS, "PROCESS"), (SYNC_MEMORY, "MEMORY")) if level & bit]
    return "|".join(parts) if parts else "NONE"


def text_fields(kind_name: str, payload: Any) -> list[tuple[str, str]]:
    """``[(key, value)]`` of an RMA record as a ``.trace`` line writes them."""
    f = fields_of(kind_name, payload)
    out = []
    for name in RMA_FIELDS[kind_name]:
        v = f[name]
        if name == "members":
            text = ",".join(str(m) for m in v) if v else "-"
        elif name == "sync_level":
            text = _sync_text(v)
        elif isinstance(v, int):
            text = "-" if v < 0 else str(v)
        else:
            text = str(v)
        out.append((name, text))
    return out


def otf2_event(kind_name: str, time: int, payload: Any, reg: Any, groups: dict) -> Any:
    """The ``otf2`` event object of an RMA record for a trace that did not come from
    OTF2: windows from ``reg.rma_wins``; a GroupSync's member set becomes a group
    definition (one per distinct set, cached in ``groups``)."""
    import otf2.events as oev
    from otf2.enums import (
        CollectiveOp,
        GroupType,
        LockType,
        Paradigm,
        RmaAtomicType,
        RmaSyncLevel,
        RmaSyncType,
    )

    f = fields_of(kind_name, payload)
    cls = getattr(oev, kind_name)
    if kind_name == "RmaCollectiveBegin":
        return cls(time)

    def u32(v: int) -> int:
        return _UINT32_UNDEF if v < 0 else v

    def u64(v: int) -> int:
        return _UINT64_UNDEF if v < 0 else v

    win = reg.rma_wins[f["win"]]
    if kind_name in ("RmaWinCreate", "RmaWinDestroy", "RmaWaitChange"):
        return cls(time, win)
    if kind_name == "RmaCollectiveEnd":
        return cls(time, CollectiveOp(COLLECTIVE_OPS[f["op"]]), RmaSyncLevel(f["sync_level"]),
                   win, u32(f["root"]), u64(f["sent"]), u64(f["received"]))
    if kind_name == "RmaGroupSync":
        key = f["members"]
        group = groups.get(key)
        if group is None:
            locs = {int(loc._ref): loc for loc in reg.locations}
            group = groups[key] = reg.group("", group_type=GroupType.COMM_GROUP,
                                            paradigm=Paradigm.MPI,
                                            members=tuple(locs[m] for m in key))
        return cls(time, RmaSyncLevel(f["sync_level"]), win, group)
    if kind_name in ("RmaRequestLock", "RmaAcquireLock", "RmaTryLock"):
        return cls(time, win, u32(f["remote"]), u64(f["lock_id"]),
                   getattr(LockType, f["lock_type"]))
    if kind_name == "RmaReleaseLock":
        return cls(time, win, u32(f["remote"]), u64(f["lock_id"]))
    if kind_name == "RmaSync":
        return cls(time, win, u32(f["remote"]), getattr(RmaSyncType, f["sync_type"]))
    if kind_name in ("RmaPut", "RmaGet"):
        return cls(time, win, u32(f["remote"]), u64(f["bytes"]), u64(f["matching_id"]))
    if kind_name == "RmaAtomic":
        return cls(time, win, u32(f["remote"]), getattr(RmaAtomicType, f["type"]),
                   u64(f["sent"]), u64(f["received"]), u64(f["matching_id"]))
    return cls(time, win, u64(f["matching_id"]))


def mpi_windows(defs: Any) -> set[int]:
    """The windows R10 applies to: MPI windows, whose communicator's members are all
    CPU threads (the MPI ranks). A window with a member on an accelerator stream
    holds device copies that Score-P records as RMA (CUDA, HIP, offload): left to
    the accelerator rules and carried as local records."""
    out = set()
    for wid, win in defs.windows.items():
        comm = defs.comms.get(win.comm)
        members = comm.members if comm is not None else ()
        if members and all(m in defs.locations and defs.locations[m].is_cpu
                           for m in members):
            out.add(wid)
    return out


__all__ = ["RMA_FIELDS", "RMA_KINDS", "SYNC_MEMORY", "SYNC_PROCESS", "fields_of",
           "mpi_windows", "otf2_event", "text_fields"]
