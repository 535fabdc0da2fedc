"""The lexical rules of the ``.trace`` text format, shared by its reader and writer:
the magic line, quoting and escaping of values, comments, how values are shown
in error messages (docs/trace-format.md), the ``key=value`` fields the writer
makes of an OTF2 record object it has no syntax of its own for, and those of an
RMA record (:func:`text_fields`)."""

from __future__ import annotations

import enum
import re
from typing import Any

import numpy as np

from compensate.formats.fields import enum_name, enum_names, fields_of
from compensate.formats.rma import RMA_FIELDS, SYNC_MEMORY, SYNC_PROCESS

MAGIC = "compensate-trace"
FORMAT_VERSION = 1

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_INT32_MAX = 2**31 - 1
_INT16_MAX = 2**15 - 1

_EVENT_SYNTAX = "'<time> <location> <kind> [key=value ...]'"
_HEADER_KEYWORDS = ("timer_resolution", "location", "region", "comm", "window", "events")

# Escapes inside double-quoted strings (besides \xHH).
_UNESCAPE = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE_TABLE = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r",
                 ord("\t"): "\\t"}
for _c in (*range(0x20), 0x7F):
    _ESCAPE_TABLE.setdefault(_c, f"\\x{_c:02x}")
# A bare (unquoted) value must not contain any of these, nor whitespace.
_NEEDS_QUOTES = re.compile(r'[\s"\\\x00-\x1f\x7f]|^#|^$')
_BARE_RUN = re.compile(r'[^\s"]*')


# ---------------------------------------------------------------------------
# Small lexical helpers (shared by reader and writer)


def _quote(s: str) -> str:
    """``s`` as a double-quoted string with ``\\`` ``\"`` ``\\n`` ``\\r`` ``\\t`` ``\\xHH``
    escapes, so that any string survives on one line."""
    return '"' + s.translate(_ESCAPE_TABLE) + '"'


def _value(s: str) -> str:
    """``s`` bare if that reads back identically, else quoted."""
    return _quote(s) if _NEEDS_QUOTES.search(s) else s


def _valid_key(key: str) -> bool:
    return bool(key) and not _NEEDS_QUOTES.search(key) and "=" not in key


def _strip_comment(line: str) -> str:
    """Cut a ``#`` comment (a ``#`` at the start or after whitespace) from a quote-free line."""
    i = line.find("#")
    while i > 0 and not line[i - 1].isspace():
        i = line.find("#", i + 1)
    return line if i < 0 else line[:i]


def _join_args(args: list[str]) -> str:
    """Program arguments as one comma-separated string (``\\,`` and ``\\\\`` escaped)."""
    return ",".join(a.replace("\\", "\\\\").replace(",", "\\,") for a in args)


def _enum_name(v: Any) -> str | None:
    """The member name of an OTF2 (``_otf2`` EnumBase) or Python enum value, else None."""
    if isinstance(v, enum.Enum):
        return v.name
    return enum_name(v)


def _show(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, shortened to ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return repr(text)


def _brief(obj: Any, limit: int = 80) -> str:
    """``repr(obj)`` shortened for an error message."""
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _scalar_fields(obj: Any) -> list[tuple[str, str]]:
    """Best-effort ``key=value`` fields from an OTF2 event object's attributes: ints,
    floats, strings, enums (by name), definitions (``key_ref=<ref>``) and lists of
    numbers (comma-separated); anything else is skipped. Runs for most records of a
    metric-heavy archive, so what depends only on a key or a value's type is
    remembered; the result is that of :func:`_scalar_field` on each attribute."""
    out: list[tuple[str, str]] = []
    try:
        attrs = vars(obj)
    except TypeError:
        return out
    for key, v in attrs.items():
        ok = _KEY_OK.get(key)
        if not (_key_ok(key) if ok is None else ok):
            continue
        t = type(v)
        if t is int:
            out.append((key, str(v)))
        elif t is str:
            out.append((key, v))
        elif t is list or t is tuple:
            _number_list(key, v, out)
        else:
            plain = _PLAIN_TYPE.get(t)
            if plain if plain is not None else _is_plain_type(t):  # a definition or nothing
                if isinstance(getattr(v, "_ref", None), int | np.integer):
                    out.append((key + "_ref", str(int(v._ref))))
            else:
                _scalar_field(key, v, out)
    return out


_KEY_OK: dict[str, bool] = {}  # key -> written at all
_PLAIN_TYPE: dict[type, bool] = {}  # type -> see _is_plain_type


def _key_ok(key: str) -> bool:
    ok = _KEY_OK[key] = not (key in ("time", "attributes") or key.startswith("_")
                             or not _valid_key(key))
    return ok


def _is_plain_type(t: type) -> bool:
    """Is ``t`` none of what :func:`_scalar_field` tests before ``_ref`` (enum by
    :func:`_enum_name`'s type test, bool, number, string) nor a list or tuple?"""
    plain = _PLAIN_TYPE[t] = not (
        issubclass(t, enum.Enum) or enum_names(t) is not None
        or issubclass(t, bool | np.bool_ | int | np.integer | float | np.floating | str
                      | list | tuple))
    return plain


def _scalar_field(key: str, v: Any, out: list[tuple[str, str]]) -> None:
    """Append the field of one attribute value to ``out`` (nothing if unwritable)."""
    name = _enum_name(v)
    if name is not None:
        out.append((key, name))
    elif isinstance(v, bool | np.bool_):
        out.append((key, "true" if v else "false"))
    elif isinstance(v, int | np.integer):
        out.append((key, str(int(v))))
    elif isinstance(v, float | np.floating):
        out.append((key, repr(float(v))))
    elif isinstance(v, str):
        out.append((key, v))
    elif isinstance(getattr(v, "_ref", None), int | np.integer):
        out.append((key + "_ref", str(int(v._ref))))
    elif isinstance(v, list | tuple):
        _number_list(key, v, out)


def _number_list(key: str, v: list | tuple, out: list[tuple[str, str]]) -> None:
    if v and all(type(x) is int for x in v):
        out.append((key, ",".join(map(str, v))))
    elif v and all(isinstance(x, int | float | np.integer | np.floating)
                 and not isinstance(x, bool) for x in v):
        out.append((key, ",".join(str(int(x)) if isinstance(x, int | np.integer)
                                  else repr(float(x)) for x in v)))


def _sync_text(level: int) -> str:
    parts = [n for bit, n in ((SYNC_PROCESS, "PROCESS"), (SYNC_MEMORY, "MEMORY")) if level & bit]
    return "|".join(parts) if parts else "NONE"


def text_fields(kind_name: str, payload: Any) -> list[tuple[str, str]]:
    """``[(key, value)]`` of an RMA record as a ``.trace`` line writes them (its
    normalised fields, :func:`compensate.formats.fields.fields_of`, as text)."""
    f = fields_of(kind_name, payload)
    out = []
    for name in RMA_FIELDS[kind_name]:
        v = f[name]
        if name == "members":
            text = ",".join(str(m) for m in v) if v else "-"
        elif name == "sync_level":
            text = _sync_text(v)
        elif isinstance(v, int):
            text = "-" if v < 0 else str(v)
        else:
            text = str(v)
        out.append((name, text))
    return out
