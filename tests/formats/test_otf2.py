"""Tests for compensate.formats.otf2: OTF2 round trips must be invisible to OTF2 tools.

The compensated archive has to open in the same tools as the measured one, with
the same definitions and records, only the timestamps changed. So the round trips
of the real Score-P archives are checked against the reference reader
``otf2-print`` (when installed) and, always, by reading the written archive back.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections import Counter

import numpy as np
import pytest

from compensate.formats.otf2 import Otf2Archive, read_otf2, write_otf2
from compensate.model import (
    BUFFER_FLUSH,
    COLL_BEGIN,
    COLL_END,
    COLLECTIVE_OPS,
    COLUMNS,
    ENTER,
    KIND_CODE,
    KIND_NAMES,
    LEAVE,
    MEASUREMENT_ONOFF,
    METRIC,
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

from ..conftest import TRACES

REAL = {
    "plain": TRACES / "ping-pong-otf2" / "traces.otf2",
    "papi": TRACES / "ping-pong-otf2-papi" / "traces.otf2",
}
OTF2_PRINT = shutil.which("otf2-print")


def _need_otf2_print() -> None:
    if OTF2_PRINT is None:
        pytest.skip("otf2-print is not installed")


def otf2_print(*args: str | os.PathLike) -> str:
    """Run otf2-print; it must succeed without errors or warnings."""
    res = subprocess.run([OTF2_PRINT, *map(str, args)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr
    return res.stdout


def assert_same_records(a: Trace, b: Trace) -> None:
    """Same locations (in order), same kinds and same columns everywhere."""
    assert list(a.events) == list(b.events)
    for loc in a.events:
        ea, eb = a.events[loc], b.events[loc]
        assert [KIND_NAMES[k] for k in ea.kind] == [KIND_NAMES[k] for k in eb.kind], loc
        for name, _ in COLUMNS:
            np.testing.assert_array_equal(getattr(ea, name), getattr(eb, name),
                                          err_msg=f"location {loc}, column {name}")


def payload_fields(trace: Trace) -> dict[int, list[dict[str, str]]]:
    """Every payload field but the timestamps, rendered for comparison (definition
    objects render with their reference and name)."""
    return {loc: [{k: repr(v) for k, v in vars(p).items() if k not in ("time", "stop_time")}
                  for p in ev.payload] for loc, ev in trace.events.items()}


def shifted(trace: Trace, delta: int) -> Trace:
    """The trace with every timestamp (and BufferFlush stop time) moved by delta."""
    times = {loc: ev.time + delta for loc, ev in trace.events.items()}
    sizes = {loc: np.where(ev.kind == BUFFER_FLUSH, ev.size + delta, ev.size)
             for loc, ev in trace.events.items()}
    return trace.with_times(times, sizes)


def clock_line(listing: str) -> dict[str, str]:
    line = next(ln for ln in listing.splitlines() if ln.startswith("CLOCK_PROPERTIES"))
    fields = line[len("CLOCK_PROPERTIES"):].strip()
    return dict(part.split(": ", 1) for part in fields.split(", "))


def anchor_info(listing: str) -> list[str]:
    keep = ("Creator", "Description", "Machine name", "Number of properties",
            "Property name", "Property value", "Number of locations",
            "Chunk size events", "Chunk size definitions")
    return [ln for ln in listing.splitlines() if ln.startswith(keep)]


def events_per_location(listing: str) -> Counter:
    counts: Counter = Counter()
    for line in listing.splitlines():
        parts = line.split()
        if line[:1].strip() and len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
            counts[int(parts[1])] += 1
    return counts


# ---------------------------------------------------------------------------
# Real Score-P archives


@pytest.fixture(scope="module", params=sorted(REAL))
def real(request, tmp_path_factory):
    """(input anchor, trace, unchanged copy, shifted copy) for one real archive.

    The shifted copy is written first, so the unchanged copy also shows that
    timestamps come from the columns and not from the (shared) payload objects."""
    src = REAL[request.param]
    if not src.exists():
        pytest.skip(f"{src} is not available")
    trace = read_otf2(str(src))
    out = tmp_path_factory.mktemp(request.param)
    shift_path = out / "shift" / "traces.otf2"
    write_otf2(shifted(trace, 12345), str(shift_path))
    same_path = out / "same" / "traces.otf2"
    write_otf2(trace, str(same_path))
    return src, trace, same_path, shift_path


def test_read_real_model(real):
    src, trace, _, _ = real
    d = trace.definitions
    assert trace.source == str(src)
    assert isinstance(d.otf2, Otf2Archive)
    assert d.timer_resolution > 10**9
    assert list(d.locations) == list(trace.events) == list(d.otf2.location_order) == [0, 1]
    assert d.locations[0].group_name == "MPI Rank 0"
    world = next(c for c in d.comms.values() if c.name == "MPI_COMM_WORLD")
    assert world.members == (0, 1)
    self_comm = next(c for c in d.comms.values() if c.name == "MPI_COMM_SELF")
    assert self_comm.members == ()
    assert d.otf2.creator.startswith("Score-P")
    assert ("OTF2::MPI_COMMUNICATION_COMPLETE", "true") in d.otf2.properties
    for loc, ev in trace.events.items():
        assert len(ev) == len(ev.payload) > 0
        assert np.all(np.diff(ev.time) >= 0)
        assert [type(p).__name__ for p in ev.payload] == [KIND_NAMES[k] for k in ev.kind]
        sends = np.flatnonzero(ev.kind == SEND)
        recvs = np.flatnonzero(ev.kind == RECV)
        assert len(sends) == len(recvs) == 8
        assert set(ev.peer[sends]) == set(ev.peer[recvs]) == {1 - loc}
        assert set(ev.comm[sends]) == {world.id}
        assert np.all(ev.size[sends] >= 16384)
        enters = ev.kind == ENTER
        assert d.regions[int(ev.region[enters][0])] == "int main(int, char**)"
        assert np.all(ev.region[~(enters | (ev.kind == LEAVE))] == -1)
        assert ev.kind[0] == PROGRAM_BEGIN and ev.kind[-1] == PROGRAM_END
        assert ev.payload[0].attributes  # Score-P's ProcessId attribute
        if "papi" in str(src):
            assert np.count_nonzero(ev.kind == METRIC) > 0


def test_real_roundtrip_read_back(real):
    src, trace, same_path, shift_path = real
    back = read_otf2(str(same_path))
    assert_same_records(trace, back)
    # Attributes, metric values, program names ... all came through unchanged.
    assert payload_fields(back) == payload_fields(trace)
    assert back.definitions.comms == trace.definitions.comms
    assert back.definitions.locations == trace.definitions.locations
    assert back.definitions.regions == trace.definitions.regions
    a, b = trace.definitions.otf2, back.definitions.otf2
    for field in ("timer_resolution", "realtime_timestamp",
                  "creator", "description", "machine_name", "properties",
                  "chunk_size_events", "chunk_size_definitions", "location_order"):
        assert getattr(a, field) == getattr(b, field), field
    assert (b.global_offset, b.trace_length) == _span(back)

    moved = read_otf2(str(shift_path))
    assert_same_records(shifted(trace, 12345), moved)
    assert payload_fields(moved) == payload_fields(trace)
    m = moved.definitions.otf2
    # the clock describes the output: its first record and the span to its last
    assert (m.global_offset, m.trace_length) == _span(moved)
    assert m.global_offset == _span(trace)[0] + 12345
    assert m.realtime_timestamp == a.realtime_timestamp


def _span(trace):
    """(first timestamp, last - first) of a trace's records."""
    first = min(int(ev.time[0]) for ev in trace.events.values() if len(ev))
    last = max(int(ev.time[-1]) for ev in trace.events.values() if len(ev))
    return first, last - first


