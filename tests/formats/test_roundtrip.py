"""Round trips across formats and record kinds the engine does not interpret.

* text -> OTF2 -> text keeps every record the models interpret (issue #2, item 4);
* OTF2 record kinds the engine does not interpret (parameters, metrics, OpenMP and
  thread events, attributes) come out of `compensate` with the same content, only
  their timestamps changed.
"""

import re
import shutil
import subprocess

import numpy as np
import otf2
import pytest
from otf2.enums import ParameterType, Type

from compensate.cli import main
from compensate.formats.otf2 import read_otf2, write_otf2
from compensate.formats.text import read_text, write_text
from compensate.model import COLUMNS, TraceError

from ..conftest import CASES, ROOT

# r1_same_timestamp holds a Metric record, which a text trace cannot turn into OTF2
# (no metric definitions in the text format; refusal tested below with the PAPI archive)
# (the r8_* thread cases hold carried thread records, which the OTF2 writer cannot
# build from text fields yet: it refuses them with a one-line error, see
# test_thread_records_from_text_are_refused_for_otf2)
TEXT_FILES = [p for p in sorted(CASES.glob("*.trace"))
              if p.stem != "r1_same_timestamp" and not p.stem.startswith(("r8_", "r9_"))]
TEXT_FILES.append(ROOT / "examples" / "pingpong.trace")


def same_records(a, b):
    assert list(a.events) == list(b.events)
    for loc, ea in a.events.items():
        eb = b.events[loc]
        for name, _ in COLUMNS:
            assert np.array_equal(getattr(ea, name), getattr(eb, name)), (loc, name)


def test_thread_records_from_text_are_refused_for_otf2(tmp_path):
    from compensate.model import TraceError
    with pytest.raises(TraceError, match="cannot write record kind ThreadAcquireLock to OTF2"):
        write_otf2(read_text(str(CASES / "r8_lock.trace")), str(tmp_path / "a" / "traces.otf2"))
    # parameters too: the text format carries no parameter definitions (r9)
    with pytest.raises(TraceError, match="cannot write record kind ParameterUnsignedInt"):
        write_otf2(read_text(str(CASES / "r9_launch_sync.trace")),
                   str(tmp_path / "b" / "traces.otf2"))


def test_region_roles_survive_otf2(tmp_path):
    """A text region's role and paradigm become the OTF2 region's; regions without
    them are FUNCTION (MPI or USER, as before)."""
    p = tmp_path / "t.trace"
    p.write_text("compensate-trace 1\ntimer_resolution 1000\nlocation 0\n"
                 'region 0 "!$omp implicit barrier" role=IMPLICIT_BARRIER paradigm=OPENMP\n'
                 'region 1 "MPI_Send"\nregion 2 "f"\nevents\n'
                 "10 0 Enter region=0\n20 0 Leave region=0\n")
    write_otf2(read_text(str(p)), str(tmp_path / "a" / "traces.otf2"))
    roles = read_otf2(str(tmp_path / "a" / "traces.otf2")).definitions.region_roles
    assert roles == {0: ("IMPLICIT_BARRIER", "OPENMP"), 1: ("FUNCTION", "MPI"),
                     2: ("FUNCTION", "USER")}


@pytest.mark.parametrize("path", TEXT_FILES, ids=lambda p: p.stem)
def test_text_otf2_text(tmp_path, path):
    original = read_text(str(path))
    write_otf2(original, str(tmp_path / "a" / "traces.otf2"))
    via = read_otf2(str(tmp_path / "a" / "traces.otf2"))
    same_records(original, via)
    assert via.definitions.timer_resolution == original.definitions.timer_resolution
    for rid, name in original.definitions.regions.items():
        assert via.definitions.regions[rid] == name
    for cid, comm in original.definitions.comms.items():
        assert via.definitions.comms[cid].members == comm.members
    write_text(via, str(tmp_path / "b.trace"))
    same_records(original, read_text(str(tmp_path / "b.trace")))


def test_otf2_text_otf2_interpreted_records(tmp_path, real_archive):
    original = read_otf2(str(real_archive))
    write_text(original, str(tmp_path / "a.trace"))
    via = read_text(str(tmp_path / "a.trace"))
    same_records(original, via)
    if "papi" in real_archive.parent.name:
        # Metric records need metric definitions that text does not carry: refused
        # with a clear error rather than dropped
        with pytest.raises(TraceError, match="location 0, record 1: cannot write record "
                                             "kind Metric"):
            write_otf2(via, str(tmp_path / "b" / "traces.otf2"))
        return
    write_otf2(via, str(tmp_path / "b" / "traces.otf2"))
    same_records(original, read_otf2(str(tmp_path / "b" / "traces.otf2")))


