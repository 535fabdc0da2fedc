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

This module reads it (:func:`read_text`, :func:`read_text_chunks`);
:mod:`compensate.formats.text.write` writes it. Every problem with the
input is reported as a one-line :class:`~compensate.model.TraceError` of the
form ``FILE:LINE: what was wrong, what was expected`` -- never a traceback.

Why one module (over 600 lines): nearly all of it is one class, the parser of one
grammar (header, then one record line per kind with its own fields and checks);
each error names the line, so the checks stay beside the fields they check.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from itertools import islice
from typing import Any, TextIO

import numpy as np

import compensate.insitu as insitu
from compensate.formats.chunks import ChunkIterator, selected_locations
from compensate.formats.partitioned import TEXT_FIELDS
from compensate.formats.text.fastread import fast_records
from compensate.formats.text.syntax import (
    _BARE_RUN,
    _EVENT_SYNTAX,
    _HEADER_KEYWORDS,
    _INT16_MAX,
    _INT32_MAX,
    _INT64_MAX,
    _INT64_MIN,
    _UNESCAPE,
    FORMAT_VERSION,
    MAGIC,
    _show,
    _strip_comment,
)
from compensate.model import (
    ACCELERATOR_STREAM,
    COLLECTIVE_OPS,
    CPU_THREAD,
    ENTER,
    IMRECV,
    IMRECV_REQUEST,
    ISEND,
    KIND_CODE,
    KIND_NAMES,
    LEAVE,
    LOCATION_GROUP_TYPES,
    LOCATION_TYPES,
    MRECV,
    NONE,
    PROCESS,
    RECORD_COLUMNS,
    RECV,
    SEND,
    Comm,
    Definitions,
    Events,
    Location,
    Trace,
    TraceError,
    Window,
)

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
        self.region_roles: dict[int, tuple[str, str]] = {}
        self.insitu: dict[int, dict] = {}
        self.comms: dict[int, Comm] = {}
        self.windows: dict[int, Window] = {}
        self.def_line: dict[tuple[str, int], int] = {}  # (what, id) -> line defined
        # location id -> (rows, payloads) of the current chunk; rows are model column tuples
        self.state: dict[int, tuple[list[tuple], list[Any]]] = {}
        # location id -> time of its last record and number of its records in
        # earlier chunks
        self.prev: dict[int, int] = {}
        self.base: dict[int, int] = {}
        # the locations to read (None: all) and the spelling in the file of every
        # other defined location, whose record lines are skipped unparsed
        self.selection: tuple[int, ...] | None = None
        self.others: frozenset[str] = frozenset()
        # the C path of the record lines (fastread.py; None: all Python), the
        # location of the last line Python parsed, and per location the blocks of
        # rows (with payloads) C's batches gave in this chunk, before ``state``'s
        self.fast: Any = None
        self.last_loc: int | None = None
        self.pieces: dict[int, list[tuple[np.ndarray, list[Any]]]] = {}
        # record kind -> parser of its fields (keyed by the kind's name in the file)
        by_name: dict[str, Callable[[str, int, int, dict[str, str]], tuple[tuple, Any]]] = {
            "Enter": self._region_record,
            "Leave": self._region_record,
            "MpiSend": self._p2p_record,
            "MpiRecv": self._p2p_record,
            "MpiIsend": self._p2p_request_record,
            "MpiIrecv": self._p2p_request_record,
            "MpiIsendComplete": self._request_record,
            "MpiIrecvRequest": self._request_record,
            "MpiRequestTest": self._request_record,
            "MpiRequestCancelled": self._request_record,
            "NonBlockingCollectiveRequest": self._request_record,
            "NonBlockingCollectiveComplete": self._nbc_complete,
            "MpiProbe": self._probe,
            "MpiMrecv": self._matched_record,
            "MpiImrecvRequest": self._matched_record,
            "MpiImrecv": self._matched_record,
            "MpiCollectiveBegin": self._coll_begin,
            "MpiCollectiveEnd": self._coll_end,
            "BufferFlush": self._buffer_flush,
            "MeasurementOnOff": self._measurement,
            "ProgramBegin": self._program_begin,
            "ProgramEnd": self._program_end,
        }
        self.handlers = {KIND_CODE[name]: handler for name, handler in by_name.items()}
        self.handlers.update(dict.fromkeys(TEXT_FIELDS, self._partitioned))

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
        elif word == "window":
            self.window_line(toks, text)
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
                 '[group_name="..."] [type=CPU_THREAD|ACCELERATOR_STREAM|METRIC|UNKNOWN] '
                 '[group_type=PROCESS|ACCELERATOR|UNKNOWN] [group_creator=<id>] '
                 '[insitu="<JSON>"]\'')
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
        # the location model (optional, docs/trace-format.md): without them a CPU
        # thread in a process, as every file before these fields
        kind = fields.pop("type", CPU_THREAD).upper()
        kind = ACCELERATOR_STREAM if kind == "GPU" else kind  # OTF2 < 3 spelling
        if kind not in LOCATION_TYPES:
            raise self.err(f"unknown type {_show(kind)}, expected one of "
                           f"{', '.join(LOCATION_TYPES)}", location=loc)
        group_type = fields.pop("group_type", PROCESS).upper()
        if group_type not in LOCATION_GROUP_TYPES:
            raise self.err(f"unknown group_type {_show(group_type)}, expected "
                           f"one of {', '.join(LOCATION_GROUP_TYPES)}", location=loc)
        creator = -1
        if "group_creator" in fields:
            creator = self.int_value(fields.pop("group_creator"), "location group creator",
                                     0, 2**64 - 1)
        table = fields.pop("insitu", None)  # the tracer's in-situ overhead (JSON)
        if fields:
            raise self.err(f"unexpected field '{next(iter(fields))}=' in location line, {usage}")
        if table is not None:
            try:
                self.insitu[loc] = insitu.parse(table, self.path, loc)
            except TraceError as exc:
                raise self.err(exc.reason) from None
        self.locations[loc] = Location(id=loc, name=name, group=group, group_name=group_name,
                                       type=kind, group_type=group_type,
                                       group_creator=creator)
        self.state[loc] = ([], [])
        self.prev[loc] = -1
        self.base[loc] = 0

    def region_line(self, toks: list[_Token], text: str) -> None:
        usage = "expected 'region <id> \"<name>\" [role=<OTF2 role>] [paradigm=<OTF2 paradigm>]'"
        if len(toks) < 3 or toks[1].positional() is None or toks[2].positional() is None:
            raise self.err(f"{usage}, got {_show(text)}")
        region = self.int_value(toks[1].positional(), "region id", 0, _INT32_MAX)
        self.define("region", region)
        self.regions[region] = toks[2].positional()
        fields = self.field_dict(toks[3:], usage)
        # optional (docs/trace-format.md): OpenMP barriers are regions of role
        # BARRIER or IMPLICIT_BARRIER and paradigm OPENMP (R8)
        role = fields.pop("role", None)
        paradigm = fields.pop("paradigm", None)
        if fields:
            raise self.err(f"unexpected field '{next(iter(fields))}=' in region line, {usage}")
        for what, v in (("role", role), ("paradigm", paradigm)):
            if v is not None and not v.replace("_", "").isalnum():
                raise self.err(f"region {region}: {what} {_show(v)} is not a name, {usage}")
        if role is not None or paradigm is not None:
            self.region_roles[region] = ((role or "FUNCTION").upper(),
                                         (paradigm or "UNKNOWN").upper())

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

    def window_line(self, toks: list[_Token], text: str) -> None:
        usage = "expected 'window <id> \"<name>\" comm=<comm id>' (an RMA window, R10)"
        if len(toks) != 4 or any(t.positional() is None for t in toks[1:3]) \
                or toks[3].key != "comm":
            raise self.err(f"{usage}, got {_show(text)}")
        win = self.int_value(toks[1].positional(), "window id", 0, _INT32_MAX)
        self.define("window", win)
        comm = self.int_value(toks[3].value, "window comm id", 0, _INT32_MAX)
        self.windows[win] = Window(id=win, name=toks[2].positional(), comm=comm)

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
        for wid, win in self.windows.items():
            if win.comm not in self.comms:
                self.lineno = self.def_line[("window", wid)]
                raise self.err(f"window {wid}: comm {win.comm} is not defined, expected a "
                               f"'comm {win.comm} ...' line")
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

    def event_line(self, parts: list[str], fields: dict[str, str] | None, line: str
                   ) -> bool | None:
        """Parse one record; ``fields`` is None for a quote-free line (then parsed here).
        True: the record is of a location not selected, and skipped."""
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
        self.last_loc = loc
        if st is None:
            if loc in self.locations:  # not selected (spelled unlike its header id)
                return True
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
        rows.append(row if len(row) == len(RECORD_COLUMNS) else row + (NONE,))
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
        key = "object" if kind == ENTER else "ret"  # a Pthread call's (syncobjects.py)
        value = fields.pop(key, None)
        sync = NONE if value is None else self.int_value(value, key, 0, _INT64_MAX)
        self.no_more(fields, kname, f"region= and {key}=")
        return (t, kind, region, NONE, NONE, NONE, NONE, NONE, NONE, sync), None

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

    def _partitioned(self, kname: str, kind: int, t: int,
                     fields: dict[str, str]) -> tuple[tuple, Any]:
        """MPI-4 partitioned records (:data:`compensate.formats.partitioned.TEXT_FIELDS`)."""
        spec = TEXT_FIELDS[kind]
        cols = {name: NONE for name, _ in RECORD_COLUMNS}
        keys = dict(spec)
        if "comm" in keys:
            cols["comm"] = self.comm_ref(self.need(fields, "comm", kname, "<comm id>"))
        for key, column in spec:
            if column == "comm":
                continue
            text = self.need(fields, key, kname, f"<{key}>")
            if column == "peer":
                cols[column] = self.rank(text, f"{key} rank", cols["comm"])
            elif column == "tag":
                cols[column] = self.int_value(text, "tag", _INT64_MIN, _INT64_MAX)
            elif column == "request":
                cols[column] = self.int_value(text, "request id", NONE, _INT64_MAX)
            else:
                cols[column] = self.int_value(text, key, 0, _INT64_MAX)
        self.no_more(fields, kname, " ".join(f"{k}=" for k, _ in spec))
        cols["time"], cols["kind"] = t, kind
        return tuple(cols[name] for name, _ in RECORD_COLUMNS), None

    def _probe(self, kname: str, kind: int, t: int,
               fields: dict[str, str]) -> tuple[tuple, Any]:
        """MpiProbe: the message id in ``size_recv`` (-1: a probe that takes no message)."""
        comm = self.comm_ref(self.need(fields, "comm", kname, "<comm id>"))
        peer = self.rank(self.need(fields, "sender", kname, "<rank in comm>"), "sender rank",
                         comm)
        tag = self.int_value(self.need(fields, "tag", kname, "<tag>"), "tag",
                             _INT64_MIN, _INT64_MAX)
        message = self.int_value(self.need(fields, "message", kname, "<message id or -1>"),
                                 "message id", NONE, _INT64_MAX)
        self.no_more(fields, kname, "sender= comm= tag= message=")
        return (t, kind, NONE, peer, comm, tag, NONE, message, NONE, NONE), None

    def _matched_record(self, kname: str, kind: int, t: int,
                        fields: dict[str, str]) -> tuple[tuple, Any]:
        """MpiMrecv (message= bytes=), MpiImrecvRequest (message= request=), MpiImrecv
        (request= bytes=): message id -> ``size_recv``, bytes -> ``size``."""
        keys = {MRECV: ("message", "bytes"), IMRECV_REQUEST: ("message", "request"),
                IMRECV: ("request", "bytes")}[kind]
        message = size = request = NONE
        if "message" in keys:
            message = self.int_value(self.need(fields, "message", kname, "<message id>"),
                                     "message id", NONE, _INT64_MAX)
        if "request" in keys:
            request = self._request_id(fields, kname)
        if "bytes" in keys:
            size = self.int_value(self.need(fields, "bytes", kname, "<message bytes>"),
                                  "bytes", 0, _INT64_MAX)
        self.no_more(fields, kname, " ".join(f"{k}=" for k in keys))
        return (t, kind, NONE, NONE, NONE, NONE, size, message, NONE, request), None

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
                if self.selection is not None:
                    self.select()
                self.fast = fast_records(self)
                return Definitions(timer_resolution=self.timer_resolution,
                                   locations=self.locations, regions=self.regions,
                                   comms=self.comms, otf2=None,
                                   region_roles=self.region_roles, insitu=self.insitu,
                                   windows=self.windows)
        if not self.seen_magic:
            self.lineno = max(self.lineno, 1)
            raise self.err(f"empty trace, expected '{MAGIC} {FORMAT_VERSION}' as the first line")
        raise self.err("end of file before the 'events' line, expected the header to end "
                       "with 'events'")

    def select(self) -> None:
        """Keep only the selected locations' records (after the header): the lines
        of every other defined location are skipped without being parsed, so a
        record's problems are reported by the reader that selects its location,
        and a line naming no defined location by every reader."""
        chosen = set(selected_locations(sorted(self.locations), self.selection, self.path) or ())
        self.others = frozenset(str(loc) for loc in self.locations if loc not in chosen)
        for loc in list(self.state):
            if loc not in chosen:
                del self.state[loc]

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
            pieces = self.pieces.pop(loc, None)
            if pieces:  # C's blocks (fastread.py), then Python's rows (none in C mode)
                if rows:
                    pieces.append((np.array(rows, dtype=np.int64).reshape(-1, len(RECORD_COLUMNS)),
                                   payloads))
                chunk[loc] = _events_of_blocks(pieces)
            elif rows:
                chunk[loc] = _events(rows, payloads)
            if rows:
                self.prev[loc] = rows[-1][0]
                self.base[loc] += len(rows)
                self.state[loc] = ([], [])
        return chunk

    def parse_lines(self, lines: Iterable[tuple[int, str]]) -> int:
        """Parse record lines; returns how many were blank, comments or another
        reader's (through C where it can: fastread.py)."""
        if self.fast is not None:
            return self.fast.parse_lines(self, lines)
        skipped = 0
        for lineno, line in lines:
            self.lineno = lineno
            skipped += self.parse_line(lineno, line)
        return skipped

    def parse_line(self, lineno: int, line: str) -> int:
        """Parse one record line; 1 if it was blank, a comment or another
        reader's, else 0."""
        if '"' in line:
            toks = self.tokenize(line)
            if not toks:
                return 1
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
                return 1
            fields = None  # parsed from parts[3:] by event_line
        if self.others and len(parts) > 1 and parts[1] in self.others \
                and parts[0] not in _HEADER_KEYWORDS:
            return 1  # a location another reader selected: checked there
        return 1 if self.event_line(parts, fields, line) else 0

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
    table = np.array(rows, dtype=np.int64).reshape(len(rows), len(RECORD_COLUMNS))
    cols = {name: np.ascontiguousarray(table[:, j], dtype=dtype)
            for j, (name, dtype) in enumerate(RECORD_COLUMNS)}
    return Events(**cols, payload=payloads)


