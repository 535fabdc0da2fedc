"""Ghost locations: the other ranks' records a rank needs (docs/parallel.md).

In this first version a rank's ghosts are whole locations: :func:`complete_trace`
turns the locations each rank read (its own: ``read_trace(path, locations)`` in
:func:`compensate.parallel.command.read_own`) into the whole trace on every rank
with one ``allgather`` per numpy column (no Python object per record; one
column in flight at a time).
The payloads — OTF2 event objects, text fields — stay with their owner, which
is the only rank that writes them; of the records whose payload matching reads
(thread, task and lock records, parameters, RMA records) a small dict of just
those fields crosses instead (:func:`stand_in`). The engine never evaluates a
ghost (of a ghost location it anchors only the records the rank's rules read:
:meth:`compensate.engine.graph.Graph.set_rules`); matching, the network
fit and the statistics read them. Keeping of each remote location only the
records the rank's matching and rules read: :func:`complete_trimmed` (the rule
and its index map: :mod:`compensate.parallel.trim`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compensate.formats.fields import field_of, fields_of
from compensate.formats.rma import RMA_FIELDS
from compensate.model import COLUMNS, KIND_NAMES, Definitions, Events, Trace
from compensate.parallel import trim
from compensate.parallel.transport import Transport

#: the payload fields the matchers read (compensate/matching/threads.py, tasks.py,
#: devices.py), by :func:`compensate.formats.fields.field_of`
MATCHED_FIELDS = ("thread_team", "model", "lock_id", "acquisition_order",
                  "thread_contingent", "sequence_count", "task_id", "creating_thread",
                  "generation_number", "parameter", "value")
_PREFIXES = ("Thread", "Omp", "Parameter")


def stand_in(kind_name: str, payload: Any) -> Any:
    """What another rank needs of a record's payload: None for a kind no matcher
    reads; a ``.trace`` field dict as it is; of an OTF2 event object, the fields
    matching reads, normalised (RMA: :func:`compensate.formats.fields.fields_of`;
    thread, task and parameter records: :func:`compensate.formats.fields.field_of`),
    as a dict that both functions read back to the same values (the C path's
    :class:`~compensate.formats.fields.Fields` are such a dict already)."""
    if payload is None or isinstance(payload, dict):
        return payload
    if kind_name in RMA_FIELDS:
        return fields_of(kind_name, payload)
    if kind_name.startswith(_PREFIXES):
        out = {}
        for name in MATCHED_FIELDS:
            v = field_of(payload, name)
            if v is not None:
                out[name] = v
        return out
    return None


def _stand_ins(ev: Events) -> dict[int, Any]:
    """``{record: stand-in}`` of the records of ``ev`` whose payload matching reads."""
    out = {}
    for k in np.unique(ev.kind).tolist():
        name = KIND_NAMES[k]
        if name in RMA_FIELDS or name.startswith(_PREFIXES):
            for i in np.flatnonzero(ev.kind == k).tolist():
                out[i] = stand_in(name, ev.payload[i])
    return out


def complete_trace(defs: Definitions, own: dict[int, Events], transport: Transport,
                   source: str = "") -> Trace:
    """The whole trace from every rank's ``own`` locations (each location read by
    exactly one rank): locations in definition order, as the readers give them;
    the other ranks' locations carry only the stand-ins of :func:`stand_in`."""
    # one allgather per column: what is in flight at once (each rank's pickled
    # part and everybody's received parts) is one column, not all ten
    columns: dict[int, dict[str, np.ndarray]] = {}
    for name, _ in COLUMNS:
        part = {loc: np.ascontiguousarray(getattr(ev, name)) for loc, ev in own.items()}
        for got in transport.allgather(part):
            for loc, col in got.items():
                if loc not in own:  # (our own part comes back too: a copy)
                    columns.setdefault(loc, {})[name] = col
        del part
    stand_ins: dict[int, dict[int, Any]] = {}
    for got in transport.allgather({loc: _stand_ins(ev) for loc, ev in own.items()}):
        stand_ins.update(got)  # (few: the records whose payload matching reads)
    return Trace(defs, _assemble(defs, own, columns, stand_ins), source)


def _assemble(defs: Definitions, own: dict[int, Events],
              columns: dict[int, dict[str, np.ndarray]],
              stand_ins: dict[int, dict[int, Any]]) -> dict[int, Events]:
    """Every location in definition order: this rank's own, and the others' from the
    received columns (emptied as it goes) with their payload stand-ins."""
    events: dict[int, Events] = {}
    for loc in defs.locations:
        if loc in own:
            events[loc] = own[loc]
        elif loc in columns:
            cols = columns.pop(loc)
            payload: list[Any] = [None] * len(cols["time"])
            for i, p in stand_ins.get(loc, {}).items():
                payload[i] = p
            events[loc] = Events(**cols, payload=payload)
    return events


