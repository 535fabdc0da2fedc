"""Reading and writing only some locations (issue #21, the parallel replay's I/O;
compensate/formats/parts.py and the ``locations=`` selection of the readers).

* A selection read gives exactly the selected locations, each record for record
  what the whole read gives (index i = the i-th record of the location), on the
  C path, the ``otf2`` package path and the text reader, whole and in chunks; an
  OTF2 selection does not even open the other locations' files; a text selection
  does not parse the other locations' lines; an unknown id is a one-line error.
* Parts written "rank by rank" in one process (2 and 3 parts, one of them
  empty) and committed give the one-process output: an OTF2 archive equal byte
  for byte but the anchor file's random trace id (which differs between any two
  one-process runs too), opening in ``otf2-print``; a ``.trace`` file equal byte
  for byte. Also with compensated (changed) times on a simulated program.
* ``abort`` (or a failed ``commit``) leaves nothing at the output.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import _otf2
import numpy as np
import pytest

import compensate as c
from compensate.formats import (
    location_record_counts,
    read_chunks,
    read_trace,
    write_trace,
)
from compensate.formats import parts as P
from compensate.formats.text import parts as text_parts
from compensate.model import COLUMNS, Trace, TraceError
from compensate.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
REAL_ARCHIVES = sorted((ROOT / "tests" / "data" / "traces").glob("*/traces.otf2"))
#: the largest (73,000 records in 32 locations) only where it is read and written by
#: the C path: through the ``otf2`` package (an object per record) it takes seconds
LARGE = "hip-two-gpu-metrics"
SMALL = [p for p in REAL_ARCHIVES if p.parent.name != LARGE]

PINGPONG = ROOT / "examples" / "pingpong.trace"
OTF2_PRINT = shutil.which("otf2-print")


def splits(locs: list[int]) -> list[list[list[int]]]:
    """The locations in 2 parts (alternating) and in 3 (one of them empty)."""
    return [[locs[0::2], locs[1::2]], [locs[1:], [], locs[:1]]]


def same_columns(a, b) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n, _ in COLUMNS)


@pytest.fixture(scope="module")
def real() -> dict[str, Trace]:
    """The whole traces, read by the C path (columns; payloads copied from the input)."""
    out = {}
    for p in REAL_ARCHIVES:
        defs, chunks = read_chunks(p, 1 << 30, payload=False)
        chunk = next(chunks, {})
        out[p.parent.name] = Trace(defs, {k: chunk[k] for k in defs.otf2.location_order})
    return out


# ---------------------------------------------------------------------------
# Reading a selection


def test_otf2_selection_reads_those_locations_record_for_record(real):
    """The C path (``read_chunks(payload=False)``) on every archive; the ``otf2``
    package path (``read_trace``, an object per record) on the small ones."""
    for path in REAL_ARCHIVES:
        whole = real[path.parent.name]
        for part in splits(list(whole.events))[1]:
            if path.parent.name != LARGE:
                got = read_trace(path, part)
                assert list(got.events) == part
                assert all(same_columns(got.events[k], whole.events[k]) for k in part)
            # chunked: at most 500 selected records a chunk, concatenated the location
            defs, chunks = read_chunks(path, 500, payload=False, locations=part)
            pieces: dict[int, list] = {}
            for chunk in chunks:
                assert set(chunk) <= set(part) and sum(map(len, chunk.values())) <= 500
                for k, ev in chunk.items():
                    pieces.setdefault(k, []).append(ev.time)
            assert len(defs.locations) == len(whole.definitions.locations)
            for k in part:
                t = np.concatenate(pieces[k]) if k in pieces else np.zeros(0, np.int64)
                assert np.array_equal(t, whole.events[k].time)


def test_otf2_selection_opens_no_other_event_file(tmp_path):
    """With another location's files deleted, a selection without it still reads
    (on both paths); one with it fails naming the missing file."""
    src = next(p for p in REAL_ARCHIVES if p.parent.name == "jacobi-mpi-openmp-cuda")
    shutil.copytree(src.parent, tmp_path / "a")
    anchor = tmp_path / "a" / "traces.otf2"
    for suffix in (".evt", ".def"):
        (tmp_path / "a" / "traces" / f"1{suffix}").unlink()
    whole = read_trace(src)
    others = [k for k in whole.events if k != 1]
    got = read_trace(anchor, iter(others))  # any iterable of ids
    assert list(got.events) == others
    assert all(same_columns(got.events[k], whole.events[k]) for k in others)
    _, chunks = read_chunks(anchor, 1000, payload=False, locations=others)
    assert type(chunks).__name__ == "NativeChunks"
    assert sum(len(ev) for ch in chunks for ev in ch.values()) == \
        sum(len(whole.events[k]) for k in others)
    with pytest.raises(TraceError, match="location 1, record 0: its event file traces/1.evt "
                       "cannot be read: the file does not exist"):
        read_trace(anchor, [1])


def test_text_selection_keeps_and_parses_only_its_lines(tmp_path):
    whole = read_trace(PINGPONG)
    for part in ([0], [1], []):
        got = read_trace(PINGPONG, iter(part))
        assert list(got.events) == part
        for k in part:
            assert same_columns(got.events[k], whole.events[k])
            assert got.events[k].payload == whole.events[k].payload
        _, chunks = read_chunks(PINGPONG, 4, locations=part)
        sizes = [sum(map(len, ch.values())) for ch in chunks]
        assert all(s <= 4 for s in sizes) and sum(sizes) == sum(len(whole.events[k])
                                                                for k in part)
    # a bad record of location 1 is not even parsed by a reader of location 0
    lines = PINGPONG.read_text().splitlines(keepends=True)
    i = next(j for j, ln in enumerate(lines) if ln.split()[1:3] == ["1", "Enter"])
    lines[i] = lines[i].replace("region=", "regio=")
    bad = tmp_path / "bad.trace"
    bad.write_text("".join(lines))
    assert len(read_trace(bad, [0]).events[0]) == len(whole.events[0])
    with pytest.raises(TraceError, match=f"bad.trace:{i + 1}:"):
        read_trace(bad, [1])


@pytest.mark.parametrize("path", [PINGPONG, REAL_ARCHIVES[0]], ids=["text", "otf2"])
def test_unknown_selected_location_is_a_one_line_error(path):
    for read in (lambda: read_trace(path, [0, 99999]),
                 lambda: read_chunks(path, 10, locations=[99999])):
        with pytest.raises(TraceError) as err:
            read()
        msg = str(err.value)
        assert "\n" not in msg and "location 99999" in msg and str(path) in msg


def test_record_counts_without_reading_records(real):
    for path in REAL_ARCHIVES:  # (ids beyond the archive's would fail the comparison)
        counts = location_record_counts(path)
        assert counts == {k: len(ev) for k, ev in real[path.parent.name].events.items()}
    assert location_record_counts(PINGPONG) == {0: None, 1: None}



@pytest.mark.parametrize("name", ["ring", "halo", "hybrid", "mutex"])
def test_record_counts_a_definition_understates_are_estimated_from_the_event_file(name):
    """EZTrace declares 2 records for every location: the counts that divide the
    locations among ranks come from the event files' sizes instead, within a
    third of the records each location holds (those of more than 2 records'
    worth of file)."""
    path = ROOT / "tests" / "data" / "eztrace" / name / "eztrace_log.otf2"
    counts = location_record_counts(path)
    held = {k: len(ev) for k, ev in read_trace(path).events.items()}
    assert set(counts) == set(held)
    for loc, n in held.items():
        assert abs(counts[loc] - n) <= n / 3, (loc, counts[loc], n)


# ---------------------------------------------------------------------------
# Writing in parts


def files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def content(f: Path) -> bytes:
    """A file's bytes; an anchor file's with its trace id zeroed (OTF2 draws it at
    random for every archive it creates)."""
    b = f.read_bytes()
    if f.suffix == ".otf2":
        r = _otf2.Reader_Open(str(f))
        tid = _otf2.Reader_GetTraceId(r)
        _otf2.Reader_Close(r)
        assert b.count(struct.pack("<Q", tid)) == 1
        b = b.replace(struct.pack("<Q", tid), bytes(8))
    return b


def assert_same_output(ref: Path, out: Path) -> None:
    if ref.is_dir():
        assert files(ref) == files(out)
        for f in files(ref):
            assert content(ref / f) == content(out / f), f
        assert not list(out.parent.glob(".*tmp*"))
    else:
        assert ref.read_bytes() == out.read_bytes()
        assert not list(out.parent.glob(f".{out.name}*"))


def write_in_parts(out: Path, definitions, part_sources) -> None:
    """begin, every part in turn (as ranks would, between two barriers), commit."""
    tmp = P.begin(out)
    for rank, (source, mine) in enumerate(part_sources):
        P.write_part(tmp, rank, source, mine)
    P.commit(tmp, definitions)
    assert not tmp.exists()


def test_otf2_parts_equal_the_one_process_archive(real, tmp_path):
    """Records read by the C path and copied from the input by its writer, on every
    archive in 2 and 3 parts; records read as ``otf2`` objects and written by the
    package, on the small ones in 3 parts (one empty; not the 12,000-record one)."""
    runs = [(path, n, split, True) for path in REAL_ARCHIVES
            for n, split in enumerate(splits(list(real[path.parent.name].events)))]
    runs += [(path, 2, splits(list(real[path.parent.name].events))[1], False)
             for path in SMALL if path.parent.name != "jacobi-openmp-tasks-offload"]
    for path, n, split, native in runs:
        name = path.parent.name
        whole = real[name]
        ref = tmp_path / name / "ref" / "traces.otf2"
        if not ref.exists():
            write_trace(whole, ref)  # the one-process archive
        out = tmp_path / name / f"p{n}" / "traces.otf2"
        write_in_parts(out, whole.definitions,
                       [(read_chunks(path, 4096, payload=False, locations=mine)
                         if native else read_trace(path, mine), mine) for mine in split])
        assert_same_output(ref.parent, out.parent)
        defs, chunks = read_chunks(out, 1 << 30, payload=False)
        back = next(chunks, {})
        assert all(same_columns(back[k], whole.events[k]) for k in back)
        assert sum(map(len, back.values())) == whole.record_count
    if OTF2_PRINT:  # (it prints every record: not the large one)
        for out in sorted(tmp_path.glob("*/p1/traces.otf2")):
            if out.parent.parent.name == LARGE:
                continue
            run = subprocess.run([OTF2_PRINT, str(out)], capture_output=True, text=True)
            assert run.returncode == 0 and not run.stderr, run.stderr


def test_text_parts_equal_the_one_process_file(tmp_path, monkeypatch):
    monkeypatch.setattr(text_parts, "FAN_IN", 2)  # 3 parts: merged in two rounds
    for path in [PINGPONG, SMALL[0], *SMALL[2:]]:
        whole = read_trace(path)
        ref = tmp_path / f"{path.parent.name}.trace"
        write_trace(whole, ref)
        for n, split in enumerate(splits(list(whole.events))):
            out = tmp_path / f"{path.parent.name}-{n}.trace"
            write_in_parts(out, whole.definitions,
                           [(read_chunks(path, 7, locations=mine), mine) for mine in split])
            assert_same_output(ref, out)


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_parts_with_compensated_times(tmp_path, fmt):
    """Times that changed (compensated), on a simulated program: the parts of the
    result give the one-process output, the clock properties included."""
    sim = simulate("stencil", ranks=5, iterations=4, overhead=2e-6)
    src = tmp_path / "in" / "traces.otf2"
    write_trace(sim.measured, src)
    result = c.compensate(read_trace(src), platform=sim.platform).trace
    name = "traces.otf2" if fmt == "otf2" else "out.trace"
    ref = tmp_path / "ref" / name
    write_trace(result, ref)
    out = tmp_path / "par" / name
    locs = list(result.events)
    write_in_parts(out, result.definitions,
                   [(Trace(result.definitions, {k: result.events[k] for k in mine}), mine)
                    for mine in (locs[:2], locs[2:3], locs[3:])])
    assert_same_output(ref.parent if fmt == "otf2" else ref,
                       out.parent if fmt == "otf2" else out)


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_abort_and_failed_commit_leave_nothing(tmp_path, fmt):
    whole = read_trace(PINGPONG if fmt == "trace" else SMALL[-1])
    assert list(whole.events) == [0, 1]
    out = tmp_path / "new" / "dir" / ("traces.otf2" if fmt == "otf2" else "out.trace")
    tmp = P.begin(out)
    P.write_part(tmp, 0, whole, [0])
    with pytest.raises(TraceError, match="part 0 is written twice"):
        P.PartWriter(tmp, 0, whole.definitions, [1])
    writer = P.PartWriter(tmp, 1, whole.definitions, [1])
    with pytest.raises(TraceError, match="location 0: location is not among"):
        writer.write(0, whole.events[0])
    P.abort(tmp)
    assert list(tmp_path.iterdir()) == []  # the directories begin made are gone too
    P.abort(tmp)  # idempotent
    P.abort(tmp_path)  # and never removes a directory begin did not make
    assert tmp_path.exists()
    # a commit that finds a location no part wrote fails and leaves nothing
    tmp = P.begin(out)
    P.write_part(tmp, 0, whole, [0])
    with pytest.raises(TraceError) as err:
        P.commit(tmp, whole.definitions)
    assert "location 1: location written by no part" in str(err.value)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
    # an existing output stays as it was until a commit replaces it
    old = tmp_path / "old" / ("traces.otf2" if fmt == "otf2" else "out.trace")
    write_trace(whole, old)
    before, inode = files(old.parent), old.stat().st_ino
    tmp = P.begin(old)
    P.write_part(tmp, 0, whole, [0, 1])
    P.abort(tmp)
    assert files(old.parent) == before and old.stat().st_ino == inode
    tmp = P.begin(old)
    P.write_part(tmp, 0, whole, [0, 1])
    P.commit(tmp, whole.definitions)
    assert files(old.parent) == before and not tmp.exists()
    assert old.stat().st_ino != inode  # replaced by the new output


def test_otf2_parts_refuse_records_that_add_definitions(tmp_path):
    """A text trace's ProgramBegin becomes an OTF2 record with new String
    definitions: parts cannot share those, so the part refuses (one line) and
    nothing is left."""
    whole = read_trace(PINGPONG)
    out = tmp_path / "o" / "traces.otf2"
    tmp = P.begin(out)
    with pytest.raises(TraceError) as err:
        P.write_part(tmp, 0, whole, [0])
    assert "adds definitions" in str(err.value) and "\n" not in str(err.value)
    P.abort(tmp)
    assert list(tmp_path.iterdir()) == []


def test_a_held_text_part_is_written_in_time_windows(tmp_path, monkeypatch):
    """A ``.trace`` part given as a Trace is handed to the writer in time windows
    (so its merge need not hold the whole part): tiny windows give the one-process
    file byte for byte, and each window's records precede its watermark, which
    precedes every later record."""
    sim = simulate("pipeline", ranks=4, iterations=3, overhead=2e-6)
    result = c.compensate(sim.measured, platform=sim.platform).trace
    ref = tmp_path / "ref.trace"
    write_trace(result, ref)
    locs = list(result.events)
    for window in (1, 5):
        monkeypatch.setattr(P, "_WINDOW", window)
        out = tmp_path / f"w{window}.trace"
        write_in_parts(out, result.definitions,
                       [(Trace(result.definitions, {k: result.events[k] for k in mine}), mine)
                        for mine in (locs[:1], locs[1:])])
        assert_same_output(ref, out)
    seen = {loc: 0 for loc in locs}
    windows = list(P._time_windows(dict(result.events), 5))
    assert len(windows) > 3
    for chunk, watermark, done in windows:
        for loc, ev in chunk.items():
            rest = result.events[loc].time[seen[loc] + len(ev):]
            assert ev.time.max() < watermark and (rest >= watermark).all()
            seen[loc] += len(ev)
        assert all(seen[loc] == len(result.events[loc]) for loc in done)
    assert seen == {loc: len(ev) for loc, ev in result.events.items()}


def test_otf2_parts_into_an_existing_directory_keep_it(tmp_path):
    """An existing archive directory (a mount point, say) is written into, not
    replaced: the same directory holds the archive afterwards, equal to the
    one-process one."""
    whole = read_trace(SMALL[-1])
    ref = tmp_path / "ref" / "traces.otf2"
    write_trace(whole, ref)
    out = tmp_path / "mnt" / "traces.otf2"
    out.parent.mkdir()
    inode = out.parent.stat().st_ino
    for _ in range(2):  # into the empty directory, then over the archive it holds
        write_in_parts(out, whole.definitions, [(whole, [0]), (whole, [1])])
        assert out.parent.stat().st_ino == inode
        assert_same_output(ref.parent, out.parent)