def build_uninterpreted_archive(anchor_dir):
    import otf2.events as E

    with otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        grp = d.location_group("rank 0", system_tree_parent=node)
        loc = d.location("thread 0", group=grp)
        f = d.region("f")
        par = d.parameter("iterations", parameter_type=ParameterType.INT64)
        spar = d.parameter("mode", parameter_type=ParameterType.STRING)
        attr = d.attribute("answer", "", Type.UINT64)
        member = d.metric_member("cycles", "", otf2.MetricType.PAPI,
                                 otf2.MetricMode.ACCUMULATED_START, Type.UINT64,
                                 otf2.Base.DECIMAL, 0, "")
        metric = d.metric_class([member])
        ew = w.event_writer_from_location(loc)
        records = [
            E.Enter(0, f, attributes={attr: 42}),
            E.ParameterInt(0, par, -7),
            E.ParameterString(0, spar, "fast"),
            E.Metric(0, metric, [123]),
            E.OmpFork(0, 4),
            E.OmpJoin(0),
            E.ThreadFork(0, otf2.Paradigm.OPENMP, 4),
            E.ThreadJoin(0, otf2.Paradigm.OPENMP),
            E.MeasurementOnOff(0, otf2.MeasurementMode.OFF),
            E.MeasurementOnOff(0, otf2.MeasurementMode.ON),
            E.Leave(0, f),
        ]
        for i, ev in enumerate(records):
            ev.time = 1000 + 1000 * i
            ew(ev)


@pytest.mark.skipif(shutil.which("otf2-print") is None, reason="otf2-print not installed")
def test_uninterpreted_kinds_survive_compensation(tmp_path):
    build_uninterpreted_archive(tmp_path / "in")
    src, out = tmp_path / "in" / "traces.otf2", tmp_path / "out" / "traces.otf2"
    assert main([str(src), str(out), "--overhead", "100ns", "--quiet"]) == 0

    def listing(path):
        text = subprocess.run(["otf2-print", str(path)], capture_output=True, text=True,
                              check=True).stdout
        body = text.split("-" * 80, 1)[1]
        # drop the timestamp column, keep everything else
        return [re.sub(r"^(\S+\s+\d+)\s+\d+", r"\1", line) for line in body.splitlines()]

    before, after = listing(src), listing(out)
    assert before == after and len(before) > 11
    got = read_otf2(str(out)).events
    times = next(iter(got.values())).time
    assert times[0] == 1000 and times[-1] == 1000 + 10 * 900  # 10 gaps, 100 ns each removed


MATCHED_PROBES = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
region 1 "MPI_Mprobe"
comm 0 "MPI_COMM_WORLD" 0,1
events
0 1 Enter region=1
5 1 MpiProbe sender=0 comm=0 tag=7 message=3
6 1 MpiProbe sender=0 comm=0 tag=8 message=-1
10 1 MpiMrecv message=3 bytes=64
20 1 MpiImrecvRequest message=4 request=9
30 1 MpiImrecv request=9 bytes=128
40 1 Leave region=1
"""


def test_matched_probes_are_columns_and_survive_both_formats(tmp_path):
    """MpiProbe/MpiMrecv/MpiImrecvRequest/MpiImrecv fill the columns (message id in
    ``size_recv``, bytes in ``size``, request id in ``request``) and come back equal
    from OTF2 and from text."""
    path = tmp_path / "m.trace"
    path.write_text(MATCHED_PROBES)
    original = read_text(str(path))
    ev = original.events[1]
    assert ev.peer[1:6].tolist() == [0, 0, -1, -1, -1]
    assert ev.tag[1:6].tolist() == [7, 8, -1, -1, -1]
    assert ev.size_recv[1:6].tolist() == [3, -1, 3, 4, -1]
    assert ev.size[1:6].tolist() == [-1, -1, 64, -1, 128]
    assert ev.request[1:6].tolist() == [-1, -1, -1, 9, 9]
    write_otf2(original, str(tmp_path / "a" / "traces.otf2"))
    via = read_otf2(str(tmp_path / "a" / "traces.otf2"))
    same_records(original, via)
    write_text(via, str(tmp_path / "b.trace"))
    same_records(original, read_text(str(tmp_path / "b.trace")))
    if shutil.which("otf2-print"):  # the reference reader accepts the archive (the
        # installed one may be older than these record kinds and show them as UNKNOWN)
        out = subprocess.run(["otf2-print", str(tmp_path / "a" / "traces.otf2")],
                             capture_output=True, text=True, check=True).stdout
        assert len(re.findall(r"^(UNKNOWN|MPI_\w*PROBE|MPI_I?MRECV\w*) ", out, re.M)) == 5