def test_real_roundtrip_otf2_print(real):
    _need_otf2_print()
    src, _, same_path, shift_path = real
    # Events listing: byte for byte.
    assert otf2_print(same_path) == otf2_print(src)
    # Definitions: the same lines in the same order (written as they were read).
    defs_in, defs_out = otf2_print("-G", src), otf2_print("-G", same_path)
    assert defs_out == defs_in
    # Anchor file: same creator, description, machine name and properties.
    assert anchor_info(otf2_print("-A", same_path)) == anchor_info(otf2_print("-A", src))
    assert any(ln.startswith("Creator") and "Score-P" in ln
               for ln in anchor_info(otf2_print("-A", src)))

    # Shifted: only CLOCK_PROPERTIES' global offset differs among the definitions (it
    # is the output's first record, now 12345 ticks later; the span is the same)
    defs_shift = otf2_print("-G", shift_path)
    rest = sorted(ln for ln in defs_shift.splitlines() if not ln.startswith("CLOCK_PROP"))
    assert rest == sorted(ln for ln in defs_in.splitlines() if not ln.startswith("CLOCK_PROP"))
    c_in, c_out = clock_line(defs_in), clock_line(defs_shift)
    assert c_out["Ticks per Seconds"] == c_in["Ticks per Seconds"]
    assert int(c_out["Length"]) == int(c_in["Length"])
    assert c_out["Date"] == c_in["Date"]  # the input's realtime timestamp, not "now"
    assert int(c_out["Global Offset"]) == int(c_in["Global Offset"]) + 12345
    ev_in, ev_shift = otf2_print(src), otf2_print(shift_path)
    stamps_in = [int(t) for t in re.findall(r"^\S+\s+\d+\s+(\d+)", ev_in, re.M)]
    stamps_out = [int(t) for t in re.findall(r"^\S+\s+\d+\s+(\d+)", ev_shift, re.M)]
    assert stamps_out == [t + 12345 for t in stamps_in]
    assert re.sub(r"^(\S+\s+\d+\s+)\d+", r"\1", ev_in, flags=re.M) == \
        re.sub(r"^(\S+\s+\d+\s+)\d+", r"\1", ev_shift, flags=re.M)


