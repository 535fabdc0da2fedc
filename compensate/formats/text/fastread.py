"""The ``.trace`` reader's record lines through C (issue #18).

:class:`compensate.formats.text.read._Reader` parses a record line in Python in
~5 µs. ``fastread.c``'s ``cmp_text_parse`` parses a block of lines into the
model's columns for the frequent kinds (Enter, Leave, the point-to-point,
nonblocking, request, probe, collective, BufferFlush and partitioned kinds:
:data:`SPECS`) and stops at the first line it does not fully understand and
validate exactly as the Python path would: a quote, non-ASCII text, another
kind, an unknown or repeated field, a value that is not a plain decimal in
range, an undefined region or comm, a rank outside its comm, a time before the
location's previous one. The Python path parses that line (so every error
message is its own, word for word, and kinds with payloads stay Python's), and
C goes on after it. Rows of both land in one buffer per block in line order,
distributed to the locations at the block's end, so each location's record
order is the file's.

Compiled on first use into the per-user cache and loaded with ctypes
(:mod:`compensate.nativebuild`); if it cannot be built or loaded, or
``COMPENSATE_NATIVE=0``, the reader stays all Python (said once on stderr when
the build fails).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from compensate.formats.partitioned import TEXT_FIELDS
from compensate.formats.text.syntax import _INT16_MAX, _INT32_MAX, _INT64_MAX, _INT64_MIN
from compensate.model import COLLECTIVE_OPS, ENTER, KIND_NAMES, LEAVE, NONE, RECORD_COLUMNS
from compensate.nativebuild import ENV_SWITCH, compiled, load_once

__all__ = ["BATCH", "ENV_SWITCH", "SPECS", "FastRecords", "fast_records"]

SOURCE = Path(__file__).with_name("fastread.c")
#: lines handed to C at a time
BATCH = 1 << 14

# field value types of fastread.c
T_INT, T_COMM, T_RANK, T_ROOT, T_REGION, T_OP, T_STOP = range(7)
_COL = {name: j for j, (name, _) in enumerate(RECORD_COLUMNS)}
_RANK = (T_RANK, 0, _INT32_MAX)
_COMM = (T_COMM, 0, _INT32_MAX)
_TAG = (T_INT, _INT64_MIN, _INT64_MAX)
_BYTES = (T_INT, 0, _INT64_MAX)
_ID = (T_INT, NONE, _INT64_MAX)  # request and message ids (-1: undefined)

# (key, column, (type, lo, hi), default or None for required), as the reader's
# handlers check them (read.py: _region_record, _p2p_record, _coll_end, ...)
_P2P_SEND = (("receiver", "peer", _RANK, None), ("comm", "comm", _COMM, None),
             ("tag", "tag", _TAG, None), ("bytes", "size", _BYTES, None))
_P2P_RECV = (("sender", "peer", _RANK, None),) + _P2P_SEND[1:]
_REQUEST = (("request", "request", _ID, None),)
_COLL_END = (("op", "op", (T_OP, 0, _INT16_MAX), None), ("comm", "comm", _COMM, None),
             ("root", "peer", (T_ROOT, 0, _INT32_MAX), NONE),
             ("sent", "size", _BYTES, 0), ("received", "size_recv", _BYTES, 0))
_REGION = (("region", "region", (T_REGION, 0, _INT32_MAX), None),)


def _partitioned_spec(spec: tuple[tuple[str, str], ...]) -> tuple:
    types = {"peer": _RANK, "comm": _COMM, "tag": _TAG, "request": _ID}
    return tuple((key, column, types.get(column, _BYTES), None) for key, column in spec)


#: kind name -> its fields, for the kinds C parses
SPECS: dict[str, tuple] = {
    "Enter": _REGION,  # (a line with object= or ret= is Python's)
    "Leave": _REGION,
    "MpiSend": _P2P_SEND,
    "MpiRecv": _P2P_RECV,
    "MpiIsend": _P2P_SEND + _REQUEST,
    "MpiIrecv": _P2P_RECV + _REQUEST,
    "MpiIsendComplete": _REQUEST,
    "MpiIrecvRequest": _REQUEST,
    "MpiRequestTest": _REQUEST,
    "MpiRequestCancelled": _REQUEST,
    "NonBlockingCollectiveRequest": _REQUEST,
    "NonBlockingCollectiveComplete": _COLL_END + _REQUEST,
    "MpiProbe": (("sender", "peer", _RANK, None), ("comm", "comm", _COMM, None),
                 ("tag", "tag", _TAG, None), ("message", "size_recv", _ID, None)),
    "MpiMrecv": (("message", "size_recv", _ID, None), ("bytes", "size", _BYTES, None)),
    "MpiImrecvRequest": (("message", "size_recv", _ID, None), ("request", "request", _ID, None)),
    "MpiImrecv": (("request", "request", _ID, None), ("bytes", "size", _BYTES, None)),
    "MpiCollectiveBegin": (),
    "MpiCollectiveEnd": _COLL_END,
    "BufferFlush": (("stop", "size", (T_STOP, 0, _INT64_MAX), None),),
    **{KIND_NAMES[k]: _partitioned_spec(spec) for k, spec in TEXT_FIELDS.items()},
}

_text_of = itemgetter(1)  # (line number, text) -> text

_state: dict[str, Any] = {}


def _load() -> Any:
    dll = ctypes.CDLL(str(compiled(SOURCE.read_bytes(), "textread")))
    fn = dll.cmp_text_parse
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 2 \
        + [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_int64
    return fn


def _kernel() -> Any:
    """``cmp_text_parse``, built and loaded on first use; None if switched off or
    if it cannot be built or loaded (said once)."""
    return load_once(_state, "fn", _load, "the .trace format's C path",
                     "reading and writing it in Python (slower)")


class PerLocation:
    """``{location id: int}`` kept in an int64 array indexed like the C tables
    (the reader's ``prev`` and ``base``, which C reads and updates)."""

    def __init__(self, index: dict[int, int], values: dict[int, int]) -> None:
        self.index = index
        self.array = np.full(len(index), 0, dtype=np.int64)
        for loc, li in index.items():
            self.array[li] = values.get(loc, 0)

    def __getitem__(self, loc: int) -> int:
        return int(self.array[self.index[loc]])

    def __setitem__(self, loc: int, value: int) -> None:
        self.array[self.index[loc]] = value


class FastRecords:
    """The C parser bound to one reader's definitions (after its header)."""

    def __init__(self, fn: Any, reader: Any) -> None:
        self._fn = fn
        ids = sorted(reader.locations)
        self.ids = ids
        self.index = {loc: li for li, loc in enumerate(ids)}
        state = [1 if loc in reader.state else 2 for loc in ids]
        reader.prev = PerLocation(self.index, reader.prev)
        reader.base = PerLocation(self.index, reader.base)
        self.last, self.count = reader.prev.array, reader.base.array
        strs = bytearray()

        def name(text: str) -> tuple[int, int]:
            raw = text.encode()
            strs.extend(raw)
            return len(strs) - len(raw), len(raw)

        comms = sorted(reader.comms)
        kinds, fields = [], []
        for kname in sorted(SPECS, key=lambda s: s.encode()):
            spec = SPECS[kname]
            kinds += [*name(kname), KIND_NAMES.index(kname), len(spec), len(fields) // 8]
            for key, column, (typ, lo, hi), default in spec:
                fields += [*name(key), _COL[column], typ, lo, hi,
                           NONE if default is None else default, int(default is None)]
        ops = []
        for op, value in COLLECTIVE_OPS.items():
            ops += [*name(op), value]
        tab = [len(ids), len(reader.regions), len(comms), len(SPECS), len(COLLECTIVE_OPS)]
        tab += [loc if loc < 2**63 else loc - 2**64 for loc in ids] + state
        tab += sorted(reader.regions) + comms + [len(reader.comms[c].members) for c in comms]
        tab += kinds + fields + ops
        self.tab = np.array(tab, dtype=np.int64)
        self.strs = bytes(strs) + b"\0"
        self.rows = np.empty((BATCH, len(RECORD_COLUMNS)), dtype=np.int64)
        self.locs = np.empty(BATCH, dtype=np.int64)
        self.res = np.zeros(5, dtype=np.int64)
        self._args = (self.tab.ctypes.data, self.strs, self.last.ctypes.data,
                      self.count.ctypes.data, self.locs.ctypes.data, self.rows.ctypes.data,
                      BATCH, self.res.ctypes.data)

    def parse_lines(self, reader: Any, lines: Iterable[tuple[int, str]]) -> int:
        """:meth:`_Reader.parse_lines` with C: same records, same errors; returns
        how many lines were blank, comments or another reader's."""
        skipped = 0
        it = iter(lines)
        fn, res = self._fn, self.res
        tab, strs, last, count, locs, rows, cap, resp = self._args
        while True:
            batch = list(islice(it, BATCH))
            if not batch:
                return skipped
            data = "".join(map(_text_of, batch)).encode()  # (no bytecode per line)
            size = len(data)
            pos = i = n = 0
            payloads: dict[int, Any] = {}
            try:
                while i < len(batch):
                    fn(data, size, pos, tab, strs, last, count, locs + 8 * n,
                       rows + 8 * len(RECORD_COLUMNS) * n, cap - n, resp)
                    n += int(res[0])
                    i += int(res[1])
                    skipped += int(res[2])
                    pos = int(res[3])
                    if i >= len(batch):
                        break
                    # a line C does not handle: Python parses it
                    lineno, line = batch[i]
                    reader.lineno = lineno
                    reader.last_loc = None
                    skipped += reader.parse_line(lineno, line)
                    loc = reader.last_loc
                    if loc is not None:
                        st = reader.state[loc]
                        if st[0]:
                            row = st[0].pop()
                            li = self.index[loc]
                            self.rows[n] = row if len(row) == len(RECORD_COLUMNS) else row + (NONE,)
                            self.locs[n] = li
                            payload = st[1].pop()
                            if payload is not None:
                                payloads[n] = payload
                            self.last[li] = row[0]
                            self.count[li] += 1
                            n += 1
                    i += 1
                    end = data.find(b"\n", pos)
                    pos = size if end < 0 else end + 1
            finally:
                reader.lineno = batch[min(i, len(batch) - 1)][0]
                self._distribute(reader, n, payloads)

    def _distribute(self, reader: Any, n: int, payloads: dict[int, Any]) -> None:
        """The block's rows (and Python's payloads) to their locations' pieces."""
        if not n:
            return
        locs = self.locs[:n]
        order = np.argsort(locs, kind="stable")
        sorted_locs = locs[order]
        cuts = np.flatnonzero(sorted_locs[1:] != sorted_locs[:-1]) + 1
        starts = [0, *cuts.tolist()]
        stops = [*cuts.tolist(), n]
        every: list[Any] = [None] * n
        if payloads:  # Python's payloads at their places in location order
            inverse = np.empty(n, dtype=np.int64)
            inverse[order] = np.arange(n)
            for k, p in payloads.items():
                every[int(inverse[k])] = p
        for a, b in zip(starts, stops, strict=True):
            block = self.rows[order[a:b]]
            reader.pieces.setdefault(self.ids[int(sorted_locs[a])], []).append(
                (block, every[a:b]))


def fast_records(reader: Any) -> FastRecords | None:
    """A :class:`FastRecords` for ``reader`` (its header read), None where the
    Python path must run."""
    fn = _kernel()
    return FastRecords(fn, reader) if fn is not None else None


# ---------------------------------------------------------------------------
# Writing

#: record lines formatted per C call (its buffer: ~320 bytes a record, zeroed: 2.5
#: MiB; 2^15 records made it, with its copy, the peak of a .trace run, issue #21)
FORMAT_BATCH = 1 << 13
_LINE_MAX = 320


def _load_format() -> Any:
    dll = ctypes.CDLL(str(compiled(SOURCE.read_bytes(), "textread")))
    fn = dll.cmp_text_format
    fn.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 5 + [ctypes.c_char_p] \
        + [ctypes.c_void_p] * 3
    fn.restype = ctypes.c_int64
    return fn


class FastFormat:
    """``cmp_text_format``: the record lines of :meth:`_Formatter.records` for the
    kinds of :data:`SPECS` (from the columns, as ``_Formatter.fields`` writes
    them); the lines of other kinds are Python's, copied in place."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        strs = bytearray()

        def name(text: str) -> tuple[int, int]:
            raw = text.encode()
            strs.extend(raw)
            return len(strs) - len(raw), len(raw)

        wtab, fields = [len(KIND_NAMES)], []
        handled = np.zeros(len(KIND_NAMES), dtype=bool)
        for code, kname in enumerate(KIND_NAMES):
            spec = SPECS.get(kname)
            if spec is None:
                wtab += [*name(kname), -1, 0]
                continue
            handled[code] = True
            wtab += [*name(kname), len(spec), len(fields) // 4]
            for key, column, (typ, _, _), _ in spec:
                fields += [*name(key), _COL[column], typ]
        top = max(COLLECTIVE_OPS.values()) + 1
        ops = [top] + [-1, 0] * top
        for op, value in COLLECTIVE_OPS.items():
            ops[1 + 2 * value:3 + 2 * value] = name(op)
        self.handled = handled
        self._tabs = [np.array(x, dtype=np.int64) for x in (wtab, fields or [0], ops)]
        self._strs = bytes(strs) + b"\0"

    def lines(self, cols: list[np.ndarray], python_lines: Any,
              widths: tuple[int, int, int]) -> Iterator[bytes]:
        """The record lines of ``cols`` (time, location, kind, region, ...,
        request; output order) as UTF-8 bytes, :data:`FORMAT_BATCH` records at a
        time; ``python_lines(indices)`` gives the lines (str) of the records at
        ``indices`` whose kind C does not format; ``widths``: of the time,
        location and kind columns."""
        widths_array = np.array(widths, dtype=np.int64)
        kinds = cols[2]
        inside = (kinds >= 0) & (kinds < len(KIND_NAMES))
        mine = np.zeros(len(kinds), dtype=bool)
        mine[inside] = self.handled[kinds[inside]]
        # an Enter's object, a Leave's return value (EZTrace's Pthread calls): Python's
        mine &= ~(((kinds == ENTER) | (kinds == LEAVE)) & (cols[-1] >= 0))
        wtab, fields, ops = self._tabs
        for a in range(0, len(kinds), FORMAT_BATCH):
            b = min(a + FORMAT_BATCH, len(kinds))
            part = [np.ascontiguousarray(c[a:b], dtype=np.int64) for c in cols]
            part[2] = np.where(mine[a:b], part[2], -1)  # C hands kind -1 to Python
            ptrs = (ctypes.c_void_p * len(part))(*[c.ctypes.data for c in part])
            others = np.flatnonzero(~mine[a:b]) + a
            py = [s.encode() for s in python_lines(others)] if len(others) else []
            offsets = np.zeros(len(py) + 1, dtype=np.int64)
            if py:
                np.cumsum([len(x) for x in py], out=offsets[1:])
            blob = b"".join(py) + b"\0"
            buf = ctypes.create_string_buffer((b - a) * _LINE_MAX + len(blob))
            size = self._fn(b - a, ptrs, wtab.ctypes.data, fields.ctypes.data, ops.ctypes.data,
                            self._strs, blob, offsets.ctypes.data, widths_array.ctypes.data,
                            buf)
            yield ctypes.string_at(buf, size)  # (buf.raw would copy the whole buffer)


def fast_format() -> FastFormat | None:
    """A :class:`FastFormat`, None where the Python formatter must run."""
    if _kernel() is None:
        return None
    if "format" not in _state:
        try:
            _state["format"] = FastFormat(_load_format())
        except (OSError, AttributeError, ValueError):
            _state["format"] = None
    return _state["format"]
