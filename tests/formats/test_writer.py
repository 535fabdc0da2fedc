"""Streaming I/O (compensate.formats.writer): chunked reading and incremental writing.

* ``read_chunks``: a location's chunks, concatenated, are exactly what
  ``read_trace`` gives (columns and payloads), for chunk sizes from 1 to more
  than the trace, on real Score-P archives and simulated traces in both formats;
  errors are the same as ``read_trace``'s; no event object outlives its chunk.
* ``TraceWriter``: writing segment by segment (locations interleaved) gives the
  output ``write_trace`` gives (text: the same bytes; OTF2: the same files but
  the anchor's random trace id, the same ``otf2-print`` listing); a failure or
  an abort leaves nothing behind and the target untouched; a tiny merge buffer
  still gives a valid trace with the same per-location records.
"""

from __future__ import annotations

import filecmp
import gc
import os
import re
import shutil
import weakref
from pathlib import Path

import numpy as np
import pytest

import compensate.formats.text.write as textio
from compensate.formats import TraceWriter, read_chunks, read_trace, write_trace
from compensate.formats.otf2 import BATCH_EVENTS
from compensate.model import COLUMNS, KIND_CODE, Events, Trace, TraceError
from compensate.simulate import simulate

from ..conftest import REAL_ARCHIVES
from ..otf2print import OTF2_PRINT, listing
from .test_text import FULL, HEADER

# ---------------------------------------------------------------------------
# Helpers


def payload_key(p):
    """A payload rendered for comparison: text dicts as they are; ``otf2`` event
    objects by class and every field but the timestamps."""
    if p is None or isinstance(p, dict):
        return p
    return (type(p).__name__,
            {k: repr(v) for k, v in vars(p).items() if k not in ("time", "stop_time")})


def concat(parts: list[Events]) -> Events:
    cols = {name: np.concatenate([getattr(p, name) for p in parts]) for name, _ in COLUMNS}
    return Events(**cols, payload=[x for p in parts for x in p.payload])


def assert_same_events(a: Events, b: Events, what: str) -> None:
    for name, dtype in COLUMNS:
        ca, cb = getattr(a, name), getattr(b, name)
        assert ca.dtype == cb.dtype == dtype, (what, name)
        np.testing.assert_array_equal(ca, cb, err_msg=f"{what}, column {name}")
    assert [payload_key(p) for p in a.payload] == [payload_key(p) for p in b.payload], what


def collect(path, chunk_records: int) -> tuple[dict[int, Events], list[dict[int, Events]]]:
    defs, chunks = read_chunks(path, chunk_records)
    got = list(chunks)
    parts: dict[int, list[Events]] = {}
    for chunk in got:
        for loc, ev in chunk.items():
            assert len(ev) > 0
            parts.setdefault(loc, []).append(ev)
    return {loc: concat(p) for loc, p in parts.items()}, got


def segments(trace: Trace, size: int) -> list[list[tuple[int, Events]]]:
    """The trace cut into segments of ``size`` records in global time order (ties
    by location): each segment gives every location's next records, the
    locations in a scrambled order, as a segment-wise writer hands them over."""
    locs = sorted(trace.events)
    times = np.concatenate([trace.events[loc].time for loc in locs])
    owner = np.concatenate([np.full(len(trace.events[loc]), j) for j, loc in enumerate(locs)])
    order = np.lexsort((owner, times))
    done = dict.fromkeys(locs, 0)
    out = []
    for start in range(0, len(order), size):
        per = np.bincount(owner[order[start:start + size]], minlength=len(locs))
        seg = []
        present = np.flatnonzero(per).tolist()
        for j in present[1::2][::-1] + present[::2]:  # locations in a scrambled order
            loc, n = locs[j], int(per[j])
            ev = trace.events[loc]
            a = done[loc]
            seg.append((loc, Events(**{name: getattr(ev, name)[a:a + n] for name, _ in COLUMNS},
                                    payload=ev.payload[a:a + n])))
            done[loc] = a + n
        out.append(seg)
    assert all(done[loc] == len(trace.events[loc]) for loc in locs)
    return out


