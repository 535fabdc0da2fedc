"""Write the ``.trace`` text format (docs/trace-format.md): :func:`write_text` for a
whole trace, :class:`TextEventWriter` for records handed over location by location
and chunk by chunk, merged into global time order."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any, TextIO

import numpy as np

import compensate.insitu as insitu
from compensate.formats.order import Piece, WindowedMerge, merge_order
from compensate.formats.partitioned import TEXT_FIELDS
from compensate.formats.rma import RMA_FIELDS
from compensate.formats.text.fastread import fast_format
from compensate.formats.text.syntax import (
    FORMAT_VERSION,
    MAGIC,
    _brief,
    _enum_name,
    _join_args,
    _quote,
    _scalar_fields,
    _valid_key,
    _value,
    text_fields,
)
from compensate.model import (
    BARRIER_ROLES,
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    CPU_THREAD,
    ENTER,
    IMRECV,
    IMRECV_REQUEST,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    KIND_NAMES,
    LEAVE,
    MEASUREMENT_ONOFF,
    MRECV,
    NBC_COMPLETE,
    NBC_REQUEST,
    PROBE,
    PROCESS,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECORD_COLUMNS,
    RECV,
    REQUEST_CANCELLED,
    REQUEST_TEST,
    SEND,
    Definitions,
    Events,
    Trace,
    TraceError,
)


class _Formatter:
    """Formats the header and the records of one trace; ``fail`` makes a TraceError
    naming the record."""

    def __init__(self, definitions: Definitions, path: str) -> None:
        self.definitions = definitions
        self.path = path

    def fail(self, loc: int, index: int, message: str) -> TraceError:
        return TraceError(f"cannot write as .trace: {message}", source=self.path,
                          location=loc, index=index)

    def fields(self, loc: int, index: int, kind: int, cols: tuple, payload: Any) -> str:
        """The ``key=value`` part of one record's line (may be empty)."""
        region, peer, comm, tag, size, size_recv, op, request = cols
        if kind == ENTER or kind == LEAVE:  # a Pthread call's object or return value
            if request < 0:
                return f"region={region}"
            return f"region={region} {'object' if kind == ENTER else 'ret'}={request}"
        if kind == SEND:
            return f"receiver={peer} comm={comm} tag={tag} bytes={size}"
        if kind == RECV:
            return f"sender={peer} comm={comm} tag={tag} bytes={size}"
        if kind == ISEND:
            return f"receiver={peer} comm={comm} tag={tag} bytes={size} request={request}"
        if kind == IRECV:
            return f"sender={peer} comm={comm} tag={tag} bytes={size} request={request}"
        if kind in (ISEND_COMPLETE, IRECV_REQUEST, REQUEST_TEST, REQUEST_CANCELLED,
                    NBC_REQUEST):
            return f"request={request}"
        if kind == PROBE:
            return f"sender={peer} comm={comm} tag={tag} message={size_recv}"
        if kind == MRECV:
            return f"message={size_recv} bytes={size}"
        if kind == IMRECV_REQUEST:
            return f"message={size_recv} request={request}"
        if kind == IMRECV:
            return f"request={request} bytes={size}"
        if kind == COLL_END or kind == NBC_COMPLETE:
            root = "-" if peer < 0 else peer
            text = (f"op={COLLECTIVE_OP_NAMES.get(op, op)} comm={comm} root={root} "
                    f"sent={size} received={size_recv}")
            return text + (f" request={request}" if kind == NBC_COMPLETE else "")
        if kind == COLL_BEGIN:
            return ""
        if kind in TEXT_FIELDS:
            values = dict(zip(("region", "peer", "comm", "tag", "size", "size_recv", "op",
                               "request"), cols, strict=True))
            return " ".join(f"{key}={values[column]}" for key, column in TEXT_FIELDS[kind])
        if kind == BUFFER_FLUSH:
            return f"stop={size}"
        if kind == MEASUREMENT_ONOFF:
            return self.measurement(loc, index, payload)
        if kind == PROGRAM_BEGIN:
            return self.program_begin(loc, index, payload)
        if kind == PROGRAM_END:
            return self.program_end(loc, index, payload)
        return self.generic(loc, index, payload, KIND_NAMES[kind])

    def measurement(self, loc: int, index: int, payload: Any) -> str:
        if isinstance(payload, dict):
            mode = payload.get("mode")
        else:
            mode = _enum_name(getattr(payload, "measurement_mode", None))
        mode = mode.lower() if isinstance(mode, str) else None
        if mode not in ("on", "off"):
            raise self.fail(loc, index, f"MeasurementOnOff record without an on/off mode "
                                        f"(payload {_brief(payload)})")
        return f"mode={mode}"

    def program_begin(self, loc: int, index: int, payload: Any) -> str:
        if isinstance(payload, dict):
            name, args = payload.get("name"), payload.get("args", [])
        else:
            name = getattr(payload, "program_name", None)
            args = getattr(payload, "program_arguments", [])
        if not isinstance(name, str) or not isinstance(args, list | tuple) \
                or not all(isinstance(a, str) for a in args):
            raise self.fail(loc, index, f"ProgramBegin record needs a name string and a list "
                                        f"of argument strings (payload {_brief(payload)})")
        text = f"name={_quote(name)}"
        return f"{text} args={_quote(_join_args(list(args)))}" if args else text

    def program_end(self, loc: int, index: int, payload: Any) -> str:
        status = payload.get("status") if isinstance(payload, dict) \
            else getattr(payload, "exit_status", None)
        if isinstance(status, bool) or not isinstance(status, int | np.integer):
            raise self.fail(loc, index, f"ProgramEnd record without an integer exit status "
                                        f"(payload {_brief(payload)})")
        return f"status={int(status)}"

    def generic(self, loc: int, index: int, payload: Any, kind_name: str = "") -> str:
        if payload is None:
            return ""
        if isinstance(payload, dict) and not (
                kind_name in RMA_FIELDS and not all(isinstance(v, str) for v in payload.values())):
            items = [(k, v if isinstance(v, str) else str(v)) for k, v in payload.items()]
            for k, _ in items:
                if not isinstance(k, str) or not _valid_key(k):
                    raise self.fail(loc, index, f"field name {k!r} cannot be written, expected "
                                                f"a non-empty name without whitespace, '=', "
                                                f"quotes or control characters")
        elif kind_name in RMA_FIELDS:  # an OTF2 RMA record or built fields (R10)
            try:
                items = text_fields(kind_name, payload)
            except TraceError as exc:
                raise self.fail(loc, index, exc.reason) from exc
        else:
            items = _scalar_fields(payload)
        return " ".join(f"{k}={_value(v)}" for k, v in items)

    def header(self) -> list[str]:
        d = self.definitions
        out = [
            f"{MAGIC} {FORMAT_VERSION}\n",
            "# compensate .trace file, one record per line (format: docs/trace-format.md)\n",
            f"timer_resolution {int(d.timer_resolution)}\n",
        ]
        for lid in sorted(d.locations):
            loc = d.locations[lid]
            line = f"location {lid} group={loc.group}"
            if loc.name:
                line += f" name={_quote(loc.name)}"
            if loc.group_name:
                line += f" group_name={_quote(loc.group_name)}"
            # the location model, only where it is not the default (so that files
            # of CPU threads in processes read and write as before)
            if loc.type != CPU_THREAD:
                line += f" type={loc.type}"
            if loc.group_type != PROCESS:
                line += f" group_type={loc.group_type}"
            if loc.group_creator >= 0:
                line += f" group_creator={loc.group_creator}"
            if lid in d.insitu:  # the tracer's in-situ overhead table
                line += f" insitu={_quote(insitu.dumps(d.insitu[lid]))}"
            out.append(line + "\n")
        for rid in sorted(d.regions):
            line = f"region {rid} {_quote(str(d.regions[rid]))}"
            # role and paradigm only of barriers, the regions compensation reads them of
            role, paradigm = d.region_roles.get(rid, ("FUNCTION", "UNKNOWN"))
            if role in BARRIER_ROLES:
                line += f" role={role} paradigm={paradigm}"
            out.append(line + "\n")
        for cid in sorted(d.comms):
            c = d.comms[cid]
            members = ",".join(str(m) for m in c.written) if c.written else "-"
            out.append(f"comm {cid} {_quote(str(c.name))} {members}\n")
        for wid in sorted(d.windows):
            w = d.windows[wid]
            out.append(f"window {wid} {_quote(str(w.name))} comm={w.comm}\n")
        out.append("events\n")
        return out

    def records(self, f: TextIO, cols: list[Any], payloads: list[Any],
                widths: tuple[int, int, int]) -> None:
        """Write records given as columns in output order: ``cols`` is
        ``[time, location, index, kind, region, peer, comm, tag, size, size_recv,
        op, request]`` (lists, or int64-able numpy arrays: then C formats the
        kinds it knows, fastread.py, the same bytes), ``widths`` the time,
        location and kind column widths."""
        fast = fast_format() if isinstance(cols[0], np.ndarray) else None
        if fast is not None:
            def python_lines(at: np.ndarray) -> Iterator[str]:
                sub = [c[at].tolist() for c in cols]
                return self.lines(sub, [payloads[j] for j in at.tolist()], widths)

            f.flush()  # (the text layer's pending lines first)
            for data in fast.lines(cols[:2] + cols[3:], python_lines, widths):
                f.buffer.write(data)
            return
        cols = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols]
        buf: list[str] = []
        for line in self.lines(cols, payloads, widths):
            buf.append(line)
            if len(buf) >= 8192:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))

    def lines(self, cols: list[list[Any]], payloads: list[Any],
              widths: tuple[int, int, int]) -> Iterator[str]:
        """The lines of :meth:`records`, one by one."""
        tw, lw, kw = widths
        fields_of = self.fields
        for t, loc, i, kind, *c, p in zip(*cols, payloads, strict=True):
            fields = fields_of(loc, i, kind, c, p)
            name = KIND_NAMES[kind]  # codes validated by the caller
            if fields:
                yield f"{t:>{tw}} {loc:>{lw}} {name:<{kw}} {fields}\n"
            else:
                yield f"{t:>{tw}} {loc:>{lw}} {name}\n"


