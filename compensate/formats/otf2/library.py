"""What the OTF2 reader and writer share: the archive metadata kept beside the
columns (:class:`Otf2Archive`), OTF2's "undefined" constants, and the routing of
the OTF2 C library's failures into one-line :class:`~compensate.model.TraceError`
messages (the ``otf2`` bindings raise uninformative exceptions, "INVALID (1):
Unknown error code", and let the library print to stderr): the diagnostics and
their words are :mod:`~compensate.formats.otf2.diagnostics`', finding the damaged
location is :mod:`~compensate.formats.otf2.damage`'s."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import threading
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

import _otf2
from _otf2.Config import conf
from otf2.error import Error as _Otf2Error

import compensate.interrupt as interrupt
from compensate.errors import Refusal
from compensate.formats.otf2.damage import check_file_ends as check_file_ends
from compensate.formats.otf2.damage import locate_damage
from compensate.formats.otf2.diagnostics import (
    _CODE_WORDS,
    _callback_failures,
    _capture_diagnostics,
    _code_name,
    _describe,
    _diagnostics,
    callback_failure,
)
from compensate.formats.otf2.diagnostics import code_words as code_words
from compensate.formats.otf2.diagnostics import damage_hint as damage_hint
from compensate.model import TraceError


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
    ``trace_length`` are the input's values (the output's are its own records',
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
    #: every global definition of the input as it was read, in file order
    #: (:func:`~compensate.formats.otf2.globaldefs.read_registry`): the writer
    #: writes these (empty: the registry's definitions)
    raw_definitions: tuple = ()
    #: the input archive the records were read from by the C path (their payloads
    #: are ``native.NATIVE``): the writer copies them from it (None: not read so)
    native_source: str | None = None


# ---------------------------------------------------------------------------
# Routing OTF2's C-level diagnostics into TraceError messages.


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
