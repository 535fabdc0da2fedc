"""What the OTF2 reader and writer share: the archive metadata kept beside the
columns (:class:`Otf2Archive`), OTF2's "undefined" constants, and the routing of
the OTF2 C library's diagnostics into one-line :class:`~compensate.model.TraceError`
messages (the ``otf2`` bindings raise uninformative exceptions, "INVALID (1):
Unknown error code", and let the library print to stderr)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import os
import platform
import struct
import sys
import threading
import traceback
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

import _otf2
from _otf2.Config import conf
from otf2.error import Error as _Otf2Error

import compensate.interrupt as interrupt
from compensate.errors import Refusal
from compensate.model import (
    TraceError,
)


def _fix_inter_comm() -> None:
    """Repair the ``otf2`` package's InterComm definition (MPI inter-communicators,
    which Score-P defines for MPI_Intercomm_create): the class inherits Comm's fields
    and appends its own, so that the reader's callback puts group B into the
    parent-communicator field and fails on an unknown communicator reference, which
    made every archive with an inter-communicator unreadable. Its fields become those
    of OTF2's InterComm record (name, group A, group B, common communicator, flags),
    which the package's writer already emits. Nothing changes where the package has
    it right."""
    from otf2 import definitions as odef

    cls = getattr(odef, "InterComm", None)
    fields = getattr(cls, "_fields", ())
    names = [f.name for f in fields]
    if names == ["name", "group", "parent", "flags", "groupA", "groupB", "parent", "flags"]:
        # (the common communicator is a Comm: Comm's parent field, not the InterComm one)
        cls._fields = (fields[0], fields[4], fields[5], fields[2], fields[7])


_fix_inter_comm()

#: Events fetched per call into the OTF2 global event reader (the bindings default
#: to 100, which makes reading dominated by per-batch overhead).
BATCH_EVENTS = 10000

_UINT32_UNDEF = 0xFFFFFFFF
_UINT64_UNDEF = 0xFFFFFFFFFFFFFFFF
_INT64_MAX = 2**63 - 1
_INT64_UNDEF = -(2**63)  # OTF2_UNDEFINED_INT64, e.g. an unknown ProgramEnd exit status
_TIMESTAMP_UNDEF = _UINT64_UNDEF


@dataclass
class Otf2Archive:
    """Everything of an OTF2 archive beyond the columns, kept so that
    :func:`write_otf2` can reproduce the archive (stored in ``Definitions.otf2``).

    ``registry`` is the ``otf2`` DefinitionRegistry of the input: every global
    definition with its original reference; the payload event objects point into it,
    so it must be written together with them. ``global_offset`` and
    ``trace_length`` are the input's values; the writer keeps them (the length
    grows only if a record written lies beyond it, see
    :func:`compensate.formats.otf2.write.clock_properties`).
    """

    registry: Any
    timer_resolution: int
    global_offset: int
    trace_length: int
    realtime_timestamp: int
    creator: str = ""
    description: str = ""
    machine_name: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    chunk_size_events: int | None = None
    chunk_size_definitions: int | None = None
    trace_id: int = 0
    version: tuple[int, ...] = ()
    location_order: tuple[int, ...] = ()
    #: the input archive the records were read from by the C path (their payloads
    #: are ``native.NATIVE``): the writer copies them from it (None: not read so)
    native_source: str | None = None


# ---------------------------------------------------------------------------
# Routing OTF2's C-level diagnostics into TraceError messages.

# OTF2_ErrorCallback(void* userData, const char* file, uint64_t line,
#                    const char* function, OTF2_ErrorCode code,
#                    const char* msgFormatString, va_list va)
_ERROR_CALLBACK_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
    ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
)


def _load_vsnprintf() -> Any:
    """libc's vsnprintf, if a ``va_list`` argument can be passed on as a pointer.

    That holds where ``va_list`` is an array type or a large struct passed by
    reference (x86-64 SysV, AArch64); elsewhere the messages stay unformatted."""
    if sys.platform == "win32" or platform.machine().lower() not in {
        "x86_64", "amd64", "aarch64", "arm64"
    }:
        return None
    try:
        fn = ctypes.CDLL(None).vsnprintf
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


_VSNPRINTF = _load_vsnprintf()
_diagnostics: list[tuple[int, str]] = []


def _on_otf2_error(_user, _file, _line, _func, code, fmt, va):  # C callback signature
    """Collect one OTF2 diagnostic instead of printing it to stderr."""
    try:
        text = ""
        if fmt:
            if _VSNPRINTF is not None:
                buf = ctypes.create_string_buffer(1024)
                _VSNPRINTF(buf, len(buf), fmt, va)
                text = buf.value.decode("utf-8", "replace")
            else:
                text = fmt.decode("utf-8", "replace")
        _diagnostics.append((int(code), text))
    except BaseException:  # never raise into C (a KeyboardInterrupt included)
        pass
    return code


_ERROR_CALLBACK = _ERROR_CALLBACK_TYPE(_on_otf2_error)


def _register_callback(callback: Any) -> Any:
    """Install an OTF2 error callback; returns the previous one (None if not possible)."""
    try:
        fn = conf.lib.OTF2_Error_RegisterCallback
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_void_p
    return fn(callback, None)


_capture_depth = 0
_previous_callback: Any = None


@contextlib.contextmanager
def _capture_diagnostics() -> Generator[None, None, None]:
    """Collect OTF2's diagnostics in ``_diagnostics`` for the duration (re-entrant);
    empty again afterwards, so that a failure outside any capture never reports
    an earlier call's diagnostic (the C reader's ``_raise`` reads the list)."""
    global _capture_depth, _previous_callback
    if _capture_depth == 0:
        _diagnostics.clear()
        _callback_failures.clear()
        _previous_callback = _register_callback(ctypes.cast(_ERROR_CALLBACK, ctypes.c_void_p))
    _capture_depth += 1
    try:
        yield
    finally:
        _capture_depth -= 1
        if _capture_depth == 0:
            _register_callback(_previous_callback)
            _diagnostics.clear()
            _callback_failures.clear()


def damage_hint() -> str:
    """For a timestamp going backwards: a clause to append that names the other
    cause than a clock (what the OTF2 library reported while reading, if anything). A
    truncated or damaged event file makes the library deliver a location's records
    again from a bad chunk on, which shows as time going backwards (probe 14a)."""
    texts = [text for _code, text in _diagnostics if text]
    if texts:
        return (f"; the OTF2 library reported while reading: {' '.join(texts[0].split())} "
                f"(is an event file of the archive truncated or damaged?)")
    # (OTF2 3.x reports nothing through its error callback here: otf2-print says "This
    # is no chunk header!" and stops)
    return ("; if the clock was monotonic, the location's event file may be truncated or "
            "damaged (otf2-print then stops at a bad chunk)")


#: what the OTF2 library's error codes met on damaged inputs mean, in words (the
#: library's own description follows where it has one that says more)
_CODE_WORDS = {
    "INVALID_DATA": "invalid data",
    "INVALID_ARGUMENT": "invalid data",
    "INTEGRITY_FAULT": "invalid data",
    "INVALID_RECORD": "invalid data",
    "INVALID_SIZE_GIVEN": "invalid data",
    "ENOENT": "the file does not exist",
    "EACCES": "permission denied",
    "EISDIR": "a directory where a file must be",
    "EIO": "an input/output error",
    "FILE_DOES_NOT_EXIST": "the file does not exist",
    "FILE_INTERACTION": "a file of the archive cannot be read",
    "FILE_CAN_NOT_OPEN": "a file of the archive cannot be opened",
    "END_OF_FUNCTION": "the file ends inside a record",
    "INDEX_OUT_OF_BOUNDS": "the file ends inside a record",
    "MEM_ALLOC_FAILED": "out of memory",
    "MEM_FAULT": "out of memory",
    "INTERRUPTED_BY_CALLBACK": "reading stopped in a reader callback",
}

#: the OTF2 library's short diagnostics, in words
_TEXT_WORDS = {
    "This is no chunk header!": "the file ends inside a record or a chunk is damaged",
    "Read of chunk header failed!": "the file ends inside a record or a chunk is damaged",
    "Load of next chunk failed!": "the file ends inside a record or a chunk is damaged",
}


def _code_name(code: int) -> str:
    """The OTF2 error code's name ("INVALID_DATA"), "" if it has none."""
    try:
        return str(_otf2.Error_GetName(_otf2.ErrorCode(code)))
    except Exception:  # an unknown code
        return ""


