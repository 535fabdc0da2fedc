"""Reading a trace in chunks of records, so that memory is bounded by a chunk: the
iterator protocol both readers' chunk iterators share (:class:`ChunkIterator`), and
the default chunk size of :func:`compensate.formats.read_chunks`.
"""

from __future__ import annotations

import contextlib

import compensate.interrupt as interrupt


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
        with interrupt.shielded(), contextlib.suppress(Exception):
            self.close()


#: Records per chunk of :func:`read_chunks`.
DEFAULT_CHUNK_RECORDS = 1 << 18
