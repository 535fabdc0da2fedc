"""The OTF2 C library's diagnostics, caught and put in words: its error callback
(collected in ``_diagnostics`` instead of printed), the words for its error codes
and short messages, and the failures raised inside the ``otf2`` package's reader
callbacks (which the package prints and swallows), kept so that a message can name
the record kind, location or undefined reference."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import platform
import struct
import sys
import traceback
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import _otf2
from _otf2.Config import conf
from otf2.error import Error as _Otf2Error

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