def write_segments(trace: Trace, out: Path, size: int, **kw) -> None:
    with TraceWriter(out, trace.definitions, **kw) as writer:
        for seg in segments(trace, size):
            for loc, ev in seg:
                writer.write(loc, ev)


def archive_files(anchor: Path) -> list[Path]:
    root = anchor.parent
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def otf2_print(anchor: Path) -> tuple[str, str]:
    """otf2-print's listing and warnings (the warnings with the path taken out)."""
    got = listing(anchor)
    return got.events, got.warnings.replace(str(Path(anchor).resolve().parent), "")


def assert_same_archive(a: Path, b: Path, printed_a: tuple[str, str] | None = None) -> None:
    """``printed_a``: otf2_print(a) when the caller has it already."""
    files = archive_files(a)
    assert files == archive_files(b)
    different = [str(f) for f in files if not filecmp.cmp(a.parent / f, b.parent / f,
                                                          shallow=False)]
    assert different == [a.name]  # the anchor holds a random trace id
    if OTF2_PRINT:
        assert (printed_a or otf2_print(a)) == otf2_print(b)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name
                  or ".repad-" in p.name or ".old-" in p.name)


# ---------------------------------------------------------------------------
# Sources: real archives, simulated traces in both formats, a text trace with
# every kind of line


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sources")
    out: dict[str, Path] = {}
    for program, ranks in (("stencil", 8), ("nonblocking", 4), ("mixed", 3)):
        trace = simulate(program, ranks=ranks, seed=3).measured
        for fmt in ("otf2", "trace"):
            path = base / f"{program}-{fmt}" / "traces.otf2" if fmt == "otf2" \
                else base / f"{program}.trace"
            write_trace(trace, path)
            out[f"{program}-{fmt}"] = path
    for archive in REAL_ARCHIVES:
        if archive.exists():
            out[archive.parent.name] = archive
            text = base / f"{archive.parent.name}.trace"
            write_trace(read_trace(archive), text)
            out[f"{archive.parent.name}-trace"] = text
    full = base / "full.trace"
    full.write_text(FULL)
    out["full-trace"] = full
    return out


SOURCES = ["stencil-otf2", "stencil-trace", "nonblocking-otf2", "nonblocking-trace",
           "mixed-otf2", "mixed-trace", "full-trace",
           *[p.parent.name for p in REAL_ARCHIVES],
           *[p.parent.name + "-trace" for p in REAL_ARCHIVES]]


def source(sources: dict[str, Path], name: str) -> Path:
    if name not in sources:
        pytest.skip(f"{name} not available")
    return sources[name]


# ---------------------------------------------------------------------------
# read_chunks


@pytest.fixture(scope="module")
def read_whole():
    """read_trace of a source, read once for the module's read-only comparisons
    (the 4 chunk sizes compare against the same whole trace; ~0.7 s less)."""
    made: dict[Path, Trace] = {}

    def read(path: Path) -> Trace:
        if path not in made:
            made[path] = read_trace(path)
        return made[path]
    return read


@pytest.mark.parametrize("chunk_records", [1, 7, 1000, 10**9])
@pytest.mark.parametrize("name", SOURCES)
def test_chunks_concatenate_to_read_trace(sources, read_whole, name, chunk_records):
    path = source(sources, name)
    whole = read_whole(path)
    got, chunks = collect(path, chunk_records)
    assert set(got) <= set(whole.events)
    for loc, ev in whole.events.items():
        if len(ev) == 0:
            assert loc not in got
        else:
            assert_same_events(got[loc], ev, f"{name}, location {loc}")
    sizes = [sum(len(ev) for ev in chunk.values()) for chunk in chunks]
    assert sum(sizes) == whole.record_count
    assert all(s == chunk_records for s in sizes[:-1]) and 0 < sizes[-1] <= chunk_records
    if path.suffix == ".otf2":  # the global reader's timestamp order
        for a, b in zip(chunks, chunks[1:], strict=False):
            assert max(int(ev.time[-1]) for ev in a.values()) \
                <= min(int(ev.time[0]) for ev in b.values())


