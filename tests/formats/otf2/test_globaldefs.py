"""Global definitions read as ``otf2-print`` reads them
(compensate/formats/otf2/globaldefs.py), on archives crafted with definitions
as other tracers write them (tests/formats/otf2/craft.py): duplicates that are
identical, references to later definitions, a COMM_LOCATIONS group sharing its
id, UNDEFINED thread contingents (an older EZTrace's Barnes-Hut archive) and
Locations declaring fewer records than they hold are accepted and written back
as they were; a real conflict and a dangling reference are one line naming the
definition (exit 3)."""

from __future__ import annotations

import re
import subprocess

import otf2.events as oev
import pytest
from otf2.enums import CollectiveOp, GroupFlag, GroupType, Paradigm

from compensate.cli import main
from compensate.formats.otf2 import read_otf2, write_otf2
from compensate.formats.otf2.globaldefs import added_definitions
from compensate.model import TraceError

from ...conftest import ROOT
from ...otf2print import OTF2_PRINT, needs_print
from .craft import UNDEF, Ref, basic_definitions, craft


def _print(*args) -> str:
    return subprocess.run([OTF2_PRINT, *map(str, args)], capture_output=True, text=True,
                          check=True).stdout


def _definitions(anchor) -> list[str]:
    lines = _print("-G", anchor).split("-" * 80, 1)[1].splitlines()
    return [ln for ln in lines if ln.strip() and not ln.startswith("CLOCK_PROPERTIES")]


def _refused(tmp_path, anchor, capsys) -> str:
    """The one line the command prints for ``anchor`` (it must exit 3)."""
    capsys.readouterr()
    out = tmp_path / "refused" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "KeyError" not in err, err
    assert not out.exists()
    return err


@needs_print
def test_undefined_thread_contingents_are_read_written_and_compensated(tmp_path):
    anchor = craft(tmp_path / "a", basic_definitions())
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet"]) == 0
    listing = _print(out)
    assert listing.count("Thread Contingent: UNDEFINED") == 2
    for path in (anchor, out):  # (the Python path too)
        trace = read_otf2(str(path))
        assert [p.thread_contingent for p in trace.events[0].payload[::3]] == [None, None]
    again = tmp_path / "p" / "traces.otf2"
    write_otf2(read_otf2(str(out)), str(again))
    assert _print(again) == listing


@needs_print
def test_duplicates_and_forward_references_are_written_back_as_read(tmp_path):
    defs = basic_definitions()
    # the Location before its LocationGroup, the Region and a String given twice
    defs = defs[:6] + [defs[7], defs[6], defs[8], defs[8], ("String", (1, "node"))]
    anchor = craft(tmp_path / "a", defs)
    trace = read_otf2(str(anchor))
    assert trace.definitions.locations[0].group_name == "P#0"
    assert trace.definitions.regions == {0: "main"}
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet"]) == 0
    assert _definitions(out) == _definitions(anchor)
    assert sum(ln.startswith("REGION ") for ln in _definitions(out)) == 2


def _comm_defs(first: str) -> list[tuple[str, tuple]]:
    """MPI_COMM_WORLD as EZTrace writes it: Group 0 as COMM_LOCATIONS and as
    COMM_GROUP (``first`` of them first), Comm 0 on it."""
    locations = ("Group", (0, 4, GroupType.COMM_LOCATIONS, Paradigm.MPI, GroupFlag.NONE, [0]))
    ranks = ("Group", (0, 4, GroupType.COMM_GROUP, Paradigm.MPI, GroupFlag.NONE, [0]))
    pair = [locations, ranks] if first == "locations" else [ranks, locations]
    return basic_definitions() + [("String", (4, "MPI_COMM_WORLD"))] + pair + [
        ("Comm", (0, 4, 0, UNDEF, 0))]


@needs_print
@pytest.mark.parametrize("first", ["locations", "ranks"])
def test_a_comm_locations_group_sharing_its_id_is_kept_beside_the_other(tmp_path, first):
    anchor = craft(tmp_path / "a", _comm_defs(first))
    trace = read_otf2(str(anchor))
    assert trace.definitions.comms[0].members == (0,)
    out = tmp_path / "o" / "traces.otf2"
    write_otf2(trace, str(out))
    assert _definitions(out) == _definitions(anchor)