def code_words(code: int, text: str = "") -> str:
    """What an OTF2 error ``code`` (with the library's diagnostic ``text``, if any)
    means, in words: a short phrase, then the library's own words in
    parentheses ("invalid data (the OTF2 library: This is no chunk header!)")."""
    text = " ".join(text.split())
    phrase = _TEXT_WORDS.get(text) or _CODE_WORDS.get(_code_name(code))
    if phrase is None:
        try:
            phrase = str(_otf2.Error_GetDescription(_otf2.ErrorCode(code)))
        except Exception:  # an unknown code
            phrase = ""
        phrase = phrase if phrase and phrase != "Unknown error code" else "the OTF2 library failed"
    return f"{phrase} (the OTF2 library: {text})" if text and text != phrase else phrase


def _otf2_code(exc: BaseException) -> int | None:
    """The OTF2 error code an ``_otf2`` exception carries (None: not one)."""
    if not isinstance(exc, _otf2.Error):
        return None
    code = getattr(exc, "errcode", None)
    if code is None and exc.args:
        code = exc.args[0]
    try:
        return int(getattr(code, "value", code))
    except (TypeError, ValueError):
        return None


def _describe(exc: BaseException) -> str:
    """One line explaining a library failure, in words: never a Python
    exception's name or an OTF2 error code's.

    For a failing OTF2 call the exception only says "INVALID (1): Unknown error
    code"; the first diagnostic the C library emitted names the real cause
    (e.g. "File or directory does not exist: POSIX: 'x/traces.otf2'"), and the
    code becomes a phrase (:func:`code_words`)."""
    if isinstance(exc, _otf2.Error) and _diagnostics:
        code, text = _diagnostics[0]
        try:
            what = str(_otf2.Error_GetDescription(_otf2.ErrorCode(code)))
        except Exception:  # unknown code: keep the text alone
            what = ""
        if what == "Unknown error code":
            what = ""
        msg = f"{what}: {text}" if what and text else (text or what)
        if msg:
            return " ".join(msg.split())
    code = _otf2_code(exc)
    if code is not None:
        return code_words(code)
    return _exception_words(exc)


