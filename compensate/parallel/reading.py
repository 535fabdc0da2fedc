"""What a rank reads beyond its own records' blocks (docs/parallel.md, "What each
rank reads"): :class:`OneRead`, the one read of a rank's own chunks that the cut
agreement and the segment pass share; :func:`agreed_rank_threads`, the ranks
that call MPI from another thread, as one process finds them; and
:func:`guessed_offsets`, the first guess of the processes' clock offsets.

A rank's own locations read whole (the in-memory distributed run) are
:func:`compensate.formats.read_blocks`: bounded blocks, joined column by column,
an OTF2 input whose output is OTF2 through the C path (the library's
``OTF2_Reader_SelectLocation`` opens only the rank's event files), its part
copied from the input by the OTF2 writer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from compensate.formats import mpithreads, read_chunks
from compensate.model import Definitions, Events
from compensate.parallel.driver import agreed_gather
from compensate.parallel.transport import Transport


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
