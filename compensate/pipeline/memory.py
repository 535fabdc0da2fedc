"""The heap between segments: a streamed run's memory stays bounded by a segment
only if what one segment freed is reused by the next or handed back (glibc's
malloc; a no-op elsewhere); and running out of it: a MemoryError anywhere in a run
becomes one pre-formatted line (:class:`OutOfMemory`, exit 3, docs/messages.md).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator

from compensate.errors import Refusal

#: Free heap memory (bytes) the process may keep between segments for the next
#: one to reuse (:func:`release_memory`), at least; a run of larger segments keeps
#: :data:`HEAP_PER_RECORD` bytes per segment record (:func:`heap_to_keep`).
KEEP_FREE_HEAP = 64 << 20
#: The heap a segment frees, per record of the segment, that the next one takes
#: again (its columns, the matching, the engine's graph and rules): kept between
#: segments, or the next segment faults it all in again (docs/performance.md)
HEAP_PER_RECORD = 512
#: what :func:`release_memory` keeps now (set by :func:`steady_malloc`)
_keep = [KEEP_FREE_HEAP]


def heap_to_keep(segment_records: int) -> int:
    """The free heap (bytes) to keep between segments of ``segment_records``
    records: :data:`HEAP_PER_RECORD` each, at least :data:`KEEP_FREE_HEAP`."""
    return max(KEEP_FREE_HEAP, HEAP_PER_RECORD * int(segment_records))


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``fordblks``: free bytes held by malloc)."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def libc_release(keep: int | list[int]) -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` once malloc holds more than ``keep`` free bytes
    (``mallinfo2``; every time if glibc is older than 2.33); a no-op elsewhere.
    ``keep`` as a one-element list: read at each call."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (AttributeError, OSError):
        return lambda: None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    info = getattr(libc, "mallinfo2", None)
    if info is None:
        return lambda: trim(0)
    info.argtypes, info.restype = [], MallInfo2

    bound = keep if isinstance(keep, list) else [keep]

    def release() -> None:
        if info().fordblks > bound[0]:
            trim(0)
    return release


def steady_malloc(keep: int = KEEP_FREE_HEAP) -> None:
    """Fix glibc's two malloc thresholds for a streamed run (a no-op elsewhere):
    blocks under 32 MiB from the heap (``M_MMAP_THRESHOLD``), and the heap's top
    handed back by ``free`` only above ``keep`` bytes (``M_TRIM_THRESHOLD``; the
    same bound :func:`release_memory` keeps between segments).

    By default glibc starts with 128 KiB / 256 KiB and raises both as larger
    mapped blocks are freed, so a run's first segments get their arrays as fresh
    mappings and hand them back at once, and fault them in again the next time.
    Fixed from the start (32 MiB is glibc's own upper bound for the adjusted
    threshold), the segments reuse the heap instead (docs/performance.md). Called
    by the command, not on import: the thresholds are the whole process's.
    ``keep`` is also what :func:`release_memory` keeps from then on
    (:func:`heap_to_keep` of the run's segment size)."""
    _keep[0] = keep
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (AttributeError, OSError):
        return
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc's thresholds, not musl's stub
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, min(keep, _INT_MAX))  # (an int: segments of 4 M records on)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_INT_MAX = (1 << 31) - 1


#: Hand the heap a segment freed back to the system before the next segment, once
#: it holds more free bytes than the run keeps (:data:`KEEP_FREE_HEAP`, or what
#: :func:`steady_malloc` set). Without trimming, every segment's transient arrays
#: leave free holes that the next segment's allocations only partly reuse, and the
#: peak keeps creeping up with the number of segments. Trimming after every
#: segment instead makes the next segment fault all its memory in again; keeping
#: about one segment's free heap avoids both (docs/performance.md).
release_memory = libc_release(_keep)


class OutOfMemory(Refusal):
    """The run ran out of memory (a MemoryError): one line, nothing written."""


