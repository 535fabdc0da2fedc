"""The location model (OTF2 location and group types, group creator) through every
reader and writer: docs/trace-format.md, compensate/model.py Location."""

import pytest

import compensate as c
from compensate.formats.text import read_text
from compensate.model import TraceError

from ..conftest import ROOT, read_bundled

TEXT = """\
compensate-trace 1
timer_resolution 1000
location 0 group=0 name="Master thread" group_name="P0"
location 5 group=0 type=METRIC
location 7 group=2 group_name="ctx" type=GPU group_type=ACCELERATOR group_creator=0
region 1 "main"
events
0 0 Enter region=1
3 7 Enter region=1
5 7 Leave region=1
10 0 Leave region=1
"""


def test_text_fields_and_defaults(tmp_path):
    path = tmp_path / "l.trace"
    path.write_text(TEXT)
    d = read_text(str(path)).definitions
    assert (d.locations[0].type, d.locations[0].group_type) == ("CPU_THREAD", "PROCESS")
    assert d.locations[5].is_metric and d.locations[5].group_creator == -1
    loc = d.locations[7]  # GPU is the OTF2 < 3 spelling of ACCELERATOR_STREAM
    assert (loc.type, loc.group_type, loc.group_creator) == ("ACCELERATOR_STREAM",
                                                             "ACCELERATOR", 0)
    assert d.process_of(7) == 0 and d.cpu_threads(0) == [0] and d.reference_of(5) == 0


@pytest.mark.parametrize("suffix", ["x.trace", "x/traces.otf2"])
def test_round_trip(tmp_path, suffix):
    path = tmp_path / "l.trace"
    path.write_text(TEXT)
    t = read_text(str(path))
    c.write(t, tmp_path / suffix)
    back = c.read(tmp_path / suffix).definitions.locations
    for lid, loc in t.definitions.locations.items():
        got = back[lid]
        assert (got.type, got.group, got.group_type, got.group_creator) == \
            (loc.type, loc.group, loc.group_type, loc.group_creator)


def test_old_files_are_cpu_threads_in_processes():
    t = c.read(ROOT / "examples" / "pingpong.trace")
    assert all(loc.is_cpu and loc.group_type == "PROCESS"
               for loc in t.definitions.locations.values())


def test_bad_type_is_one_line(tmp_path):
    path = tmp_path / "l.trace"
    path.write_text(TEXT.replace("type=METRIC", "type=SENSOR"))
    with pytest.raises(TraceError, match="unknown type 'SENSOR'"):
        read_text(str(path))


def test_otf2_types_of_the_bundled_archives():
    base = ROOT / "tests" / "data" / "traces"
    d = read_bundled(base / "hip-two-gpu-metrics" / "traces.otf2").definitions
    types = [loc.type for loc in d.locations.values()]
    assert types.count("METRIC") == 29 and types.count("ACCELERATOR_STREAM") == 2
    stream = next(loc for loc in d.locations.values() if loc.is_device)
    assert stream.group_type == "ACCELERATOR" and d.process_of(stream.id) == 0
    d = read_bundled(base / "jacobi-mpi-openmp-cuda" / "traces.otf2").definitions
    assert {d.process_of(x) for x in d.locations} == {0, 1}
    assert d.cpu_threads(1) == [1, 4294967297]  # master thread first
