"""The tracer's records as OTF2 events: as ``otf2`` event objects, and straight
through the OTF2 C library.

:func:`event` maps a record ``(time, kind, *fields)`` of
:func:`calibration.tracer.buffer.rows` to its ``otf2.events`` object — the
reference mapping, and the path every record kind can take. Writing an object
through the bindings costs ~37 µs a record, nearly all of it in
``EventWriter.write``: the event opens an OTF2 AttributeList for its one
attribute (the in-situ cost, :data:`calibration.tracer.insitu.ATTRIBUTE`), sets
the value through an AttributeValue union, deletes the list again, and every
ctypes wrapper sets its function's argument types and error check anew on each
call. A run of 10⁶ records took minutes to write.

:func:`write_rows` writes one location's records the same way the bindings
do, for the common kinds (Enter, Leave, the blocking and nonblocking
point-to-point records, request tests, collective begin/end, lock records,
BufferFlush): the same C functions (``OTF2_EvtWriter_Enter`` ...) with the same
arguments, from function objects configured once, and with ONE AttributeList
per location, filled with ``OTF2_AttributeList_AddUint64`` before each record
that carries the attribute. OTF2 empties an attribute list when it writes the
event that carries it, so the list is ready for the next record; it is deleted
at the end, also when a write fails. Every other record goes, at its position,
to the caller's ``fallback``, which writes its event object the ordinary way.
The event writer's bookkeeping (the location's event count, the archive's
first and last timestamp) is done once at the end for the records written
directly. The archive is the same, byte for byte
(tests/calibration/test_tracer_evtwrite.py), 5-10x faster to write
(``benchmarks/tracer_write.py``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import _otf2
import otf2.events as oev
from otf2.enums import CollectiveOp, Paradigm

from calibration.tracer import buffer as tb

__all__ = ["DIRECT_KINDS", "UNDEF_U32", "UNDEF_U64", "event", "write_rows"]

UNDEF_U32 = 0xFFFFFFFF  # OTF2_UNDEFINED_UINT32
UNDEF_U64 = 0xFFFFFFFFFFFFFFFF  # OTF2_UNDEFINED_UINT64


def event(rec: tuple, regions: list, comms: list, contingent: Any = None,
          waited: frozenset | set = frozenset()) -> Any:
    """The ``otf2.events`` object of the tracer's record ``rec`` (every kind but the
    partitioned and RMA ones): ``regions`` and ``comms`` map the rank's local ids to
    their OTF2 definitions, ``contingent`` is the rank's thread contingent
    communicator, ``waited`` the sequence counts some ThreadWait joined."""
    t, kind = rec[0], rec[1]
    if kind == tb.ENTER:
        return oev.Enter(t, regions[rec[2]])
    if kind == tb.LEAVE:
        return oev.Leave(t, regions[rec[2]])
    if kind == tb.MPI_SEND:
        return oev.MpiSend(t, rec[2], comms[rec[3]], rec[4], rec[5])
    if kind == tb.MPI_RECV:
        return oev.MpiRecv(t, rec[2], comms[rec[3]], rec[4], rec[5])
    if kind == tb.MPI_ISEND:
        return oev.MpiIsend(t, rec[2], comms[rec[3]], rec[4], rec[5], rec[6])
    if kind == tb.MPI_IRECV:
        return oev.MpiIrecv(t, rec[2], comms[rec[3]], rec[4], rec[5], rec[6])
    if kind == tb.MPI_IRECV_REQUEST:
        return oev.MpiIrecvRequest(t, rec[2])
    if kind == tb.MPI_ISEND_COMPLETE:
        return oev.MpiIsendComplete(t, rec[2])
    if kind == tb.MPI_REQUEST_TEST:
        return oev.MpiRequestTest(t, rec[2])
    if kind == tb.COLL_BEGIN:
        return oev.MpiCollectiveBegin(t)
    if kind == tb.COLL_END:
        op, comm, root, sent, received = rec[2:7]
        return oev.MpiCollectiveEnd(t, CollectiveOp(op), comms[comm],
                                    UNDEF_U32 if root < 0 else root, sent, received)
    if kind == tb.PROGRAM_BEGIN:
        return oev.ProgramBegin(t, rec[2], rec[3])
    if kind == tb.PROGRAM_END:
        return oev.ProgramEnd(t, rec[2])
    if kind == tb.THREAD_CREATE:
        return oev.ThreadCreate(t, contingent, rec[2])
    if kind == tb.THREAD_BEGIN:
        return oev.ThreadBegin(t, contingent, rec[2])
    if kind == tb.THREAD_END:
        return oev.ThreadEnd(t, contingent, rec[2] if rec[2] in waited else UNDEF_U64)
    if kind == tb.THREAD_WAIT:
        return oev.ThreadWait(t, contingent, rec[2])
    if kind == tb.THREAD_ACQUIRE_LOCK:
        return oev.ThreadAcquireLock(t, Paradigm.PTHREAD, rec[2], rec[3])
    if kind == tb.THREAD_RELEASE_LOCK:
        return oev.ThreadReleaseLock(t, Paradigm.PTHREAD, rec[2], rec[3])
    if kind == tb.BUFFER_FLUSH:
        return oev.BufferFlush(t, rec[2])
    if kind == tb.NBC_REQUEST:
        return oev.NonBlockingCollectiveRequest(t, rec[2])
    if kind == tb.NBC_COMPLETE:
        op, comm, root, sent, received, request = rec[2:8]
        return oev.NonBlockingCollectiveComplete(t, CollectiveOp(op), comms[comm],
                                                 UNDEF_U32 if root < 0 else root, sent,
                                                 received, request)
    if kind == tb.REQUEST_CANCELLED:
        return oev.MpiRequestCancelled(t, rec[2])
    if kind == tb.PROBE:
        return oev.MpiProbe(t, rec[2], comms[rec[3]], rec[4], rec[5])
    if kind == tb.MRECV:
        return oev.MpiMrecv(t, rec[2], rec[3])
    if kind == tb.IMRECV_REQUEST:
        return oev.MpiImrecvRequest(t, rec[2], rec[3])
    if kind == tb.IMRECV:
        return oev.MpiImrecv(t, rec[2], rec[3])
    raise ValueError(f"unknown record kind {kind}")


# -- the direct path ----------------------------------------------------------------

_u8, _u32, _u64, _ptr = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
_P2P = [_ptr, _ptr, _u64, _u32, _u32, _u32, _u64]  # peer, comm, tag, length
_NB_P2P = [*_P2P, _u64]  # ... request id
_REQUEST = [_ptr, _ptr, _u64, _u64]  # request id
_LOCK = [_ptr, _ptr, _u64, _u8, _u32, _u32]  # model, lock id, acquisition order
#: C function -> argument types, as the bindings' ctypes wrappers set them
#: (``_otf2/EvtWriter.py``: TimeStamp and the 64-bit fields are uint64, the
#: references and 32-bit fields uint32, OTF2_Paradigm and OTF2_CollectiveOp uint8)
_SIGNATURES: dict[str, list[Any]] = {
    "OTF2_EvtWriter_Enter": [_ptr, _ptr, _u64, _u32],
    "OTF2_EvtWriter_Leave": [_ptr, _ptr, _u64, _u32],
    "OTF2_EvtWriter_MpiSend": _P2P,
    "OTF2_EvtWriter_MpiRecv": _P2P,
    "OTF2_EvtWriter_MpiIsend": _NB_P2P,
    "OTF2_EvtWriter_MpiIrecv": _NB_P2P,
    "OTF2_EvtWriter_MpiIrecvRequest": _REQUEST,
    "OTF2_EvtWriter_MpiIsendComplete": _REQUEST,
    "OTF2_EvtWriter_MpiRequestTest": _REQUEST,
    "OTF2_EvtWriter_MpiCollectiveBegin": [_ptr, _ptr, _u64],
    # op, communicator, root, bytes sent, bytes received
    "OTF2_EvtWriter_MpiCollectiveEnd": [_ptr, _ptr, _u64, _u8, _u32, _u32, _u64, _u64],
    "OTF2_EvtWriter_ThreadAcquireLock": _LOCK,
    "OTF2_EvtWriter_ThreadReleaseLock": _LOCK,
    "OTF2_EvtWriter_BufferFlush": [_ptr, _ptr, _u64, _u64],  # stop time
    "OTF2_AttributeList_AddUint64": [_ptr, _u32, _u64],
    "OTF2_AttributeList_Delete": [_ptr],
    "OTF2_AttributeList_New": [],
}
#: the kinds :func:`write_rows` writes itself
DIRECT_KINDS = frozenset((
    tb.ENTER, tb.LEAVE, tb.MPI_SEND, tb.MPI_RECV, tb.MPI_ISEND, tb.MPI_IRECV,
    tb.MPI_IRECV_REQUEST, tb.MPI_ISEND_COMPLETE, tb.MPI_REQUEST_TEST, tb.COLL_BEGIN,
    tb.COLL_END, tb.THREAD_ACQUIRE_LOCK, tb.THREAD_RELEASE_LOCK, tb.BUFFER_FLUSH))
_functions: dict[str, Any] = {}


def _function(name: str) -> Any:
    """A private ctypes function object for the C function ``name``, configured
    once (the bindings' shared ones get their argument types reset on every call).
    It returns the OTF2_ErrorCode as an int (0: OTF2_SUCCESS), the caller checks it;
    OTF2_AttributeList_New returns the list's address."""
    fn = _functions.get(name)
    if fn is None:
        fn = _otf2.conf.lib[name]  # item access: a new function object, not the cached one
        fn.argtypes = _SIGNATURES[name]
        fn.restype = ctypes.c_void_p if name == "OTF2_AttributeList_New" else ctypes.c_int
        _functions[name] = fn
    return fn


def _raise(rc: int) -> None:
    """Raise what the bindings raise for a failed call (``_otf2.Error``)."""
    _otf2.HandleErrorCode(_otf2.ErrorCode(rc))
    raise AssertionError(f"OTF2 error code {rc} raised nothing")  # not reached


def write_rows(writer: Any, ew: Any, rows: Iterable[tuple], cost: Iterable[int],
               attribute: Any, regions: Sequence[Any], comms: Sequence[Any],
               fallback: Callable[[tuple, int], None], direct: bool = True) -> int:
    """Write one location's records ``rows`` (``(time, kind, *fields)``, any
    iterable: one record at a time), in order; returns the number written
    directly.

    ``writer`` is the ``otf2`` archive writer, ``ew`` the location's event writer,
    ``cost[i]`` the value of the UINT64 ``attribute`` (an ``otf2`` Attribute
    definition) of record ``i``, none where it is negative; ``regions`` and
    ``comms`` map the rank's local region and communicator ids to their
    definitions. A record of a kind in :data:`DIRECT_KINDS` is written through
    the C library, as :func:`event` and ``ew.write`` would write it with the
    attribute; every other record (all of them unless ``direct``) is handed to
    ``fallback(rec, cost)``, which writes it at once with ``ew.write``.
    """
    if not direct:  # (zip's strict: records and values must be as many)
        for rec, o in zip(rows, cost, strict=True):
            fallback(rec, o)
        return 0
    f = _function
    enter, leave = f("OTF2_EvtWriter_Enter"), f("OTF2_EvtWriter_Leave")
    send, recv = f("OTF2_EvtWriter_MpiSend"), f("OTF2_EvtWriter_MpiRecv")
    add = f("OTF2_AttributeList_AddUint64")
    region_refs = [r._ref for r in regions]
    comm_refs = [c._ref for c in comms]
    aref = attribute._ref
    fast = DIRECT_KINDS
    k_enter, k_leave, k_send, k_recv = tb.ENTER, tb.LEAVE, tb.MPI_SEND, tb.MPI_RECV
    h = ctypes.cast(ew.handle, ctypes.c_void_p).value
    rare = _rare_writers(h, comm_refs)
    al = f("OTF2_AttributeList_New")()
    if not al:
        raise MemoryError("OTF2_AttributeList_New failed")
    n = 0
    first = t = None
    try:
        for rec, o in zip(rows, cost, strict=True):
            t = rec[0]
            if first is None:
                first = t
            kind = rec[1]
            if kind not in fast:
                fallback(rec, o)
                continue
            if o >= 0:
                rc = add(al, aref, o)
                if rc:
                    _raise(rc)
                a = al
            else:
                a = None
            if kind == k_enter:
                rc = enter(h, a, t, region_refs[rec[2]])
            elif kind == k_leave:
                rc = leave(h, a, t, region_refs[rec[2]])
            elif kind == k_send:
                rc = send(h, a, t, rec[2], comm_refs[rec[3]], rec[4], rec[5])
            elif kind == k_recv:
                rc = recv(h, a, t, rec[2], comm_refs[rec[3]], rec[4], rec[5])
            else:
                rc = rare[kind](rec, a)
            if rc:
                _raise(rc)
            n += 1
    finally:
        rc = f("OTF2_AttributeList_Delete")(al)
    if rc:
        _raise(rc)
    if n:  # what EventWriter.write does per event, once: event count, time range
        ew._location._number_of_events_written += n
        # OTF2 refuses a timestamp below the location's last one: rows are in order
        writer._update_timestamps(first)
        writer._update_timestamps(t)
    return n


def _rare_writers(h: int, comm_refs: list[int]) -> dict[int, Callable[[tuple, Any], int]]:
    """kind -> ``write(rec, attribute_list)`` for the rarer kinds of
    :data:`DIRECT_KINDS`, on the event writer ``h``; each returns the rc."""
    f = _function
    isend, irecv = f("OTF2_EvtWriter_MpiIsend"), f("OTF2_EvtWriter_MpiIrecv")
    irecv_req = f("OTF2_EvtWriter_MpiIrecvRequest")
    isend_done = f("OTF2_EvtWriter_MpiIsendComplete")
    test = f("OTF2_EvtWriter_MpiRequestTest")
    begin, end = f("OTF2_EvtWriter_MpiCollectiveBegin"), f("OTF2_EvtWriter_MpiCollectiveEnd")
    acquire = f("OTF2_EvtWriter_ThreadAcquireLock")
    release = f("OTF2_EvtWriter_ThreadReleaseLock")
    flush = f("OTF2_EvtWriter_BufferFlush")
    pthread = Paradigm.PTHREAD.value

    def coll_end(r: tuple, a: Any) -> int:
        # (the bindings pass CollectiveOp(op), a ctypes.c_uint8: the same byte)
        op, comm, root, sent, received = r[2:7]
        return end(h, a, r[0], op, comm_refs[comm], UNDEF_U32 if root < 0 else root,
                   sent, received)

    return {
        tb.MPI_ISEND: lambda r, a: isend(h, a, r[0], r[2], comm_refs[r[3]], r[4], r[5], r[6]),
        tb.MPI_IRECV: lambda r, a: irecv(h, a, r[0], r[2], comm_refs[r[3]], r[4], r[5], r[6]),
        tb.MPI_IRECV_REQUEST: lambda r, a: irecv_req(h, a, r[0], r[2]),
        tb.MPI_ISEND_COMPLETE: lambda r, a: isend_done(h, a, r[0], r[2]),
        tb.MPI_REQUEST_TEST: lambda r, a: test(h, a, r[0], r[2]),
        tb.COLL_BEGIN: lambda r, a: begin(h, a, r[0]),
        tb.COLL_END: coll_end,
        tb.THREAD_ACQUIRE_LOCK: lambda r, a: acquire(h, a, r[0], pthread, r[2], r[3]),
        tb.THREAD_RELEASE_LOCK: lambda r, a: release(h, a, r[0], pthread, r[2], r[3]),
        tb.BUFFER_FLUSH: lambda r, a: flush(h, a, r[0], r[2]),
    }
