"""Write a trace incrementally, location by location and segment by segment.

The whole-trace :func:`compensate.formats.write_trace` holds every record in
memory; :class:`TraceWriter` keeps memory bounded by what the OTF2 library buffers
and the text merge holds, and shares all formatting code with it. It takes records
location by location and segment by segment and writes them with the same
atomic-output contract as ``write_trace``: the output appears under its name only
when :meth:`TraceWriter.close` completes; on failure (or
:meth:`TraceWriter.abort`) nothing is left behind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import compensate.interrupt as interrupt
from compensate.formats.paths import AtomicOutput, output_error
from compensate.model import Definitions, Events, TraceError

#: ``max_buffered`` not given: the text writer's own default (``MAX_BUFFERED`` of
#: :mod:`compensate.formats.text`, imported only when a text output is written)
_TEXT_DEFAULT: Any = object()


class TraceWriter:
    """Write a trace incrementally to ``out_path`` (``*.otf2`` or ``*.trace``).

    ``write(loc, events)`` appends records to location ``loc``; calls for
    different locations may interleave arbitrarily, but each location's records
    must come in order with non-decreasing times (the times are final;
    BufferFlush stop times are in ``events.size``). ``close()`` finishes the
    output and moves it into place; ``abort()`` removes everything written. As a
    context manager it closes on success and aborts on an exception. Any
    failure inside ``write``/``close`` (TraceError for records the format cannot
    store, times going backwards, OSError, KeyboardInterrupt, ...) aborts the
    writer before propagating; ``target`` is replaced only by a complete output.

    * OTF2: the archive is written under a temporary directory beside
      ``target`` (default: the archive directory of ``out_path``), each record
      handed to its location's OTF2 event writer at once; the definitions are
      written at ``close()``. The archive equals what
      :func:`~compensate.formats.write_trace` writes for the same records.
    * Text: a temporary file beside ``out_path`` (``target``: the file), then
      ``os.replace``. Records are merged into global time order with a buffer
      of at most ``max_buffered`` records; while it suffices the file is
      byte for byte what ``write_trace`` writes. See
      :class:`compensate.formats.text.TextEventWriter`, :meth:`finish` and
      :meth:`advance` (without which a location that has written nothing yet
      holds back every record).

    The writer keeps references to the ``events`` handed to it until their
    records are written (text) and sets the timestamps of OTF2 payload objects;
    do not modify them after ``write``.
    """

    def __init__(self, out_path: str | Path, definitions: Definitions,
                 target: Path | None = None, *, max_buffered: Any = _TEXT_DEFAULT,
                 output: AtomicOutput | None = None) -> None:
        # ``output``: an AtomicOutput for ``out_path`` created beforehand (e.g. before a
        # long computation, so that an unusable path fails first)
        self._output = output if output is not None else AtomicOutput(out_path, target)
        self._sink: Any = None
        self._finished: set[int] = set()
        options = {} if max_buffered is _TEXT_DEFAULT else {"max_buffered": max_buffered}
        try:
            self._sink = self._output.trace_format.open_writer(self._output.path, definitions,
                                                               **options)
        except BaseException:
            self._output.discard()
            raise
        self._state = "open"

    @property
    def path(self) -> Path:
        """The output path (the anchor file for OTF2)."""
        return self._output.out

    def write(self, loc: int, events: Events) -> None:
        """Append ``events`` (in order, times final) to location ``loc``."""
        self._check_open()
        try:
            if loc in self._finished and len(events):
                raise TraceError(f"location {loc} was declared finished",
                                 source=str(self._output.out))
            self._sink.write(loc, events)
        except OSError as exc:
            self.abort()
            raise output_error(self._output.out, "write", exc) from None
        except BaseException:
            self.abort()
            raise

    def finish(self, loc: int) -> None:
        """Declare that location ``loc`` gets no more records. Optional: for a text
        output it stops ``loc`` from holding back the merge (a location that
        has not written anything yet holds back every record unless
        :meth:`advance` says from when it may write, so call it for locations
        known to have no records, or none left); no effect on OTF2."""
        self._check_open()
        self._finished.add(loc)
        self._forward("finish", loc)

    def advance(self, time: int) -> None:
        """The producer's watermark: no location that has not written anything yet
        will write a record earlier than ``time``. For a text output it stops such
        locations (none written so far, or a first record that comes late) from
        holding back the merge before ``time``; no effect on OTF2, which is written
        per location."""
        self._check_open()
        self._forward("advance", time)

    def _forward(self, method: str, *args: Any) -> None:
        """Call the sink's ``method`` if it has one (the text writer's merge calls);
        a failure aborts the writer."""
        call = getattr(self._sink, method, None)
        if call is None:
            return
        try:
            call(*args)
        except OSError as exc:
            self.abort()
            raise output_error(self._output.out, "write", exc) from None
        except BaseException:
            self.abort()
            raise

    def close(self, before_commit: Callable[[], None] | None = None) -> None:
        """Finish the output and move it into place (atomically; not after an
        interrupt, :meth:`AtomicOutput.commit`); ``before_commit()`` runs right
        before the move."""
        self._check_open()
        try:
            try:
                self._sink.close()
            except OSError as exc:
                raise output_error(self._output.out, "write", exc) from None
            self._output.commit(before_commit)
        except BaseException:
            self.abort()
            raise
        self._state = "closed"

    def abort(self) -> None:
        """Remove every temporary file; ``target`` is left untouched. Idempotent,
        and a no-op after a successful :meth:`close`."""
        if self._state == "closed":
            return
        self._state = "aborted"
        sink, self._sink = self._sink, None
        try:
            if sink is not None:
                sink.abandon()
        finally:
            self._output.discard()

    def _check_open(self) -> None:
        if self._state != "open":
            raise TraceError(f"the writer is already {self._state}",
                             source=str(self._output.out))

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            if self._state == "open":
                self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # never leave temporary output behind, even if the caller forgot abort()
        if getattr(self, "_state", "closed") == "open":
            with interrupt.shielded():
                try:
                    self.abort()
                except Exception:
                    pass
