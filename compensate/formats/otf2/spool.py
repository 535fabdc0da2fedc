"""The columns pass 2 copies, kept in a temporary file until the archive is closed
(issue #18, peak memory).

The C path's pass 2 (:class:`~compensate.formats.otf2.native.NativeCopier`)
copies each input record to the output with its new timestamp. Copied in step
with the engine's segments, every location's OTF2 event writer and local reader
stayed open for the whole run, and the OTF2 library keeps per open event file a
4 MiB write buffer (every write under 4 MiB is buffered; an event chunk is
1 MiB) and per local reader the current and the previous 1 MiB read chunk, none
of which it lets a caller size. Those fill as a location's file grows past its
first chunk: ~200 MiB for the 32 locations of a 10^7-record archive, against
almost nothing at 10^6 records (docs/performance.md, *Peak memory at 10^7*).

So :class:`~compensate.formats.otf2.write.Otf2EventWriter` hands pass 2's three
columns (``time``; ``kind``, checked against the input's record; ``size`` of the
BufferFlush records, their stop time) to a :class:`ColumnSpool` as the segments
come, and copies location after location when the archive is closed, each
location's reader and writer closed before the next is opened. The archive is
the same byte for byte: what OTF2 writes for an event file depends on the
records and the chunk size, not on when its buffers are flushed.

The file is unnamed (``tempfile.TemporaryFile``: gone with the process however
it ends) and lies in the output's directory, so it uses the output's file system
until the output is closed: 10 bytes a record (8 time, 2 kind) and 8 more per
BufferFlush, written once and read back once (100 MB for the 10^7-record stencil,
whose OTF2 output is 77 MB). No CPU cost was measurable (docs/performance.md).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import numpy as np

from compensate.model import BUFFER_FLUSH

__all__ = ["ColumnSpool"]


def _pwrite_all(fd: int, data: np.ndarray, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


def _pread(fd: int, dtype: type, n: int, offset: int) -> np.ndarray:
    out = np.empty(n, dtype)
    view = memoryview(out).cast("B")
    while view:
        done = os.preadv(fd, [view], offset)
        if done <= 0:
            raise OSError(f"the temporary column file ended early ({offset} bytes)")
        view, offset = view[done:], offset + done
    return out


class ColumnSpool:
    """Blocks of (time, kind, BufferFlush stop times) per location, appended to an
    unnamed temporary file in ``directory`` and read back in the order added."""

    def __init__(self, directory: str) -> None:
        self._file = tempfile.TemporaryFile(dir=directory or ".", prefix=".compensate-")
        self._end = 0
        # location -> [(file offset, records, BufferFlush records, first record's index)]
        self._blocks: dict[int, list[tuple[int, int, int, int]]] = {}

    def add(self, ref: int, time: np.ndarray, size: np.ndarray, kind: np.ndarray,
            base: int) -> None:
        """Append records ``base`` on of location ``ref``: their ``time`` and
        ``kind`` columns, and ``size`` where the kind is BufferFlush."""
        kinds = np.ascontiguousarray(kind, np.int16)
        times = np.ascontiguousarray(time, np.int64)
        flush = np.flatnonzero(kinds == BUFFER_FLUSH)
        stops = np.ascontiguousarray(np.asarray(size)[flush], np.int64)
        fd, start = self._file.fileno(), self._end
        for part in (times, kinds, stops):
            _pwrite_all(fd, part, self._end)
            self._end += part.nbytes
        self._blocks.setdefault(int(ref), []).append((start, len(times), len(flush), base))

    def locations(self) -> list[int]:
        """The locations with blocks not taken yet, in the order first added."""
        return list(self._blocks)

    def pending(self, ref: int) -> bool:
        return int(ref) in self._blocks

    def take(self, ref: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
        """Location ``ref``'s blocks in the order added, each as ``(time, size,
        kind, base)`` (``size`` 0 but for BufferFlush records); they are forgotten."""
        fd = self._file.fileno()
        for offset, n, m, base in self._blocks.pop(int(ref), ()):
            time = _pread(fd, np.int64, n, offset)
            kind = _pread(fd, np.int16, n, offset + 8 * n)
            size = np.zeros(n, np.int64)
            size[kind == BUFFER_FLUSH] = _pread(fd, np.int64, m, offset + 10 * n)
            yield time, size, kind, base

    def close(self) -> None:
        """Remove the file (idempotent)."""
        self._blocks = {}
        self._file.close()
