"""Read a written OTF2 archive back before it is committed: are all its records there?

A write that the file system cut short (a full disk, a file-size limit) can leave
event files that end in the middle of a chunk while every OTF2 call reported
success; ``otf2-print`` then stops with INVALID_DATA. :func:`check_archive`
re-reads the staged archive's global definitions and counts each location's
event records with the OTF2 library's local event readers (no callback, so no
Python call per record: about 6 million records/s, benchmarks/output_check.py),
and compares three numbers per location: the records handed to the writer, the
records in its event file, and the ``numberOfEvents`` of its Location
definition. Any difference is an :class:`~compensate.formats.paths.OutputError`,
raised before the output is moved into place.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable

import _otf2

from compensate.formats.otf2.damage import _probe_calls
from compensate.formats.otf2.globaldefs import read_registry
from compensate.formats.otf2.library import _capture_diagnostics, _describe, _diagnostics
from compensate.formats.outputerror import OutputError

__all__ = ["HINT", "check_archive", "count_events", "declared_events"]

#: what a record lost between the writer and the file usually means
HINT = "a full disk or a file-size limit?"

_ALL = 0xFFFFFFFFFFFFFFFF


def _fail(anchor: str, reason: str) -> OutputError:
    return OutputError(reason, file=anchor)


def declared_events(anchor: str) -> dict[int, int]:
    """Each Location definition's ``numberOfEvents`` in the archive's global
    definitions (OutputError if they cannot be read back)."""
    with _capture_diagnostics():
        try:
            handle = _otf2.Reader_Open(anchor)
            try:
                _otf2.Reader_SetSerialCollectiveCallbacks(handle)
                registry, _raw = read_registry(handle, anchor)
            finally:
                _otf2.Reader_Close(handle)
        except Exception as exc:  # the otf2 package's or the library's failure
            raise _fail(anchor, "the output's definitions cannot be read back: "
                        f"{_describe(exc)} ({HINT})") from None
    return {int(loc._ref): int(loc.number_of_events) for loc in registry.locations}


def count_events(anchor: str, locations: Iterable[int]) -> dict[int, tuple[int, str]]:
    """Each location's records in its event file of the archive ``anchor``, and
    why the count stops short ("" if the file was read to its end), read one
    location after the other (one event file open at a time)."""
    refs = [int(r) for r in locations]
    read = _probe_calls()[0]  # OTF2_EvtReader_ReadEvents: its code and its count
    counts: dict[int, tuple[int, str]] = {}
    with _capture_diagnostics():
        try:
            handle = _otf2.Reader_Open(anchor)
            try:
                _otf2.Reader_SetSerialCollectiveCallbacks(handle)
                for ref in refs:
                    _otf2.Reader_SelectLocation(handle, ref)
                if refs:
                    _otf2.Reader_OpenEvtFiles(handle)
                for ref in refs:
                    counts[ref] = _count_one(handle, ref, read)
                if refs:
                    _otf2.Reader_CloseEvtFiles(handle)
            finally:
                _otf2.Reader_Close(handle)
        except Exception as exc:  # the otf2 package's or the library's failure
            raise _fail(anchor, "the output's event files cannot be read back: "
                        f"{_describe(exc)} ({HINT})") from None
    return counts


def _count_one(handle: object, ref: int, read: object) -> tuple[int, str]:
    mark = len(_diagnostics)
    reader = _otf2.Reader_GetEvtReader(handle, ref)
    n = ctypes.c_uint64(0)
    try:
        rc = read(ctypes.cast(reader, ctypes.c_void_p), _ALL, ctypes.byref(n))
    finally:
        _otf2.Reader_CloseEvtReader(handle, reader)
    if not rc:
        return int(n.value), ""
    texts = [text for _code, text in _diagnostics[mark:] if text]
    why = _otf2.Error_GetName(_otf2.ErrorCode(rc))
    return int(n.value), f"{why}: {texts[0]}" if texts else why


def check_archive(anchor: str, written: dict[int, int], *, definitions: bool = True,
                  events: bool = True) -> None:
    """Raise OutputError unless the archive ``anchor`` holds what was written:
    ``written`` maps each location the writer wrote to the records handed to it.
    ``definitions``: the global definitions are read back, must define exactly
    these locations (a writer of every location) or at least them, and declare
    these counts; ``events``: each location's event file holds that many
    records, read to its end."""
    if definitions:
        declared = declared_events(anchor)
        for ref, n in sorted(written.items()):
            if ref not in declared:
                raise _fail(anchor, f"the output is incomplete: location {ref} is not "
                            f"defined in its definitions ({HINT})")
            if declared[ref] != n:
                raise _fail(anchor, f"the output's definitions declare {declared[ref]:,} "
                            f"records for location {ref}, {n:,} were written")
    if not events:
        return
    counts = count_events(anchor, written)
    for ref, n in sorted(written.items()):
        got, why = counts[ref]
        if got != n or why:
            broken = f"; its event file breaks off: {why}" if why else ""
            raise _fail(anchor, f"the output is incomplete: location {ref} has {got:,} of "
                        f"{n:,} records written{broken} ({HINT})")
