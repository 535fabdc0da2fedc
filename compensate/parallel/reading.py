"""A rank reads its own locations in bounded blocks (docs/parallel.md, "What each
rank reads"; issue #21's memory target).

:func:`compensate.formats.read_trace` parses a whole selection at once: a
``.trace`` file's lines become Python row tuples of every selected record before
the columns are built (the parse transient: +72 MiB over the columns for half of
a 10^6-record trace), and an OTF2 archive is read through the ``otf2`` package,
one Python event object per record kept as its payload (+124 MiB for half of a
10^6-record stencil). :func:`read_own_records` reads the same records with
:func:`compensate.formats.read_chunks` instead, :data:`BLOCK` records at a time,
and joins each location's blocks column by column, releasing every block's column
as it goes, so the transient is one block plus one column. An OTF2 input whose
output is OTF2 needs no payload objects (``payload=False``): its records then come
through the C path (:mod:`compensate.formats.otf2.native`, the library's
``OTF2_Reader_SelectLocation`` opens only the rank's event files) and the rank's
part is copied from the input by the OTF2 writer, as the one-process streamed
command does. The records, their indices and every error message are those of
``read_trace(path, locations)``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np

from compensate.formats import mpithreads, read_chunks
from compensate.formats.chunks import selected_locations
from compensate.model import COLUMNS, Definitions, Events, Trace
from compensate.parallel.driver import agreed_gather
from compensate.parallel.transport import Transport

#: Records per block a rank reads (of its own locations only).
BLOCK = 1 << 16


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


def read_own_records(path: str, locations: Iterable[int], payload: bool = True,
                     block: int = BLOCK) -> Trace:
    """``read_trace(path, locations)`` read ``block`` records at a time: the
    definitions, and ``events`` holding exactly the selected locations (in the
    trace's location order, empty ones included). ``payload=False``: the records
    are written, if at all, to an OTF2 archive (an OTF2 input is then read by the C
    path where it can be, payloads ``NATIVE``; see
    :func:`compensate.formats.read_chunks`). TraceError as ``read_trace`` raises it."""
    path = str(path)
    mine = tuple(locations)
    definitions, chunks = read_chunks(path, block, payload=payload, locations=mine)
    pieces: dict[int, list[Events]] = {}
    with contextlib.closing(chunks):
        for chunk in chunks:
            for loc, events in chunk.items():
                pieces.setdefault(loc, []).append(events)
    meta = definitions.otf2
    order = meta.location_order if meta is not None else tuple(definitions.locations)
    selection = selected_locations(order, mine, path) or ()
    events = {loc: join_blocks(pieces.pop(loc, [])) for loc in selection}
    return Trace(definitions=definitions, events=events, source=path)


class OneRead:
    """One read of a rank's own locations, shared by the cut agreement and the
    segment pass (docs/parallel.md, "Streaming within a rank"): :meth:`first` is
    the agreement's reading (every chunk from the input, held here as well), and
    :meth:`second` gives the held chunks to the segment pass in the same order. The
    agreement reads at most a segment's share beyond the last cut it agreed before
    the segment pass splits at that cut, so what is held is bounded by a segment."""

    def __init__(self, chunks: Iterable[dict[int, Events]]) -> None:
        self.source = iter(chunks)
        self.held: deque[dict[int, Events]] = deque()
        self.ended = False

    def first(self) -> Iterator[dict[int, Events]]:
        """The input's chunks, each held for :meth:`second` as it is read."""
        for chunk in self.source:
            self.held.append(chunk)
            yield chunk
        self.ended = True

    def second(self) -> Iterator[dict[int, Events]]:
        """The chunks :meth:`first` read, each once; it ends where the input ends.
        A segment pass never needs a chunk the agreement has not read (a cut is
        agreed below every rank's latest time read, or once its input ended):
        RuntimeError if it asks for one."""
        while True:
            if self.held:
                yield self.held.popleft()
            elif self.ended:
                return
            else:
                raise RuntimeError("the segment pass reached past the records the cut "
                                   "agreement read")


def agreed_rank_threads(transport: Transport, path: str, defs: Definitions,
                        mine: list[int]) -> Definitions:
    """``defs`` with each rank that calls MPI from another thread of its process
    mapped to that thread (:mod:`compensate.formats.mpithreads`), as one process
    maps it: each rank reads its own processes' locations (a rank owns whole
    processes, so it decides for them alone) and every rank learns every answer
    in one ``allgather``, kept for the reads of this run
    (:func:`compensate.formats.mpithreads.remember`). Collective."""
    if not mpithreads.other_threads(defs):
        return defs

    def read(locations: Iterable[int]) -> Iterator[dict[int, Events]]:
        return read_chunks(path, mpithreads.SCAN_CHUNK, payload=False,
                           locations=list(locations), mpi_threads=False)[1]

    found = agreed_gather(transport, mpithreads.found_by_reading, defs, read, set(mine))
    ranks = {m: t for part in found for m, t in part.items()}
    mpithreads.remember(path, ranks)
    return mpithreads.renamed(defs, ranks)


def guessed_offsets(path: str, records: int) -> dict[int, int]:
    """The processes' clock offsets :func:`compensate.matching.clocks.first_offsets`
    guesses from the first chunks of the trace at ``path`` holding ``records``
    records (a read of its own): {} where those show no receive before its send."""
    from compensate.matching.clocks import first_offsets
    from compensate.pipeline.run import first_chunks

    defs, chunks = read_chunks(path, payload=False)
    return first_offsets(defs, first_chunks(chunks, records)[0])
