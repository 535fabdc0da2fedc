"""Read a trace in chunks of records, so that memory is bounded by a chunk.

:func:`read_chunks` opens an OTF2 anchor file or a ``.trace`` file (same suffix
dispatch and errors as :func:`compensate.formats.read_trace`) and returns its
definitions and an iterator of chunks ``{location: Events}``; a location's chunks,
one after the other, are exactly ``read_trace(path).events[location]``. Both
readers' chunk iterators share :class:`ChunkIterator`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from compensate.formats.paths import input_format
from compensate.model import Definitions, Events


class ChunkIterator:
    """The iterator protocol of the chunked readers (``otf2io.Otf2Chunks``,
    ``textio.TextChunks``): :meth:`_read` gives the next chunk ({} at the end),
    :meth:`_release` frees the input. The input is released at the end, when a
    chunk fails, on :meth:`close` or when the iterator is garbage collected."""

    _open = True

    def _read(self) -> dict:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def __iter__(self) -> ChunkIterator:
        return self

    def __next__(self) -> dict:
        if not self._open:
            raise StopIteration
        try:
            chunk = self._read()
        except BaseException:
            self.close()
            raise
        if not chunk:
            self.close()
            raise StopIteration
        return chunk

    def close(self) -> None:
        """Release the input (idempotent)."""
        if self._open:
            self._open = False
            self._release()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


#: Records per chunk of :func:`read_chunks`.
DEFAULT_CHUNK_RECORDS = 1 << 18


def read_chunks(path: str | Path, chunk_records: int = DEFAULT_CHUNK_RECORDS
                ) -> tuple[Definitions, Iterator[dict[int, Events]]]:
    """Definitions of the trace ``path`` and an iterator over its records in chunks.

    ``path`` is an OTF2 anchor file (``*.otf2``) or a text trace (``*.trace``).
    Each chunk maps location id -> :class:`Events` with that location's next
    records, for the locations that have records among the chunk's
    ``chunk_records`` records (the last chunk may be smaller). Record order: the
    OTF2 global reader's (timestamp order across locations), or the file's for
    text. Concatenated, a location's chunks equal ``read_trace(path).events[loc]``
    (payloads: new ``otf2`` event objects or text field dicts, as there).

    A missing file or bad definitions/header raise :class:`TraceError` here; a
    bad record raises it from the iterator, with the same message as
    ``read_trace`` (record index counted over the whole location). The iterator
    keeps no record of a chunk it has returned; it releases the file at the end,
    on an error, or on ``close()``.
    """
    if chunk_records < 1:
        raise ValueError(f"chunk_records must be at least 1, got {chunk_records}")
    path = str(path)
    if input_format(path) == "otf2":
        from compensate.formats.otf2 import read_otf2_chunks
        return read_otf2_chunks(path, chunk_records)
    from compensate.formats.text import read_text_chunks
    return read_text_chunks(path, chunk_records)