@pytest.mark.parametrize("name", ["stencil-otf2", "stencil-trace", "ping-pong-otf2-papi"])
def test_definitions_are_read_traces(sources, read_whole, name):
    path = source(sources, name)
    whole = read_whole(path)
    defs, chunks = read_chunks(path)
    chunks.close()
    assert defs.timer_resolution == whole.definitions.timer_resolution
    assert defs.locations == whole.definitions.locations
    assert defs.regions == whole.definitions.regions
    assert defs.comms == whole.definitions.comms
    if path.suffix == ".otf2":
        a, b = defs.otf2, whole.definitions.otf2
        for field in ("timer_resolution", "global_offset", "trace_length", "realtime_timestamp",
                      "creator", "description", "machine_name", "properties",
                      "chunk_size_events", "chunk_size_definitions", "version",
                      "location_order"):
            assert getattr(a, field) == getattr(b, field), field
    else:
        assert defs.otf2 is None


def test_otf2_chunks_do_not_keep_event_objects(sources):
    defs, chunks = read_chunks(sources["stencil-otf2"], 50)
    first = next(chunks)
    refs = [weakref.ref(p) for ev in first.values() for p in ev.payload]
    del first
    # the otf2 bindings hold one batch of BATCH_EVENTS events: read past it
    seen = 50
    while seen < BATCH_EVENTS + 100:
        seen += sum(len(ev) for ev in next(chunks).values())
    gc.collect()
    assert refs and sum(r() is not None for r in refs) == 0
    chunks.close()


def test_iterator_close_releases_and_stops(sources):
    for name in ("stencil-otf2", "stencil-trace"):
        defs, chunks = read_chunks(sources[name], 10)
        next(chunks)
        chunks.close()
        assert list(chunks) == []


def test_bad_chunk_size_and_missing_or_unknown_files(tmp_path):
    with pytest.raises(ValueError):
        read_chunks(tmp_path / "x.trace", 0)
    for name in ("nothing.trace", "nothing/traces.otf2"):
        with pytest.raises(TraceError) as a:
            read_trace(tmp_path / name)
        with pytest.raises(TraceError) as b:
            read_chunks(tmp_path / name)
        assert str(a.value) == str(b.value) == f"{tmp_path / name}: no such file"
    with pytest.raises(ValueError, match="unknown trace format"):
        read_chunks(tmp_path / "x.txt")


def _errors(path) -> tuple[str, str, int]:
    """(read_trace's message, read_chunks' message, records yielded before it)."""
    with pytest.raises(TraceError) as whole:
        read_trace(path)
    yielded = 0
    with pytest.raises(TraceError) as chunked:
        defs, chunks = read_chunks(path, 1)
        for chunk in chunks:
            yielded += sum(len(ev) for ev in chunk.values())
    return str(whole.value), str(chunked.value), yielded


BAD_TEXT = {
    "magic": ("timer_resolution 10\n", False),
    "no events line": ("compensate-trace 1\ntimer_resolution 10\nlocation 0\n", False),
    "duplicate location": ("compensate-trace 1\ntimer_resolution 1\nlocation 0\n"
                           "location 0\n", False),
    "comm member": ("compensate-trace 1\ntimer_resolution 1\nlocation 0\n"
                    "comm 4 \"w\" 0,3\nevents\n", False),
    "unknown kind": (HEADER + "10 0 Enter region=3\n20 0 Entr region=3\n", True),
    "missing field": (HEADER + "10 0 Enter region=3\n20 0 Enter\n", True),
    "undefined location": (HEADER + "10 0 Enter region=3\n10 4 Enter region=3\n", True),
    "bad rank": (HEADER + "10 0 Enter region=3\n"
                 "10 0 MpiSend receiver=2 comm=1 tag=1 bytes=1\n", True),
    "late header line": (HEADER + "10 0 Enter region=3\nregion 5 \"late\"\n", True),
    "unterminated quote": (HEADER + "10 0 Enter region=3\n"
                           "20 0 ParameterString s=\"abc\n", True),
    # across chunks: the location's earlier records were in earlier chunks
    "time backwards": (HEADER + "1000 0 Enter region=3\n5 1 Enter region=3\n"
                       "1100 0 Leave region=3\n7 1 Leave region=3\n"
                       "900 0 Enter region=3\n", True),
}