def test_two_groups_of_one_id_and_kind_with_different_members_are_refused(tmp_path, capsys):
    """Two COMM_GROUP groups of one id, each of several members, not the same."""
    defs = _comm_defs("locations")
    defs[-2] = ("Group", (0, 4, GroupType.COMM_GROUP, Paradigm.MPI, GroupFlag.NONE, [0, 0]))
    defs.insert(-1, ("Group", (0, 4, GroupType.COMM_GROUP, Paradigm.MPI, GroupFlag.NONE,
                               [0, 0, 0])))
    anchor = craft(tmp_path / "a", defs)
    err = _refused(tmp_path, anchor, capsys)
    assert re.fullmatch(r"compensate: error: .*traces\.def: conflicting definitions: Group 0 "
                        r"is defined twice with different content \(.*\)", err), err


def test_a_region_defined_twice_differently_is_refused(tmp_path, capsys):
    defs = basic_definitions() + [("String", (4, "other"))]
    defs.append(("Region", (0, 4, 4, 4) + defs[8][1][4:]))
    anchor = craft(tmp_path / "a", defs)
    with pytest.raises(TraceError, match="conflicting definitions: Region 0 is defined twice"):
        read_otf2(str(anchor))
    err = _refused(tmp_path, anchor, capsys)
    assert "traces.def: conflicting definitions: Region 0 is defined twice" in err


def test_a_location_in_an_undefined_location_group_is_refused(tmp_path, capsys):
    anchor = craft(tmp_path / "a", basic_definitions(group=5))
    err = _refused(tmp_path, anchor, capsys)
    assert err.endswith("traces.def: Location 0 refers to LocationGroup 5, which the "
                        "archive does not define"), err


def test_fewer_records_declared_than_held_is_a_tracer_habit_more_is_damage(tmp_path, capsys):
    fewer = craft(tmp_path / "a", basic_definitions(events=2))  # (EZTrace declares 2)
    assert main([str(fewer), str(tmp_path / "o" / "traces.otf2"), "--overhead", "100ns",
                 "--quiet"]) == 0
    assert len(read_otf2(str(tmp_path / "o" / "traces.otf2")).events[0]) == 4
    more = craft(tmp_path / "b", basic_definitions(events=6))
    err = _refused(tmp_path, more, capsys)
    assert "location 0" in err and "holds 4 records but its definition declares 6" in err


@needs_print
def test_a_definition_added_after_reading_is_written_too(tmp_path):
    anchor = ROOT / "tests" / "data" / "eztrace" / "ring" / "eztrace_log.otf2"
    trace = read_otf2(str(anchor))
    meta = trace.definitions.otf2
    assert added_definitions(meta.registry, meta.raw_definitions) == []
    ref = meta.registry.strings.get_ref("added after reading")
    out = tmp_path / "o" / "traces.otf2"
    write_otf2(trace, str(out))
    counted = [re.sub(r"# Events: \d+", "# Events: N", ln) for ln in _definitions(out)]
    assert counted == [re.sub(r"# Events: \d+", "# Events: N", ln)
                       for ln in _definitions(anchor)] + [
        f'STRING {ref:>33}  "added after reading"']


def _team_and_mpi_comm(first: str) -> list[tuple[str, tuple]]:
    """MPI_COMM_WORLD (:func:`_comm_defs`), then, as EZTrace writes an MPI+OpenMP
    run, Comm 1 twice (``first`` of them first, each right after its Group 1):
    an OpenMP thread team (group: a COMM_LOCATIONS of paradigm OPENMP) and an MPI
    communicator MPI_COMM_1 (group: an MPI COMM_GROUP)."""
    team = [("String", (5, "OpenMP Thread Team")),
            ("Group", (1, 5, GroupType.COMM_LOCATIONS, Paradigm.OPENMP, GroupFlag.NONE, [0])),
            ("Comm", (1, 5, 1, 0, 0))]
    mpi = [("String", (6, "MPI_COMM_1")),
           ("Group", (1, 6, GroupType.COMM_GROUP, Paradigm.MPI, GroupFlag.NONE, [0])),
           ("Comm", (1, 6, 1, 0, 0))]
    return _comm_defs("locations") + (team + mpi if first == "team" else mpi + team)