def _exception_words(exc: BaseException) -> str:
    """What a Python exception raised while reading or writing an archive says
    about the data, without its class name."""
    msg = " ".join(str(exc).split())
    if isinstance(exc, _Otf2Error):  # the otf2 package's own words
        return msg.removeprefix("Semantic error in the input trace: ") or "invalid data"
    if isinstance(exc, UnicodeDecodeError):
        return "text that is not valid UTF-8"
    if isinstance(exc, KeyError):
        return f"a reference to an undefined definition ({msg})"
    if isinstance(exc, OverflowError):
        return "a value out of range"
    if isinstance(exc, IndexError):
        return "a reference out of range"
    if isinstance(exc, struct.error) or type(exc).__module__ == "ctypes":
        return "a value of the wrong size"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"invalid data ({msg})" if msg else "invalid data"


# ---------------------------------------------------------------------------
# Exceptions raised in the otf2 package's reader callbacks. The package prints
# them (traceback.format_exc) and lets the library stop with
# INTERRUPTED_BY_CALLBACK: the exception itself is kept here instead, so that the
# message can name the definition or record it failed on.

_callback_failures: list[BaseException] = []


class _TracebackShim:
    """Stands for the ``traceback`` module in the ``_otf2`` callback wrappers:
    :func:`format_exc` also keeps the exception being handled."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def format_exc(*args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        if exc is not None and len(_callback_failures) < 8:
            _callback_failures.append(exc)
        return traceback.format_exc(*args, **kwargs)


def _keep_callback_failures() -> None:
    for name in ("GlobalDefReaderCallbacks", "GlobalEvtReaderCallbacks", "DefReaderCallbacks",
                 "EvtReaderCallbacks"):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(f"_otf2.{name}")
            if getattr(module, "traceback", None) is traceback:
                module.traceback = _TracebackShim()


_keep_callback_failures()


def _camel(name: str) -> str:
    """``_mpi_send`` -> ``MpiSend`` (a reader callback's name -> its record's)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _type_label(def_type: Any) -> str:
    if def_type is str:
        return "String"
    return getattr(def_type, "__name__", "definition")