@pytest.mark.parametrize("case", sorted(BAD_TEXT))
def test_text_errors_are_read_traces(tmp_path, case):
    text, in_records = BAD_TEXT[case]
    path = tmp_path / "bad.trace"
    path.write_text(text)
    whole, chunked, yielded = _errors(path)
    assert whole == chunked
    assert whole.startswith(f"{path}:") and "\n" not in whole
    assert (yielded > 0) == in_records  # header problems: before any chunk
    if case == "time backwards":
        assert whole.endswith("location 0, record 2: time 900 is before the previous "
                              "record's 1100")


def test_text_encoding_error_is_read_traces(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_bytes((HEADER + "10 0 Enter region=3\n").encode() + b"20 0 Leave \xff\n")
    whole, chunked, _ = _errors(path)
    assert whole == chunked == f"{path}:10: not valid UTF-8 text, expected a UTF-8 .trace file"


def test_otf2_errors_are_read_traces(sources, tmp_path):
    # garbage anchor: raised before returning
    garbage = tmp_path / "garbage" / "traces.otf2"
    garbage.parent.mkdir()
    garbage.write_bytes(b"this is not an OTF2 anchor file\n" * 20)
    whole, chunked, yielded = _errors(garbage)
    assert whole == chunked and yielded == 0 and "OTF2" in whole
    # a timestamp going backwards in an event file (patched, as in test_otf2io)
    trace = read_trace(sources["stencil-otf2"])
    ev = trace.events[1]
    bad = tmp_path / "bad" / "traces.otf2"
    shutil.copytree(sources["stencil-otf2"].parent, bad.parent)
    evt = bad.parent / "traces" / "1.evt"
    data = evt.read_bytes()
    i = next(i for i in range(200, len(ev)) if
             data.count(int(ev.time[i]).to_bytes(8, "little")) == 1 and ev.time[i] > ev.time[i - 1])
    evt.write_bytes(data.replace(int(ev.time[i]).to_bytes(8, "little"),
                                 (int(ev.time[i - 1]) - 1).to_bytes(8, "little")))
    whole, chunked, yielded = _errors(bad)
    assert whole == chunked and yielded > 0
    assert f"location 1, record {i}: timestamp" in whole
    # a truncated event file
    if REAL_ARCHIVES[0].exists():
        cut = tmp_path / "cut"
        shutil.copytree(REAL_ARCHIVES[0].parent, cut)
        evt = cut / "traces" / "1.evt"
        evt.write_bytes(evt.read_bytes()[:300])
        whole, chunked, _ = _errors(cut / "traces.otf2")
        assert whole == chunked


# ---------------------------------------------------------------------------
# TraceWriter: the same output as write_trace


WRITE_SOURCES = ["stencil-otf2", "stencil-trace", "nonblocking-trace", "mixed-otf2",
                 "full-trace", *[p.parent.name for p in REAL_ARCHIVES],
                 *[p.parent.name + "-trace" for p in REAL_ARCHIVES]]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """write_trace's output of a source (and otf2-print's listing of it), made once
    per source and text release interval, not once for each segment size: the
    reference does not depend on how the streamed copy is cut (~1.3 s less)."""
    base = tmp_path_factory.mktemp("references")
    made: dict[tuple[str, int], tuple[Path, tuple[str, str] | None]] = {}

    def reference(path: Path, name: str) -> tuple[Path, tuple[str, str] | None]:
        key = (name, textio._RELEASE_EVERY)  # as the test set it
        if key not in made:
            if path.suffix == ".otf2":
                whole = base / f"{name}-{key[1]}" / "traces.otf2"
                write_trace(read_trace(path), whole)
                made[key] = whole, otf2_print(whole) if OTF2_PRINT else None
            else:
                whole = base / f"{name}-{key[1]}.trace"
                write_trace(read_trace(path), whole)
                made[key] = whole, None
        return made[key]
    return reference


@pytest.mark.parametrize("release_every", [1 << 16, 5])
@pytest.mark.parametrize("segment", [1, 37, 10**9])
@pytest.mark.parametrize("name", WRITE_SOURCES)
def test_segment_wise_writing_gives_write_traces_output(sources, references, read_whole,
                                                        tmp_path, monkeypatch, name, segment,
                                                        release_every):
    """``release_every`` 5: the text merge writes out every few records, which also
    makes the column widths grow during the run (rewritten at close). The source is
    read once for the module (read_whole): the writer only reads the records it is
    handed, and the references are written from a fresh read_trace."""
    monkeypatch.setattr(textio, "_RELEASE_EVERY", release_every)
    path = source(sources, name)
    whole, printed = references(path, name)
    if path.suffix == ".otf2":
        streamed = tmp_path / "seg" / "traces.otf2"
        write_segments(read_whole(path), streamed, segment)
        assert_same_archive(whole, streamed, printed)
    else:
        streamed = tmp_path / "seg.trace"
        write_segments(read_whole(path), streamed, segment)
        assert streamed.read_bytes() == whole.read_bytes()
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("block", [1, 7])
@pytest.mark.parametrize("name", [n for n in WRITE_SOURCES if n.endswith("-trace")])
def test_text_lines_formatted_in_blocks_are_the_same(sources, references, read_whole,
                                                     tmp_path, monkeypatch, name, block):
    """The text writer formats a batch of ready records ``EMIT_BLOCK`` at a time, the
    C formatter ``FORMAT_BATCH`` at a time (issue #21: their transient): the same
    bytes at any block size, with every record of a batch and merges across
    locations."""
    from compensate.formats.text import fastread
    path = source(sources, name)
    whole, _ = references(path, name)  # (written with the default blocks)
    monkeypatch.setattr(textio, "EMIT_BLOCK", block)
    monkeypatch.setattr(fastread, "FORMAT_BATCH", block + 2)
    streamed = tmp_path / "seg.trace"
    write_segments(read_whole(path), streamed, 37)
    assert streamed.read_bytes() == whole.read_bytes()


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_chunked_copy_gives_write_traces_output(sources, tmp_path, monkeypatch, fmt):
    """read_chunks -> TraceWriter, chunk by chunk, also across formats."""
    monkeypatch.setattr(textio, "_RELEASE_EVERY", 64)
    for name in ("stencil-otf2", "stencil-trace", "mixed-otf2"):
        src = sources[name]
        out = tmp_path / "copy" / "traces.otf2" if fmt == "otf2" else tmp_path / "copy.trace"
        ref = tmp_path / "ref" / "traces.otf2" if fmt == "otf2" else tmp_path / "ref.trace"
        write_trace(read_trace(src), ref)
        defs, chunks = read_chunks(src, 100)
        with TraceWriter(out, defs) as writer:
            for chunk in chunks:
                for loc, ev in chunk.items():
                    writer.write(loc, ev)
        if fmt == "otf2":
            assert_same_archive(ref, out)
            shutil.rmtree(out.parent)
            shutil.rmtree(ref.parent)
        else:
            assert out.read_bytes() == ref.read_bytes()


def test_widths_grow_during_the_run(tmp_path, monkeypatch):
    """Early records have short times and kind names, later ones long: the lines
    written first are widened at close, to exactly write_text's layout."""
    monkeypatch.setattr(textio, "_RELEASE_EVERY", 1)
    text = HEADER + "".join(
        f"{t} {loc} Enter region=3\n{t + 1} {loc} ThreadTeamBegin\n{t + 2} {loc} Leave region=3\n"
        for t in (1, 50, 7000, 10**6, 10**12) for loc in (0, 1))
    text += "1000000000000000 1 NonBlockingCollectiveComplete op=BARRIER comm=1 request=4\n"
    src = tmp_path / "in.trace"
    src.write_text(text)
    trace = read_trace(src)
    write_trace(trace, tmp_path / "whole.trace")
    for segment in (1, 2, 5):
        write_segments(trace, tmp_path / "seg.trace", segment)
        assert (tmp_path / "seg.trace").read_bytes() == (tmp_path / "whole.trace").read_bytes()


def test_location_whose_records_all_come_late(tmp_path, monkeypatch):
    """A location that writes nothing for a long time holds back the merge (it
    might still add early records); everything comes out in order at close."""
    monkeypatch.setattr(textio, "_RELEASE_EVERY", 1)
    trace = read_trace(_write_text(tmp_path, HEADER + "".join(
        f"{t} 0 Enter region=3\n{t + 5} 0 Leave region=3\n" for t in range(0, 1000, 10))
        + "3 1 Enter region=4\n2000 1 Leave region=4\n"))
    write_trace(trace, tmp_path / "whole.trace")
    with TraceWriter(tmp_path / "seg.trace", trace.definitions) as writer:
        for seg in segments(Trace(trace.definitions, {0: trace.events[0]}), 10):
            for loc, ev in seg:
                writer.write(loc, ev)
        writer.write(1, trace.events[1])  # all of location 1, at the end
    assert (tmp_path / "seg.trace").read_bytes() == (tmp_path / "whole.trace").read_bytes()


def test_finish_releases_a_location_without_records(tmp_path, monkeypatch):
    monkeypatch.setattr(textio, "_RELEASE_EVERY", 1)
    trace = read_trace(_write_text(tmp_path, HEADER + "".join(
        f"{t} 0 Enter region=3\n{t + 5} 0 Leave region=3\n" for t in range(0, 100, 10))))
    out = tmp_path / "o.trace"
    writer = TraceWriter(out, trace.definitions)
    writer.write(0, trace.events[0].__class__(**{n: getattr(trace.events[0], n)[:4]
                                                 for n, _ in COLUMNS},
                                              payload=trace.events[0].payload[:4]))
    tmp = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    writer._sink._file.flush()
    assert len(tmp) == 1 and "Enter" not in tmp[0].read_text()  # location 1 holds it back
    writer.finish(1)
    writer._sink._file.flush()
    assert "Enter" in tmp[0].read_text()  # now the records before time 15 are out
    with pytest.raises(TraceError, match="location 1 was declared finished"):
        writer.write(1, trace.events[0])
    assert not tmp[0].exists() and not out.exists()  # the failure aborted the writer


def _write_text(tmp_path: Path, text: str, name: str = "in.trace") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_empty_trace_and_empty_writes(tmp_path):
    trace = read_trace(_write_text(tmp_path, HEADER))
    write_trace(trace, tmp_path / "whole.trace")
    with TraceWriter(tmp_path / "s.trace", trace.definitions) as writer:
        writer.write(0, trace.events[0])  # no records
    assert (tmp_path / "s.trace").read_bytes() == (tmp_path / "whole.trace").read_bytes()
    write_trace(trace, tmp_path / "whole" / "traces.otf2")
    with TraceWriter(tmp_path / "s" / "traces.otf2", trace.definitions):
        pass
    assert_same_archive(tmp_path / "whole" / "traces.otf2", tmp_path / "s" / "traces.otf2")


@pytest.mark.parametrize("max_buffered", [1, 3, 50])
@pytest.mark.parametrize("name", ["stencil-trace", "mixed-otf2", "full-trace"])
def test_tiny_merge_buffer_still_gives_a_valid_trace(sources, tmp_path, name, max_buffered):
    trace = read_trace(source(sources, name))
    out = tmp_path / "small.trace"
    write_segments(trace, out, 97, max_buffered=max_buffered)
    back = read_trace(out)
    ref = tmp_path / "ref.trace"
    write_trace(trace, ref)
    want = read_trace(ref)  # the same records as they come through text
    assert set(back.events) == set(want.events)
    for loc, ev in want.events.items():
        assert_same_events(back.events[loc], ev, f"location {loc}")
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------
# TraceWriter: nothing half-written, ever


def _target_state(path: Path) -> dict[str, bytes]:
    root = path if path.is_dir() else path.parent
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and (path.is_dir() or p == path)}


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_abort_leaves_nothing_and_target_untouched(sources, tmp_path, fmt):
    trace = read_trace(sources["stencil-otf2" if fmt == "otf2" else "stencil-trace"])
    out = tmp_path / "o" / "traces.otf2" if fmt == "otf2" else tmp_path / "o" / "x.trace"
    write_trace(trace, out)  # an existing output that must survive
    target = out.parent if fmt == "otf2" else out
    before = _target_state(target)
    writer = TraceWriter(out, trace.definitions, target)
    for seg in segments(trace, 1000)[:3]:
        for loc, ev in seg:
            writer.write(loc, ev)
    writer.abort()
    writer.abort()  # idempotent
    assert _target_state(target) == before
    assert leftovers(tmp_path) == [] and leftovers(out.parent) == []
    with pytest.raises(TraceError, match="already aborted"):
        writer.write(0, trace.events[0])


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_failure_midway_leaves_nothing(sources, tmp_path, fmt):
    """Time going backwards in a later segment: the same error as write_trace
    (but for the temporary file name), the writer aborted, the target untouched."""
    trace = read_trace(sources["stencil-otf2" if fmt == "otf2" else "stencil-trace"])
    times = {loc: ev.time.copy() for loc, ev in trace.events.items()}
    times[3][700] = times[3][699] - 1
    bad = trace.with_times(times)
    out = tmp_path / "o" / "traces.otf2" if fmt == "otf2" else tmp_path / "o" / "x.trace"
    write_trace(trace, out)
    target = out.parent if fmt == "otf2" else out
    before = _target_state(target)
    with pytest.raises(TraceError) as whole:
        write_trace(bad, out, target)
    with pytest.raises(TraceError) as streamed:
        write_segments(bad, out, 100)
    tmp_name = re.compile(r"\S*\.tmp-[^/:]*(/traces\.otf2)?")
    assert tmp_name.sub("TMP", str(whole.value)) == tmp_name.sub("TMP", str(streamed.value))
    assert "location 3, record 700" in str(streamed.value)
    assert _target_state(target) == before
    assert leftovers(tmp_path) == [] and leftovers(out.parent) == []