def _team_and_collective() -> list:
    """A parallel region on thread team 1, then an MPI_Allreduce on MPI_COMM_1."""
    return [oev.ThreadFork(1000, Paradigm.OPENMP, 1),
            oev.ThreadTeamBegin(2000, Ref(1)), oev.Enter(3000, Ref(0)),
            oev.Leave(4000, Ref(0)), oev.ThreadTeamEnd(5000, Ref(1)),
            oev.ThreadJoin(6000, Paradigm.OPENMP), oev.MpiCollectiveBegin(7000),
            oev.MpiCollectiveEnd(8000, CollectiveOp.ALLREDUCE, Ref(1), UNDEF, 8, 8)]


@needs_print
@pytest.mark.parametrize("first", ["team", "mpi"])
def test_a_thread_team_and_an_mpi_comm_sharing_an_id_are_both_kept(tmp_path, first):
    """The MPI records' Comm 1 is MPI_COMM_1, the thread records' the team; both
    definitions are written back as read, the records unchanged."""
    anchor = craft(tmp_path / "a", _team_and_mpi_comm(first), _team_and_collective())
    trace = read_otf2(str(anchor))
    assert (trace.definitions.comms[1].name, trace.definitions.comms[1].members) == (
        "MPI_COMM_1", (0,))
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet"]) == 0
    defs = [re.sub(r"# Events: \d+", "", ln) for ln in _definitions(out)]
    assert defs == [re.sub(r"# Events: \d+", "", ln) for ln in _definitions(anchor)]
    assert sum(ln.startswith("COMM ") for ln in defs) == 3
    body = [re.sub(r"^(\S+\s+\d+)\s+\d+", r"\1", ln) for ln in _print(out).splitlines()]
    assert body == [re.sub(r"^(\S+\s+\d+)\s+\d+", r"\1", ln)
                    for ln in _print(anchor).splitlines()]
    assert sum(ln.startswith("THREAD_TEAM_") and "<1>" in ln for ln in body) == 2


def test_two_mpi_comms_of_one_id_beside_a_thread_team_are_refused(tmp_path, capsys):
    """Records cannot tell two MPI communicators 1 apart: refused, naming them
    (not the thread team that shares their id)."""
    defs = _team_and_mpi_comm("team") + [
        ("String", (7, "MPI_COMM_1b")), ("Comm", (1, 7, 1, 0, 0))]
    anchor = craft(tmp_path / "a", defs)
    err = _refused(tmp_path, anchor, capsys)
    assert re.fullmatch(r"compensate: error: .*traces\.def: conflicting definitions: Comm 1 "
                        r"is defined twice with different content \('name': 'MPI_COMM_1', "
                        r".* / 'name': 'MPI_COMM_1b', .*\)", err), err


def test_a_one_process_scope_sharing_an_mpi_comms_id_is_kept_beside_it(tmp_path):
    """EZTrace's posixio module writes its I/O scope as Group 0 and Comm 0 (no
    parent, one member) after MPI_COMM_WORLD's: in a one-rank run both list the
    same location, and MPI_COMM_WORLD, the first, keeps the id."""
    defs = _comm_defs("locations") + [
        ("Group", (0, UNDEF, GroupType.COMM_GROUP, Paradigm.MPI, GroupFlag.NONE, [0])),
        ("Comm", (0, UNDEF, 0, UNDEF, 0))]
    anchor = craft(tmp_path / "a", defs)
    comms = read_otf2(str(anchor)).definitions.comms
    assert (comms[0].name, comms[0].members) == ("MPI_COMM_WORLD", (0,))
    assert main([str(anchor), str(tmp_path / "o" / "traces.otf2"), "--overhead", "100ns",
                 "--quiet"]) == 0
