"""What both OTF2 paths share (compensate/formats/otf2/library.py): the repair of the
``otf2`` package's InterComm definition, so that archives with MPI
inter-communicators (Score-P defines one for MPI_Intercomm_create) can be read and
written; communication over one is refused in one line."""

import shutil
import subprocess
from pathlib import Path

import otf2
import otf2.events as E
import pytest
from otf2.enums import GroupType, Paradigm

from compensate.cli import main
from compensate.formats import read_trace
from compensate.formats.otf2 import (
    diagnostics,  # (the InterComm repair is made on import)
)


def write_archive(anchor_dir: Path, message_on_inter: bool) -> None:
    """Two ranks, MPI_COMM_WORLD, and an inter-communicator between rank 0's and rank
    1's group; a message on MPI_COMM_WORLD, and one on the inter-communicator if
    ``message_on_inter``."""
    with otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("thread 0", group=d.location_group(f"rank {r}",
                                                              system_tree_parent=node))
                for r in range(2)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=tuple(locs))
        world_group = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                              members=tuple(locs))
        world = d.comm("MPI_COMM_WORLD", group=world_group, parent=None)
        a = d.group("a", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                    members=(locs[0],))
        b = d.group("b", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                    members=(locs[1],))
        inter = d.inter_comm("inter", a, b, world)
        send, recv = d.region("MPI_Send"), d.region("MPI_Recv")
        for r, loc in enumerate(locs):
            ew = w.event_writer_from_location(loc)
            comms = [world, inter] if message_on_inter else [world]
            t = 1000 + 10 * r
            for comm in comms:
                region = send if r == 0 else recv
                ew(E.Enter(t, region))
                peer = 0 if comm is inter else 1 - r  # (inter: a rank of the other group)
                ew(E.MpiSend(t + 100, peer, comm, 5, 64) if r == 0
                   else E.MpiRecv(t + 300, peer, comm, 5, 64))
                ew(E.Leave(t + 400, region))
                t += 1000


@pytest.fixture(params=["1", "0"], ids=["native", "python"])
def path(request, monkeypatch):
    monkeypatch.setenv("COMPENSATE_NATIVE", request.param)


@pytest.mark.usefixtures("path")
def test_an_unused_inter_communicator_is_read_and_written(tmp_path):
    write_archive(tmp_path / "in", message_on_inter=False)
    src = tmp_path / "in" / "traces.otf2"
    trace = read_trace(str(src))
    inter = [c for c in trace.definitions.comms.values() if c.inter]
    assert [c.name for c in inter] == ["inter"] and inter[0].members == ()
    out = tmp_path / "out" / "traces.otf2"
    assert main([str(src), str(out), "--overhead", "10ns"]) == 0
    if shutil.which("otf2-print"):
        printed = subprocess.run(["otf2-print", "-A", str(out)], capture_output=True,
                                 text=True, check=True).stdout
        line = next(x for x in printed.splitlines() if x.startswith("INTER_COMM"))
        assert '"inter"' in line and "MPI_COMM_WORLD" in line


@pytest.mark.usefixtures("path")
def test_a_message_on_an_inter_communicator_is_refused_in_one_line(tmp_path, capsys):
    write_archive(tmp_path / "in", message_on_inter=True)
    src = tmp_path / "in" / "traces.otf2"
    out = tmp_path / "out" / "traces.otf2"
    assert main([str(src), str(out), "--overhead", "10ns"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "location 0, record 4: MpiSend on MPI inter-communicator 1 (\"inter\"): " \
           "communication over inter-communicators is not modelled" in err
    assert not out.exists()


def write_markers(anchor_dir: Path) -> None:
    """Two marker definitions and three markers (global, location, communicator
    scope) in the archive's marker file, as Scalasca or Vampir add them."""
    import _otf2

    reader = _otf2.Reader_Open(str(anchor_dir / "traces.otf2"))
    try:
        _otf2.Reader_SetSerialCollectiveCallbacks(reader)
        mw = _otf2.Reader_GetMarkerWriter(reader)
        _otf2.MarkerWriter_WriteDefMarker(mw, 0, "Scalasca", "Late Sender", 2)
        _otf2.MarkerWriter_WriteDefMarker(mw, 1, "user", "phase", 0)
        _otf2.MarkerWriter_WriteMarker(mw, 1005, 300, 0, 1, 1, "late sender on rank 1")
        _otf2.MarkerWriter_WriteMarker(mw, 1001, 2000, 1, 0, 0, "whole run")
        _otf2.MarkerWriter_WriteMarker(mw, 1010, 0, 1, 4, 0, "on comm")
        _otf2.Reader_CloseMarkerWriter(reader, mw)
    finally:
        _otf2.Reader_Close(reader)


@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streamed", "in-memory"])
def test_markers_left_out_are_counted_and_said(tmp_path, capsys, mode):
    """The output holds no marker file (marker times are measured ones); the command
    says how many markers the input had, in a note and in the summary."""
    import json

    from compensate.formats.otf2.library import marker_count

    write_archive(tmp_path / "in", message_on_inter=False)
    src = tmp_path / "in" / "traces.otf2"
    assert marker_count(str(src)) == 0
    write_markers(tmp_path / "in")
    assert marker_count(str(src)) == 3
    out, summary = tmp_path / "out" / "traces.otf2", tmp_path / "s.json"
    assert main([str(src), str(out), "--overhead", "10ns", "--summary", str(summary),
                 *mode]) == 0
    err = capsys.readouterr().err
    assert "compensate: note: the input holds 3 markers, which the output does not" in err
    assert json.loads(summary.read_text())["markers_not_carried"] == 3
    assert marker_count(str(out)) == 0


@pytest.mark.usefixtures("path")
def test_a_truncated_event_file_is_refused_in_one_line(tmp_path, capsys):
    """An event file cut short (a job killed while Score-P flushed): one line naming
    the location, whatever state earlier runs in the process left (the OTF2 library
    reads past a file's end in its buffers: a cut file was accepted in some runs,
    tests/formats/otf2/test_damage.py), and the record it cuts where the library's
    probe finds it: with stale bytes in its chunk buffer (earlier tests on the same
    pytest worker) the probe reads on and the line names the location only."""
    write_archive(tmp_path / "in", message_on_inter=False)
    evt = tmp_path / "in" / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:-7])
    out = tmp_path / "out" / "traces.otf2"
    assert main([str(tmp_path / "in" / "traces.otf2"), str(out), "--overhead", "10ns"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.endswith(("location 1, record 2: its event file traces/1.evt is cut short: the "
                         "file ends inside this record (it lacks OTF2's end-of-file record)",
                         "location 1: its event file traces/1.evt is cut short: it lacks "
                         "OTF2's end-of-file record"))
    assert not out.exists()


def test_time_going_backwards_names_a_damaged_event_file_as_a_cause(monkeypatch):
    """Where OTF2 delivers a location's records again from a bad chunk on (seen with
    a truncated event file of a four-location archive), time goes backwards: the
    message names the damaged file besides the clock, and what the library
    reported, if it did."""
    monkeypatch.setattr(diagnostics, "_diagnostics", [])
    assert "event file may be truncated or damaged" in diagnostics.damage_hint()
    monkeypatch.setattr(diagnostics, "_diagnostics", [(1, "This is  no chunk header!")])
    assert diagnostics.damage_hint() == (
        "; the OTF2 library reported while reading: This is no chunk header! (is an "
        "event file of the archive truncated or damaged?)")
