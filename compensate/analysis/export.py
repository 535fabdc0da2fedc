"""Export a trace to the Chrome/Perfetto trace-event JSON format.

Any browser can then show the measured and the compensated trace (ui.perfetto.dev,
chrome://tracing) without an OTF2 viewer. The mapping:

* process (``pid``) = location group (an MPI rank), thread (``tid``) = location;
  both named with ``process_name``/``thread_name`` metadata events;
* every region call = one complete slice (``"ph": "X"``) with ``ts``/``dur`` in
  microseconds from the trace's earliest record, category ``MPI`` or ``user``;
  a call still open at the end of the trace ends at its location's last record;
* every buffer flush = a slice named ``TRACE BUFFER FLUSH``, category ``tracer``;
* every matched message = a flow: ``"ph": "s"`` at the send record and
  ``"ph": "f"`` (``"bp": "e"``, bound to the enclosing slice) at the receive record,
  with the same ``id``;
* every collective = one thread-scoped instant event (``"ph": "i"``) per member at
  its MpiCollectiveEnd, named after the operation, with the instance number.

The format is documented in Google's "Trace Event Format" document.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from compensate.analysis.calls import calls_of, is_mpi, location_label, region_name, trace_origin
from compensate.formats.paths import AtomicFile
from compensate.matching import Matching, match
from compensate.model import BUFFER_FLUSH, COLLECTIVE_OP_NAMES, Trace


def _us(ticks: np.ndarray | int, origin: int, res: float) -> np.ndarray:
    """Ticks -> microseconds from ``origin``, rounded to nanoseconds (monotonic)."""
    return np.round((np.asarray(ticks, dtype=np.int64) - origin) * (1e6 / res), 3)


def trace_events(trace: Trace, matching: Matching | None = None) -> dict:
    """The trace-event JSON document of ``trace`` as a dict (``traceEvents`` sorted
    by process, thread, time, longest slice first, so parents precede children)."""
    defs = trace.definitions
    res = float(defs.timer_resolution)
    origin = trace_origin(trace)
    matching = matching if matching is not None else match(trace)
    calls = calls_of(trace)
    meta: list[dict] = []
    groups: dict[int, str] = {}
    for loc in sorted(trace.events):
        d = defs.locations.get(loc)
        pid = d.group if d is not None else loc
        groups.setdefault(pid, (d.group_name if d is not None and d.group_name else
                                f"group {pid}"))
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": loc,
                     "args": {"name": location_label(defs, loc)}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": loc,
                     "args": {"sort_index": loc}})
    for pid, name in groups.items():
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                     "args": {"sort_index": pid}})
    pid_of = {loc: (defs.locations[loc].group if loc in defs.locations else loc)
              for loc in trace.events}

    body: list[tuple] = []  # (pid, tid, ts, -dur, seq, event) for a stable sort
    seq = 0

    def put(loc: int, ts: float, dur: float, event: dict) -> None:
        nonlocal seq
        body.append((pid_of[loc], loc, ts, -dur, seq, event))
        seq += 1

    for loc in sorted(trace.events):
        ev, c = trace.events[loc], calls[loc]
        pid = pid_of[loc]
        names = {int(r): region_name(defs, r) for r in np.unique(c.region)}
        t0, t1 = _us(c.t0, origin, res), _us(c.t1, origin, res)
        for k in range(len(c)):
            name = names[int(c.region[k])]
            ts, dur = float(t0[k]), float(t1[k] - t0[k])
            put(loc, ts, dur, {"ph": "X", "name": name, "cat": "MPI" if is_mpi(name) else "user",
                               "pid": pid, "tid": loc, "ts": ts, "dur": dur})
        fl = np.flatnonzero(ev.kind == BUFFER_FLUSH)
        if fl.size:
            f0 = _us(ev.time[fl], origin, res)
            f1 = _us(np.maximum(ev.size[fl], ev.time[fl]), origin, res)
            for a, b in zip(f0.tolist(), f1.tolist(), strict=True):
                put(loc, a, b - a, {"ph": "X", "name": "TRACE BUFFER FLUSH", "cat": "tracer",
                                    "pid": pid, "tid": loc, "ts": a, "dur": b - a})
    for k, msg in enumerate(matching.messages):
        ts_s = float(_us(trace.events[msg.send_loc].time[msg.send_idx], origin, res))
        ts_r = float(_us(trace.events[msg.recv_loc].time[msg.recv_idx], origin, res))
        args = {"bytes": int(msg.size)}
        put(msg.send_loc, ts_s, 0.0, {"ph": "s", "name": "message", "cat": "p2p", "id": k,
                                      "pid": pid_of[msg.send_loc], "tid": msg.send_loc,
                                      "ts": ts_s, "args": args})
        put(msg.recv_loc, ts_r, 0.0, {"ph": "f", "bp": "e", "name": "message", "cat": "p2p",
                                      "id": k, "pid": pid_of[msg.recv_loc],
                                      "tid": msg.recv_loc, "ts": ts_r, "args": args})
    for k, ins in enumerate(matching.instances):
        op = COLLECTIVE_OP_NAMES.get(int(ins.op), str(int(ins.op)))
        for loc, e in zip(ins.locs, ins.end_idx, strict=True):
            ts = float(_us(trace.events[loc].time[e], origin, res))
            put(loc, ts, 0.0, {"ph": "i", "s": "t", "name": op, "cat": "collective",
                               "pid": pid_of[loc], "tid": loc, "ts": ts,
                               "args": {"instance": k, "class": ins.cls, "comm": int(ins.comm),
                                        "root": int(ins.root)}})
    body.sort(key=lambda x: x[:5])
    return {
        "traceEvents": meta + [b[-1] for b in body],
        "displayTimeUnit": "ns",
        "otherData": {"source": trace.source, "generator": "compensate export",
                      "timer_resolution": int(defs.timer_resolution),
                      "origin_ticks": int(origin)},
    }


def write_trace_events(trace: Trace, path: str | Path | AtomicFile,
                       matching: Matching | None = None) -> int:
    """Write :func:`trace_events` to ``path`` atomically (temporary file, then rename;
    or into an :class:`~compensate.formats.AtomicFile` created beforehand); return
    the number of trace events written."""
    doc = trace_events(trace, matching)
    out = path if isinstance(path, AtomicFile) else AtomicFile(path)
    try:
        with out.open() as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        out.commit()
    except BaseException:
        out.discard()
        raise
    return len(doc["traceEvents"])


__all__ = ["trace_events", "write_trace_events"]
