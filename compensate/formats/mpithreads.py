"""MPI called from another thread than the one the communicators list: a rank is
read where its records lie.

OTF2 maps an MPI rank to one location: a communicator's group lists a location
per rank, the process's first thread in the archives of Score-P and EZTrace. MPI
itself knows processes, not threads: under ``MPI_THREAD_SERIALIZED`` or
``MPI_THREAD_MULTIPLE`` any thread of a process may make its calls, and a program
that makes all of them from one other thread (a communication thread) has every
MPI record of the rank on that thread's location, which no communicator lists;
matching would find a collective with a member missing and messages sent to a
location that receives none.

Where the listed location of a process holds no MPI record and exactly one other
CPU thread of the same process holds MPI records, that thread *is* the rank: the
readers hand on communicators that list it (communicators of ranks only, whose
members lie in as many processes: not a thread team's or an accelerator's, which
Score-P defines beside them) (:attr:`Comm.members`) and keep the
archive's list for the writers (:attr:`Comm.listed`), so that everything after
the reader (matching, the cutter, the distributed run's ownership, the verifier)
sees one consistent mapping and the output's definitions are the input's. Where
MPI records lie on two threads of one process (the listed one and another, or two
others: ``omp single``, or ``MPI_THREAD_MULTIPLE``), the communicators stay as
listed: matching takes a collective on another thread of a member's process as
the member's (:func:`compensate.matching.collectives.thread_ranks`) and refuses
messages there with the location it cannot place (docs/eztrace.md, "Real
applications").

Finding the thread reads records: all of them in memory, and in a stream first
each listed location up to its first MPI record (a single-threaded rank or one
that calls MPI from its first thread stops there, at once), then, only for a
process whose listed location has none, its other threads. An archive without a
process that has both a listed location and other CPU threads is not read at
all. The answer is kept per file (size and modification time), since a run
reads its input several times.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from compensate.model import KIND_NAMES, Definitions, Events

#: ``MPI_RECORD[kind]``: a record an MPI call writes (point-to-point, requests,
#: collectives, one-sided, partitioned)
MPI_RECORD = np.array([n.startswith(("Mpi", "NonBlockingCollective", "Rma"))
                       for n in KIND_NAMES], dtype=bool)

Reader = Callable[[Iterable[int]], Iterator[dict[int, Events]]]

#: records a scan reads at a time: a rank's first MPI record usually comes early,
#: and the reading stops at the chunk that holds the last listed location's first
SCAN_CHUNK = 4096


def other_threads(defs: Definitions) -> dict[int, list[int]]:
    """``{listed location: the other CPU threads of its process}`` for every
    location a communicator of ranks (:meth:`Definitions.is_rank_comm`) lists whose
    process has other CPU threads."""
    listed = {m for c in defs.comms.values() if defs.is_rank_comm(c) for m in c.written}
    return {m: others for m in sorted(listed) if (others := defs.sibling_threads(m))}


def has_mpi(ev: Events) -> bool:
    """Does the location's chunk ``ev`` hold an MPI record?"""
    return bool(len(ev)) and bool(MPI_RECORD.take(ev.kind).any())


def rank_threads(candidates: dict[int, list[int]], with_mpi: set[int]) -> dict[int, int]:
    """``{listed location: the thread that is the rank}``, for the listed locations
    of ``candidates`` not in ``with_mpi`` (the locations holding MPI records) of
    whose other threads exactly one is in ``with_mpi``."""
    out = {}
    for m, others in candidates.items():
        carriers = [x for x in others if x in with_mpi]
        if m not in with_mpi and len(carriers) == 1:
            out[m] = carriers[0]
    return out


def found_in_memory(defs: Definitions, events: dict[int, Events]) -> dict[int, int]:
    """:func:`rank_threads` of a trace read whole."""
    candidates = other_threads(defs)
    if not candidates:
        return {}
    return rank_threads(candidates, {loc for loc, ev in events.items() if has_mpi(ev)})