@pytest.mark.parametrize("fmt", ["otf2", "trace"])
def test_interrupt_leaves_nothing(sources, tmp_path, fmt):
    trace = read_trace(sources["stencil-otf2" if fmt == "otf2" else "stencil-trace"])
    out = tmp_path / "new" / "traces.otf2" if fmt == "otf2" else tmp_path / "new.trace"
    with pytest.raises(KeyboardInterrupt):
        with TraceWriter(out, trace.definitions) as writer:
            for seg in segments(trace, 500)[:4]:
                for loc, ev in seg:
                    writer.write(loc, ev)
            raise KeyboardInterrupt
    assert not out.exists() and leftovers(tmp_path) == []
    if fmt == "otf2":
        assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_interrupt_inside_write_aborts(sources, tmp_path, monkeypatch):
    trace = read_trace(sources["stencil-trace"])
    out = tmp_path / "new.trace"
    monkeypatch.setattr(textio, "_RELEASE_EVERY", 1)
    writer = TraceWriter(out, trace.definitions)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(textio._Formatter, "records", interrupted)
    with pytest.raises(KeyboardInterrupt):
        for seg in segments(trace, 100):
            for loc, ev in seg:
                writer.write(loc, ev)
    assert not out.exists() and leftovers(tmp_path) == []


