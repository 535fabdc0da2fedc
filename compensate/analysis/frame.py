"""A trace as a pandas DataFrame: one row per record (``pip install compensate[pandas]``).

:func:`to_dataframe` is for looking at a trace with pandas (in a notebook, next to
pipit): select, group and plot records without knowing the columnar
:class:`~compensate.model.Events` layout. pandas is imported only when it is called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from compensate.analysis.calls import region_name, trace_origin
from compensate.model import (
    COLL_END,
    COLLECTIVE_OP_NAMES,
    COLUMNS,
    ENTER,
    IRECV,
    ISEND,
    KIND_NAMES,
    LEAVE,
    NBC_COMPLETE,
    RECV,
    SEND,
    Trace,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FRAME_COLUMNS", "to_dataframe"]

#: The columns of :func:`to_dataframe`, in order.
FRAME_COLUMNS: tuple[str, ...] = (
    "location", "record", "time", "seconds", "kind", "region", "peer", "peer_location",
    "comm", "tag", "bytes", "bytes_recv", "op", "request")

# records whose ``size`` column is a message size (for BufferFlush it is a time)
_MESSAGE_KINDS = (SEND, RECV, ISEND, IRECV, COLL_END, NBC_COMPLETE)


def to_dataframe(trace: Trace) -> pd.DataFrame:
    """One row per record of ``trace``, location by location (ascending id), each
    location's records in recorded order.

    ======================  ==================================================================
    ``location``            location id (a key of ``trace.events``)
    ``record``              index of the record in its location (``trace.events[location]``)
    ``time``                timestamp in timer ticks, as in the trace
    ``seconds``             seconds since the trace's earliest record
    ``kind``                record kind, the OTF2 name (``Enter``, ``MpiSend``, ...), categorical
    ``region``              region name of Enter/Leave records, categorical
    ``peer``                rank in ``comm`` of the partner (MpiSend/Recv, MpiIsend/Irecv)
                            or of the root (collective ends, if the operation has one)
    ``peer_location``       ``peer`` as a location id
    ``comm``, ``tag``       communicator id and message tag
    ``bytes``               message size (point-to-point) or bytes sent (collective end)
    ``bytes_recv``          bytes received (collective end)
    ``op``                  collective operation (``ALLREDUCE``, ...), categorical
    ``request``             request id of nonblocking records
    ======================  ==================================================================

    The integer columns after ``seconds`` are pandas nullable integers: ``<NA>`` where
    the record has no such field. ``attrs`` holds ``timer_resolution`` (ticks per
    second) and ``origin`` (the earliest timestamp, ticks). The measured and the
    compensated trace have the same records, so their frames line up row by row.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe needs pandas: pip install compensate[pandas]") from None
    defs = trace.definitions
    locs = sorted(trace.events)
    events = [trace.events[loc] for loc in locs]
    col = {name: (np.concatenate([np.asarray(getattr(ev, name)) for ev in events])
                  .astype(dtype, copy=False) if events else np.zeros(0, dtype))
           for name, dtype in COLUMNS}
    counts = [len(ev) for ev in events]
    kind = col["kind"].astype(np.int64)
    origin = trace_origin(trace)

    def nullable(values: np.ndarray, present: np.ndarray):
        return pd.arrays.IntegerArray(np.where(present, values, 0).astype(np.int64), ~present)

    region = col["region"]
    has_region = np.isin(kind, (ENTER, LEAVE)) & (region >= 0)
    peer, comm = col["peer"].astype(np.int64), col["comm"].astype(np.int64)
    peer_location = _peer_locations(trace, peer, comm)
    size, op = col["size"], col["op"].astype(np.int64)
    data = {
        "location": np.repeat(np.asarray(locs, dtype=np.int64), counts),
        "record": (np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
                   if counts else np.zeros(0, np.int64)),
        "time": col["time"],
        "seconds": (col["time"] - origin) / float(defs.timer_resolution),
        "kind": pd.Categorical.from_codes(kind, categories=list(KIND_NAMES)),
        "region": _categorical(pd, region, has_region, lambda r: region_name(defs, r)),
        "peer": nullable(peer, peer >= 0),
        "peer_location": nullable(peer_location, peer_location >= 0),
        "comm": nullable(comm, comm >= 0),
        "tag": nullable(col["tag"], col["tag"] >= 0),
        "bytes": nullable(size, np.isin(kind, _MESSAGE_KINDS) & (size >= 0)),
        "bytes_recv": nullable(col["size_recv"], col["size_recv"] >= 0),
        "op": _categorical(pd, op, op >= 0, lambda o: COLLECTIVE_OP_NAMES.get(o, f"op {o}")),
        "request": nullable(col["request"], col["request"] >= 0),
    }
    frame = pd.DataFrame(data, columns=list(FRAME_COLUMNS))
    frame.attrs.update(timer_resolution=int(defs.timer_resolution), origin=origin)
    return frame


def _categorical(pd, values: np.ndarray, present: np.ndarray, name_of: Callable[[int], str]):
    """A categorical of the names of ``values`` where ``present`` (missing elsewhere);
    ids that share a name share a category."""
    ids, inverse = np.unique(values[present], return_inverse=True)
    names = [name_of(int(i)) for i in ids]
    categories = list(dict.fromkeys(names))
    position = {name: k for k, name in enumerate(categories)}
    codes = np.full(len(values), -1, dtype=np.int64)
    codes[present] = np.asarray([position[n] for n in names], dtype=np.int64)[inverse]
    return pd.Categorical.from_codes(codes, categories=categories)


def _peer_locations(trace: Trace, peer: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Location id of each (communicator, rank) pair; -1 where there is none."""
    out = np.full(len(peer), -1, dtype=np.int64)
    rows = np.flatnonzero((peer >= 0) & (comm >= 0))
    if not rows.size:
        return out
    rows = rows[np.argsort(comm[rows], kind="stable")]
    for group in np.split(rows, np.flatnonzero(np.diff(comm[rows])) + 1):
        c = trace.definitions.comms.get(int(comm[group[0]]))
        if c is None:
            continue
        members = np.asarray(c.members, dtype=np.int64)
        ok = group[peer[group] < len(members)]
        out[ok] = members[peer[ok]]
    return out