@dataclass
class CallbackFailure:
    """Where an exception in a reader callback arose, from its frames: the
    location (an event callback's), the record's or definition's kind, and the
    kind and number of an undefined reference."""

    reason: str
    location: int | None = None
    global_definitions: bool = False


def callback_failure(exc: BaseException) -> CallbackFailure:
    """The words for ``exc``, raised in a reader callback (module comment)."""
    location = record = definition = undefined = None
    global_defs = False
    for frame, _line in traceback.walk_tb(exc.__traceback__):
        name, local = frame.f_code.co_name, frame.f_locals
        filename = frame.f_code.co_filename
        if name == "wrapper" and filename.endswith("GlobalDefReaderCallbacks.py"):
            global_defs = True
        elif name == "wrapper" and "location" in local and "time" in local:
            with contextlib.suppress(TypeError, ValueError):
                location = int(local["location"])
            record = _camel(getattr(local.get("func"), "__name__", "") or "") or None
        elif name == "callback" and "definition_type" in local:
            definition = _type_label(local["definition_type"])
        elif name == "_get" and "def_type" in local and "ref" in local:
            undefined = f"{_type_label(local['def_type'])} {local['ref']}"
        elif name == "__getitem__" and "ref" in local and undefined is None:
            kind = getattr(local.get("self"), "_default_type", None)
            undefined = f"{_type_label(kind)} {local['ref']}"
    subject = record or (f"a {definition} definition" if definition else "a record")
    if isinstance(exc, KeyError) and undefined:
        reason = f"{subject} refers to undefined {undefined}"
    else:
        reason = f"{subject}: {_exception_words(exc)}"
    return CallbackFailure(reason, location, global_defs)


# ---------------------------------------------------------------------------
# Finding the location whose files are damaged: the global event reader says only
# that a location failed, not which one. Each selected location is read again
# alone, its local definitions and then its records (every record's fields read,
# through one C-level no-op callback: about the C library's speed); the first that
# fails names the location and the record.

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


def _count_records(evt: Any) -> tuple[int, int]:
    """(OTF2 error code, records read before it) of reading the local event reader
    ``evt`` to its end, every record's fields read (:data:`_NO_OP`)."""
    read, setters = _probe_calls()
    callbacks = _otf2.EvtReaderCallbacks_New()
    try:
        for setter in setters:
            setter(ctypes.cast(callbacks, ctypes.c_void_p), ctypes.cast(_NO_OP, ctypes.c_void_p))
        _otf2.EvtReader_SetCallbacks(evt, callbacks, None)
    finally:
        _otf2.EvtReaderCallbacks_Delete(callbacks)
    count = ctypes.c_uint64(0)
    rc = read(ctypes.cast(evt, ctypes.c_void_p), _UINT64_UNDEF, ctypes.byref(count))
    return int(rc), int(count.value)


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
            rc, count = _count_records(_otf2.Reader_GetEvtReader(reader, ref))
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
    short (an empty local definition file is read as none, as otf2-print reads
    it). The OTF2 library does not bound what it reads by the file's length: it
    goes on in its chunk buffer past the end, whose bytes are left from earlier
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
    if size == 0:
        if file.endswith(".def") and location is not None:
            return  # (read as absent, as otf2-print does: a location may have none)
        raise TraceError(f"{what} is empty", source=source, location=location,
                         index=0 if location is not None else None)
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


