"""The ``.trace`` text format: one record per line, human-editable.

Why a text format next to OTF2: test cases for the compensation engine are far
easier to write, read and diff as text, and a text dump is the simplest way to
look at (or exchange) what the engine sees. The format round-trips exactly with
the model of :mod:`compensate.model` for every record kind the engine
interprets, and carries every other record kind as a local event with
``key=value`` fields. The full specification, with an example, is
``docs/trace-format.md``; in short::

    compensate-trace 1
    timer_resolution 1000000000
    location 0 group=0 name="Master thread" group_name="MPI Rank 0"
    region 3 "MPI_Send"
    comm 1 "MPI_COMM_WORLD" 0,1
    events
    1000  0  Enter    region=3
    1200  0  MpiSend  receiver=1 comm=1 tag=10 bytes=16384

Public API: :func:`read_text` and :func:`write_text`. Every problem with the
input is reported as a one-line :class:`~compensate.model.TraceError` of the
form ``FILE:LINE: what was wrong, what was expected`` -- never a traceback.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import os
import re
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, TextIO

import numpy as np

from .model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OP_NAMES,
    COLLECTIVE_OPS,
    COLUMNS,
    ENTER,
    IRECV,
    IRECV_REQUEST,
    ISEND,
    ISEND_COMPLETE,
    KIND_CODE,
    KIND_NAMES,
    LEAVE,
    MEASUREMENT_ONOFF,
    NBC_COMPLETE,
    NBC_REQUEST,
    NONE,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECV,
    REQUEST_CANCELLED,
    REQUEST_TEST,
    SEND,
    Comm,
    Definitions,
    Events,
    Location,
    Trace,
    TraceError,
)
from .traceio import ChunkIterator

__all__ = ["MAGIC", "FORMAT_VERSION", "MAX_BUFFERED", "TextChunks", "TextEventWriter", "read_text",
           "read_text_chunks", "write_text"]

MAGIC = "compensate-trace"
FORMAT_VERSION = 1

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_INT32_MAX = 2**31 - 1
_INT16_MAX = 2**15 - 1

_EVENT_SYNTAX = "'<time> <location> <kind> [key=value ...]'"
_HEADER_KEYWORDS = ("timer_resolution", "location", "region", "comm", "events")

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


# ---------------------------------------------------------------------------
# Reader


class _Token:
    """One whitespace-separated token: ``key=value`` (key set) or a positional value."""

    __slots__ = ("key", "value", "raw", "quoted")

    def __init__(self, key: str | None, value: str, raw: str, quoted: bool) -> None:
        self.key = key
        self.value = value
        self.raw = raw
        self.quoted = quoted

    def positional(self) -> str | None:
        """The token as a positional value (a bare ``a=b`` stays ``a=b``), or None for
        ``key="quoted"``."""
        if not self.quoted:
            return self.raw
        return self.value if self.key is None else None


class _Reader:
    """Line-by-line parser state. ``lineno`` always names the line being parsed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lineno = 0
        self.seen_magic = False
        self.in_events = False
        self.timer_resolution: int | None = None
        self.locations: dict[int, Location] = {}
        self.regions: dict[int, str] = {}
        self.comms: dict[int, Comm] = {}
        self.def_line: dict[tuple[str, int], int] = {}  # (what, id) -> line defined
        # location id -> (rows, payloads) of the current chunk; rows are model column tuples
        self.state: dict[int, tuple[list[tuple], list[Any]]] = {}
        # location id -> time of its last record and number of its records in
        # earlier chunks
        self.prev: dict[int, int] = {}
        self.base: dict[int, int] = {}
        self.handlers: dict[int, Callable[[str, int, int, dict[str, str]],
                                          tuple[tuple, Any]]] = {
            ENTER: self._region_record,
            LEAVE: self._region_record,
            SEND: self._p2p_record,
            RECV: self._p2p_record,
            ISEND: self._p2p_request_record,
            IRECV: self._p2p_request_record,
            ISEND_COMPLETE: self._request_record,
            IRECV_REQUEST: self._request_record,
            REQUEST_TEST: self._request_record,
            REQUEST_CANCELLED: self._request_record,
            NBC_REQUEST: self._request_record,
            NBC_COMPLETE: self._nbc_complete,
            COLL_BEGIN: self._coll_begin,
            COLL_END: self._coll_end,
            BUFFER_FLUSH: self._buffer_flush,
            MEASUREMENT_ONOFF: self._measurement,
            PROGRAM_BEGIN: self._program_begin,
            PROGRAM_END: self._program_end,
        }

    # -- errors ---------------------------------------------------------------

    def err(self, message: str, *, location: int | None = None,
            index: int | None = None) -> TraceError:
        return TraceError(message, source=f"{self.path}:{self.lineno}", location=location,
                          index=index)

    # -- tokenizing -------------------------------------------------------------

    def tokenize(self, line: str) -> list[_Token]:
        """Split a line that contains a ``"`` into tokens, stopping at a comment."""
        line = line.rstrip("\r\n")
        toks: list[_Token] = []
        i, n = 0, len(line)
        while True:
            while i < n and line[i].isspace():
                i += 1
            if i >= n or line[i] == "#":
                return toks
            start = i
            j = _BARE_RUN.match(line, i).end()
            bare = line[i:j]
            if j < n and line[j] == '"':
                if bare == "":
                    key = None
                elif bare.endswith("=") and bare.count("=") == 1:
                    key = bare[:-1]
                else:
                    raise self.err(f"unexpected '\"' inside {_show(line[start:j + 1])}, expected a "
                                   f'quote only at the start of a value (key="...")')
                value, j = self.read_quoted(line, j)
                if j < n and not line[j].isspace():
                    raise self.err(f"unexpected {line[j]!r} right after the closing quote of "
                                   f"{_show(line[start:j])}, expected whitespace")
                toks.append(_Token(key, value, line[start:j], True))
            else:
                k, sep, v = bare.partition("=")
                toks.append(_Token(k, v, bare, False) if sep else _Token(None, bare, bare, False))
            i = j

    def read_quoted(self, line: str, q: int) -> tuple[str, int]:
        """Parse the quoted string whose opening quote is at ``line[q]``; return the
        unescaped text and the index just after the closing quote."""
        out: list[str] = []
        i = q + 1
        while True:
            close = line.find('"', i)
            esc = line.find("\\", i)
            if close < 0:
                raise self.err(f"unterminated quoted string starting at column {q + 1}, "
                               f"expected a closing '\"' on the same line")
            if esc < 0 or close < esc:
                out.append(line[i:close])
                return "".join(out), close + 1
            out.append(line[i:esc])
            c = line[esc + 1:esc + 2]
            if c in _UNESCAPE:
                out.append(_UNESCAPE[c])
                i = esc + 2
            elif c == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", line[esc + 2:esc + 4]):
                out.append(chr(int(line[esc + 2:esc + 4], 16)))
                i = esc + 4
            else:
                raise self.err(f"unknown escape '{line[esc:esc + 2]}' in quoted string, "
                               f"expected one of \\\" \\\\ \\n \\r \\t \\xHH")

    # -- numbers ----------------------------------------------------------------

    def int_value(self, text: str, what: str, lo: int, hi: int) -> int:
        try:
            v = int(text)
        except ValueError:
            raise self.err(f"{what} {_show(text)} is not an integer, expected an integer") from None
        if not lo <= v <= hi:
            raise self.err(f"{what} {v} is out of range, expected {lo}..{hi}")
        return v

    # -- header -----------------------------------------------------------------

    def header_line(self, toks: list[_Token], text: str) -> None:
        word = toks[0].positional()
        if not self.seen_magic:
            if word != MAGIC:
                raise self.err(f"expected '{MAGIC} {FORMAT_VERSION}' as the first line "
                               f"(the .trace magic), got {_show(text)}")
            if len(toks) != 2 or toks[1].positional() is None:
                raise self.err(f"expected '{MAGIC} {FORMAT_VERSION}', got {_show(text)}")
            version = toks[1].positional()
            if version != str(FORMAT_VERSION):
                raise self.err(f"unsupported .trace format version {_show(version)}, expected "
                               f"{FORMAT_VERSION}")
            self.seen_magic = True
            return
        if word == "timer_resolution":
            if len(toks) != 2 or toks[1].positional() is None:
                raise self.err(f"expected 'timer_resolution <ticks per second>', got {_show(text)}")
            self.define("timer_resolution", 0)
            self.timer_resolution = self.int_value(toks[1].positional(), "timer_resolution",
                                                   1, _INT64_MAX)
        elif word == "location":
            self.location_line(toks, text)
        elif word == "region":
            self.region_line(toks, text)
        elif word == "comm":
            self.comm_line(toks, text)
        elif word == "events":
            if len(toks) != 1:
                raise self.err(f"expected 'events' alone on its line, got {_show(text)}")
            self.finish_header()
        elif word == MAGIC:
            raise self.err(f"duplicate '{MAGIC}' line, expected it only as the first line")
        else:
            raise self.err(f"unknown header line {_show(text)}, expected one of "
                           f"{', '.join(_HEADER_KEYWORDS)}")

    def define(self, what: str, ident: int) -> None:
        first = self.def_line.get((what, ident))
        if first is not None:
            if what == "timer_resolution":
                raise self.err(f"duplicate definition: timer_resolution already given on line "
                               f"{first}, expected it once")
            raise self.err(f"duplicate definition: {what} {ident} already defined on line "
                           f"{first}, expected each {what} id once")
        self.def_line[(what, ident)] = self.lineno

    def location_line(self, toks: list[_Token], text: str) -> None:
        usage = ('expected \'location <id> [group=<id>] [name="..."] '
                 '[group_name="..."]\'')
        if len(toks) < 2 or toks[1].positional() is None:
            raise self.err(f"{usage}, got {_show(text)}")
        loc = self.int_value(toks[1].positional(), "location id", 0, 2**64 - 1)
        self.define("location", loc)
        fields = self.field_dict(toks[2:], usage)
        group = loc
        if "group" in fields:
            group = self.int_value(fields.pop("group"), "location group", 0, 2**64 - 1)
        name = fields.pop("name", "")
        group_name = fields.pop("group_name", "")
        if fields:
            raise self.err(f"unexpected field '{next(iter(fields))}=' in location line, {usage}")
        self.locations[loc] = Location(id=loc, name=name, group=group, group_name=group_name)
        self.state[loc] = ([], [])
        self.prev[loc] = -1
        self.base[loc] = 0

    def region_line(self, toks: list[_Token], text: str) -> None:
        if len(toks) != 3 or toks[1].positional() is None or toks[2].positional() is None:
            raise self.err(f"expected 'region <id> \"<name>\"', got {_show(text)}")
        region = self.int_value(toks[1].positional(), "region id", 0, _INT32_MAX)
        self.define("region", region)
        self.regions[region] = toks[2].positional()

    def comm_line(self, toks: list[_Token], text: str) -> None:
        usage = ("expected 'comm <id> \"<name>\" <member location ids in rank order, "
                 "comma-separated, or ->'")
        if len(toks) != 4 or any(t.positional() is None for t in toks[1:]):
            raise self.err(f"{usage}, got {_show(text)}")
        comm = self.int_value(toks[1].positional(), "comm id", 0, _INT32_MAX)
        self.define("comm", comm)
        spec = toks[3].positional()
        members: tuple[int, ...] = ()
        if spec != "-":
            members = tuple(self.int_value(m, "comm member location id", 0, 2**64 - 1)
                            for m in spec.split(","))
        self.comms[comm] = Comm(id=comm, name=toks[2].positional(), members=members)

    def finish_header(self) -> None:
        if self.timer_resolution is None:
            raise self.err("missing 'timer_resolution <ticks per second>' line, expected it "
                           "before 'events'")
        for cid, comm in self.comms.items():
            for rank, loc in enumerate(comm.members):
                if loc not in self.locations:
                    self.lineno = self.def_line[("comm", cid)]
                    raise self.err(f"comm {cid}: member rank {rank} is location {loc}, which is "
                                   f"not defined, expected a 'location {loc}' line")
        self.in_events = True

    # -- events -----------------------------------------------------------------

    def field_dict(self, toks: list[_Token], usage: str) -> dict[str, str]:
        fields: dict[str, str] = {}
        for t in toks:
            if not t.key:
                raise self.err(f"expected key=value, got {_show(t.raw)}"
                               + (f" ({usage})" if usage else ""))
            if t.key in fields:
                raise self.err(f"duplicate field '{t.key}=', expected each field once")
            fields[t.key] = t.value
        return fields

    def plain_fields(self, parts: list[str]) -> dict[str, str]:
        """The ``key=value`` fields ``parts[3:]`` of a quote-free line as a dict."""
        fields: dict[str, str] = {}
        for p in parts[3:]:
            k, sep, v = p.partition("=")
            if not sep or not k:
                raise self.err(f"expected key=value, got {_show(p)}")
            if k in fields:
                raise self.err(f"duplicate field '{k}=', expected each field once")
            fields[k] = v
        return fields

    def event_line(self, parts: list[str], fields: dict[str, str] | None, line: str) -> None:
        """Parse one record; ``fields`` is None for a quote-free line (then parsed here)."""
        if len(parts) < 3:
            self.misplaced_header(parts[0])
            raise self.err(f"expected {_EVENT_SYNTAX}, got {_show(line.strip())}")
        try:
            t = int(parts[0])
        except ValueError:
            self.misplaced_header(parts[0])
            raise self.err(f"time {_show(parts[0])} is not an integer, expected integer ticks "
                           f"({_EVENT_SYNTAX})") from None
        if not 0 <= t <= _INT64_MAX:
            raise self.err(f"time {t} is out of range, expected 0..{_INT64_MAX}")
        try:
            loc = int(parts[1])
        except ValueError:
            raise self.err(f"location {_show(parts[1])} is not an integer, expected a location id "
                           f"({_EVENT_SYNTAX})") from None
        st = self.state.get(loc)
        if st is None:
            raise self.err(f"location {loc} is not defined, expected a 'location {loc}' line "
                           f"in the header")
        kname = parts[2]
        kind = KIND_CODE.get(kname)
        if kind is None:
            raise self.err(_unknown_kind(kname))
        rows, payloads = st
        if rows:
            if t < rows[-1][0]:
                raise self.backwards(loc, t, rows[-1][0], len(rows))
        elif t < self.prev[loc]:  # the location's first record in this chunk
            raise self.backwards(loc, t, self.prev[loc], 0)
        if fields is None:
            if (kind == ENTER or kind == LEAVE) and len(parts) == 4 \
                    and parts[3].startswith("region="):
                # fast path for the most common records; anything unusual falls through
                try:
                    region = int(parts[3][7:])
                except ValueError:
                    region = None
                if region in self.regions:
                    rows.append((t, kind, region, NONE, NONE, NONE, NONE, NONE, NONE, NONE))
                    payloads.append(None)
                    return
            fields = self.plain_fields(parts)
        handler = self.handlers.get(kind)
        if handler is None:  # carried, uninterpreted kind: fields verbatim
            rows.append((t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE))
            payloads.append(fields)
            return
        row, payload = handler(kname, kind, t, fields)
        rows.append(row if len(row) == len(COLUMNS) else row + (NONE,))
        payloads.append(payload)

    def backwards(self, loc: int, t: int, previous: int, in_chunk: int) -> TraceError:
        return self.err(f"time {t} is before the previous record's {previous}",
                        location=loc, index=self.base[loc] + in_chunk)

    def misplaced_header(self, word: str) -> None:
        if word in _HEADER_KEYWORDS or word == MAGIC:
            raise self.err(f"header line {_show(word)} after the 'events' line, expected all "
                           f"definitions before 'events'")

    def need(self, fields: dict[str, str], key: str, kname: str, hint: str) -> str:
        try:
            return fields.pop(key)
        except KeyError:
            raise self.err(f"missing field '{key}=' for {kname}, expected {key}={hint}") from None

    def no_more(self, fields: dict[str, str], kname: str, allowed: str) -> None:
        if fields:
            key = next(iter(fields))
            expected = f"only {allowed}" if allowed else "no fields"
            raise self.err(f"unexpected field '{key}=' for {kname}, expected {expected}")

    def comm_ref(self, text: str) -> int:
        comm = self.int_value(text, "comm id", 0, _INT32_MAX)
        if comm not in self.comms:
            raise self.err(f"comm {comm} is not defined, expected a 'comm {comm} ...' line in "
                           f"the header")
        return comm

    def rank(self, text: str, what: str, comm: int) -> int:
        r = self.int_value(text, what, 0, _INT32_MAX)
        size = len(self.comms[comm].members)
        if r >= size:
            raise self.err(f"{what} {r} is not in comm {comm} ({size} members), expected a rank "
                           f"0..{size - 1}" if size else
                           f"{what} {r} is not in comm {comm}, which has no members")
        return r

    def _region_record(self, kname: str, kind: int, t: int,
                       fields: dict[str, str]) -> tuple[tuple, Any]:
        region = self.int_value(self.need(fields, "region", kname, "<region id>"),
                                "region id", 0, _INT32_MAX)
        if region not in self.regions:
            raise self.err(f"region {region} is not defined, expected a 'region {region} "
                           f"\"<name>\"' line in the header")
        self.no_more(fields, kname, "region=")
        return (t, kind, region, NONE, NONE, NONE, NONE, NONE, NONE), None

    def _request_id(self, fields: dict[str, str], kname: str) -> int:
        return self.int_value(self.need(fields, "request", kname, "<request id>"),
                              "request id", NONE, _INT64_MAX)  # -1: undefined

    def _p2p_request_record(self, kname: str, kind: int, t: int,
                            fields: dict[str, str]) -> tuple[tuple, Any]:
        request = self._request_id(fields, kname)
        row, payload = self._p2p_record(kname, SEND if kind == ISEND else RECV, t, fields,
                                        extra="request=")
        return (row[0], kind) + row[2:] + (request,), payload

    def _request_record(self, kname: str, kind: int, t: int,
                        fields: dict[str, str]) -> tuple[tuple, Any]:
        request = self._request_id(fields, kname)
        self.no_more(fields, kname, "request=")
        return (t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE, request), None

    def _nbc_complete(self, kname: str, kind: int, t: int,
                      fields: dict[str, str]) -> tuple[tuple, Any]:
        request = self._request_id(fields, kname)
        row, payload = self._coll_end(kname, kind, t, fields, extra="request=")
        return row + (request,), payload

    def _p2p_record(self, kname: str, kind: int, t: int,
                    fields: dict[str, str], extra: str = "") -> tuple[tuple, Any]:
        peer_key = "receiver" if kind == SEND else "sender"
        peer_text = self.need(fields, peer_key, kname, "<rank in comm>")
        comm = self.comm_ref(self.need(fields, "comm", kname, "<comm id>"))
        peer = self.rank(peer_text, f"{peer_key} rank", comm)
        tag = self.int_value(self.need(fields, "tag", kname, "<tag>"), "tag",
                             _INT64_MIN, _INT64_MAX)
        size = self.int_value(self.need(fields, "bytes", kname, "<message bytes>"), "bytes",
                              0, _INT64_MAX)
        self.no_more(fields, kname, f"{peer_key}= comm= tag= bytes= {extra}".strip())
        return (t, kind, NONE, peer, comm, tag, size, NONE, NONE), None

    def _coll_begin(self, kname: str, kind: int, t: int,
                    fields: dict[str, str]) -> tuple[tuple, Any]:
        self.no_more(fields, kname, "")
        return (t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE), None

    def _coll_end(self, kname: str, kind: int, t: int,
                  fields: dict[str, str], extra: str = "") -> tuple[tuple, Any]:
        op_text = self.need(fields, "op", kname, "<operation, e.g. BARRIER or ALLREDUCE>")
        op = COLLECTIVE_OPS.get(op_text.upper())
        if op is None:
            if not op_text.isdigit():
                names = ", ".join(list(COLLECTIVE_OPS)[:17])
                raise self.err(f"unknown collective op {_show(op_text)}, expected one of {names}, "
                               f"... or a number")
            op = self.int_value(op_text, "collective op", 0, _INT16_MAX)
        comm = self.comm_ref(self.need(fields, "comm", kname, "<comm id>"))
        root_text = fields.pop("root", "-")
        root = NONE if root_text == "-" else self.rank(root_text, "root rank", comm)
        sent = self.int_value(fields.pop("sent", "0"), "sent bytes", 0, _INT64_MAX)
        received = self.int_value(fields.pop("received", "0"), "received bytes", 0, _INT64_MAX)
        self.no_more(fields, kname, f"op= comm= root= sent= received= {extra}".strip())
        return (t, kind, NONE, root, comm, NONE, sent, received, op), None

    def _buffer_flush(self, kname: str, kind: int, t: int,
                      fields: dict[str, str]) -> tuple[tuple, Any]:
        stop = self.int_value(self.need(fields, "stop", kname, "<stop time in ticks>"),
                              "stop time", 0, _INT64_MAX)
        if stop < t:
            raise self.err(f"BufferFlush stop time {stop} is before its start {t}, expected "
                           f"stop >= time")
        self.no_more(fields, kname, "stop=")
        return (t, kind, NONE, NONE, NONE, NONE, stop, NONE, NONE), None

    def _measurement(self, kname: str, kind: int, t: int,
                     fields: dict[str, str]) -> tuple[tuple, Any]:
        mode = self.need(fields, "mode", kname, "on|off").lower()
        if mode not in ("on", "off"):
            raise self.err(f"bad measurement mode {_show(mode)}, expected mode=on or mode=off")
        self.no_more(fields, kname, "mode=")
        return (t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE), {"mode": mode}

    def _program_begin(self, kname: str, kind: int, t: int,
                       fields: dict[str, str]) -> tuple[tuple, Any]:
        name = self.need(fields, "name", kname, '"<program name>"')
        args = self.split_args(fields.pop("args")) if "args" in fields else []
        self.no_more(fields, kname, "name= args=")
        return (t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE), {"name": name, "args": args}

    def _program_end(self, kname: str, kind: int, t: int,
                     fields: dict[str, str]) -> tuple[tuple, Any]:
        status = self.int_value(self.need(fields, "status", kname, "<exit status>"),
                                "exit status", _INT64_MIN, _INT64_MAX)
        self.no_more(fields, kname, "status=")
        return (t, kind, NONE, NONE, NONE, NONE, NONE, NONE, NONE), {"status": status}

    def split_args(self, text: str) -> list[str]:
        """Inverse of :func:`_join_args`."""
        if "\\" not in text:
            return text.split(",")
        out: list[str] = []
        cur: list[str] = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in (",", "\\"):
                    raise self.err(f"bad escape '{text[i:i + 2]}' in args, expected '\\,' or "
                                   f"'\\\\' (written \"\\\\,\" and \"\\\\\\\\\" inside quotes)")
                cur.append(nxt)
                i += 2
                continue
            if c == ",":
                out.append("".join(cur))
                cur = []
            else:
                cur.append(c)
            i += 1
        out.append("".join(cur))
        return out

    # -- driver -----------------------------------------------------------------

    def read_header(self, lines: Iterator[tuple[int, str]]) -> Definitions:
        """Parse ``(line number, line)`` pairs up to and including the 'events' line."""
        for lineno, line in lines:
            self.lineno = lineno
            if '"' in line:
                toks = self.tokenize(line)
                if not toks:
                    continue
                self.header_line(toks, line.strip())
            else:
                if "#" in line:
                    line = _strip_comment(line)
                parts = line.split()
                if not parts:
                    continue
                self.header_line(self.tokenize_plain(parts), line.strip())
            if self.in_events:
                return Definitions(timer_resolution=self.timer_resolution,
                                   locations=self.locations, regions=self.regions,
                                   comms=self.comms, otf2=None)
        if not self.seen_magic:
            self.lineno = max(self.lineno, 1)
            raise self.err(f"empty trace, expected '{MAGIC} {FORMAT_VERSION}' as the first line")
        raise self.err("end of file before the 'events' line, expected the header to end "
                       "with 'events'")

    def read_records(self, lines: Iterator[tuple[int, str]],
                     limit: int | None) -> dict[int, Events]:
        """Parse record lines until ``limit`` records (None: the end of the file);
        return them per location (only locations with records)."""
        if limit is None:
            self.parse_lines(lines)
        else:
            while limit:  # each line is at most one record: read limit lines, repeat
                first = self.lineno + 1
                skipped = self.parse_lines(islice(lines, limit))
                seen = self.lineno - first + 1
                if seen < limit:  # end of file
                    break
                limit -= seen - skipped
        chunk = {}
        for loc, (rows, payloads) in self.state.items():
            if rows:
                chunk[loc] = _events(rows, payloads)
                self.prev[loc] = rows[-1][0]
                self.base[loc] += len(rows)
                self.state[loc] = ([], [])
        return chunk

    def parse_lines(self, lines: Iterable[tuple[int, str]]) -> int:
        """Parse record lines; returns how many were blank or comments."""
        skipped = 0
        for lineno, line in lines:
            self.lineno = lineno
            if '"' in line:
                toks = self.tokenize(line)
                if not toks:
                    skipped += 1
                    continue
                parts = [t.raw if not t.quoted else t.value for t in toks[:3]]
                usage = _EVENT_SYNTAX
                if any(t.key is not None and t.quoted for t in toks[:3]):
                    raise self.err(f"expected {usage}, got {_show(line.strip())}")
                fields = self.field_dict(toks[3:], "")
            else:
                if "#" in line:
                    line = _strip_comment(line)
                parts = line.split()
                if not parts:
                    skipped += 1
                    continue
                fields = None  # parsed from parts[3:] by event_line
            self.event_line(parts, fields, line)
        return skipped

    @staticmethod
    def tokenize_plain(parts: list[str]) -> list[_Token]:
        toks = []
        for p in parts:
            k, sep, v = p.partition("=")
            toks.append(_Token(k, v, p, False) if sep else _Token(None, p, p, False))
        return toks


