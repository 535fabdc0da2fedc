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
import sys
import threading
from collections.abc import Generator
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
        _previous_callback = _register_callback(ctypes.cast(_ERROR_CALLBACK, ctypes.c_void_p))
    _capture_depth += 1
    try:
        yield
    finally:
        _capture_depth -= 1
        if _capture_depth == 0:
            _register_callback(_previous_callback)
            _diagnostics.clear()


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


def _describe(exc: BaseException) -> str:
    """One line explaining a library failure.

    For a failing OTF2 call the exception only says "INVALID (1): Unknown error
    code"; the first diagnostic the C library emitted names the real cause
    (e.g. "File or directory does not exist: POSIX: 'x/traces.otf2'")."""
    msg = ""
    if isinstance(exc, _otf2.Error) and _diagnostics:
        code, text = _diagnostics[0]
        try:
            what = _otf2.Error_GetDescription(_otf2.ErrorCode(code))
        except Exception:  # unknown code: keep the text alone
            what = None
        msg = f"{what}: {text}" if what and text else (text or what or "")
    if not msg:
        msg = str(exc)
        if not isinstance(exc, (_otf2.Error, _Otf2Error)) or not msg:
            msg = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return " ".join(msg.split())


@contextlib.contextmanager
def _library_errors(path: str, action: str) -> Generator[None, None, None]:
    """Turn any exception from the otf2 library into a one-line TraceError.

    The ``otf2`` package prints the traceback of an exception raised in one of
    its reader callbacks (a record naming a definition the archive lacks) on
    ``sys.stderr`` and the C library then reports only INTERRUPTED_BY_CALLBACK:
    what is printed meanwhile is held back (in a single-threaded process), and
    on a failure the traceback's last line becomes the reason; without one it is
    printed as it came."""
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
            except (Refusal, MemoryError, KeyboardInterrupt):  # (TraceError, OutputError)
                raise
            except Exception as exc:
                reason = _describe(exc)
                text = held.getvalue()
                if "Traceback (most recent call last)" in text:
                    lines = [x.strip() for x in text.splitlines() if x.strip()]
                    reason = f"{lines[-1]} (in a reader callback; {reason})"
                    held = io.StringIO()
                raise TraceError(f"{action}: {reason}", source=path) from exc
    finally:
        if held.getvalue() and sys.stderr is not None:  # printed as it came, after
            sys.stderr.write(held.getvalue())


@contextlib.contextmanager
def _library_call(path: str, action: str, point: str) -> Generator[None, None, None]:
    """:func:`_library_errors` around calls into the C library that call back into
    Python (flushes, memory and error callbacks, the reader's event callbacks): a
    signal meanwhile is recorded and raised when the call returns
    (:func:`compensate.interrupt.deferred`; ``point`` names it for the test hook)."""
    with interrupt.deferred(point), _library_errors(path, action):
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
