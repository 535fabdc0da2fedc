"""Which location's files of a damaged OTF2 archive are at fault: the global event
reader says only that some location failed. Each location is read again alone
(:func:`locate_damage`), and every file must end with OTF2's end-of-file mark
(:func:`check_file_ends`): the library reads past a cut file's end into bytes left
in its buffers, which may complete the last record."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import _otf2
from _otf2.Config import conf

from compensate.formats.otf2.diagnostics import (
    _capture_diagnostics,
    _diagnostics,
    _otf2_code,
    code_words,
)
from compensate.model import TraceError

_probe_lib: dict[str, Any] = {}

#: one callback for every record kind: the OTF2 library reads (and checks) a
#: record's fields only for a kind that has a callback (ignores its arguments)
_NO_OP = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)


def _probe_calls() -> Any:
    """The OTF2 library through a handle of its own (the bindings set argument
    types on theirs): ``(ReadEvents, [every EvtReaderCallbacks setter])``."""
    if "lib" not in _probe_lib:
        lib = ctypes.CDLL(conf.lib._name)
        read = lib.OTF2_EvtReader_ReadEvents
        read.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]
        read.restype = ctypes.c_int
        setters = []
        for name in dir(_otf2):
            if name.startswith("EvtReaderCallbacks_Set") and name.endswith("Callback"):
                fn = getattr(lib, f"OTF2_{name}", None)
                if fn is not None:
                    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
                    setters.append(fn)
        _probe_lib["lib"] = (read, setters)
    return _probe_lib["lib"]


def _count_records(evt: Any, limit: int) -> tuple[int, int]:
    """(OTF2 error code, records read before it) of reading the local event reader
    ``evt`` to its end, every record's fields read (:data:`_NO_OP`), at most
    ``limit`` records: a cut file's last chunk is read on into whatever the
    library's buffer holds, which may never end (a file of N bytes holds fewer
    than N records)."""
    read, setters = _probe_calls()
    callbacks = _otf2.EvtReaderCallbacks_New()
    try:
        for setter in setters:
            setter(ctypes.cast(callbacks, ctypes.c_void_p), ctypes.cast(_NO_OP, ctypes.c_void_p))
        _otf2.EvtReader_SetCallbacks(evt, callbacks, None)
    finally:
        _otf2.EvtReaderCallbacks_Delete(callbacks)
    count = ctypes.c_uint64(0)
    rc = read(ctypes.cast(evt, ctypes.c_void_p), limit, ctypes.byref(count))
    return int(rc), int(count.value)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


@dataclass
class Damage:
    """A location whose files cannot be read: the record its events fail at
    (None: its local definitions fail) and why, in words."""

    location: int
    record: int | None
    reason: str


def _probe(anchor: str, ref: int) -> Damage | None:
    """Read location ``ref`` of ``anchor`` alone (module comment); None if it reads."""
    folder = os.path.splitext(anchor)[0]
    base = os.path.basename(folder)
    defs = os.path.join(folder, f"{ref}.def")
    start = len(_diagnostics)
    reader = _otf2.Reader_Open(anchor)
    try:
        _otf2.Reader_SetSerialCollectiveCallbacks(reader)
        _otf2.Reader_SelectLocation(reader, ref)
        if os.path.exists(defs):
            try:
                _otf2.Reader_OpenDefFiles(reader)
                try:
                    def_reader = _otf2.Reader_GetDefReader(reader, ref)
                    _otf2.Reader_ReadAllLocalDefinitions(reader, def_reader)
                    _otf2.Reader_CloseDefReader(reader, def_reader)
                finally:
                    _otf2.Reader_CloseDefFiles(reader)
            except _otf2.Error as exc:
                return Damage(ref, None, f"its local definition file {base}/{ref}.def cannot be "
                              f"read: {_probe_words(exc, start)}")
        _otf2.Reader_OpenEvtFiles(reader)
        try:
            rc, count = _count_records(_otf2.Reader_GetEvtReader(reader, ref),
                                       _file_size(os.path.join(folder, f"{ref}.evt")))
        except _otf2.Error as exc:  # (a missing file: no reader)
            return Damage(ref, 0, f"its event file {base}/{ref}.evt cannot be read: "
                          f"{_probe_words(exc, start)}")
        if rc:
            words = code_words(*_diagnostics[start]) if len(_diagnostics) > start \
                else code_words(rc)
            return Damage(ref, count, f"its event file {base}/{ref}.evt cannot be "
                          f"read: {words}")
        return None
    finally:
        with contextlib.suppress(_otf2.Error):
            _otf2.Reader_Close(reader)


def _probe_words(exc: BaseException, start: int) -> str:
    """The words for a failed OTF2 call of :func:`_probe`: the first diagnostic it
    gave (its code and text), else the exception's code."""
    if len(_diagnostics) > start:
        return code_words(*_diagnostics[start])
    code = _otf2_code(exc)
    return code_words(code if code is not None else 0)