def _events(rows: list[tuple], payloads: list[Any]) -> Events:
    """Rows to columns (one 2-D int64 conversion, faster than per-column iteration;
    every value was range-checked for its column while parsing)."""
    table = np.array(rows, dtype=np.int64).reshape(len(rows), len(COLUMNS))
    cols = {name: np.ascontiguousarray(table[:, j], dtype=dtype)
            for j, (name, dtype) in enumerate(COLUMNS)}
    return Events(**cols, payload=payloads)


def _show(text: str, limit: int = 80) -> str:
    """``text`` quoted for an error message, shortened to ``limit`` characters."""
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return repr(text)


def _brief(obj: Any, limit: int = 80) -> str:
    """``repr(obj)`` shortened for an error message."""
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _unknown_kind(name: str) -> str:
    close = difflib.get_close_matches(name, KIND_NAMES, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    shown = ", ".join(KIND_NAMES[:10])
    return (f"unknown record kind {_show(name)}, {hint}expected a kind name (known: {shown}, ... "
            f"{len(KIND_NAMES)} in all, see docs/trace-format.md)")


def _first_undecodable_line(path: str) -> int:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return lineno
    return 1


@contextlib.contextmanager
def _read_errors(path: str) -> Iterator[None]:
    """Unreadable and non-UTF-8 files as one-line TraceErrors."""
    try:
        yield
    except UnicodeDecodeError:
        line = _first_undecodable_line(path)
        raise TraceError("not valid UTF-8 text, expected a UTF-8 .trace file",
                         source=f"{path}:{line}") from None
    except OSError as e:
        raise TraceError(f"cannot read the file: {e.strerror or e}", source=path) from None


class TextChunks(ChunkIterator):
    """Iterator over a ``.trace`` file's records in chunks (see :func:`read_text_chunks`);
    holds the open file until the records are exhausted, a chunk fails,
    :meth:`close` is called or the iterator is garbage collected."""

    def __init__(self, reader: _Reader, f: TextIO, lines: Iterator[tuple[int, str]],
                 chunk_records: int | None) -> None:
        self.path = reader.path
        self.chunk_records = chunk_records
        self._reader = reader
        self._file: TextIO | None = f
        self._lines = lines

    def _read(self) -> dict[int, Events]:
        with _read_errors(self.path):
            return self._reader.read_records(self._lines, self.chunk_records)

    def _release(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()


def read_text_chunks(path: str, chunk_records: int | None) -> tuple[Definitions, TextChunks]:
    """The definitions of a ``.trace`` file and an iterator over its records in chunks.

    Each chunk holds the next ``chunk_records`` records of the file (all if None),
    in file order, as ``{location: Events}`` for the locations that have records
    among them. Header problems raise :class:`~compensate.model.TraceError` here,
    record problems from the iterator (``FILE:LINE: ...``, with the record's index
    within the whole location), exactly as :func:`read_text` reports them.
    """
    path = os.fspath(path)
    reader = _Reader(path)
    with _read_errors(path):
        f = open(path, encoding="utf-8")  # noqa: SIM115 (closed by TextChunks)
    try:
        lines = enumerate(f, 1)
        with _read_errors(path):
            definitions = reader.read_header(lines)
    except BaseException:
        f.close()
        raise
    return definitions, TextChunks(reader, f, lines, chunk_records)


def read_text(path: str) -> Trace:
    """Read a ``.trace`` file into a :class:`~compensate.model.Trace`.

    The result's ``source`` is ``path`` and ``definitions.otf2`` is None. Every
    defined location gets an :class:`~compensate.model.Events` (possibly empty).
    Raises :class:`~compensate.model.TraceError` (``FILE:LINE: ...``) on any bad input.
    """
    path = os.fspath(path)
    definitions, chunks = read_text_chunks(path, None)
    with contextlib.closing(chunks):
        chunk = next(chunks, {})
    events = {loc: chunk[loc] if loc in chunk else _events([], [])
              for loc in definitions.locations}
    return Trace(definitions, events, source=path)


# ---------------------------------------------------------------------------
# Writer


def _scalar_fields(obj: Any) -> list[tuple[str, str]]:
    """Best-effort ``key=value`` fields from an OTF2 event object's attributes: ints,
    floats, strings, enums (by name), definitions (``key_ref=<ref>``) and lists of
    numbers (comma-separated); anything else is skipped."""
    out: list[tuple[str, str]] = []
    try:
        attrs = vars(obj)
    except TypeError:
        return out
    for key, v in attrs.items():
        if key in ("time", "attributes") or key.startswith("_") or not _valid_key(key):
            continue
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
        elif (isinstance(v, list | tuple) and v
              and all(isinstance(x, int | float | np.integer | np.floating)
                      and not isinstance(x, bool) for x in v)):
            out.append((key, ",".join(str(int(x)) if isinstance(x, int | np.integer)
                                      else repr(float(x)) for x in v)))
    return out


class _Formatter:
    """Formats the header and the records of one trace; ``fail`` makes a TraceError
    naming the record."""

    def __init__(self, definitions: Definitions, path: str) -> None:
        self.definitions = definitions
        self.path = path

    def fail(self, loc: int, index: int, message: str) -> TraceError:
        return TraceError(f"cannot write as .trace: {message}", source=self.path,
                          location=loc, index=index)

    def fields(self, loc: int, index: int, kind: int, cols: tuple, payload: Any) -> str:
        """The ``key=value`` part of one record's line (may be empty)."""
        region, peer, comm, tag, size, size_recv, op, request = cols
        if kind == ENTER or kind == LEAVE:
            return f"region={region}"
        if kind == SEND:
            return f"receiver={peer} comm={comm} tag={tag} bytes={size}"
        if kind == RECV:
            return f"sender={peer} comm={comm} tag={tag} bytes={size}"
        if kind == ISEND:
            return f"receiver={peer} comm={comm} tag={tag} bytes={size} request={request}"
        if kind == IRECV:
            return f"sender={peer} comm={comm} tag={tag} bytes={size} request={request}"
        if kind in (ISEND_COMPLETE, IRECV_REQUEST, REQUEST_TEST, REQUEST_CANCELLED,
                    NBC_REQUEST):
            return f"request={request}"
        if kind == COLL_END or kind == NBC_COMPLETE:
            root = "-" if peer < 0 else peer
            text = (f"op={COLLECTIVE_OP_NAMES.get(op, op)} comm={comm} root={root} "
                    f"sent={size} received={size_recv}")
            return text + (f" request={request}" if kind == NBC_COMPLETE else "")
        if kind == COLL_BEGIN:
            return ""
        if kind == BUFFER_FLUSH:
            return f"stop={size}"
        if kind == MEASUREMENT_ONOFF:
            return self.measurement(loc, index, payload)
        if kind == PROGRAM_BEGIN:
            return self.program_begin(loc, index, payload)
        if kind == PROGRAM_END:
            return self.program_end(loc, index, payload)
        return self.generic(loc, index, payload)

    def measurement(self, loc: int, index: int, payload: Any) -> str:
        if isinstance(payload, dict):
            mode = payload.get("mode")
        else:
            mode = _enum_name(getattr(payload, "measurement_mode", None))
        mode = mode.lower() if isinstance(mode, str) else None
        if mode not in ("on", "off"):
            raise self.fail(loc, index, f"MeasurementOnOff record without an on/off mode "
                                        f"(payload {_brief(payload)})")
        return f"mode={mode}"

    def program_begin(self, loc: int, index: int, payload: Any) -> str:
        if isinstance(payload, dict):
            name, args = payload.get("name"), payload.get("args", [])
        else:
            name = getattr(payload, "program_name", None)
            args = getattr(payload, "program_arguments", [])
        if not isinstance(name, str) or not isinstance(args, list | tuple) \
                or not all(isinstance(a, str) for a in args):
            raise self.fail(loc, index, f"ProgramBegin record needs a name string and a list "
                                        f"of argument strings (payload {_brief(payload)})")
        text = f"name={_quote(name)}"
        return f"{text} args={_quote(_join_args(list(args)))}" if args else text

    def program_end(self, loc: int, index: int, payload: Any) -> str:
        status = payload.get("status") if isinstance(payload, dict) \
            else getattr(payload, "exit_status", None)
        if isinstance(status, bool) or not isinstance(status, int | np.integer):
            raise self.fail(loc, index, f"ProgramEnd record without an integer exit status "
                                        f"(payload {_brief(payload)})")
        return f"status={int(status)}"

    def generic(self, loc: int, index: int, payload: Any) -> str:
        if payload is None:
            return ""
        if isinstance(payload, dict):
            items = [(k, v if isinstance(v, str) else str(v)) for k, v in payload.items()]
            for k, _ in items:
                if not isinstance(k, str) or not _valid_key(k):
                    raise self.fail(loc, index, f"field name {k!r} cannot be written, expected "
                                                f"a non-empty name without whitespace, '=', "
                                                f"quotes or control characters")
        else:
            items = _scalar_fields(payload)
        return " ".join(f"{k}={_value(v)}" for k, v in items)

    def header(self) -> list[str]:
        d = self.definitions
        out = [
            f"{MAGIC} {FORMAT_VERSION}\n",
            "# compensate .trace file, one record per line (format: docs/trace-format.md)\n",
            f"timer_resolution {int(d.timer_resolution)}\n",
        ]
        for lid in sorted(d.locations):
            loc = d.locations[lid]
            line = f"location {lid} group={loc.group}"
            if loc.name:
                line += f" name={_quote(loc.name)}"
            if loc.group_name:
                line += f" group_name={_quote(loc.group_name)}"
            out.append(line + "\n")
        for rid in sorted(d.regions):
            out.append(f"region {rid} {_quote(str(d.regions[rid]))}\n")
        for cid in sorted(d.comms):
            c = d.comms[cid]
            members = ",".join(str(m) for m in c.members) if c.members else "-"
            out.append(f"comm {cid} {_quote(str(c.name))} {members}\n")
        out.append("events\n")
        return out

    def records(self, f: TextIO, cols: list[list[Any]], payloads: list[Any],
                widths: tuple[int, int, int]) -> None:
        """Write records given as columns in output order: ``cols`` is
        ``[time, location, index, kind, region, peer, comm, tag, size, size_recv,
        op, request]`` (lists), ``widths`` the time, location and kind column
        widths."""
        tw, lw, kw = widths
        fields_of = self.fields
        buf: list[str] = []
        for t, loc, i, kind, *c, p in zip(*cols, payloads, strict=True):
            fields = fields_of(loc, i, kind, c, p)
            name = KIND_NAMES[kind]  # codes validated by the caller
            if fields:
                buf.append(f"{t:>{tw}} {loc:>{lw}} {name:<{kw}} {fields}\n")
            else:
                buf.append(f"{t:>{tw}} {loc:>{lw}} {name}\n")
            if len(buf) >= 8192:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))


