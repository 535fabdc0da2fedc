"""Reading a trace in bounded blocks (compensate/formats/__init__.py read_blocks,
compensate/formats/chunks.py join_blocks): the same records, indices, payloads and
errors as ``read_trace(path, locations)``, with blocks far smaller than a location,
for a selection and for the whole trace."""

from __future__ import annotations

import numpy as np
import pytest

from compensate.formats import read_blocks, read_trace, write_trace
from compensate.formats.chunks import join_blocks
from compensate.formats.otf2.native import NATIVE, available
from compensate.model import COLUMNS, Events, TraceError
from compensate.simulate import simulate

from ..conftest import TRACES


def same_columns(a: Events, b: Events) -> None:
    for name, dtype in COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.dtype(dtype), name
        assert np.array_equal(x, y), name


@pytest.fixture(scope="module")
def text_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("reading") / "mixed.trace"
    write_trace(simulate("mixed", ranks=4, seed=3, iterations=1).measured, str(path))
    return path


def test_text_blocks_equal_the_whole_read(text_trace):
    whole = read_trace(text_trace)
    locs = list(whole.definitions.locations)
    mine = locs[1::2]
    got = read_blocks(text_trace, mine, block=7)
    ref = read_trace(text_trace, mine)
    assert list(got.events) == list(ref.events) == mine
    for loc in mine:
        assert len(got.events[loc]) > 7  # several blocks joined
        same_columns(got.events[loc], ref.events[loc])
        assert got.events[loc].payload == ref.events[loc].payload
    assert read_blocks(text_trace, []).events == {}


def test_a_bad_record_is_named_as_the_whole_read_names_it(tmp_path, text_trace):
    lines = text_trace.read_text().splitlines()
    last = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].split()[:1] != ["#"])
    lines[last] = lines[last].split()[0] + " " + lines[last].split()[1] + " Bogus"
    bad = tmp_path / "bad.trace"
    bad.write_text("\n".join(lines) + "\n")
    locs = list(read_trace(text_trace, []).definitions.locations)
    with pytest.raises(TraceError) as whole:
        read_trace(bad, locs)
    with pytest.raises(TraceError) as blocks:
        read_blocks(bad, locs, block=5)
    assert str(blocks.value) == str(whole.value)


@pytest.mark.skipif(not available(), reason="the OTF2 C path is not built")
def test_otf2_without_payload_reads_the_c_path_in_blocks():
    path = TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2"
    if not path.exists():
        pytest.skip(f"{path} not available")
    ref = read_trace(path)
    mine = [loc for loc, ev in ref.events.items() if len(ev)][:3]
    got = read_blocks(path, mine, payload=False, block=100)
    assert list(got.events) == mine
    assert got.definitions.otf2.native_source == str(path)  # the writer copies from it
    for loc in mine:
        same_columns(got.events[loc], ref.events[loc])
        assert any(x is NATIVE for x in got.events[loc].payload)  # no otf2 objects
    # with payloads (a .trace output): the otf2 package's event objects, in blocks
    objects = read_blocks(path, mine[:1], block=100).events[mine[0]]
    same_columns(objects, ref.events[mine[0]])
    assert [type(x) for x in objects.payload] == [type(x) for x in ref.events[mine[0]].payload]


def test_join_blocks_empties_the_blocks():
    ev = Events.from_rows([(t, 0) for t in range(10)])
    blocks = [ev.slice(0, 3), ev.slice(3, 4), ev.slice(4, 10)]
    joined = join_blocks(blocks)
    assert blocks == []
    same_columns(joined, ev)
    assert len(join_blocks([])) == 0


@pytest.mark.parametrize("anchor", [
    TRACES / "hip-two-gpu-metrics" / "traces.otf2",
    TRACES.parent / "eztrace" / "commthread" / "eztrace_log.otf2"],
    ids=["hip-metrics", "eztrace-commthread"])
@pytest.mark.parametrize("payload", [True, False])
def test_a_whole_read_in_blocks_is_read_trace(anchor, payload):
    """Every location (empty ones too, in the archive's order), every column, the
    ranks that call MPI from another thread (commthread: each rank is its
    Pthread) as ``read_trace`` finds them; without payloads by the C path, whose
    output the writer copies from the input."""
    if not anchor.exists():
        pytest.skip(f"{anchor} not available")
    ref = read_trace(anchor)
    got = read_blocks(anchor, payload=payload, block=1000)
    assert list(got.events) == list(ref.events)
    assert got.definitions.comms == ref.definitions.comms
    for loc, ev in ref.events.items():
        same_columns(got.events[loc], ev)
    if not payload and available():
        assert got.definitions.otf2.native_source == str(anchor)
