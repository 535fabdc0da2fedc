"""MPI-4 partitioned records in the text format and in OTF2
(:mod:`compensate.formats.partitioned`): first-class text records, OTF2
ParameterUnsignedInt records with attributes that other tools open, and the
round trips text -> OTF2 -> text and OTF2 -> text -> OTF2."""

import shutil
import subprocess

import numpy as np
import pytest

from compensate.formats.otf2 import read_otf2, write_otf2
from compensate.formats.text import read_text, write_text
from compensate.model import COLUMNS, KIND_CODE, PARTITIONED_KINDS, TraceError

from ..conftest import CASES

CASE = CASES / "r11_partitioned.trace"


def _same(a, b):
    assert a.events.keys() == b.events.keys()
    for loc in a.events:
        for name, _ in COLUMNS:
            np.testing.assert_array_equal(getattr(a.events[loc], name),
                                          getattr(b.events[loc], name), err_msg=name)


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """The case as OTF2 (from text), then OTF2 -> text -> OTF2 again."""
    d = tmp_path_factory.mktemp("partitioned")
    text = read_text(CASE)
    write_otf2(text, d / "a" / "traces.otf2")
    from_otf2 = read_otf2(d / "a" / "traces.otf2")
    write_text(from_otf2, d / "b.trace")
    write_otf2(read_text(d / "b.trace"), d / "c" / "traces.otf2")
    return text, from_otf2, d


def test_text_records_are_first_class():
    t = read_text(CASE)
    ev = t.events[0]
    i = int(np.flatnonzero(ev.kind == KIND_CODE["MpiPsendInit"])[0])
    assert (ev.peer[i], ev.comm[i], ev.tag[i], ev.size[i], ev.size_recv[i], ev.request[i]) \
        == (1, 0, 1, 3000, 3, 1)
    ready = np.flatnonzero(ev.kind == KIND_CODE["MpiPready"])
    assert ev.size_recv[ready].tolist() == [0, 1, 2]
    assert all(ev.payload[i] is None for i in ready)


def test_text_round_trip_is_exact(tmp_path):
    t = read_text(CASE)
    write_text(t, tmp_path / "x.trace")
    _same(t, read_text(tmp_path / "x.trace"))


def test_otf2_round_trips(archives):
    text, from_otf2, d = archives
    _same(text, from_otf2)  # every partitioned field survives OTF2
    assert all(p is None for ev in from_otf2.events.values()
               for p, k in zip(ev.payload, ev.kind, strict=True) if k in PARTITIONED_KINDS)
    _same(text, read_otf2(d / "c" / "traces.otf2"))


@pytest.mark.skipif(shutil.which("otf2-print") is None, reason="otf2-print not installed")
def test_otf2_print_opens_it_and_text_round_trip_keeps_it(archives):
    _, _, d = archives
    first = subprocess.run(["otf2-print", str(d / "a" / "traces.otf2")], check=True,
                           capture_output=True, text=True).stdout
    again = subprocess.run(["otf2-print", str(d / "c" / "traces.otf2")], check=True,
                           capture_output=True, text=True).stdout
    assert first == again
    assert 'Parameter: "compensate:MpiPready"' in first
    assert '("compensate:partition"' in first and '("compensate:communicator"' in first


@pytest.mark.parametrize("line,expected", [
    ("100 0 MpiPready request=1", "missing field 'partition='"),
    ("100 0 MpiPready request=1 partition=0 peer=3", "peer"),
    ("100 0 MpiPsendInit receiver=5 comm=0 tag=1 bytes=8 partitions=2 request=1",
     "receiver rank 5 is not in comm 0"),
    ("100 0 MpiPsendInit receiver=1 comm=0 tag=1 bytes=-8 partitions=2 request=1", "bytes"),
])
def test_bad_text_records_are_one_line_errors(tmp_path, line, expected):
    p = tmp_path / "bad.trace"
    p.write_text("compensate-trace 1\ntimer_resolution 1000\nlocation 0\nlocation 1\n"
                 f"comm 0 \"W\" 0,1\nevents\n{line}\n")
    with pytest.raises(TraceError) as err:
        read_text(p)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert "bad.trace:7" in str(err.value)