def test_close_then_abort_keeps_the_output(sources, tmp_path):
    trace = read_trace(sources["stencil-trace"])
    out = tmp_path / "o.trace"
    writer = TraceWriter(out, trace.definitions)
    for loc, ev in trace.events.items():
        writer.write(loc, ev)
    writer.close()
    writer.abort()  # no-op after a successful close
    assert out.exists() and leftovers(tmp_path) == []
    with pytest.raises(TraceError, match="already closed"):
        writer.close()


def test_undefined_location_and_bad_payload(sources, tmp_path):
    trace = read_trace(sources["stencil-trace"])
    for out in (tmp_path / "o.trace", tmp_path / "a" / "traces.otf2"):
        with pytest.raises(TraceError, match="location 99"):
            with TraceWriter(out, trace.definitions) as writer:
                writer.write(99, trace.events[0])
        assert not out.exists() and leftovers(tmp_path) == []
    # a payload the text format cannot write surfaces when the record is written
    ev = trace.events[0]
    kinds = ev.kind.copy()
    kinds[5] = KIND_CODE["ProgramEnd"]
    payload = list(ev.payload)
    payload[5] = None
    bad = Events(**{n: getattr(ev, n) for n, _ in COLUMNS if n != "kind"}, kind=kinds,
                 payload=payload)
    with pytest.raises(TraceError, match="location 0, record 5: .*ProgramEnd"):
        with TraceWriter(tmp_path / "o.trace", trace.definitions) as writer:
            writer.write(0, bad)
    assert leftovers(tmp_path) == [] and not (tmp_path / "o.trace").exists()