def _events_of_blocks(pieces: list[tuple[np.ndarray, list[Any]]]) -> Events:
    """Blocks of rows (n x columns, int64) with their payloads to one Events."""
    table = np.concatenate([block for block, _ in pieces]) if len(pieces) > 1 \
        else pieces[0][0]
    payloads = [p for _, pl in pieces for p in pl] if len(pieces) > 1 else pieces[0][1]
    cols = {name: np.ascontiguousarray(table[:, j], dtype=dtype)
            for j, (name, dtype) in enumerate(RECORD_COLUMNS)}
    return Events(**cols, payload=payloads)


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
def _read_errors(path: str) -> Generator[None, None, None]:
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
        #: the locations whose records are read
        self.selected: tuple[int, ...] = tuple(reader.state)

    def _read(self) -> dict[int, Events]:
        with _read_errors(self.path):
            return self._reader.read_records(self._lines, self.chunk_records)

    def _release(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()


def read_text_chunks(path: str, chunk_records: int | None,
                     locations: Iterable[int] | None = None) -> tuple[Definitions, TextChunks]:
    """The definitions of a ``.trace`` file and an iterator over its records in chunks.

    Each chunk holds the next ``chunk_records`` records of the file (all if None),
    in file order, as ``{location: Events}`` for the locations that have records
    among them. Header problems raise :class:`~compensate.model.TraceError` here,
    record problems from the iterator (``FILE:LINE: ...``, with the record's index
    within the whole location), exactly as :func:`read_text` reports them.

    ``locations`` (ids; None: all): keep only these locations' records. The file
    is still scanned whole (their lines are interleaved with the others'), but
    another location's line is skipped unparsed and never kept, and
    ``chunk_records`` counts only selected records; an id the header does not
    define is a TraceError naming it.
    """
    path = os.fspath(path)
    reader = _Reader(path)
    if locations is not None:
        reader.selection = tuple(int(loc) for loc in locations)
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


def read_text(path: str, locations: Iterable[int] | None = None) -> Trace:
    """Read a ``.trace`` file into a :class:`~compensate.model.Trace`.

    The result's ``source`` is ``path`` and ``definitions.otf2`` is None. Every
    defined location gets an :class:`~compensate.model.Events` (possibly empty).
    Raises :class:`~compensate.model.TraceError` (``FILE:LINE: ...``) on any bad input.
    ``locations``: keep only these locations' records; ``events`` then holds
    exactly them (:func:`read_text_chunks`).
    """
    path = os.fspath(path)
    definitions, chunks = read_text_chunks(path, None, locations)
    with contextlib.closing(chunks):
        chunk = next(chunks, {})
    wanted = definitions.locations if locations is None else set(chunks.selected)
    events = {loc: chunk[loc] if loc in chunk else _events([], [])
              for loc in definitions.locations if loc in wanted}
    return Trace(definitions, events, source=path)
