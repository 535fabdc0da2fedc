"""Tests of the `.trace` text format (compensate.formats.text): exact round trips, ordering,
one-line `FILE:LINE:` error messages, OTF2 payload objects, and the bundled example."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.formats.text import read_text, write_text
from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    COLUMNS,
    ENTER,
    INTERPRETED,
    KIND_CODE,
    KIND_NAMES,
    LEAVE,
    MEASUREMENT_ONOFF,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RECV,
    SEND,
    Comm,
    Definitions,
    Location,
    Trace,
    TraceError,
)
from tests.rowbuilder import RowBuilder

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "pingpong.trace"

HEADER = """\
compensate-trace 1
timer_resolution 1000000000
location 0 group=0 name="Master thread" group_name="MPI Rank 0"
location 1 group=1
region 3 "MPI_Send"
region 4 "compute"
comm 1 "MPI_COMM_WORLD" 0,1
events
"""

FULL = r'''# a comment before the magic line
compensate-trace 1   # magic
timer_resolution 2095191439

location 0 group=0 name="Master thread" group_name="MPI Rank 0"
location 7 group=1 name="say \"hi\"\t\\ back#slash" group_name="MPI Rank 1"
location 3                                  # group defaults to the id
region 3 "MPI_Send"
region 4 "compute # not a comment"
region 5 bare_name
comm 1 "MPI_COMM_WORLD" 0,7
comm 2 "MPI_COMM_SELF" -
comm 9 "" 7
events
# time   location  kind                 fields
0        0         ProgramBegin         name="./a.out" args="-n,4,with space,a\\,b,"
5        7         ProgramBegin         name="x"
1000     0         Enter                region=3
1200     0         MpiSend              receiver=1 comm=1 tag=10 bytes=16384
1300     7         MpiRecv              sender=0 comm=1 tag=10 bytes=16384
1300     7         Metric               metric_ref=0 values=1,2,3
1400     7         MpiIsend             receiver=0 comm=1 tag=-5 bytes=0 request=77
1500     7         ParameterString      parameter_ref=2 string="two words \"quoted\" \\ \x01"
1500     7         ParameterInt         parameter_ref=1 value=-3 note=a#b
2000     0         MpiCollectiveBegin
2500     0         MpiCollectiveEnd     op=ALLREDUCE comm=1 root=- sent=8 received=8
2600     0         MpiCollectiveEnd     op=bcast comm=1 root=1 sent=0 received=4
2700     0         MpiCollectiveEnd     op=17 comm=1
2800     0         Leave                region=3
3000     0         BufferFlush          stop=3500
3600     0         MeasurementOnOff     mode=off
3700     0         MeasurementOnOff     mode=ON
3800     3         Enter                region=4
3800     3         Leave                region=4
3900     3         ThreadTeamEnd
9000     0         ProgramEnd           status=0
9001     7         ProgramEnd           status=-9223372036854775808
'''


def write(tmp_path: Path, text: str, name: str = "t.trace") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def assert_traces_equal(a: Trace, b: Trace) -> None:
    da, db = a.definitions, b.definitions
    assert da.timer_resolution == db.timer_resolution
    assert da.locations == db.locations
    assert da.regions == db.regions
    assert da.comms == db.comms
    assert set(a.events) == set(b.events)
    for loc in a.events:
        ea, eb = a.events[loc], b.events[loc]
        for name, dtype in COLUMNS:
            ca, cb = getattr(ea, name), getattr(eb, name)
            assert ca.dtype == cb.dtype == dtype, (loc, name)
            np.testing.assert_array_equal(ca, cb, err_msg=f"location {loc} column {name}")
        assert ea.payload == eb.payload, loc


def roundtrip(trace: Trace, tmp_path: Path, name: str = "rt.trace") -> Trace:
    out = tmp_path / name
    write_text(trace, str(out))
    return read_text(str(out))


# ---------------------------------------------------------------------------
# Reading and round trips


def test_full_trace_parses_as_documented(tmp_path):
    path = write(tmp_path, FULL)
    t = read_text(path)
    assert t.source == path
    d = t.definitions
    assert d.otf2 is None
    assert d.timer_resolution == 2095191439
    assert d.locations[0] == Location(0, "Master thread", 0, "MPI Rank 0")
    assert d.locations[7] == Location(7, 'say "hi"\t\\ back#slash', 1, "MPI Rank 1")
    assert d.locations[3] == Location(3, "", 3, "")
    assert d.regions == {3: "MPI_Send", 4: "compute # not a comment", 5: "bare_name"}
    assert d.comms[1] == Comm(1, "MPI_COMM_WORLD", (0, 7))
    assert d.comms[2] == Comm(2, "MPI_COMM_SELF", ())
    assert d.comms[9] == Comm(9, "", (7,))
    assert d.location_of(1, 1) == 7

    e0 = t.events[0]
    assert [KIND_NAMES[k] for k in e0.kind] == [
        "ProgramBegin", "Enter", "MpiSend", "MpiCollectiveBegin", "MpiCollectiveEnd",
        "MpiCollectiveEnd", "MpiCollectiveEnd", "Leave", "BufferFlush", "MeasurementOnOff",
        "MeasurementOnOff", "ProgramEnd"]
    assert e0.payload[0] == {"name": "./a.out", "args": ["-n", "4", "with space", "a,b", ""]}
    assert e0.payload[1] is None
    send = 2
    assert (e0.time[send], e0.peer[send], e0.comm[send], e0.tag[send], e0.size[send]) == \
        (1200, 1, 1, 10, 16384)
    assert (e0.region[send], e0.size_recv[send], e0.op[send]) == (-1, -1, -1)
    assert e0.region[1] == 3
    assert (e0.peer[4], e0.comm[4], e0.size[4], e0.size_recv[4], e0.op[4]) == \
        (-1, 1, 8, 8, COLLECTIVE_OPS["ALLREDUCE"])
    assert (e0.peer[5], e0.op[5], e0.size_recv[5]) == (1, COLLECTIVE_OPS["BCAST"], 4)
    assert (e0.peer[6], e0.op[6], e0.size[6], e0.size_recv[6]) == (-1, 17, 0, 0)
    assert e0.size[8] == 3500
    assert e0.payload[9] == {"mode": "off"}
    assert e0.payload[10] == {"mode": "on"}
    assert e0.payload[11] == {"status": 0}

    e7 = t.events[7]
    assert [KIND_NAMES[k] for k in e7.kind] == [
        "ProgramBegin", "MpiRecv", "Metric", "MpiIsend", "ParameterString", "ParameterInt",
        "ProgramEnd"]
    assert e7.payload[0] == {"name": "x", "args": []}
    assert (e7.peer[1], e7.comm[1], e7.tag[1], e7.size[1]) == (0, 1, 10, 16384)
    assert e7.payload[2] == {"metric_ref": "0", "values": "1,2,3"}
    assert (e7.peer[3], e7.comm[3], e7.tag[3], e7.size[3], e7.request[3]) == (0, 1, -5, 0, 77)
    assert e7.payload[4] == {"parameter_ref": "2", "string": 'two words "quoted" \\ \x01'}
    assert e7.payload[5] == {"parameter_ref": "1", "value": "-3", "note": "a#b"}
    assert e7.payload[6] == {"status": -(2**63)}
    for i in (2, 4, 5):  # uninterpreted kinds: all columns unused
        assert e7.region[i] == e7.peer[i] == e7.comm[i] == e7.size[i] == e7.op[i] == -1

    e3 = t.events[3]
    assert list(e3.time) == [3800, 3800, 3900]
    assert e3.payload[2] == {}


def test_full_trace_round_trips(tmp_path):
    t = read_text(write(tmp_path, FULL))
    t2 = roundtrip(t, tmp_path)
    assert_traces_equal(t, t2)
    t3 = roundtrip(t2, tmp_path, "rt2.trace")
    assert_traces_equal(t, t3)
    # the writer is deterministic
    assert (tmp_path / "rt.trace").read_text() == (tmp_path / "rt2.trace").read_text()


def test_region_role_and_paradigm(tmp_path):
    """Optional role= and paradigm= of a region (upper case; R8 finds OpenMP barriers by
    them); the writer keeps them on barrier regions, other regions stay plain."""
    text = ("compensate-trace 1\ntimer_resolution 1000\nlocation 0\n"
            'region 1 "!$omp barrier" role=barrier paradigm=openmp\n'
            'region 2 "f" role=FUNCTION\nregion 3 "g"\nevents\n')
    d = read_text(write(tmp_path, text)).definitions
    assert d.region_roles == {1: ("BARRIER", "OPENMP"), 2: ("FUNCTION", "UNKNOWN")}
    out = tmp_path / "b.trace"
    write_text(read_text(write(tmp_path, text)), str(out))
    lines = out.read_text().splitlines()
    assert 'region 1 "!$omp barrier" role=BARRIER paradigm=OPENMP' in lines
    assert 'region 2 "f"' in lines and 'region 3 "g"' in lines
    assert read_text(str(out)).definitions.region_roles == {1: ("BARRIER", "OPENMP")}


def test_interleaving_in_the_file_does_not_matter(tmp_path):
    a = HEADER + "1 0 Enter region=4\n2 1 Enter region=4\n3 0 Leave region=4\n4 1 Leave region=4\n"
    b = HEADER + "2 1 Enter region=4\n4 1 Leave region=4\n1 0 Enter region=4\n3 0 Leave region=4\n"
    ta, tb = read_text(write(tmp_path, a, "a.trace")), read_text(write(tmp_path, b, "b.trace"))
    assert_traces_equal(ta, tb)


def test_writer_merges_by_time_then_location_then_record_order(tmp_path):
    text = HEADER.replace("location 1 group=1\n", "location 1 group=1\nlocation 5\n") + (
        "100 5 Enter region=4\n"
        "100 1 Enter region=3\n"
        "100 1 Leave region=3\n"
        "100 0 Enter region=4\n"
        "100 0 ThreadTeamBegin\n"
        "100 0 Leave region=4\n"
        "200 5 Leave region=4\n"
        "150 0 Metric x=1\n"
    )
    t = read_text(write(tmp_path, text))
    out = tmp_path / "out.trace"
    write_text(t, str(out))
    lines = out.read_text().split("events\n", 1)[1].splitlines()
    records = [ln.split()[:3] for ln in lines if not ln.startswith("#")]
    assert records == [
        ["100", "0", "Enter"], ["100", "0", "ThreadTeamBegin"], ["100", "0", "Leave"],
        ["100", "1", "Enter"], ["100", "1", "Leave"], ["100", "5", "Enter"],
        ["150", "0", "Metric"], ["200", "5", "Leave"]]
    assert_traces_equal(t, read_text(str(out)))


def test_comment_and_whitespace_handling(tmp_path):
    text = HEADER + (
        "\n   \n"
        "  # indented comment\n"
        "10\t0\tEnter\tregion=4   # trailing comment\n"
        '20 0 ParameterString s="# not a comment" t=x#y  # comment "with quotes"\n'
        "30 0 Leave region=4\r\n"
    )
    t = read_text(write(tmp_path, text))
    e = t.events[0]
    assert list(e.time) == [10, 20, 30]
    assert e.payload[1] == {"s": "# not a comment", "t": "x#y"}


def test_empty_locations_and_no_events(tmp_path):
    t = read_text(write(tmp_path, HEADER))
    assert set(t.events) == {0, 1}
    assert all(len(e) == 0 for e in t.events.values())
    assert_traces_equal(t, roundtrip(t, tmp_path))


# ---------------------------------------------------------------------------
# Errors: always a one-line TraceError starting with FILE:LINE:

ERRORS = [
    # (text, line, message regex)
    ("", 1, r"empty trace, expected 'compensate-trace 1'"),
    ("# only a comment\n\n", 2, r"empty trace"),
    ("timer_resolution 10\n", 1, r"expected 'compensate-trace 1' as the first line"),
    ("compensate-trace 2\n", 1, r"unsupported \.trace format version '2', expected 1"),
    ("compensate-trace 1\ntimer_resolution 10\nlocation 0\n", 3,
     r"end of file before the 'events' line"),
    ("compensate-trace 1\nlocation 0\nevents\n", 3, r"missing 'timer_resolution"),
    ("compensate-trace 1\ntimer_resolution 0\n", 2, r"timer_resolution 0 is out of range"),
    ("compensate-trace 1\ntimer_resolution fast\n", 2,
     r"timer_resolution 'fast' is not an integer"),
    ("compensate-trace 1\nfoo 1\n", 2, r"unknown header line 'foo 1', expected one of"),
    ("compensate-trace 1\ntimer_resolution 1\nlocation 0\nlocation 0\n", 4,
     r"duplicate definition: location 0 already defined on line 3"),
    ("compensate-trace 1\nregion 1 \"a\"\nregion 1 \"b\"\n", 3,
     r"duplicate definition: region 1 already defined on line 2"),
    ("compensate-trace 1\ncomm 1 \"a\" -\ncomm 1 \"b\" -\n", 3,
     r"duplicate definition: comm 1 already defined on line 2"),
    ("compensate-trace 1\ntimer_resolution 1\ntimer_resolution 2\n", 3,
     r"duplicate definition: timer_resolution already given on line 2, expected it once"),
    ("compensate-trace 1\nregion 1\n", 2,
     r"expected 'region <id> \"<name>\" \[role=.*got 'region 1'"),
    ("compensate-trace 1\nregion 1 \"b\" kind=BARRIER\n", 2,
     r"unexpected field 'kind=' in region line, expected 'region <id> \"<name>\" \[role="),
    ("compensate-trace 1\nregion 1 \"b\" role=\"a b\"\n", 2,
     r"region 1: role 'a b' is not a name"),
    ("compensate-trace 1\nlocation 0 colour=red\n", 2, r"unexpected field 'colour='"),
    ("compensate-trace 1\nlocation 0 group=x\n", 2, r"location group 'x' is not an integer"),
    ("compensate-trace 1\nlocation 0 \"Master\"\n", 2,
     r"expected key=value, got '\"Master\"' \(expected 'location <id> \[group=<id>\]"),
    ("compensate-trace 1\ntimer_resolution 1\nlocation 0\ncomm 4 \"w\" 0,3\nevents\n", 4,
     r"comm 4: member rank 1 is location 3, which is not defined"),
    ('compensate-trace 1\nregion 1 "abc\n', 2, r"unterminated quoted string"),
    ('compensate-trace 1\nregion 1 "a\\qb"\n', 2, r"unknown escape '\\q' in quoted string"),
    ('compensate-trace 1\nregion 1 "a"b\n', 2, r"right after the closing quote"),
    ('compensate-trace 1\nregion 1 a"b"\n', 2, r"unexpected '\"' inside"),
    (HEADER + "foo\n", 9, r"expected '<time> <location> <kind> \[key=value \.\.\.\]', "
                          r"got 'foo'"),
    (HEADER + "1000 0\n", 9, r"expected '<time> <location> <kind>"),
    (HEADER + "10.5 0 Enter region=3\n", 9, r"time '10\.5' is not an integer"),
    (HEADER + "-1 0 Enter region=3\n", 9, r"time -1 is out of range"),
    (HEADER + "10 x Enter region=3\n", 9, r"location 'x' is not an integer"),
    (HEADER + "10 4 Enter region=3\n", 9, r"location 4 is not defined"),
    (HEADER + "10 0 Entr region=3\n", 9,
     r"unknown record kind 'Entr', did you mean 'Enter'\? expected a kind name "
     r"\(known: Enter, Leave, .*\)"),
    (HEADER + "10 0 Enter\n", 9, r"missing field 'region=' for Enter"),
    (HEADER + "10 0 Enter region=99\n", 9, r"region 99 is not defined"),
    (HEADER + "10 0 Enter region=3 region=4\n", 9, r"duplicate field 'region='"),
    (HEADER + "10 0 Enter region=3 color=red\n", 9, r"unexpected field 'color=' for Enter"),
    (HEADER + "10 0 Enter region\n", 9, r"expected key=value, got 'region'"),
    (HEADER + "10 0 MpiSend receiver=1 comm=5 tag=1 bytes=1\n", 9, r"comm 5 is not defined"),
    (HEADER + "10 0 MpiSend receiver=2 comm=1 tag=1 bytes=1\n", 9,
     r"receiver rank 2 is not in comm 1 \(2 members\)"),
    (HEADER + "10 0 MpiRecv sender=1 comm=1 tag=1\n", 9, r"missing field 'bytes=' for MpiRecv"),
    (HEADER + "10 0 MpiRecv sender=1 comm=1 tag=1 bytes=-4\n", 9, r"bytes -4 is out of range"),
    (HEADER + "10 0 MpiCollectiveEnd op=FOO comm=1\n", 9, r"unknown collective op 'FOO'"),
    (HEADER + "10 0 MpiCollectiveEnd op=BCAST comm=1 root=2\n", 9, r"root rank 2 is not in"),
    (HEADER + "10 0 MpiCollectiveBegin op=BARRIER\n", 9,
     r"unexpected field 'op=' for MpiCollectiveBegin, expected no fields"),
    (HEADER + "10 0 BufferFlush stop=5\n", 9, r"stop time 5 is before its start 10"),
    (HEADER + "10 0 MeasurementOnOff mode=maybe\n", 9, r"bad measurement mode 'maybe'"),
    (HEADER + "10 0 ProgramEnd status=ok\n", 9, r"exit status 'ok' is not an integer"),
    (HEADER + '10 0 ProgramBegin name="a" args="x\\\\y"\n', 9, r"bad escape '\\y' in args"),
    (HEADER + '10 0 Metric "v"\n', 9, r"expected key=value, got '\"v\"'"),
    (HEADER + "10 0 Enter region=3\nregion 5 \"late\"\n", 10,
     r"header line 'region' after the 'events' line"),
    (HEADER + "events\n", 9, r"header line 'events' after the 'events' line"),
    (HEADER + "1000 0 Enter region=3\n" + "5 1 Enter region=3\n" + "900 0 Leave region=3\n",
     11, r"location 0, record 1: time 900 is before the previous record's 1000$"),
]


@pytest.mark.parametrize("text,line,pattern", ERRORS)
def test_errors_name_file_and_line(tmp_path, text, line, pattern):
    path = write(tmp_path, text, "bad.trace")
    with pytest.raises(TraceError) as info:
        read_text(path)
    msg = str(info.value)
    assert "\n" not in msg
    prefix = f"{path}:{line}: "
    assert msg.startswith(prefix), msg
    assert re.search(pattern, msg[len(prefix):]), msg


def test_error_message_example_format(tmp_path):
    path = write(tmp_path, HEADER + "foo\n", "bad.trace")
    with pytest.raises(TraceError, match=r"bad\.trace:9: expected '<time> <location> <kind> "
                                         r"\[key=value \.\.\.\]', got 'foo'$"):
        read_text(path)


def test_missing_file_and_bad_encoding(tmp_path):
    with pytest.raises(TraceError, match=r"nope\.trace: cannot read the file"):
        read_text(str(tmp_path / "nope.trace"))
    p = tmp_path / "latin.trace"
    p.write_bytes(HEADER.encode() + b"1 0 Metric s=\xe9t\xe9\n")
    with pytest.raises(TraceError, match=r"latin\.trace:9: not valid UTF-8"):
        read_text(str(p))


def test_writer_rejects_what_it_cannot_represent(tmp_path):
    defs = Definitions(10, {0: Location(0)}, {1: "r"})
    b = RowBuilder()
    b.add(5, ENTER, region=1)
    b.add(4, LEAVE, region=1)
    with pytest.raises(TraceError, match=r"location 0, record 1: .*time 4 is before"):
        write_text(Trace(defs, {0: b.build()}), str(tmp_path / "x.trace"))
    b = RowBuilder()
    b.add(-5, ENTER, region=1)
    with pytest.raises(TraceError, match=r"location 0, record 0: .*negative time -5"):
        write_text(Trace(defs, {0: b.build()}), str(tmp_path / "x.trace"))
    b = RowBuilder()
    b.add(5, MEASUREMENT_ONOFF)
    with pytest.raises(TraceError, match=r"MeasurementOnOff record without an on/off mode"):
        write_text(Trace(defs, {0: b.build()}), str(tmp_path / "x.trace"))
    b = RowBuilder()
    b.add(5, KIND_CODE["Metric"], payload={"bad key": "1"})
    with pytest.raises(TraceError, match=r"field name 'bad key' cannot be written"):
        write_text(Trace(defs, {0: b.build()}), str(tmp_path / "x.trace"))
    with pytest.raises(TraceError, match=r"location 3 has records but no definition"):
        write_text(Trace(defs, {3: RowBuilder().build()}), str(tmp_path / "x.trace"))


# ---------------------------------------------------------------------------
# Payloads that are OTF2 event objects


@dataclass(eq=False)
class _FakeEnum:
    value: int
    _names: ClassVar[dict[int, str]] = {1: "ON", 2: "OFF", 5: "SOMETHING"}


class _FakeEvent:
    """Stands in for an otf2.events object of a kind the text format does not model."""

    def __init__(self) -> None:
        self.time = 123
        self.attributes = {"ignored": 1}
        self.count = 3
        self.ratio = 0.25
        self.label = "two words"
        self.handle = SimpleNamespace(_ref=42)
        self.mode = _FakeEnum(5)
        self.values = [1, 2.5]
        self.blob = object()
        self.flag = True


def test_otf2_payload_objects_written_best_effort(tmp_path):
    defs = Definitions(1000, {0: Location(0, "Master thread", 0, "MPI Rank 0")},
                       {1: "main"}, {0: Comm(0, "MPI_COMM_WORLD", (0,))}, otf2="opaque")
    b = RowBuilder()
    begin = SimpleNamespace(time=1, attributes=None, program_name="/bin/app",
                            program_arguments=["-x", "a,b"])
    b.add(1, PROGRAM_BEGIN, payload=begin)
    b.add(2, ENTER, region=1, payload=SimpleNamespace(time=2, region=object()))
    b.add(3, MEASUREMENT_ONOFF, payload=SimpleNamespace(time=3, measurement_mode=_FakeEnum(2)))
    b.add(4, KIND_CODE["IoSeek"], payload=_FakeEvent())
    b.add(5, LEAVE, region=1, payload=object())
    b.add(6, PROGRAM_END, payload=SimpleNamespace(time=6, exit_status=np.int64(-1)))
    t = Trace(defs, {0: b.build()})
    t2 = roundtrip(t, tmp_path)
    assert t2.definitions.otf2 is None
    e = t2.events[0]
    assert list(e.kind) == [PROGRAM_BEGIN, ENTER, MEASUREMENT_ONOFF, KIND_CODE["IoSeek"], LEAVE,
                            PROGRAM_END]
    assert list(e.region) == [-1, 1, -1, -1, 1, -1]
    assert e.payload == [
        {"name": "/bin/app", "args": ["-x", "a,b"]},
        None,
        {"mode": "off"},
        {"count": "3", "ratio": "0.25", "label": "two words", "handle_ref": "42",
         "mode": "SOMETHING", "values": "1,2.5", "flag": "true"},
        None,
        {"status": -1},
    ]


def test_real_otf2_event_objects(tmp_path):
    otf2 = pytest.importorskip("otf2")
    from otf2.enums import MeasurementMode, ParameterType

    param = SimpleNamespace(_ref=7, parameter_type=ParameterType.INT64)
    defs = Definitions(1000, {0: Location(0)})
    b = RowBuilder()
    b.add(1, PROGRAM_BEGIN, payload=otf2.events.ProgramBegin(1, "./pp", ["1", "2"]))
    b.add(2, MEASUREMENT_ONOFF, payload=otf2.events.MeasurementOnOff(2, MeasurementMode.OFF))
    b.add(3, MEASUREMENT_ONOFF, payload=otf2.events.MeasurementOnOff(3, MeasurementMode.ON))
    b.add(4, KIND_CODE["ParameterInt"], payload=otf2.events.ParameterInt(4, param, -12))
    b.add(5, KIND_CODE["NonBlockingCollectiveRequest"], request=99,
          payload=otf2.events.NonBlockingCollectiveRequest(5, 99))
    b.add(6, PROGRAM_END, payload=otf2.events.ProgramEnd(6, -(2**63)))
    e = roundtrip(Trace(defs, {0: b.build()}), tmp_path).events[0]
    assert e.payload == [
        {"name": "./pp", "args": ["1", "2"]},
        {"mode": "off"},
        {"mode": "on"},
        {"parameter_ref": "7", "value": "-12"},
        None,  # request ids live in the request column
        {"status": -(2**63)},
    ]
    assert e.request[4] == 99


# ---------------------------------------------------------------------------
# The bundled example


def test_the_example_in_the_format_docs_parses_and_round_trips(tmp_path):
    doc = (EXAMPLE.parent.parent / "docs" / "trace-format.md").read_text(encoding="utf-8")
    block = doc.split("## A complete example", 1)[1].split("```\n", 2)[1]
    t = read_text(write(tmp_path, block, "doc.trace"))
    assert t.record_count == 26
    assert t.events[0].payload[0] == {"name": "./a.out", "args": ["-n", "4"]}
    assert t.definitions.comms[2].members == ()
    assert_traces_equal(t, roundtrip(t, tmp_path))


def test_example_pingpong_is_valid_and_plausible(tmp_path):
    t = read_text(str(EXAMPLE))
    d = t.definitions
    assert d.timer_resolution == 1_000_000_000
    assert set(t.events) == {0, 1}
    names = {v: k for k, v in d.regions.items()}
    for loc, e in t.events.items():
        kinds = [KIND_NAMES[k] for k in e.kind]
        assert kinds[0] == "ProgramBegin" and kinds[-1] == "ProgramEnd"
        assert kinds[1] == "Enter" and e.region[1] == names["main"]
        assert kinds[-2] == "Leave" and e.region[-2] == names["main"]
        assert np.all(np.diff(e.time) >= 1000), loc  # ~1 us tracer overhead per record
        assert kinds.count("MpiSend") == kinds.count("MpiRecv") == 4
        assert kinds.count("MpiCollectiveEnd") == 1
        coll = kinds.index("MpiCollectiveEnd")
        assert e.op[coll] == COLLECTIVE_OPS["BARRIER"]
        assert kinds[coll - 2:coll + 2] == ["Enter", "MpiCollectiveBegin", "MpiCollectiveEnd",
                                            "Leave"]
        assert e.region[coll - 2] == names["MPI_Barrier"]
        for i, k in enumerate(kinds):  # every message record sits inside its call
            if k in ("MpiSend", "MpiRecv"):
                call = names["MPI_Send" if k == "MpiSend" else "MPI_Recv"]
                assert kinds[i - 1] == "Enter" and e.region[i - 1] == call
                assert kinds[i + 1] == "Leave" and e.region[i + 1] == call
    # k-th send on (sender, receiver, comm, tag) matches the k-th receive; recv after send
    sends, recvs = {}, {}
    for loc, e in t.events.items():
        for i in range(len(e)):
            if e.kind[i] == SEND:
                dst = d.location_of(int(e.comm[i]), int(e.peer[i]))
                key = (loc, dst, int(e.comm[i]), int(e.tag[i]))
                sends.setdefault(key, []).append((int(e.time[i]), int(e.size[i])))
            elif e.kind[i] == RECV:
                src = d.location_of(int(e.comm[i]), int(e.peer[i]))
                key = (src, loc, int(e.comm[i]), int(e.tag[i]))
                recvs.setdefault(key, []).append((int(e.time[i]), int(e.size[i])))
    assert sends.keys() == recvs.keys()
    sizes = set()
    for key in sends:
        assert len(sends[key]) == len(recvs[key])
        for (ts, ss), (tr, sr) in zip(sends[key], recvs[key], strict=True):
            assert tr > ts and ss == sr
            sizes.add(ss)
    assert sizes == {1024, 2048, 4096, 8192}
    # barrier: nobody leaves before the last one entered
    begins = [int(e.time[e.kind == COLL_BEGIN][0]) for e in t.events.values()]
    ends = [int(e.time[e.kind == COLL_END][0]) for e in t.events.values()]
    assert min(ends) > max(begins)
    assert_traces_equal(t, roundtrip(t, tmp_path))


# ---------------------------------------------------------------------------
# Property: any valid model trace survives write -> read exactly

_ids = st.integers(0, 10_000)
_key = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,8}", fullmatch=True)
_int64 = st.integers(-(2**63), 2**63 - 1)
_size = st.integers(0, 2**63 - 1)
_UNINTERPRETED = [k for k in range(len(KIND_NAMES))
                  if k not in INTERPRETED and k not in (MEASUREMENT_ONOFF, PROGRAM_BEGIN,
                                                        PROGRAM_END)]


@st.composite
def traces(draw) -> Trace:
    loc_ids = draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    locations = {i: Location(i, draw(st.text(max_size=6)), draw(_ids), draw(st.text(max_size=6)))
                 for i in loc_ids}
    regions = draw(st.dictionaries(st.integers(0, 2**31 - 1), st.text(max_size=8), max_size=4))
    comms = {}
    for cid in draw(st.lists(st.integers(0, 2**31 - 1), max_size=3, unique=True)):
        members = draw(st.lists(st.sampled_from(loc_ids), max_size=4))
        comms[cid] = Comm(cid, draw(st.text(max_size=8)), tuple(members))
    nonempty = [c for c in comms.values() if c.members]
    defs = Definitions(draw(st.integers(1, 2**63 - 1)), locations, regions, comms)
    choices = ["uninterpreted", "onoff", "begin", "end", "flush", "cbegin"]
    if regions:
        choices += ["enter", "leave"]
    if nonempty:
        choices += ["send", "recv", "cend"]
    events = {}
    for loc in loc_ids:
        b = RowBuilder()
        t = draw(st.integers(0, 10**15))
        for _ in range(draw(st.integers(0, 12))):
            t += draw(st.sampled_from([0, 0, 1, 7, 1000]))
            what = draw(st.sampled_from(choices))
            if what in ("enter", "leave"):
                b.add(t, ENTER if what == "enter" else LEAVE,
                      region=draw(st.sampled_from(sorted(regions))))
            elif what in ("send", "recv", "cend"):
                c = draw(st.sampled_from(nonempty))
                rank = draw(st.integers(0, len(c.members) - 1))
                if what == "cend":
                    b.add(t, COLL_END, peer=draw(st.sampled_from([-1, rank])), comm=c.id,
                          size=draw(_size), size_recv=draw(_size),
                          op=draw(st.sampled_from(sorted(COLLECTIVE_OPS.values()))))
                else:
                    b.add(t, SEND if what == "send" else RECV, peer=rank, comm=c.id,
                          tag=draw(_int64), size=draw(_size))
            elif what == "cbegin":
                b.add(t, COLL_BEGIN)
            elif what == "flush":
                b.add(t, BUFFER_FLUSH, size=t + draw(st.integers(0, 10**6)))
            elif what == "onoff":
                b.add(t, MEASUREMENT_ONOFF, payload={"mode": draw(st.sampled_from(["on", "off"]))})
            elif what == "begin":
                b.add(t, PROGRAM_BEGIN, payload={"name": draw(st.text(max_size=10)),
                                                 "args": draw(st.lists(st.text(max_size=5),
                                                                       max_size=3))})
            elif what == "end":
                b.add(t, PROGRAM_END, payload={"status": draw(_int64)})
            else:
                b.add(t, draw(st.sampled_from(_UNINTERPRETED)),
                      payload=draw(st.dictionaries(_key, st.text(max_size=8), max_size=3)))
        events[loc] = b.build()
    return Trace(defs, events)


# 75 examples (150 before): every kind of line also round-trips by hand in FULL
# (test_full_trace_round_trips) and in the format docs' example, and
# tests/formats/test_writer.py writes and reads FULL, the simulated programs and the
# real archives as text
@settings(max_examples=75, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(trace=traces())
def test_random_traces_round_trip(tmp_path, trace):
    back = roundtrip(trace, tmp_path)
    assert_traces_equal(trace, back)


_FUZZ_ALPHABET = list(' \t\n"\\#=,-0123456789abcxyzEnterLeave') + ["\x00", "\r", "\u2028", "é"]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, len(FULL)), st.integers(0, 3),
                                st.sampled_from(_FUZZ_ALPHABET)), min_size=1, max_size=4))
def test_damaged_input_gives_a_trace_or_a_one_line_trace_error(tmp_path, edits):
    text = list(FULL)
    for pos, n_deleted, char in edits:
        text[pos:pos + n_deleted] = [char]
    path = write(tmp_path, "".join(text), "fuzz.trace")
    try:
        read_text(path)
    except TraceError as e:
        assert "\n" not in str(e)
        assert str(e).startswith(path + ":")
