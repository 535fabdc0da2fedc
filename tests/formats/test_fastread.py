"""The .trace C path (compensate/formats/text/fastread.py): the same columns,
payloads and error messages as the Python reader, and the same bytes as the
Python writer, on simulated programs, the repository's text files, damaged
lines and random traces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.formats.text import (
    TextEventWriter,
    fastread,
    read_text,
    read_text_chunks,
    write_text,
)
from compensate.formats.text.read import _Reader
from compensate.formats.text.write import _Formatter
from compensate.model import KIND_NAMES, TraceError
from compensate.simulate import simulate
from tests.formats.test_text import FULL, assert_traces_equal, traces

ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAMS = ("stencil", "nonblocking", "mprobe", "partitioned", "collectives", "flush_in_calls")

pytestmark = pytest.mark.skipif(fastread._kernel() is None,
                                reason="the C path cannot be built here")


def _docs_example(tmp_path: Path) -> str:
    text = (ROOT / "docs" / "trace-format.md").read_text()
    block = re.search(r"## A complete example\n\n```\n(.*?)```", text, re.S).group(1)
    path = tmp_path / "docs-example.trace"
    path.write_text(block)
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[str]:
    """The simulated programs' measured traces (small), the repository's text files."""
    tmp = tmp_path_factory.mktemp("fastread")
    out = [str(ROOT / "tests" / "data" / "rma_records.trace"),
           str(ROOT / "examples" / "pingpong.trace"), _docs_example(tmp)]
    for name in PROGRAMS:
        path = tmp / f"{name}.trace"
        write_text(simulate(name, ranks=4, iterations=3).measured, str(path))
        out.append(str(path))
    return out


def _both(monkeypatch, read):
    """``read()`` through C and through Python (value or TraceError message)."""
    out = []
    for switch in ("1", "0"):
        monkeypatch.setenv(fastread.ENV_SWITCH, switch)
        try:
            out.append(read())
        except TraceError as exc:
            out.append(str(exc))
    monkeypatch.delenv(fastread.ENV_SWITCH)
    return out


def test_c_and_python_read_the_same_records(files, monkeypatch):
    python_lines = []
    parse_line = _Reader.parse_line

    def spy(self, lineno, line):
        python_lines.append(line)
        return parse_line(self, lineno, line)

    monkeypatch.setattr(_Reader, "parse_line", spy)
    for path in files:
        native, python = _both(monkeypatch, lambda p=path: read_text(p))
        assert_traces_equal(native, python)
    # through C, Python parses only what C leaves to it: here the quoted
    # ProgramBegin lines and ProgramEnd (payload kinds), one of each per rank
    stencil = files[3]
    python_lines.clear()
    monkeypatch.setenv(fastread.ENV_SWITCH, "1")
    read_text(stencil)
    kinds = {line.split()[2] for line in python_lines}
    assert kinds == {"ProgramBegin", "ProgramEnd"} and len(python_lines) == 8, kinds


def test_chunks_and_location_selection(files, monkeypatch):
    stencil = files[3]

    def chunks(locations):
        defs, it = read_text_chunks(stencil, 11, locations)
        return [{loc: (ev.time.tolist(), ev.kind.tolist(), ev.peer.tolist(), ev.payload)
                 for loc, ev in chunk.items()} for chunk in it]

    for locations in (None, [1, 2]):
        native, python = _both(monkeypatch, lambda s=locations: chunks(s))
        assert native == python and len(native) > 3


BAD_LINES = [
    "1000 0 Enter region=99",             # undefined region
    "1000 0 Enter region=3 region=3",     # duplicate field
    "1000 0 Enter",                       # missing field
    "1000 0 Enter region=3 extra=1",      # unexpected field
    "10.5 0 Enter region=3",              # time not an integer
    "1000 4 Enter region=3",              # undefined location
    "1000 0 Entr region=3",               # unknown kind
    "1000 0 MpiSend receiver=2 comm=1 tag=1 bytes=8",  # rank outside the comm
    "1000 0 MpiSend receiver=1 comm=7 tag=1 bytes=8",  # undefined comm
    "1000 0 MpiSend receiver=1 comm=1 tag=1 bytes=-8",  # negative bytes
    "1000 0 MpiSend receiver=1 comm=1 tag=99999999999999999999 bytes=8",  # tag too large
    "1000 0 MpiCollectiveEnd op=FOO comm=1",  # unknown op
    "1000 0 MpiCollectiveEnd op=99999 comm=1",  # op number out of range
    "1000 0 MpiCollectiveEnd op=BARRIER comm=1 root=-1",  # root: '-', not -1
    "1000 0 BufferFlush stop=999",        # stop before the time
    "999 0 Enter region=3",               # time before the previous record's
    "1000 0 MpiIrecvRequest request=-2",  # request id below -1
    "1000 0 MpiCollectiveBegin op=BARRIER",  # no fields allowed
    "events",                             # header line after 'events'
]

HEAD = """compensate-trace 1
timer_resolution 1000
location 0
location 1
region 3 "f"
comm 1 "w" 0,1
events
1000 0 Enter region=3
1000 1 MpiRecv sender=0 comm=1 tag=+1 bytes=1_0
"""


@pytest.mark.parametrize("bad", BAD_LINES)
def test_bad_lines_give_the_python_error(tmp_path, monkeypatch, bad):
    path = tmp_path / "bad.trace"
    path.write_text(HEAD + "1001 1 Leave region=3\n" * 3 + bad + "\n1001 0 Leave region=3\n")
    native, python = _both(monkeypatch, lambda: read_text(str(path)))
    assert isinstance(python, str) and python.startswith(f"{path}:13: ")
    assert native == python


_ALPHABET = list(' \t"\\#=,-0123456789ruxEnterLeave') + ["\x00", "\r", "\u2028", "é", "\n"]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, len(FULL)), st.integers(0, 3),
                                st.sampled_from(_ALPHABET)), min_size=1, max_size=4))
def test_damaged_input_reads_the_same_both_ways(tmp_path, monkeypatch, edits):
    text = list(FULL)
    for pos, n_deleted, char in edits:
        text[pos:pos + n_deleted] = [char]
    path = tmp_path / "fuzz.trace"
    path.write_text("".join(text), encoding="utf-8")
    native, python = _both(monkeypatch, lambda: read_text(str(path)))
    if isinstance(python, str):
        assert native == python
    else:
        assert_traces_equal(native, python)


def _written_both_ways(monkeypatch, trace, path: Path, **writer) -> list[bytes]:
    def write():
        if writer:  # streaming, in small pieces, location after location
            w = TextEventWriter(str(path), trace.definitions, **writer)
            for loc in sorted(trace.events):
                ev = trace.events[loc]
                for a in range(0, len(ev.time), 5):
                    w.write(loc, ev.slice(a, min(a + 5, len(ev.time))))
                w.finish(loc)
            w.close()
        else:
            write_text(trace, str(path))
        return path.read_bytes()
    return _both(monkeypatch, write)


def test_c_and_python_write_the_same_bytes(files, tmp_path, monkeypatch):
    python_lines = []
    lines = _Formatter.lines

    def spy(self, cols, payloads, widths):
        python_lines.extend(cols[3])  # the kinds Python formats
        return lines(self, cols, payloads, widths)

    monkeypatch.setattr(_Formatter, "lines", spy)
    monkeypatch.setenv(fastread.ENV_SWITCH, "1")
    write_text(read_text(files[3]), str(tmp_path / "stencil.trace"))  # through C
    assert sorted({KIND_NAMES[k] for k in python_lines}) == ["ProgramBegin", "ProgramEnd"]
    assert len(python_lines) == 8
    full = tmp_path / "full.trace"
    full.write_text(FULL)
    monkeypatch.setattr(fastread, "FORMAT_BATCH", 3)
    for source in [*files, str(full)]:
        trace = read_text(source)
        native, python = _written_both_ways(monkeypatch, trace, tmp_path / "out.trace")
        assert native == python
        native, python = _written_both_ways(monkeypatch, trace, tmp_path / "out.trace",
                                            max_buffered=8)
        assert native == python


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(trace=traces())
def test_random_traces_round_trip_both_ways(tmp_path, monkeypatch, trace):
    # small blocks, so that records of both paths meet at block boundaries
    monkeypatch.setattr(fastread, "BATCH", 5)
    monkeypatch.setattr(fastread, "FORMAT_BATCH", 7)
    path = tmp_path / "rt.trace"
    native_bytes, python_bytes = _written_both_ways(monkeypatch, trace, path)
    assert native_bytes == python_bytes
    native, python = _both(monkeypatch, lambda: read_text(str(path)))
    assert_traces_equal(native, trace)
    assert_traces_equal(python, trace)


@pytest.mark.parametrize("cc", ["false", "/nonexistent/cc"])
def test_without_a_compiler_python_reads_and_writes_and_says_so_once(
        files, tmp_path, monkeypatch, capfd, cc):
    """A failed build (no compiler, a compiler that fails): the same records and
    bytes through the Python path, one line on stderr, nothing left in the cache."""
    source = files[3]
    monkeypatch.setenv(fastread.ENV_SWITCH, "0")
    expected = read_text(source)
    write_text(expected, str(tmp_path / "python.trace"))
    monkeypatch.delenv(fastread.ENV_SWITCH)
    monkeypatch.setattr(fastread, "_state", {})
    monkeypatch.setenv("COMPENSATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", cc)
    capfd.readouterr()
    for attempt in range(2):
        got = read_text(source)
        assert_traces_equal(got, expected)
        write_text(got, str(tmp_path / f"fallback{attempt}.trace"))
        assert (tmp_path / f"fallback{attempt}.trace").read_bytes() == \
            (tmp_path / "python.trace").read_bytes()
    err = capfd.readouterr().err
    assert err.count("the .trace format's C path is not available") == 1, err
    assert err.count("\n") == 1, err
    assert fastread._kernel() is None and not list((tmp_path / "cache").glob("*.so"))