@contextlib.contextmanager
def _library_errors(path: str, action: str, events: Iterable[int] | None = None,
                    definitions: bool = False) -> Generator[None, None, None]:
    """Turn any exception from the otf2 library into a one-line TraceError, in
    words (:func:`_describe`, :func:`callback_failure`).

    ``events``: the locations whose records are being read; a failure of the
    OTF2 library then names the location and record where that location's files
    stop being readable (:func:`locate_damage`). An exception in a reader
    callback names the record (its location; the caller adds the record's index)
    or the global definition it failed on (the file then is the archive's
    ``.def`` file). ``definitions``: the archive is opened and its global
    definitions read; a failure with an anchor file that opens names the ``.def``
    file.

    The ``otf2`` package prints the traceback of an exception raised in one of
    its reader callbacks on ``sys.stderr`` and the C library then reports only
    INTERRUPTED_BY_CALLBACK: what is printed meanwhile is held back (in a
    single-threaded process); without a failure it is printed as it came."""
    held = io.StringIO()
    # sys.stderr is the process's: held back only while no other thread runs (ranks
    # run as threads in the tests; a redirect interleaved with another thread's
    # would leave sys.stderr pointing at a dead buffer)
    alone = threading.active_count() == 1
    try:
        with _capture_diagnostics(), \
                contextlib.redirect_stderr(held) if alone else contextlib.nullcontext():
            try:
                yield
            except TraceError as exc:
                # (the C path's own line for a failing OTF2 call: located if it can be)
                located = _located(exc, path, events)
                if located is None:
                    raise
                raise located from exc
            except (Refusal, MemoryError, KeyboardInterrupt):  # (OutputError: the writer's)
                raise
            except Exception as exc:
                error = _translated(exc, path, action, events)
                if definitions and error.location is None and error.file == path \
                        and _anchor_opens(path):
                    error.update(file=os.path.splitext(path)[0] + ".def")
                if "Traceback (most recent call last)" in held.getvalue():
                    held = io.StringIO()
                raise error from exc
    finally:
        if held.getvalue() and sys.stderr is not None:  # printed as it came, after
            sys.stderr.write(held.getvalue())


def _anchor_opens(anchor: str) -> bool:
    """Whether the anchor file ``anchor`` is sound: the OTF2 library opens it and,
    where the global definition file exists, opens that with what the anchor
    says (its file substrate and compression); then the ``.def`` file is what a
    failure while reading the definitions concerns."""
    try:
        reader = _otf2.Reader_Open(anchor)
    except Exception:  # any failure: the anchor is what fails
        return False
    try:
        if os.path.exists(os.path.splitext(anchor)[0] + ".def"):
            _otf2.Reader_SetSerialCollectiveCallbacks(reader)
            defs = _otf2.Reader_GetGlobalDefReader(reader)
            _otf2.Reader_CloseGlobalDefReader(reader, defs)
        return True
    except Exception:  # the anchor's file settings
        return False
    finally:
        with contextlib.suppress(Exception):
            _otf2.Reader_Close(reader)


def _located(exc: TraceError, path: str, events: Iterable[int] | None) -> TraceError | None:
    """The located TraceError for ``exc``, a TraceError without a location that a
    failing OTF2 call gave while ``events`` were read (None: not such a one, or
    no location's files fail alone)."""
    if events is None or exc.location is not None or not _diagnostics:
        return None
    found = locate_damage(path, events)
    if found is None:
        return None
    return TraceError(found.reason, source=path, location=found.location, index=found.record)