#: the last bytes of every OTF2 buffer file (events, definitions) the OTF2 library
#: writes: its end-of-file record, then its end-of-buffer byte (which otf2-print
#: does not need: a file without it is read)
_FILE_ENDS = (b"\x02\x01", b"\x02")


def check_file_ends(anchor: str, locations: Iterable[int], global_defs: bool = False) -> None:
    """TraceError naming the location (or the global definition file) whose event
    or definition file does not end with OTF2's end-of-file record: a file cut
    short, or empty (the OTF2 library reports an empty local definition file as
    damaged, though otf2-print goes on to print the location's records). The OTF2
    library does not bound what it reads by the file's length: it goes on in its
    chunk buffer past the end, whose bytes are left from earlier
    use, so that a file cut short was read as complete in some runs (the last
    record taken from those bytes, exit 0) and refused in others. Only files that
    exist are checked (a missing one is the OTF2 library's to report); one read
    of two bytes per file."""
    folder = os.path.splitext(anchor)[0]
    base = os.path.basename(folder)
    if global_defs:
        _check_end(folder + ".def", "the global definition file", folder + ".def", None)
    for ref in locations:
        for ext, what in (("evt", "its event file"), ("def", "its local definition file")):
            file = os.path.join(folder, f"{ref}.{ext}")
            _check_end(file, f"{what} {base}/{ref}.{ext}", anchor, int(ref))


def _check_end(file: str, what: str, source: str, location: int | None) -> None:
    try:
        with open(file, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 2, 0))
            tail = f.read(2)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TraceError(f"{what} cannot be read: {exc.strerror or exc}", source=source,
                         location=location) from None
    if size == 0:  # (a location without local definitions has no file: OTF2
        # reports an empty one as damaged, "This is no chunk header!", and what it
        # held, mapping tables and clock offsets, cannot be told from the records)
        raise TraceError(f"{what} is empty", source=source, location=location,
                         index=0 if location is not None and file.endswith(".evt")
                         else None)
    if not tail.endswith(_FILE_ENDS):
        record = None
        if location is not None and file.endswith(".evt"):  # the first record it cuts
            with _capture_diagnostics(), contextlib.suppress(_otf2.Error):
                found = _probe(source, location)
                record = found.record if found is not None else None
        why = "it lacks OTF2's end-of-file record"
        if record is not None:
            why = f"the file ends inside this record ({why})"
        raise TraceError(f"{what} is cut short: {why}", source=source, location=location,
                         index=record)


def locate_damage(anchor: str, locations: Iterable[int]) -> Damage | None:
    """The first of ``locations`` (in that order) whose local definitions or event
    file the OTF2 library cannot read, read alone (module comment); None if each
    reads. Called with OTF2's diagnostics captured."""
    for ref in locations:
        try:
            found = _probe(anchor, int(ref))
        except _otf2.Error:  # the archive itself: not one location's fault
            return None
        if found is not None:
            return found
    return None
