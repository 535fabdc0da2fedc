"""Writing the most common OTF2 event objects straight through the OTF2 C library.

The ``otf2`` bindings write an event through five Python layers: the event
writer updates the archive's first/last timestamp and the location's event
count, the event opens an (empty) AttributeList context, and the ctypes wrapper
sets the C function's argument types again on every call. For attribute-free
Enter, Leave, MpiSend, MpiRecv and MpiCollectiveBegin records — nearly all
records of an MPI trace — :func:`write_records` calls the same C functions
(``OTF2_EvtWriter_Enter`` ...) with the same arguments, from function objects
configured once, and does the bookkeeping once per location. Everything else
(records with attributes, every other kind, payloads that are not OTF2 event
objects) goes to the caller's ``fallback``, which writes it the ordinary way.
The archive written is the same, byte for byte.

The event objects of records a trace that did not come from OTF2 holds only as
columns or fields are built here too: matched probes (:func:`matched_event`) and
RMA records (:func:`otf2_event`, from their normalised fields).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import _otf2
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

from compensate.formats.fields import fields_of
from compensate.formats.rma import UINT32_UNDEF, UINT64_UNDEF
from compensate.model import (
    COLL_BEGIN,
    COLLECTIVE_OPS,
    ENTER,
    IMRECV,
    IMRECV_REQUEST,
    LEAVE,
    MRECV,
    NONE,
    PROBE,
    RECV,
    SEND,
)

__all__ = ["MATCHED_KINDS", "matched_event", "otf2_event", "write_records"]

_u32, _u64, _ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
_SIGNATURES = {
    ENTER: ("OTF2_EvtWriter_Enter", [_ptr, _ptr, _u64, _u32]),
    LEAVE: ("OTF2_EvtWriter_Leave", [_ptr, _ptr, _u64, _u32]),
    SEND: ("OTF2_EvtWriter_MpiSend", [_ptr, _ptr, _u64, _u32, _u32, _u32, _u64]),
    RECV: ("OTF2_EvtWriter_MpiRecv", [_ptr, _ptr, _u64, _u32, _u32, _u32, _u64]),
    COLL_BEGIN: ("OTF2_EvtWriter_MpiCollectiveBegin", [_ptr, _ptr, _u64]),
}
_CLASSES = {ENTER: oev.Enter, LEAVE: oev.Leave, SEND: oev.MpiSend, RECV: oev.MpiRecv,
            COLL_BEGIN: oev.MpiCollectiveBegin}
_functions: dict[int, Any] = {}


def _function(kind: int) -> Any:
    """A private ctypes function object for ``kind`` (the bindings' shared ones get
    their argument types reset on every call)."""
    fn = _functions.get(kind)
    if fn is None:
        name, argtypes = _SIGNATURES[kind]
        fn = _otf2.conf.lib[name]  # item access: a new function object, not the cached one
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int  # checked by the caller: 0 is OTF2_SUCCESS
        _functions[kind] = fn
    return fn


def write_records(writer: Any, ew: Any, payloads: list[Any], times: list[int],
                  kinds: list[int], fallback: Callable[[int], None]) -> None:
    """Write one location's records with timestamps ``times``, in order.

    ``writer`` is the ``otf2`` archive writer, ``ew`` the location's event writer.
    Each payload that is an attribute-free event object of one of the kinds above
    (and of the class its kind says) gets ``time`` assigned and is written
    directly; for every other record ``fallback(i)`` is called.
    """
    if not payloads:
        return
    f_enter, f_leave = _function(ENTER), _function(LEAVE)
    f_send, f_recv, f_begin = _function(SEND), _function(RECV), _function(COLL_BEGIN)
    enter, leave, send, recv, begin = (_CLASSES[k] for k in (ENTER, LEAVE, SEND, RECV,
                                                             COLL_BEGIN))
    h = ctypes.cast(ew.handle, ctypes.c_void_p).value
    direct = 0
    for i, p in enumerate(payloads):
        cls = type(p)
        k = kinds[i]
        if getattr(p, "attributes", True):  # attributes, or not an event object
            fallback(i)
            continue
        t = times[i]
        if cls is enter and k == ENTER:
            p.time = t
            rc = f_enter(h, None, t, p.region._ref)
        elif cls is leave and k == LEAVE:
            p.time = t
            rc = f_leave(h, None, t, p.region._ref)
        elif cls is send and k == SEND:
            p.time = t
            rc = f_send(h, None, t, p.receiver, p.communicator._ref, p.msg_tag, p.msg_length)
        elif cls is recv and k == RECV:
            p.time = t
            rc = f_recv(h, None, t, p.sender, p.communicator._ref, p.msg_tag, p.msg_length)
        elif cls is begin and k == COLL_BEGIN:
            p.time = t
            rc = f_begin(h, None, t)
        else:
            fallback(i)
            continue
        if rc:  # raise what the bindings raise for a failed call
            _otf2.HandleErrorCode(_otf2.ErrorCode(rc))
        direct += 1
    if direct:  # what EventWriter.write does per event, once: event count, time range
        ew._location._number_of_events_written += direct
        writer._update_timestamps(times[0])
        writer._update_timestamps(times[-1])


#: Matched-probe kinds, built from the columns by :func:`matched_event`.
MATCHED_KINDS = frozenset({PROBE, MRECV, IMRECV_REQUEST, IMRECV})


def matched_event(reg: Any, cols: dict[str, list[int]], i: int, kind: int) -> Any:
    """The otf2 event of matched-probe record ``i`` (a text trace's): the message id
    is in ``size_recv``, the length in ``size``, the request id in ``request``
    (model.PROBE); -1 becomes OTF2's undefined value."""
    def u(name: str, undefined: int = 0xFFFFFFFFFFFFFFFF) -> int:
        v = cols[name][i]
        return undefined if v == NONE or v < 0 else int(v)

    t = cols["time"][i]
    if kind == PROBE:
        return oev.MpiProbe(t, u("peer", 0xFFFFFFFF), reg.comms[cols["comm"][i]],
                            u("tag", 0xFFFFFFFF), u("size_recv"))
    if kind == MRECV:
        return oev.MpiMrecv(t, u("size_recv"), u("size"))
    if kind == IMRECV_REQUEST:
        return oev.MpiImrecvRequest(t, u("size_recv"), u("request"))
    return oev.MpiImrecv(t, u("request"), u("size"))


def otf2_event(kind_name: str, time: int, payload: Any, reg: Any, groups: dict) -> Any:
    """The ``otf2`` event object of an RMA record for a trace that did not come from
    OTF2, from its normalised fields (:func:`compensate.formats.fields.fields_of`):
    windows from ``reg.rma_wins``; a GroupSync's member set becomes a group
    definition (one per distinct set, cached in ``groups``)."""
    f = fields_of(kind_name, payload)
    cls = getattr(oev, kind_name)
    if kind_name == "RmaCollectiveBegin":
        return cls(time)

    def u32(v: int) -> int:
        return UINT32_UNDEF if v < 0 else v

    def u64(v: int) -> int:
        return UINT64_UNDEF if v < 0 else v

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