def _send_columns(own: dict[int, Events], keep: list[dict[int, np.ndarray | None]],
                  transport: Transport, extras: list[dict] | None = None
                  ) -> tuple[dict[int, dict[str, np.ndarray]], list[dict] | None]:
    """Send each rank ``r`` the columns of the own locations, of each the records
    ``keep[r][loc]`` (None: every record); ``{location: {column: array}}`` of what
    the others sent here, and the ``extras`` they sent. Without ``extras``, one
    ``alltoall`` per column (what is in flight at once is one column); with them
    (one dict per rank), one ``alltoall`` carrying every column and ``extras``."""
    me, size = transport.rank, transport.size

    def part(r: int, names: list[str]) -> dict:
        if r == me:
            return {}
        return {loc: [getattr(ev, n) if keep[r][loc] is None else getattr(ev, n)[keep[r][loc]]
                      for n in names] for loc, ev in own.items()}

    columns: dict[int, dict[str, np.ndarray]] = {}
    received = None
    groups = [[name for name, _ in COLUMNS]] if extras is not None else \
        [[name] for name, _ in COLUMNS]
    for names in groups:
        parts = [part(r, names) for r in range(size)]
        if extras is not None:
            parts = [(p, x) for p, x in zip(parts, extras, strict=True)]
        got_all = transport.alltoall(parts)
        del parts
        if extras is not None:
            received = [x for _, x in got_all]
            got_all = [p for p, _ in got_all]
        for got in got_all:
            for loc, cols in got.items():
                for name, col in zip(names, cols, strict=True):
                    columns.setdefault(loc, {})[name] = np.ascontiguousarray(col)
    return columns, received


def complete_trimmed(defs: Definitions, own: dict[int, Events], transport: Transport,
                     owner: dict[int, int], source: str = "", open_calls: bool = False,
                     one_call: bool = False, nests: dict[int, Any] | None = None
                     ) -> tuple[Trace, dict[int, np.ndarray]]:
    """:func:`complete_trace` with trimmed ghosts (:mod:`compensate.parallel.trim`):
    each owner sends each other rank, of each of its simple locations, only the
    calls that rank reads (its other locations whole), one ``alltoall`` per column.
    Returns the trace (this rank's locations whole, the others trimmed or whole) and
    the index map ``{location: original indices of the kept records}`` of the
    trimmed ones. ``open_calls``: a segment of the streamed run (calls may stay
    open after its last record: :func:`compensate.parallel.trim.calls_of`).
    ``one_call``: every column and the index maps in one ``alltoall`` (a segment's
    ghosts are small: one collective instead of one per column). ``nests`` (if
    given) receives the call structure the trimming found of each own location
    (:attr:`compensate.parallel.trim.Calls.nest`), for matching to take."""
    me, size = transport.rank, transport.size
    every = transport.allgather(sorted(own))
    locations = {loc for part in every for loc in part}
    calls = {loc: trim.calls_of(defs, loc, ev, locations, open_calls)
             for loc, ev in own.items()}
    if nests is not None:
        nests.update((loc, c.nest) for loc, c in calls.items()
                     if c is not None and c.nest is not None)
    whole = np.array(sorted(loc for part in transport.allgather(
        [loc for loc, c in calls.items() if c is None]) for loc in part), dtype=np.int64)
    by_rank = [np.array([loc for loc in part], dtype=np.int64) for part in every]
    keep: list[dict[int, np.ndarray | None]] = [{} for _ in range(size)]
    for r in range(size):
        if r != me:
            for loc, ev in own.items():
                keep[r][loc] = trim.keep_for(calls[loc], len(ev), by_rank[r], whole)
    # the index maps of the trimmed locations, the stand-ins of those sent whole
    extras = [{loc: (_stand_ins(ev) if keep[r][loc] is None else keep[r][loc])
               for loc, ev in own.items()} if r != me else {} for r in range(size)]
    columns, received = _send_columns(own, keep, transport, extras if one_call else None)
    index: dict[int, np.ndarray] = {}
    stand_ins: dict[int, dict[int, Any]] = {}
    for got in received if received is not None else transport.alltoall(extras):
        for loc, x in got.items():
            if isinstance(x, dict):
                stand_ins[loc] = x
            else:
                index[loc] = x
    events = _assemble(defs, own, columns, stand_ins)
    return Trace(defs, events, source), index