def test_temporary_output_lives_beside_the_target(sources, tmp_path):
    trace = read_trace(sources["stencil-otf2"])
    out = tmp_path / "deep" / "er" / "traces.otf2"
    writer = TraceWriter(out, trace.definitions)
    # (and the output's lock file, .er.lock, while the writer is open)
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "deep").iterdir()) \
        == [".er.lock", ".er.tmp"]
    writer.write(0, trace.events[0])
    writer.close()
    assert sorted(os.listdir(out.parent)) == ["traces", "traces.def", "traces.otf2"]
    assert os.listdir(tmp_path / "deep") == ["er"]


@pytest.mark.parametrize("block", [5, 64, 1 << 21])
def test_repadding_is_the_same_whatever_the_block_read(block, monkeypatch):
    """The record lines rewritten with wider columns (``_repad_lines``) come out the
    same however the file is cut into blocks (lines cut across blocks)."""
    import io

    lines = b"".join(b"%3d %d Enter%s\n" % (i, i % 3, b" region=1" * (i % 2))
                     for i in range(50))
    monkeypatch.setattr(textio, "REPAD_BLOCK", block)
    dst = io.BytesIO()
    textio._repad_lines(io.BytesIO(lines), dst, len(lines), (3, 1, 5), (5, 1, 7))
    want = b"".join(b"  %3d %d Enter%s\n" % (i, i % 3, b"   region=1" * (i % 2))
                    for i in range(50))
    assert dst.getvalue() == want


def test_a_library_failure_at_close_is_one_error_and_no_library_noise(tmp_path, capfd):
    """The archive's files vanish before it is closed (as on a full or failing
    disk): close raises one TraceError naming the file, and what the OTF2 library
    says while the archive is released afterwards is held back, not printed."""
    from compensate.formats.otf2.write import Otf2EventWriter

    src = Path(__file__).resolve().parents[1] / "data" / "traces" / "ping-pong-otf2"
    trace = read_trace(src / "traces.otf2")
    w = Otf2EventWriter(str(tmp_path / "x" / "traces.otf2"), trace.definitions)
    for loc, ev in trace.events.items():
        w.write(loc, ev)
    shutil.rmtree(tmp_path / "x")
    with pytest.raises(TraceError, match=r"traces\.otf2: cannot write OTF2 archive: "
                                         r"File or directory does not exist"):
        w.close()
    del w
    gc.collect()  # (the otf2 Writer's __del__ would close the archive again)
    assert "[OTF2]" not in capfd.readouterr().err