# ---------------------------------------------------------------------------
# Traces built from scratch (as the text reader builds them)


def generated_trace() -> Trace:
    """3 ranks, MPI_COMM_WORLD, a sub-communicator with ranks (2, 0) and
    MPI_COMM_SELF; every record kind the engine interprets."""
    regions = {0: "main", 2: "MPI_Recv", 1: "MPI_Send", 3: "MPI_Bcast", 4: "MPI_Barrier",
               5: "compute"}
    locations = {i: Location(i, "Master thread", i, f"MPI Rank {i}") for i in range(3)}
    comms = {0: Comm(0, "MPI_COMM_WORLD", (0, 1, 2)), 1: Comm(1, "sub", (2, 0)),
             2: Comm(2, "MPI_COMM_SELF", ())}
    defs = Definitions(timer_resolution=1_000_000_000, locations=locations, regions=regions,
                       comms=comms)
    bcast, barrier = COLLECTIVE_OPS["BCAST"], COLLECTIVE_OPS["BARRIER"]

    def coll(rb: RowBuilder, t: int, region: int, comm: int, op: int, root: int,
             sent: int, recvd: int) -> int:
        rb.add(t, ENTER, region=region)
        rb.add(t + 1, COLL_BEGIN)
        rb.add(t + 5, COLL_END, comm=comm, op=op, peer=root, size=sent, size_recv=recvd)
        rb.add(t + 6, LEAVE, region=region)
        return t + 10

    r0, r1, r2 = RowBuilder(), RowBuilder(), RowBuilder()
    r0.add(100, PROGRAM_BEGIN, payload={"name": "./app", "args": ["-n", "3"]})
    r0.add(110, ENTER, region=0)
    r0.add(111, MEASUREMENT_ONOFF, payload={"mode": "off"})
    r0.add(112, MEASUREMENT_ONOFF, payload={"mode": "on"})
    r0.add(120, ENTER, region=1)
    r0.add(121, SEND, peer=1, comm=0, tag=42, size=1024)
    r0.add(125, LEAVE, region=1)
    t = coll(r0, 130, 3, 1, bcast, 0, 0, 64)           # root: rank 0 of sub = location 2
    r0.add(t, BUFFER_FLUSH, size=t + 50)
    r0.add(t + 60, ENTER, region=5)
    r0.add(t + 70, LEAVE, region=5)
    t = coll(r0, t + 80, 4, 0, barrier, -1, 0, 0)       # no root
    r0.add(t, LEAVE, region=0)
    r0.add(t + 1, PROGRAM_END, payload={"status": 0})

    r1.add(101, PROGRAM_BEGIN, payload={})             # missing keys -> defaults
    r1.add(115, ENTER, region=0)
    r1.add(120, ENTER, region=2)
    r1.add(150, RECV, peer=0, comm=0, tag=42, size=1024)
    r1.add(151, LEAVE, region=2)
    t = coll(r1, 300, 4, 0, barrier, -1, 0, 0)
    r1.add(t, LEAVE, region=0)
    r1.add(t + 1, PROGRAM_END, payload={"status": 3})

    r2.add(102, PROGRAM_BEGIN, payload={"name": "./app", "args": []})
    r2.add(116, ENTER, region=0)
    t = coll(r2, 130, 3, 1, bcast, 0, 64, 0)
    t = coll(r2, 300, 4, 0, barrier, -1, 0, 0)
    r2.add(t, LEAVE, region=0)
    r2.add(t + 1, PROGRAM_END, payload={})
    events = {0: r0.build(), 1: r1.build(), 2: r2.build()}
    return Trace(defs, events, source="generated.trace")


