"""OTF2 event objects -> the model's numpy columns, with little work per record.

:func:`compensate.formats.otf2.read_otf2` gets ``(location, event)`` pairs from the
``otf2`` reader. Building a 10-column row tuple per record and converting the
rows to arrays (what a generic row builder does) cost almost as much as the
``otf2`` bindings' own reading. Here the loop over records only checks the
timestamp, maps the event class to its kind code (cached per class) and appends
three values; the columns of each interpreted kind are then filled kind by kind
from the kept event objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import numpy as np

from compensate.formats.otf2.library import damage_hint
from compensate.formats.otf2.overheads import event_overheads
from compensate.formats.otf2.syncobjects import event_sync_column
from compensate.formats.partitioned import columns_of_event, kind_of_parameter
from compensate.gcpause import gc_paused
from compensate.model import (
    BUFFER_FLUSH,
    COLL_END,
    COLUMNS,
    ENTER,
    IMRECV,
    IMRECV_REQUEST,
    IRECV,
    ISEND,
    KIND_CODE,
    LEAVE,
    MRECV,
    NBC_COMPLETE,
    NONE,
    PROBE,
    RECV,
    REQUEST_KINDS,
    SEND,
    Events,
    TraceError,
)

__all__ = ["EventCollector", "collect_events", "empty_events"]

_UINT32_UNDEF = 0xFFFFFFFF
_UINT64_UNDEF = 0xFFFFFFFFFFFFFFFF
_INT64_MAX = 2**63 - 1


def _ref(obj: Any) -> int:
    """Reference number of a definition object (-1 for an undefined reference)."""
    return NONE if obj is None else int(obj._ref)


def _u32(value: int) -> int:
    return NONE if value == _UINT32_UNDEF else int(value)


#: MPI_PROC_NULL in a point-to-point record's peer, as a tracer that writes the
#: MPI value into OTF2's uint32 gives it: MPICH's -1 (OTF2's UNDEFINED) and Open
#: MPI's -2 (EZTrace's openmpi module); no communicator has that many ranks
_PROC_NULL_MIN = 0xFFFFFFFE


def _rank(value: int) -> int:
    """A point-to-point peer: NONE for MPI_PROC_NULL (:data:`_PROC_NULL_MIN`)."""
    return NONE if value >= _PROC_NULL_MIN else int(value)


def _u64(value: int) -> int:
    return NONE if value == _UINT64_UNDEF or value > _INT64_MAX else int(value)


def _enum_int(value: Any) -> int:
    return int(getattr(value, "value", value))


def _root(value: int) -> int:
    return NONE if value >= 2**31 else int(value)


# Which columns each interpreted kind fills, and from which event attribute how.
_P2P_SEND = (("peer", "receiver", _rank), ("comm", "communicator", _ref),
             ("tag", "msg_tag", _u32), ("size", "msg_length", _u64))
_P2P_RECV = (("peer", "sender", _rank), ("comm", "communicator", _ref),
             ("tag", "msg_tag", _u32), ("size", "msg_length", _u64))
_COLL = (("op", "collective_op", _enum_int), ("comm", "communicator", _ref),
         ("peer", "root", _root), ("size", "size_sent", _u64),
         ("size_recv", "size_received", _u64))
_REQUEST = (("request", "request_id", _u64),)
FIELDS: dict[int, tuple] = {
    ENTER: (("region", "region", _ref),),
    LEAVE: (("region", "region", _ref),),
    SEND: _P2P_SEND,
    RECV: _P2P_RECV,
    COLL_END: _COLL,
    BUFFER_FLUSH: (("size", "stop_time", int),),
    ISEND: _P2P_SEND + _REQUEST,
    IRECV: _P2P_RECV + _REQUEST,
    NBC_COMPLETE: _COLL + _REQUEST,
    # matched probes: the message id in ``size_recv`` (undefined: -1), see model.PROBE
    PROBE: (("peer", "sender", _rank), ("comm", "communicator", _ref), ("tag", "tag", _u32),
            ("size_recv", "message_id", _u64)),
    MRECV: (("size_recv", "message_id", _u64), ("size", "msg_length", _u64)),
    IMRECV_REQUEST: (("size_recv", "message_id", _u64), ("request", "request_id", _u64)),
    IMRECV: (("request", "request_id", _u64), ("size", "msg_length", _u64)),
}
for _k in REQUEST_KINDS:
    FIELDS.setdefault(_k, _REQUEST)


def collect_events(pairs: Iterable[tuple[Any, Any]], location_order: tuple[int, ...],
                   path: str) -> dict[int, Events]:
    """Columns of every location from ``(location, event)`` pairs in read order.

    Raises :class:`TraceError` naming the location and record for a timestamp
    that goes backwards or does not fit int64, and for an event class the model
    does not know. The garbage collector is paused meanwhile
    (:func:`compensate.gcpause.gc_paused`).
    """
    chunk = EventCollector(location_order, path).chunk(iter(pairs))
    return {ref: chunk[ref] if ref in chunk else empty_events() for ref in location_order}


class EventCollector:
    """Turns ``(location, event)`` pairs into columns chunk by chunk.

    Between chunks it keeps only each location's last timestamp and record count
    (for the ordering check and for record numbers in error messages counted over
    the whole location), never event objects.
    """

    def __init__(self, location_order: tuple[int, ...], path: str) -> None:
        self.path = path
        self.order = tuple(location_order)
        #: the chunk being collected (records not yet counted in ``count``)
        self.pending: dict[int, tuple[list[int], list[int], list[Any]]] = {}
        self.last: dict[int, int] = {ref: -1 for ref in location_order}
        self.count: dict[int, int] = {ref: 0 for ref in location_order}
        self.code_of: dict[type, int] = {}

    def chunk(self, pairs: Iterator[tuple[Any, Any]], limit: int | None = None
              ) -> dict[int, Events]:
        """The next at most ``limit`` pairs of ``pairs`` (all if None) as columns of the
        locations that have records among them; empty at the end. The garbage
        collector is paused meanwhile."""
        state = self.pending = _State(self)
        with gc_paused():
            _collect(pairs if limit is None else islice(pairs, limit), self, state)
        self.pending = {}
        out = {}
        for ref, (times, kinds, payload) in state.items():
            if payload:
                out[ref] = _columns(times, kinds, payload)
                self.last[ref] = times[-1]
                self.count[ref] += len(payload)
        return out


    def failed_index(self, ref: int, buffered: int = 0) -> int:
        """The index (over the whole location) of the record of location ``ref``
        that failed while a chunk was collected: the records counted so far, those
        of the chunk being collected and ``buffered`` more read after them."""
        pending = self.pending.get(ref)
        return self.count.get(ref, 0) + (len(pending[2]) if pending else 0) + buffered


class _State(dict):
    """Per-location ``([previous time, times...], kinds, events)`` of one chunk,
    created on first use (seeded with the location's last time so far)."""

    def __init__(self, collector: EventCollector) -> None:
        super().__init__()
        self.last = collector.last

    def __missing__(self, ref: int) -> tuple[list[int], list[int], list[Any]]:
        st = self[ref] = ([self.last[ref]], [], [])
        return st


def _collect(pairs: Iterable[tuple[Any, Any]], collector: EventCollector, state: _State
             ) -> dict[int, tuple[list[int], list[int], list[Any]]]:
    """Fills ``state`` (times after the previous time, kinds, events per location)."""
    path = collector.path
    code_of = collector.code_of
    for loc, ev in pairs:
        ref = loc._ref
        times, kinds, payload = state[ref]
        t = ev.time
        if t < times[-1] or t > _INT64_MAX:
            problem = (f"timestamp {t} goes backwards (previous record at {times[-1]})"
                       f"{damage_hint()}" if t < times[-1] else f"timestamp {t} is out of range")
            raise TraceError(problem, source=path, location=ref,
                             index=collector.count[ref] + len(payload))
        cls = type(ev)
        kind = code_of.get(cls)
        if kind is None:
            kind = KIND_CODE.get(cls.__name__)
            if kind is None:
                raise TraceError(f"unsupported OTF2 record type {cls.__name__}", source=path,
                                 location=ref, index=collector.count[ref] + len(payload))
            code_of[cls] = kind
        times.append(t)
        kinds.append(kind)
        payload.append(ev)
    return state


def empty_events() -> Events:
    """A location without records."""
    return _columns([-1], [], [])


def _columns(times: list[int], kinds: list[int], payload: list[Any]) -> Events:
    n = len(payload)
    cols = {name: np.full(n, NONE, dtype=dtype) for name, dtype in COLUMNS}
    cols["time"] = np.array(times[1:], dtype=np.int64)
    kind = np.array(kinds, dtype=np.int16)
    cols["kind"] = kind
    kind_codes = np.unique(kind).tolist()
    for k in kind_codes:
        fields = FIELDS.get(k)
        if not fields:
            continue
        idx = np.flatnonzero(kind == k)
        events = [payload[i] for i in idx.tolist()]
        for column, attr, convert in fields:
            values = np.array([convert(getattr(e, attr)) for e in events], dtype=np.int64)
            cols[column][idx] = values.astype(cols[column].dtype)  # wraps like a row build
    sync = event_sync_column(kind, payload)
    if sync is not None:
        cols["request"] = np.where(sync != NONE, sync, cols["request"])
    own = event_overheads(payload)
    if own is not None:
        cols["overhead"] = own
    if _PARAM_UINT in kind_codes:
        _partitioned(cols, payload)
    return Events(**cols, payload=payload)


_PARAM_UINT = KIND_CODE["ParameterUnsignedInt"]


def _partitioned(cols: dict[str, np.ndarray], payload: list[Any]) -> None:
    """The ParameterUnsignedInt records that stand for MPI-4 partitioned events
    (:mod:`compensate.formats.partitioned`) become their model kinds; their fields
    live in the columns (payload None: the writer rebuilds them from there)."""
    for i in np.flatnonzero(cols["kind"] == _PARAM_UINT).tolist():
        ev = payload[i]
        kind = kind_of_parameter(getattr(ev.parameter, "name", None))
        if kind is None:
            continue
        cols["kind"][i] = kind
        for column, value in columns_of_event(kind, ev).items():
            cols[column][i] = value
        payload[i] = None