#: Default cap of :class:`TextEventWriter`'s merge buffer, in records.
MAX_BUFFERED = 1 << 20
#: Records :class:`TextEventWriter` formats at a time. A batch of ready records was
#: formatted whole: its columns permuted into output order and the C formatter's
#: copies and text, ~300 bytes a record, 40 MiB over the previous phase for the
#: 131,000 records a rank releases at once at 10^6 records, P = 2; the peak of the
#: streamed one-process run and of the ranks on `.trace` (docs/parallel.md).
EMIT_BLOCK = 1 << 15
#: Records the merge buffer gathers before it tries to write some out.
_RELEASE_EVERY = 1 << 16
_COMMENT = "# <time> <location> <kind> [key=value ...]\n"


class TextEventWriter:
    """Writes a ``.trace`` file from records handed over location by location and
    chunk by chunk, merged into global time order.

    ``write(loc, events)`` appends records to location ``loc``, in order (calls
    for different locations may interleave). Records wait in a windowed merge
    (:class:`compensate.formats.order.WindowedMerge`) until no location can
    still add an earlier one: a record is written once its time is below every
    unfinished location's last appended time and, while some unfinished location
    has appended nothing yet, below the watermark :meth:`advance` gave (without
    one, such a location holds everything back; ``finish(loc)`` declares that
    ``loc`` appends nothing more). Written that way the file is byte for byte
    what :func:`write_text` writes for the same records: time order, ties by
    location id, then per-location order.

    ``max_buffered`` caps the merge (None: unbounded): beyond it the earliest
    queued records are written anyway, down to half the cap, and a location
    that appends an earlier record later makes the file's order across
    locations no longer global (the format allows any interleaving; the order
    of each location's records is always kept). So does a location that breaks
    the promise of :meth:`advance`.

    The column widths (time, location, kind) are fixed when the first records
    are written, from the records appended so far and the defined locations;
    if later records need other widths, :meth:`close` rewrites the record lines
    once so that the file is exactly what :func:`write_text` would write.
    """

    def __init__(self, path: str, definitions: Definitions, *,
                 max_buffered: int | None = MAX_BUFFERED,
                 locations: Iterable[int] | None = None) -> None:
        self.path = os.fspath(path)
        self.definitions = definitions
        self.max_buffered = max_buffered
        self.formatter = _Formatter(definitions, self.path)
        # locations that may be written (their ids in sorted order give the tie
        # rank), their column width
        ids = sorted(definitions.locations if locations is None else locations)
        self._ids = ids
        self._lw = max((len(str(loc)) for loc in ids), default=1)
        self._merge = WindowedMerge(ids, capacity=max_buffered)
        self._next_release = min(_RELEASE_EVERY, max(1, (max_buffered or 0) // 4))
        self._max_time = -1
        self._kinds: set[int] = set()
        self._header_written = False
        self._big_ids = bool(ids) and max(ids) > 2**62  # beyond int64 in the merge
        self._widths: tuple[int, int, int] | None = None  # set once records are written
        # (byte offset, widths) where the record lines start using other widths
        self._segments: list[tuple[int, tuple[int, int, int]]] = []
        try:
            self._file: TextIO | None = open(self.path, "w", encoding="utf-8",  # noqa: SIM115
                                             newline="\n")
        except OSError as e:
            raise TraceError(f"cannot write the file: {e.strerror or e}",
                             source=self.path) from None

    # -- appending ---------------------------------------------------------------

    def write(self, loc: int, ev: Events) -> None:
        """Append ``ev`` to location ``loc``. The writer keeps references to
        ``ev``'s columns and payload until its records are written: do not modify
        them afterwards. TraceError for an undefined location, negative times or
        times going backwards (naming the record)."""
        self._check_open()
        merge = self._merge
        if loc not in self.definitions.locations or loc not in merge:
            raise TraceError(f"cannot write as .trace: location {loc} has records but no "
                             f"definition", source=self.path)
        if merge.finished(loc):
            raise TraceError(f"cannot write as .trace: location {loc} was declared finished",
                             source=self.path)
        base = merge.count(loc)
        t = ev.time
        n = len(t)
        if n and int(t.min()) < 0:
            i = int(np.argmax(t < 0))
            raise self.formatter.fail(loc, base + i, f"negative time {int(t[i])} (the .trace "
                                                     f"format needs times >= 0)")
        previous = merge.last(loc)
        previous = -1 if previous is None else previous
        if n and int(t[0]) < previous:
            raise self._backwards(loc, base, int(t[0]), previous)
        if n > 1:
            bad = np.flatnonzero(t[1:] < t[:-1])
            if len(bad):
                i = int(bad[0]) + 1
                raise self._backwards(loc, base + i, int(t[i]), int(t[i - 1]))
        if not n:
            return
        merge.push(loc, t, ev)
        self._max_time = max(self._max_time, int(t[-1]))
        self._kinds.update(np.unique(ev.kind).tolist())
        self._release()

    def _check_open(self) -> None:
        if self._file is None:
            raise TraceError("cannot write as .trace: the file is already closed",
                             source=self.path)

    def _release(self) -> None:
        try:
            self._write_out()
        except OSError as e:
            raise TraceError(f"cannot write the file: {e.strerror or e}",
                             source=self.path) from None

    def _backwards(self, loc: int, index: int, t: int, previous: int) -> TraceError:
        return self.formatter.fail(loc, index, f"time {t} is before the previous record's "
                                               f"{previous} (the .trace format needs "
                                               f"non-decreasing times per location)")

    def finish(self, loc: int) -> None:
        """Declare that ``loc`` appends no more records, so that it no longer holds
        back the merge."""
        self._merge.finish(loc)
        self._release()

    def advance(self, time: int) -> None:
        """The producer's watermark: no location that has not appended anything yet
        will append a record earlier than ``time``, so such locations no longer
        hold back the records before it (see the class documentation)."""
        self._check_open()
        self._merge.advance(time)
        self._release()

    # -- merging -----------------------------------------------------------------

    def _write_out(self) -> None:
        """Write what can be written (see the class documentation): everything
        below the merge's release bound, tried each time ``_RELEASE_EVERY`` more
        records are queued; if the merge holds more than ``max_buffered``
        records, the earliest ones down to half that."""
        cap = self.max_buffered
        if cap is None:
            return
        merge = self._merge
        if len(merge) > cap or len(merge) >= self._next_release:
            pieces = merge.pop_ready()
            if pieces:  # (else: try again at the next call, the bound may have moved)
                self._emit(pieces)
                self._next_release = len(merge) + min(_RELEASE_EVERY, max(1, cap // 4))

    # -- output ------------------------------------------------------------------

    def _write_header(self) -> None:
        if not self._header_written:
            self._file.writelines(self.formatter.header())
            self._header_written = True

    def _final_widths(self) -> tuple[int, int, int]:
        kinds = [k for k in self._kinds if 0 <= k < len(KIND_NAMES)]
        return (len(str(self._max_time)), self._lw,
                max((len(KIND_NAMES[k]) for k in kinds), default=0))

    def _emit(self, pieces: list[Piece]) -> None:
        """Write the records of ``pieces`` merged by time, location, record order."""
        self._write_header()
        if not pieces:
            return
        bad_kinds = [k for k in self._kinds if not 0 <= k < len(KIND_NAMES)]
        if bad_kinds:
            raise TraceError(f"cannot write as .trace: unknown record kind code {bad_kinds[0]}",
                             source=self.path)
        widths = self._final_widths()  # wide enough for every record appended so far
        if widths != self._widths:
            if self._widths is None:
                self._file.write(_COMMENT)
            self._segments.append((self._file.tell(), widths))
            self._widths = widths
        cols: list[Any] = []
        if len(pieces) == 1:
            loc, _, ev, _, start, stop, first = pieces[0]
            locs = np.full(stop - start, loc, dtype=object if self._big_ids else np.int64)
            index = np.arange(first, first + stop - start, dtype=np.int64)
            payloads = _payloads(ev, start, stop)
            for name, _ in RECORD_COLUMNS:
                cols.append(getattr(ev, name)[start:stop])
            order = None
        else:
            # time, then location id (rank), then record
            order, rank, index = merge_order(pieces)
            ids = np.array(self._ids, dtype=object if self._big_ids else np.int64)
            locs = ids[rank]
            payloads = list(chain.from_iterable(_payloads(p.item, p.start, p.stop)
                                                for p in pieces))
            for name, _ in RECORD_COLUMNS:  # (in the pieces' order: permuted block by block)
                cols.append(np.concatenate([getattr(p.item, name)[p.start:p.stop]
                                            for p in pieces]))
        cols[1:1] = [locs, index]  # time, location, index, kind, ...
        # formatted EMIT_BLOCK records at a time (the same lines): the formatter's
        # copies and text are a block's, not the whole batch's
        for a in range(0, len(locs), EMIT_BLOCK):
            if order is None:
                block = [c[a:a + EMIT_BLOCK] for c in cols]
                texts = payloads[a:a + EMIT_BLOCK]
            else:
                at = order[a:a + EMIT_BLOCK]
                block = [c[at] for c in cols]
                texts = list(map(payloads.__getitem__, at.tolist()))
            if self._big_ids:  # (beyond int64: Python formats them)
                block = [c.tolist() for c in block]
            self.formatter.records(self._file, block, texts, self._widths)

    def close(self) -> None:
        """Write every record still queued and finish the file (rewriting the
        record lines if their column widths changed)."""
        self._check_open()
        try:
            try:
                self._emit(self._merge.pop_all())
                f, self._file = self._file, None
                f.close()
            except OSError as e:
                raise TraceError(f"cannot write the file: {e.strerror or e}",
                                 source=self.path) from None
            final = self._final_widths()
            if any(widths != final for _, widths in self._segments):
                try:
                    self._repad(final)
                except OSError as e:
                    raise TraceError(f"cannot write the file: {e.strerror or e}",
                                     source=self.path) from None
        except BaseException:
            self.abandon()
            raise

    def written(self) -> tuple[int, list[int]]:
        """The latest time (-1: none) and the valid kind codes written (what the
        column widths depend on: a part's record, text/parts.py)."""
        return self._max_time, sorted(k for k in self._kinds if 0 <= k < len(KIND_NAMES))

    def abandon(self) -> None:
        """Close the file after a failure (it stays, half written)."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _repad(self, final: tuple[int, int, int]) -> None:
        """Rewrite the record lines written with narrower column widths than
        ``final`` (each stretch in ``_segments`` is uniform: the widths grow only
        between batches, and always cover the batch)."""
        directory, name = os.path.split(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.repad-", dir=directory)
        try:
            shutil.copymode(self.path, tmp)  # mkstemp's 0600 would replace the umask's mode
            with open(self.path, "rb") as src, os.fdopen(fd, "wb") as dst:
                end = os.fstat(src.fileno()).st_size
                dst.write(src.read(self._segments[0][0]))
                bounds = [offset for offset, _ in self._segments[1:]] + [end]
                for (_, widths), stop in zip(self._segments, bounds, strict=True):
                    _repad_lines(src, dst, stop - src.tell(), widths, final)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


#: bytes of record lines :func:`_repad_lines` reads at a time: its transient is
#: about five times this (the lines split, padded and joined), 2 MiB -> ~11 MiB
#: (8 MiB made it the peak of a distributed rank's write, issue #21)
REPAD_BLOCK = 1 << 21


def _repad_lines(src: Any, dst: Any, size: int, old: tuple[int, int, int],
                 new: tuple[int, int, int]) -> None:
    """Copy ``size`` bytes of record lines written with column widths ``old`` from
    ``src`` to ``dst`` with widths ``new`` (each at least as wide)."""
    (tw0, lw, kw0), (tw1, _, kw1) = old, new
    cut = tw0 + lw + 2 + kw0  # a line with fields continues with " fields" here
    pad_t, pad_k = b" " * (tw1 - tw0), b" " * (kw1 - kw0)
    rest = b""
    while size > 0:
        block = src.read(min(size, REPAD_BLOCK))
        if not block:
            raise OSError("file shrank while being rewritten")
        size -= len(block)
        block = rest + block
        end = block.rfind(b"\n") + 1
        rest = block[end:]
        lines = block[:end].split(b"\n")
        lines.pop()
        if pad_k:
            lines = [pad_t + (ln[:cut] + pad_k + ln[cut:] if len(ln) > cut else ln)
                     for ln in lines]
        elif pad_t:
            lines = [pad_t + ln for ln in lines]
        lines.append(b"")
        dst.write(b"\n".join(lines))
    dst.write(rest)


def _payloads(ev: Events, start: int, stop: int) -> list[Any]:
    """``ev.payload[start:stop]``, padded with None where the list is short."""
    p = ev.payload[start:stop]
    return p if len(p) == stop - start else p + [None] * (stop - start - len(p))


def write_text(trace: Trace, path: str) -> None:
    """Write ``trace`` as a ``.trace`` file at ``path``.

    The header comes from ``trace.definitions`` (ids in ascending order); the records
    of all locations follow merged in global time order, ties broken by location id
    and then by the per-location order, which is always preserved. Interpreted kinds
    are written from the columns. MeasurementOnOff/ProgramBegin/ProgramEnd and the
    other kinds are written from their payload: a dict (as :func:`read_text` makes)
    or an OTF2 event object, whose scalar attributes are written best-effort (see
    docs/trace-format.md). Raises :class:`~compensate.model.TraceError` for a trace
    the format cannot represent (e.g. times going backwards on a location). Not
    atomic: callers that need that write to a temporary file and rename.
    (:class:`TextEventWriter` writes the same file from records handed over chunk
    by chunk.)
    """
    path = os.fspath(path)
    locs = sorted(trace.events)
    writer = TextEventWriter(path, trace.definitions, max_buffered=None, locations=locs)
    try:
        for loc in locs:
            writer.write(loc, trace.events[loc])
        writer.close()
    except OSError as e:
        raise TraceError(f"cannot write the file: {e.strerror or e}", source=path) from None
    finally:
        writer.abandon()
