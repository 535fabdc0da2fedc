"""Reading a trace in chunks of records, so that memory is bounded by a chunk: the
iterator protocol both readers' chunk iterators share (:class:`ChunkIterator`),
the default chunk size of :func:`compensate.formats.read_chunks`, and the check of
a selection of locations to read (:func:`selected_locations`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import numpy as np

import compensate.interrupt as interrupt
from compensate.model import COLUMNS, Events, TraceError


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


class NoChunks(ChunkIterator):
    """The chunks of an empty selection of locations: none (no event file is opened)."""

    def _read(self) -> dict:
        return {}

    def _release(self) -> None:
        pass


#: Records per chunk of :func:`read_chunks`.
DEFAULT_CHUNK_RECORDS = 1 << 18


def selected_locations(order: Iterable[int], locations: Iterable[int] | None,
                       source: str) -> tuple[int, ...] | None:
    """The ids of ``locations`` in the trace's location ``order`` (each once; None
    for None: every location); TraceError naming the first id not in ``order``."""
    if locations is None:
        return None
    order = tuple(order)
    wanted = {int(ref) for ref in locations}
    unknown = wanted.difference(order)
    if unknown:
        raise TraceError("selected location is not defined", source=source,
                         location=min(unknown))
    return tuple(ref for ref in order if ref in wanted)


def join_blocks(blocks: list[Events]) -> Events:
    """The records of ``blocks`` one after the other (as :meth:`Events.concat`),
    emptying ``blocks``: each column is joined and then dropped from every block
    before the next, so at most one column is held twice."""
    if not blocks:
        return Events(**{name: np.zeros(0, dtype) for name, dtype in COLUMNS}, payload=[])
    if len(blocks) == 1:
        return blocks.pop()
    cols = {}
    for name, dtype in COLUMNS:
        cols[name] = np.concatenate([getattr(b, name) for b in blocks]).astype(dtype, copy=False)
        for b in blocks:
            setattr(b, name, None)
    payload: list = []
    for b in blocks:
        payload.extend(b.payload)
        b.payload = []
    blocks.clear()
    return Events(**cols, payload=payload)