def test_generated_roundtrip(tmp_path):
    trace = generated_trace()
    kinds = {KIND_NAMES[k] for ev in trace.events.values() for k in ev.kind}
    assert kinds >= {"Enter", "Leave", "MpiSend", "MpiRecv", "MpiCollectiveBegin",
                     "MpiCollectiveEnd", "BufferFlush", "MeasurementOnOff", "ProgramBegin",
                     "ProgramEnd"}
    path = tmp_path / "gen" / "traces.otf2"
    write_otf2(trace, str(path))
    back = read_otf2(str(path))
    assert_same_records(trace, back)
    d, b = trace.definitions, back.definitions
    assert b.timer_resolution == d.timer_resolution
    assert b.regions == d.regions
    assert b.comms == d.comms
    assert b.location_of(1, 0) == 2 and b.location_of(1, 1) == 0
    assert b.locations == d.locations
    assert b.otf2.realtime_timestamp == 2**64 - 1  # undefined, not "now"
    assert b.otf2.creator == "compensate"
    # root -1 -> OTF2 undefined root -> -1; a real root stays a rank.
    ends = back.events[0].kind == COLL_END
    assert back.events[0].peer[ends].tolist() == [0, -1]
    # Text payload fields made it into the OTF2 records.
    p0 = back.events[0].payload
    assert p0[0].program_name == "./app" and list(p0[0].program_arguments) == ["-n", "3"]
    assert [str(p.measurement_mode) for p in p0 if KIND_CODE[type(p).__name__]
            == MEASUREMENT_ONOFF] == ["MeasurementMode.OFF", "MeasurementMode.ON"]
    assert p0[-1].exit_status == 0
    assert back.events[1].payload[-1].exit_status == 3
    assert back.events[1].payload[0].program_name == ""
    assert back.events[2].payload[-1].exit_status == 0

    if OTF2_PRINT is not None:
        listing = otf2_print(path)
        assert events_per_location(listing) == {
            loc: len(ev) for loc, ev in trace.events.items()}
        defs = otf2_print("-G", path)
        assert "MPI_COMM_WORLD" in defs and "COMM_LOCATIONS" in defs
        assert "Date: UNDEFINED" in defs


def test_generated_empty_location_and_shift(tmp_path):
    trace = generated_trace()
    trace.definitions.locations[3] = Location(3, "idle", 3, "")
    trace.events[3] = RowBuilder().build()
    moved = shifted(trace, 10**12)
    path = tmp_path / "traces.otf2"
    write_otf2(moved, str(path))
    back = read_otf2(str(path))
    assert_same_records(moved, back)
    assert len(back.events[3]) == 0
    assert back.definitions.locations[3].group_name == "MPI Rank 3"
    assert back.definitions.otf2.global_offset == 100 + 10**12
    if OTF2_PRINT is not None:
        assert "# Events: 0" in otf2_print("-G", path)


def test_write_trace_twice_from_same_definitions(tmp_path):
    # Writing a text trace must not mutate anything needed by a second write.
    trace = generated_trace()
    write_otf2(trace, str(tmp_path / "a" / "traces.otf2"))
    write_otf2(shifted(trace, 7), str(tmp_path / "b" / "traces.otf2"))
    assert_same_records(shifted(trace, 7), read_otf2(str(tmp_path / "b" / "traces.otf2")))


# ---------------------------------------------------------------------------
# Errors


def test_missing_archive(tmp_path):
    path = tmp_path / "nothing" / "traces.otf2"
    with pytest.raises(TraceError) as err:
        read_otf2(str(path))
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_garbage_archive(tmp_path, capfd):
    path = tmp_path / "traces.otf2"
    path.write_bytes(b"this is not an OTF2 anchor file\n" * 20)
    with pytest.raises(TraceError) as err:
        read_otf2(str(path))
    msg = str(err.value)
    assert msg.startswith(str(path)) and "OTF2" in msg and "\n" not in msg
    # The library's own diagnostics went into the message, not onto stderr.
    assert "[OTF2]" not in capfd.readouterr().err


def test_truncated_event_file(tmp_path):
    src = REAL["plain"].parent
    if not src.exists():
        pytest.skip("real archive not available")
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    evt = dst / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:300])
    with pytest.raises(TraceError) as err:
        read_otf2(str(dst / "traces.otf2"))
    assert str(dst / "traces.otf2") in str(err.value)


def test_time_going_backwards_on_write(tmp_path):
    trace = generated_trace()
    times = {loc: e.time.copy() for loc, e in trace.events.items()}
    times[1][3] = times[1][2] - 10  # record 3 of location 1 before record 2
    path = tmp_path / "bad" / "traces.otf2"
    with pytest.raises(TraceError) as err:
        write_otf2(trace.with_times(times), str(path))
    msg = str(err.value)
    assert str(path) in msg and "location 1" in msg and "record 3" in msg