def found_by_reading(defs: Definitions, read: Reader, only: set[int] | None = None
                     ) -> dict[int, int]:
    """:func:`rank_threads` of an archive read location set by location set
    (``read(locations)``: its chunks of those locations' records): the listed
    locations until each showed an MPI record, then the other threads of those that
    showed none. ``only``: the processes of these listed locations alone (a rank
    of the distributed run reads its own)."""
    candidates = {m: o for m, o in other_threads(defs).items() if only is None or m in only}
    if not candidates:
        return {}
    with_mpi = first_mpi(read, set(candidates))
    silent = {m: others for m, others in candidates.items() if m not in with_mpi}
    if not silent:
        return {}
    with_mpi |= first_mpi(read, {x for others in silent.values() for x in others})
    return rank_threads(silent, with_mpi)


def first_mpi(read: Reader, locations: set[int]) -> set[int]:
    """The locations of ``locations`` that hold an MPI record, reading no further
    than the chunk in which the last of them showed its first."""
    found: set[int] = set()
    chunks = read(sorted(locations))
    try:
        for chunk in chunks:
            found |= {loc for loc, ev in chunk.items() if loc not in found and has_mpi(ev)}
            if found >= locations:
                break
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return found


def renamed(defs: Definitions, ranks: dict[int, int]) -> Definitions:
    """``defs`` with each communicator listing the thread ``ranks`` names in place
    of the listed location (the list as read kept in :attr:`Comm.listed`; ``defs``
    renamed before count as read)."""
    comms = {}
    for cid, c in defs.comms.items():
        members = tuple(ranks.get(m, m) for m in c.written) if defs.is_rank_comm(c) \
            else c.written
        comms[cid] = dataclasses.replace(
            c, members=members, listed=None if members == c.written else c.written)
    if all(comms[cid] == c for cid, c in defs.comms.items()):
        return defs
    return dataclasses.replace(defs, comms=comms)


def for_file(path: str, defs: Definitions, read: Reader) -> Definitions:
    """``defs`` of the trace at ``path`` with each rank that calls MPI from another
    thread mapped to that thread (module docstring); ``read(locations)`` reads
    chunks of those locations' records. Answered once per file and content
    (:func:`remember`)."""
    if not other_threads(defs):
        return defs
    ranks = recalled(path)
    if ranks is None:
        ranks = found_by_reading(defs, read)
        remember(path, ranks)
    return renamed(defs, ranks)


def for_selection(path: str, defs: Definitions) -> Definitions:
    """``defs`` of a read of some locations of ``path`` only, which reads no other
    location's records: the ranks as this process learned them (a whole read of the
    file, or the distributed command's agreement, :func:`remember`), else as
    listed."""
    return renamed(defs, recalled(path) or {}) if other_threads(defs) else defs


#: the answers by (file, (size, modification time)), the latest few
_ANSWERS: dict[tuple[str, tuple[int, int]], dict[int, int]] = {}
_LOCK = threading.Lock()


def _key(path: str) -> tuple[str, tuple[int, int]] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), (st.st_size, st.st_mtime_ns)


def remember(path: str, ranks: dict[int, int]) -> None:
    """Keep ``ranks`` (:func:`rank_threads`) as the answer for the file ``path``
    (thread-safe: the tests' ranks are threads of one process)."""
    key = _key(path)
    if key is not None:
        with _LOCK:
            _ANSWERS.pop(key, None)
            while len(_ANSWERS) >= 16:
                _ANSWERS.pop(next(iter(_ANSWERS)))
            _ANSWERS[key] = dict(ranks)


def recalled(path: str) -> dict[int, int] | None:
    """The answer :func:`remember` kept for the file ``path`` as it is now, or None."""
    key = _key(path)
    if key is None:
        return None
    with _LOCK:
        return _ANSWERS.get(key)