#: Default cap of :class:`TextEventWriter`'s merge buffer, in records.
MAX_BUFFERED = 1 << 20
#: Records the merge buffer gathers before it tries to write some out.
_RELEASE_EVERY = 1 << 16
_COMMENT = "# <time> <location> <kind> [key=value ...]\n"


class TextEventWriter:
    """Writes a ``.trace`` file from records handed over location by location and
    chunk by chunk, merged into global time order.

    ``write(loc, events)`` appends records to location ``loc``, in order (calls
    for different locations may interleave). Records wait in per-location queues
    until no location can still add an earlier one: a record is written once
    its time is below every unfinished location's last appended time (a
    location that has appended nothing yet holds everything back; ``finish(loc)``
    declares that ``loc`` appends nothing more). Written that way the file is
    byte for byte what :func:`write_text` writes for the same records: time
    order, ties by location id, then per-location order.

    ``max_buffered`` caps the queues (None: unbounded): beyond it the earliest
    queued records are written anyway, down to half the cap, and a location
    that appends an earlier record later makes the file's order across
    locations no longer global (the format allows any interleaving; the order
    of each location's records is always kept).

    The column widths (time, location, kind) are fixed when the first records
    are written, from the records appended so far and the defined locations;
    if later records need other widths, :meth:`close` rewrites the record lines
    once so that the file is exactly what :func:`write_text` would write.
    """

    def __init__(self, path: str, definitions: Definitions, *,
                 max_buffered: int | None = MAX_BUFFERED,
                 locations: Iterable[int] | None = None) -> None:
        self.path = os.fspath(path)
        self.definitions = definitions
        self.max_buffered = max_buffered
        self.formatter = _Formatter(definitions, self.path)
        # locations that may be written (their ids in sorted order give the tie
        # rank), their column width
        ids = sorted(definitions.locations if locations is None else locations)
        self._rank = {loc: r for r, loc in enumerate(ids)}
        self._ids = ids
        self._lw = max((len(str(loc)) for loc in ids), default=1)
        self._queues: dict[int, deque[list[Any]]] = {}  # loc -> [[Events, first queued]]
        self._written: dict[int, int] = {}  # loc -> records taken out of its queue
        self._count: dict[int, int] = {}  # loc -> records appended
        self._last: dict[int, int] = {}  # loc -> time of its last appended record
        self._active = set(definitions.locations)  # locations not finished
        self._waiting = set(self._active)  # active locations that appended nothing yet
        self._buffered = 0
        self._next_release = min(_RELEASE_EVERY, max(1, (max_buffered or 0) // 4))
        self._max_time = -1
        self._kinds: set[int] = set()
        self._header_written = False
        self._big_ids = bool(ids) and max(ids) > 2**62  # beyond int64 in the merge
        self._widths: tuple[int, int, int] | None = None  # set once records are written
        # (byte offset, widths) where the record lines start using other widths
        self._segments: list[tuple[int, tuple[int, int, int]]] = []
        try:
            self._file: TextIO | None = open(self.path, "w", encoding="utf-8",  # noqa: SIM115
                                             newline="\n")
        except OSError as e:
            raise TraceError(f"cannot write the file: {e.strerror or e}",
                             source=self.path) from None

    # -- appending ---------------------------------------------------------------

    def write(self, loc: int, ev: Events) -> None:
        """Append ``ev`` to location ``loc``. The writer keeps references to
        ``ev``'s columns and payload until its records are written: do not modify
        them afterwards. TraceError for an undefined location, negative times or
        times going backwards (naming the record)."""
        if self._file is None:
            raise TraceError("cannot write as .trace: the file is already closed",
                             source=self.path)
        if loc not in self.definitions.locations or loc not in self._rank:
            raise TraceError(f"cannot write as .trace: location {loc} has records but no "
                             f"definition", source=self.path)
        if loc not in self._active:
            raise TraceError(f"cannot write as .trace: location {loc} was declared finished",
                             source=self.path)
        base = self._count.get(loc, 0)
        t = ev.time
        n = len(t)
        if n and int(t.min()) < 0:
            i = int(np.argmax(t < 0))
            raise self.formatter.fail(loc, base + i, f"negative time {int(t[i])} (the .trace "
                                                     f"format needs times >= 0)")
        previous = self._last.get(loc, -1)
        if n and int(t[0]) < previous:
            raise self._backwards(loc, base, int(t[0]), previous)
        if n > 1:
            bad = np.flatnonzero(t[1:] < t[:-1])
            if len(bad):
                i = int(bad[0]) + 1
                raise self._backwards(loc, base + i, int(t[i]), int(t[i - 1]))
        if not n:
            return
        self._queues.setdefault(loc, deque()).append([ev, 0])
        self._count[loc] = base + n
        self._last[loc] = int(t[-1])
        self._max_time = max(self._max_time, int(t[-1]))
        self._kinds.update(np.unique(ev.kind).tolist())
        self._buffered += n
        self._waiting.discard(loc)
        self._release()

    def _release(self) -> None:
        try:
            self._write_out()
        except OSError as e:
            raise TraceError(f"cannot write the file: {e.strerror or e}",
                             source=self.path) from None

    def _backwards(self, loc: int, index: int, t: int, previous: int) -> TraceError:
        return self.formatter.fail(loc, index, f"time {t} is before the previous record's "
                                               f"{previous} (the .trace format needs "
                                               f"non-decreasing times per location)")

    def finish(self, loc: int) -> None:
        """Declare that ``loc`` appends no more records, so that it no longer holds
        back the merge."""
        self._active.discard(loc)
        self._waiting.discard(loc)
        self._release()

    # -- merging -----------------------------------------------------------------

    def _write_out(self) -> None:
        """Write what can be written (see the class documentation): everything
        below the earliest time an unfinished location may still append, tried
        each time ``_RELEASE_EVERY`` more records are queued; if the queues hold
        more than ``max_buffered`` records, the earliest ones down to half that."""
        cap = self.max_buffered
        if cap is None:
            return
        if self._buffered > cap:
            self._emit(self._take_earliest(self._buffered - cap // 2))
        elif self._buffered >= self._next_release and not self._waiting:
            below = min((self._last[loc] for loc in self._active), default=None)
            self._emit(self._take(below))
        else:
            return
        self._next_release = self._buffered + min(_RELEASE_EVERY, max(1, cap // 4))

    def _take(self, below: int | None,
              counts: dict[int, int] | None = None) -> list[tuple[int, Events, int, int, int]]:
        """Take records out of the queues: each location's records with a time
        before ``below`` (all if None), or its first ``counts[loc]``. Returns
        pieces ``(loc, events, start, stop, index of events[start])``."""
        pieces = []
        for loc, queue in self._queues.items():
            want = None if counts is None else counts.get(loc, 0)
            while queue and want != 0:
                piece = queue[0]
                ev, start = piece
                if want is not None:
                    stop = min(len(ev), start + want)
                    want -= stop - start
                elif below is None:
                    stop = len(ev)
                else:
                    stop = int(np.searchsorted(ev.time, below, "left"))
                    if stop <= start:
                        break
                pieces.append((loc, ev, start, stop, self._written.get(loc, 0)))
                self._written[loc] = self._written.get(loc, 0) + stop - start
                self._buffered -= stop - start
                if stop < len(ev):
                    piece[1] = stop
                    break
                queue.popleft()
        return pieces

    def _take_earliest(self, k: int) -> list[tuple[int, Events, int, int, int]]:
        """Take the ``k`` earliest queued records (time, location, record order)."""
        times, ranks, locs = [], [], []
        for loc, queue in self._queues.items():
            for ev, start in queue:
                times.append(ev.time[start:])
                ranks.append(np.full(len(ev) - start, self._rank[loc], dtype=np.int64))
            locs.append(loc)
        rank = np.concatenate(ranks)
        order = np.lexsort((np.arange(len(rank)), rank, np.concatenate(times)))[:k]
        per_rank = np.bincount(rank[order], minlength=len(self._ids))
        return self._take(None, {loc: int(per_rank[self._rank[loc]]) for loc in locs})

    # -- output ------------------------------------------------------------------

    def _write_header(self) -> None:
        if not self._header_written:
            self._file.writelines(self.formatter.header())
            self._header_written = True

    def _final_widths(self) -> tuple[int, int, int]:
        kinds = [k for k in self._kinds if 0 <= k < len(KIND_NAMES)]
        return (len(str(self._max_time)), self._lw,
                max((len(KIND_NAMES[k]) for k in kinds), default=0))

    def _emit(self, pieces: list[tuple[int, Events, int, int, int]]) -> None:
        """Write the records of ``pieces`` merged by time, location, record order."""
        self._write_header()
        if not pieces:
            return
        bad_kinds = [k for k in self._kinds if not 0 <= k < len(KIND_NAMES)]
        if bad_kinds:
            raise TraceError(f"cannot write as .trace: unknown record kind code {bad_kinds[0]}",
                             source=self.path)
        widths = self._final_widths()  # wide enough for every record appended so far
        if widths != self._widths:
            if self._widths is None:
                self._file.write(_COMMENT)
            self._segments.append((self._file.tell(), widths))
            self._widths = widths
        if len(pieces) == 1:
            loc, ev, start, stop, first = pieces[0]
            sl = slice(start, stop)
            order = None
            locs = [loc] * (stop - start)
            index = list(range(first, first + stop - start))
            payloads = _payloads(ev, start, stop)
        else:
            sl = slice(None)
            time = np.concatenate([ev.time[a:b] for _, ev, a, b, _ in pieces])
            rank = np.concatenate([np.full(b - a, self._rank[loc], dtype=np.int64)
                                   for loc, _, a, b, _ in pieces])
            index = np.concatenate([np.arange(i, i + b - a) for _, _, a, b, i in pieces])
            order = np.lexsort((index, rank, time))  # time, then location id, then record
            ids = np.array(self._ids, dtype=object if self._big_ids else np.int64)
            locs = ids[rank[order]].tolist()
            index = index[order].tolist()
            payloads = [p for _, ev, a, b, _ in pieces for p in _payloads(ev, a, b)]
            payloads = [payloads[j] for j in order.tolist()]
        cols: list[list[Any]] = []
        for name, _ in COLUMNS:
            if order is None:
                col = getattr(pieces[0][1], name)[sl]
            else:
                col = np.concatenate([getattr(ev, name)[a:b] for _, ev, a, b, _ in pieces])[order]
            cols.append(col.tolist())
        cols[1:1] = [locs, index]  # time, location, index, kind, ...
        self.formatter.records(self._file, cols, payloads, self._widths)

    def close(self) -> None:
        """Write every record still queued and finish the file (rewriting the
        record lines if their column widths changed)."""
        if self._file is None:
            raise TraceError("cannot write as .trace: the file is already closed",
                             source=self.path)
        try:
            try:
                self._emit(self._take(None))
                f, self._file = self._file, None
                f.close()
            except OSError as e:
                raise TraceError(f"cannot write the file: {e.strerror or e}",
                                 source=self.path) from None
            final = self._final_widths()
            if any(widths != final for _, widths in self._segments):
                try:
                    self._repad(final)
                except OSError as e:
                    raise TraceError(f"cannot write the file: {e.strerror or e}",
                                     source=self.path) from None
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Close the file after a failure (it stays, half written)."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _repad(self, final: tuple[int, int, int]) -> None:
        """Rewrite the record lines written with narrower column widths than
        ``final`` (each stretch in ``_segments`` is uniform: the widths grow only
        between batches, and always cover the batch)."""
        directory, name = os.path.split(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.repad-", dir=directory)
        try:
            with open(self.path, "rb") as src, os.fdopen(fd, "wb") as dst:
                end = os.fstat(src.fileno()).st_size
                dst.write(src.read(self._segments[0][0]))
                bounds = [offset for offset, _ in self._segments[1:]] + [end]
                for (_, widths), stop in zip(self._segments, bounds, strict=True):
                    _repad_lines(src, dst, stop - src.tell(), widths, final)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _repad_lines(src: Any, dst: Any, size: int, old: tuple[int, int, int],
                 new: tuple[int, int, int]) -> None:
    """Copy ``size`` bytes of record lines written with column widths ``old`` from
    ``src`` to ``dst`` with widths ``new`` (each at least as wide)."""
    (tw0, lw, kw0), (tw1, _, kw1) = old, new
    cut = tw0 + lw + 2 + kw0  # a line with fields continues with " fields" here
    pad_t, pad_k = b" " * (tw1 - tw0), b" " * (kw1 - kw0)
    rest = b""
    while size > 0:
        block = src.read(min(size, 1 << 23))
        if not block:
            raise OSError("file shrank while being rewritten")
        size -= len(block)
        block = rest + block
        end = block.rfind(b"\n") + 1
        rest = block[end:]
        lines = block[:end].split(b"\n")
        lines.pop()
        if pad_k:
            lines = [pad_t + (ln[:cut] + pad_k + ln[cut:] if len(ln) > cut else ln)
                     for ln in lines]
        elif pad_t:
            lines = [pad_t + ln for ln in lines]
        lines.append(b"")
        dst.write(b"\n".join(lines))
    dst.write(rest)


def _payloads(ev: Events, start: int, stop: int) -> list[Any]:
    """``ev.payload[start:stop]``, padded with None where the list is short."""
    p = ev.payload[start:stop]
    return p if len(p) == stop - start else p + [None] * (stop - start - len(p))


def write_text(trace: Trace, path: str) -> None:
    """Write ``trace`` as a ``.trace`` file at ``path``.

    The header comes from ``trace.definitions`` (ids in ascending order); the records
    of all locations follow merged in global time order, ties broken by location id
    and then by the per-location order, which is always preserved. Interpreted kinds
    are written from the columns. MeasurementOnOff/ProgramBegin/ProgramEnd and the
    other kinds are written from their payload: a dict (as :func:`read_text` makes)
    or an OTF2 event object, whose scalar attributes are written best-effort (see
    docs/trace-format.md). Raises :class:`~compensate.model.TraceError` for a trace
    the format cannot represent (e.g. times going backwards on a location). Not
    atomic: callers that need that write to a temporary file and rename.
    (:class:`TextEventWriter` writes the same file from records handed over chunk
    by chunk.)
    """
    path = os.fspath(path)
    locs = sorted(trace.events)
    writer = TextEventWriter(path, trace.definitions, max_buffered=None, locations=locs)
    try:
        for loc in locs:
            writer.write(loc, trace.events[loc])
        writer.close()
    except OSError as e:
        raise TraceError(f"cannot write the file: {e.strerror or e}", source=path) from None
    finally:
        writer.abandon()