def _translated(exc: BaseException, path: str, action: str,
                events: Iterable[int] | None) -> TraceError:
    """The TraceError for ``exc``, raised by the otf2 library (:func:`_library_errors`)."""
    if _callback_failures:
        failure = callback_failure(_callback_failures[0])
        if _diagnostics and _diagnostics[0][1]:  # e.g. a local definition file missing
            code, text = _diagnostics[0]
            phrase = _CODE_WORDS.get(_code_name(code))
            text = " ".join(text.split())
            failure.reason += (f" (the OTF2 library reported: "
                               f"{f'{phrase}: {text}' if phrase else text})")
        if failure.location is not None:
            return TraceError(failure.reason, source=path, location=failure.location)
        if failure.global_definitions:
            return TraceError(f"{action}: {failure.reason}",
                              source=os.path.splitext(path)[0] + ".def")
        return TraceError(f"{action}: {failure.reason}", source=path)
    if events is not None and isinstance(exc, _otf2.Error):
        found = locate_damage(path, events)
        if found is not None:
            return TraceError(found.reason, source=path, location=found.location,
                              index=found.record)
    return TraceError(f"{action}: {_describe(exc)}", source=path)


@contextlib.contextmanager
def _library_call(path: str, action: str, point: str, definitions: bool = False
                  ) -> Generator[None, None, None]:
    """:func:`_library_errors` around calls into the C library that call back into
    Python (flushes, memory and error callbacks, the reader's event callbacks): a
    signal meanwhile is recorded and raised when the call returns
    (:func:`compensate.interrupt.deferred`; ``point`` names it for the test hook)."""
    with interrupt.deferred(point), _library_errors(path, action, definitions=definitions):
        yield


def marker_count(anchor: str) -> int:
    """The markers (OTF2 Marker records of the archive's ``.marker`` file, which
    analysis tools such as Scalasca and Vampir add) of the archive ``anchor``; 0 for a
    path that is not an OTF2 anchor file or has no marker file. They are not carried
    into a compensated archive (their times are measured ones): the command says how
    many were left. An unreadable marker file counts as -1 (some, number unknown)."""
    base, ext = os.path.splitext(anchor)
    if ext != ".otf2" or not os.path.isfile(base + ".marker"):
        return 0
    mrc = importlib.import_module("_otf2.MarkerReaderCallbacks")  # (the module)

    count = [0]

    def on_marker(*_args: Any) -> int:
        count[0] += 1
        return 0  # OTF2_CALLBACK_SUCCESS

    # (straight through ctypes: the bindings' wrapper of this callback passes six
    # arguments to a converter that takes four, and so fails on every marker)
    callback = mrc._MarkerReaderCallback_FP_Marker(on_marker)
    try:
        reader = _otf2.Reader_Open(anchor)
        try:
            _otf2.Reader_SetSerialCollectiveCallbacks(reader)
            markers = _otf2.Reader_GetMarkerReader(reader)
            callbacks = _otf2.MarkerReaderCallbacks_New()
            try:
                conf.lib.OTF2_MarkerReaderCallbacks_SetMarkerCallback(callbacks, callback)
                # (not Reader_RegisterMarkerCallbacks: its error check compares
                # enums of two types and raises TypeError in otf2 3.x's bindings)
                _otf2.MarkerReader_SetCallbacks(markers, callbacks, None)
                _otf2.MarkerReader_ReadMarkers(markers, _UINT64_UNDEF)
            finally:
                _otf2.MarkerReaderCallbacks_Delete(callbacks)
        finally:
            _otf2.Reader_Close(reader)
    except (_Otf2Error, OSError, AttributeError, TypeError):
        return -1
    return count[0]