#: what a run was doing when it ran out of memory, as the message says it
DOING = ("matching", "fitting the network", "compensating", "streaming the trace",
         "running")


def _message(doing: str) -> str:
    return (f"out of memory while {doing}; nothing written; try without --in-memory / "
            f"with fewer records per segment (--segment-records)")


#: the refusals, made before they are needed: building a message when the memory
#: has run out could itself fail
_REFUSALS = {doing: OutOfMemory(_message(doing)) for doing in DOING}

#: memory held back from the start and let go when a MemoryError arrives, so that
#: the cleanup (removing the temporary output) and the message have room
RESERVE_BYTES = 16 << 20
_reserve: list[bytearray] = []


def reserve_memory() -> None:
    """Hold :data:`RESERVE_BYTES` back for :func:`out_of_memory` (once)."""
    if not _reserve:
        with contextlib.suppress(MemoryError):
            _reserve.append(bytearray(RESERVE_BYTES))


def out_of_memory(exc: BaseException, doing: str = "running") -> OutOfMemory:
    """The refusal for the MemoryError ``exc`` (its traceback let go: its frames
    hold the arrays that filled the memory), with the reserve released."""
    _reserve.clear()
    exc.__traceback__ = None
    exc.__context__ = None
    refusal = _REFUSALS.get(doing, _REFUSALS["running"])
    refusal.__traceback__ = None
    return refusal


@contextlib.contextmanager
def memory_guard(doing: str) -> Iterator[None]:
    """Turn a MemoryError inside the block into :class:`OutOfMemory` (``doing``: one
    of :data:`DOING`, what the message says the run was doing)."""
    reserve_memory()
    try:
        yield
    except MemoryError as exc:
        raise out_of_memory(exc, doing) from None


#: the least memory a run takes per record it holds (a trace read whole, a segment
#: with its matching and graph; docs/performance.md, "Memory"): more records held
#: than the machine has room for at this rate are refused (:func:`room_for`)
HELD_RECORD_BYTES = 300


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux's MemAvailable), or None
    where it is not known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def room_for(records: int, available: int | None) -> bool:
    """Whether ``records`` held at :data:`HELD_RECORD_BYTES` each fit in
    ``available`` bytes (None: not known, so yes). On Linux an allocation past the
    memory available is not a MemoryError but the kernel killing the process
    without a word: a run asks this first and refuses in one line instead."""
    return available is None or records * HELD_RECORD_BYTES <= available


def refuse_read_buffers(path: str, locations: int | None = None, who: str = "",
                        remedy: str = "") -> None:
    """Refuse (:class:`OutOfMemory`, exit 3, one line) a read of ``locations``
    locations of ``path`` (None: all) whose reader's buffers alone
    (:func:`compensate.formats.read_buffers`: OTF2's event chunk per location,
    16 MiB in an EZTrace archive) need more memory than this machine has
    available, before the library fills them and the kernel kills the process
    with no word. ``who``: the rank, as the line names it; ``remedy``: what reads
    fewer locations. An input whose buffers cannot be read is not refused here
    (its read says what is wrong)."""
    from compensate.formats import read_buffers
    from compensate.model import TraceError

    available = available_memory()
    if available is None:
        return
    try:
        per_location, once, every = read_buffers(path)
    except (OSError, ValueError, TraceError):
        return
    locations = every if locations is None else locations
    need = locations * per_location + once
    if need > available:
        raise OutOfMemory(
            f"{path}: {who}reading its {locations:,} location{'s' * (locations != 1)} "
            f"needs about "
            f"{need / 2**20:,.0f} MiB for the OTF2 library's read buffers alone (an event "
            f"chunk of {per_location / 2**20:g} MiB per location, as the archive's writer "
            f"sized them), more than the {available / 2**20:,.0f} MiB available; nothing "
            f"written{remedy}")


def gib(n: float) -> str:
    """``n`` bytes in GiB, as the refusals say it."""
    return f"{n / 2**30:.1f} GiB"