def test_time_going_backwards_on_read(tmp_path):
    # The OTF2 writer refuses such archives, so write a good one and then patch
    # one timestamp in the event file (stored as a full little-endian uint64).
    trace = shifted(generated_trace(), 1 << 40)
    path = tmp_path / "bad" / "traces.otf2"
    write_otf2(trace, str(path))
    ev = trace.events[1]
    evt = tmp_path / "bad" / "traces" / "1.evt"
    data = evt.read_bytes()
    old = struct.pack("<Q", int(ev.time[3]))
    assert data.count(old) == 1
    evt.write_bytes(data.replace(old, struct.pack("<Q", int(ev.time[2]) - 10)))
    with pytest.raises(TraceError) as err:
        read_otf2(str(path))
    msg = str(err.value)
    assert str(path) in msg and "location 1" in msg and "record 3" in msg
    assert "\n" not in msg


def test_write_refuses_existing_archive(tmp_path):
    trace = generated_trace()
    path = tmp_path / "traces.otf2"
    write_otf2(trace, str(path))
    with pytest.raises(TraceError, match="already exists"):
        write_otf2(trace, str(path))
    with pytest.raises(TraceError, match=r"NAME\.otf2"):
        write_otf2(trace, str(tmp_path / "other" / "traces"))


def test_write_rejects_negative_times(tmp_path):
    trace = generated_trace()
    with pytest.raises(TraceError) as err:
        write_otf2(shifted(trace, -101), str(tmp_path / "traces.otf2"))
    assert "location 0" in str(err.value) and "record 0" in str(err.value)


def test_write_unsupported_text_kind(tmp_path):
    trace = generated_trace()
    rb = RowBuilder()
    rb.add(5, KIND_CODE["ProgramBegin"], payload={"name": "x"})
    rb.add(6, KIND_CODE["Metric"], payload={"value": "1"})
    trace.events[2] = rb.build()
    with pytest.raises(TraceError) as err:
        write_otf2(trace, str(tmp_path / "traces.otf2"))
    msg = str(err.value)
    assert "cannot write record kind Metric to OTF2 from a text trace" in msg
    assert "location 2" in msg and "record 1" in msg


def test_write_unknown_region_is_trace_error(tmp_path):
    trace = generated_trace()
    trace.events[0].region[1] = 99
    with pytest.raises(TraceError) as err:
        write_otf2(trace, str(tmp_path / "traces.otf2"))
    assert "location 0" in str(err.value) and "record 1" in str(err.value)


def test_local_definition_writers_taken_at_close(tmp_path, monkeypatch):
    """Each location's local definition writer is taken only at close, one after
    the other, so its definition-size chunk is mapped once or twice (the pool),
    not once per location; the files are those of the ``otf2`` package's own
    event writer, which takes it at once (all but the anchor's random trace id)."""
    import ctypes
    import filecmp

    import otf2

    from compensate.formats.otf2 import write as w
    from compensate.simulate import simulate

    trace = simulate("stencil", ranks=6, iterations=2).measured
    sizes: list[int] = []
    real_map = w._map_chunk

    def counting_map(size):
        sizes.append(size)
        return real_map(size)

    monkeypatch.setattr(w, "_map_chunk", counting_map)
    write_otf2(trace, str(tmp_path / "lazy" / "traces.otf2"))
    assert sizes.count(4 << 20) <= 2  # 4 MiB: the global and the local definition chunks
    assert sizes.count(1 << 20) == 6  # one event chunk per location

    monkeypatch.setattr(w._ArchiveWriter, "event_writer_from_location",
                        otf2.writer.Writer.event_writer_from_location)
    sizes.clear()
    write_otf2(trace, str(tmp_path / "stock" / "traces.otf2"))
    assert sizes.count(4 << 20) >= 6  # the stock writers hold one each from the start
    a, b = tmp_path / "lazy", tmp_path / "stock"
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    assert sum(f.endswith(".def") for f in files) == 7  # 6 local + global
    assert [f for f in files if not filecmp.cmp(a / f, b / f, shallow=False)] == ["traces.otf2"]

    # a chunk of whole huge pages is aligned to them, and usable
    ptr = real_map(4 << 20)
    assert ptr and ptr % (2 << 20) == 0
    ctypes.memset(ptr, 2, 4 << 20)
    w._unmap_chunk(ptr, 4 << 20)
