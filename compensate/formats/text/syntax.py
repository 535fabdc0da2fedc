"""The lexical rules of the ``.trace`` text format, shared by its reader and writer:
the magic line, quoting and escaping of values, comments, and how values are shown
in error messages (docs/trace-format.md)."""

from __future__ import annotations

import enum
import re
from typing import Any

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
    names = getattr(type(v), "_names", None)
    if isinstance(names, dict):
        name = names.get(getattr(v, "value", None))
        return name if isinstance(name, str) else None
    return None


def _show(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, shortened to ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return repr(text)


def _brief(obj: Any, limit: int = 80) -> str:
    """``repr(obj)`` shortened for an error message."""
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."
