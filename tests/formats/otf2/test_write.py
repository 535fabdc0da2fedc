"""Every write through the ``otf2`` package is checked (compensate/formats/otf2/write.py):
an error the OTF2 library reports only through its error callback (a buffer it
could not flush: EFBIG under a file-size limit, ENOSPC on a full disk), while
the call itself returns success, is an OutputError, never an archive cut short.
An output's chunks are the input's, at most OTF2's defaults (``chunk_sizes``)."""

from __future__ import annotations

import dataclasses
import resource
import shutil

import pytest

from compensate.formats import OutputError, read_trace
from compensate.formats.otf2 import write_otf2
from compensate.formats.otf2.library import _diagnostics
from compensate.formats.otf2.write import (
    MAX_DEFINITION_CHUNK,
    MAX_EVENT_CHUNK,
    _write_call,
    chunk_sizes,
)
from tests.inprocess import run_compensate
from tests.otf2print import listing, needs_print

from ...conftest import ROOT

RING = ROOT / "tests" / "data" / "eztrace" / "ring" / "eztrace_log.otf2"


def test_an_error_only_the_callback_reports_is_an_output_error():
    with pytest.raises(OutputError, match=r"^out/t.otf2: cannot write OTF2 archive: File is "
                                          r"too large: POSIX: out/t/0.evt \(a full disk or a "
                                          r"file-size limit\?\)$"):
        with _write_call("out/t.otf2", "otf2-write"):
            _diagnostics.append((21, "POSIX:  out/t/0.evt"))  # OTF2_ERROR_EFBIG
            _diagnostics.append((21, "Write of buffered data failed!"))


def test_a_warning_is_not_a_failure():
    with _write_call("out/t.otf2", "otf2-write"):
        _diagnostics.append((-1, "a warning"))  # OTF2_WARNING


def test_an_os_error_is_an_output_error_naming_the_output():
    with pytest.raises(OutputError, match=r"^out/t.otf2: cannot write OTF2 archive: No space "
                                          r"left on device$"):
        with _write_call("out/t.otf2", "otf2-write"):
            raise OSError(28, "No space left on device")


@pytest.fixture(scope="module")
def stencil():
    """2,888 records on two locations: event files of ~11 KiB."""
    from compensate.simulate import simulate
    return simulate("stencil", ranks=2, iterations=100, overhead=1e-7,
                    step_time=2e-6).measured


def test_write_otf2_under_a_file_size_limit_raises(tmp_path, stencil):
    """The event files are flushed several times before the archive is closed; the
    flushes that fail return success (the limit is this process's, for the write
    only: Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(OutputError, match=r"cannot write OTF2 archive: File is too large"):
            write_otf2(stencil, str(tmp_path / "o" / "traces.otf2"))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_what_the_input_reader_tolerates_is_no_write_error(tmp_path):
    """The C path's copy reads the input while the output is closed: the library's
    report of an absent local definition file of the input (which OTF2 readers
    accept) names no file of the output and is no write error."""
    from compensate.formats import TraceWriter, read_chunks
    from compensate.formats.otf2 import native

    if not native.available():
        pytest.skip("the OTF2 C path is not available")
    src = tmp_path / "in"
    shutil.copytree(ROOT / "examples" / "montecarlo", src)
    for f in (src / "traces").glob("*.def"):
        f.unlink()
    defs, chunks = read_chunks(src / "traces.otf2", payload=False)
    out = tmp_path / "o" / "traces.otf2"
    counts = {}
    with TraceWriter(out, defs) as writer:
        for chunk in chunks:
            for loc, ev in chunk.items():
                counts[loc] = counts.get(loc, 0) + len(ev)
                writer.write(loc, ev)
    assert {loc: len(ev) for loc, ev in read_trace(out).events.items()} == counts


def test_chunks_larger_than_otf2s_defaults_are_not_kept():
    meta = read_trace(RING).definitions.otf2  # EZTrace's: 16 MiB and 16 MiB
    assert (meta.chunk_size_events, meta.chunk_size_definitions) == (16 << 20, 16 << 20)
    assert chunk_sizes(meta, 2) == {"chunk_size_events": 1 << 20,
                                    "chunk_size_definitions": 4 << 20}
    assert (MAX_EVENT_CHUNK, MAX_DEFINITION_CHUNK) == (1 << 20, 4 << 20)  # OTF2's defaults
    small = dataclasses.replace(meta, chunk_size_events=256 << 10,
                                chunk_size_definitions=256 << 10)
    assert chunk_sizes(small, 2) == {"chunk_size_events": 256 << 10,
                                     "chunk_size_definitions": 256 << 10}


def test_a_definition_chunk_stays_as_large_as_the_largest_record_needs():
    meta = read_trace(RING).definitions.otf2

    def with_group(members: int):
        return dataclasses.replace(
            meta, raw_definitions=(*meta.raw_definitions, ("Group", ("g", tuple(range(members))))))

    def defs(m, locations: int = 2) -> int:
        return chunk_sizes(m, locations)["chunk_size_definitions"]

    # 16 + (1 + 8) + 8 * members + 8 bytes, four times, against 4 MiB = 4,194,304
    assert defs(with_group(131_000)) == 4 << 20  # 4,192,132
    assert defs(with_group(131_072)) == 16 << 20  # 4,194,436: the input's
    # 10 bytes a location (OTF2's rule)
    assert defs(meta, 419_430) == 4 << 20
    assert defs(meta, 419_431) == 16 << 20
    # definitions not kept as read: nothing to measure, the input's
    assert defs(dataclasses.replace(meta, raw_definitions=())) == 16 << 20


@needs_print
def test_an_eztrace_output_has_otf2s_default_chunks_and_the_same_records(tmp_path):
    out = tmp_path / "o" / "traces.otf2"
    done = run_compensate(RING, out, "--overhead", "20ns", "--quiet")
    assert done.returncode == 0, done.stderr
    anchor = listing(out).anchor
    assert "Chunk size events              1048576" in anchor
    assert "Chunk size definitions         4194304" in anchor
    assert "Chunk size events              16777216" in listing(RING).anchor

    def kinds(anchor):  # each location's record kinds, in its order
        rows = [ln.split()[:2] for ln in listing(anchor).events.splitlines()[3:] if ln.strip()]
        return sorted(rows, key=lambda r: r[1])  # (stable: each location's order kept)
    assert kinds(out) == kinds(RING)
