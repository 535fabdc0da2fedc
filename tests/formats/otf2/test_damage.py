"""Damaged OTF2 archives (compensate/formats/otf2/library.py, read.py): each kind of
damage a disk or a copy does (a file cut short, bytes flipped or zeroed, a file
missing or empty) in each part of an archive (anchor, global definitions, local
definitions, event files) is refused in one line, exit 3, naming the file, and
where the damage lies in a location's records the location and the record;
never a Python exception's name or a traceback. benchmarks/corrupt_inputs.py
runs the same families with many seeds."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from compensate.cli import main
from compensate.formats.otf2 import library

ROOT = Path(__file__).resolve().parents[3]
MONTECARLO = ROOT / "examples" / "montecarlo"
JACOBI = ROOT / "tests" / "data" / "traces" / "jacobi-openmp-tasks-offload"

#: what no message may show: a Python exception's name, a traceback, an OTF2 code
FORBIDDEN = re.compile(r"[A-Z]\w*(Error|Exception)\b|\w\.error\b|Traceback|_otf2|"
                       r"INTERRUPTED_BY_CALLBACK|INVALID_DATA|\(\d+\):")


@pytest.fixture(params=["1", "0"], ids=["native", "python"])
def path(request, monkeypatch):
    monkeypatch.setenv("COMPENSATE_NATIVE", request.param)
    return request.param


def copy(src: Path, tmp_path: Path) -> Path:
    """A copy of the archive folder ``src``; its anchor file."""
    shutil.copytree(src, tmp_path / "in")
    return tmp_path / "in" / "traces.otf2"


def refused(anchor: Path, tmp_path: Path, capsys, *extra: str) -> str:
    """The one line with which the command refuses ``anchor`` (exit 3, nothing at OUT)."""
    out = tmp_path / "out" / "traces.otf2"
    status = main([str(anchor), str(out), "--overhead", "100ns", "--quiet", *extra])
    err = capsys.readouterr().err.strip()
    assert status == 3, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("compensate: error: "), err
    assert not FORBIDDEN.search(err), err
    assert not out.exists()
    return err


def otf2_print_records(anchor: Path, location: int) -> int:
    """How many records of ``location`` otf2-print shows before it stops."""
    done = subprocess.run(["otf2-print", "-L", str(location), str(anchor)],
                          capture_output=True, text=True)
    return sum(1 for x in done.stdout.splitlines() if re.match(rf"[A-Z_]+ +{location} ", x))


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streamed", "in-memory"])
def test_an_event_file_cut_short_names_its_location_and_record(tmp_path, capsys, mode):
    anchor = copy(MONTECARLO, tmp_path)
    evt = anchor.parent / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:9000])
    err = refused(anchor, tmp_path, capsys, *mode)
    record = otf2_print_records(anchor, 1) if shutil.which("otf2-print") else 742
    assert err == (f"compensate: error: {anchor}: location 1, record {record}: its event file "
                   "traces/1.evt is cut short: the file ends inside this record (it lacks "
                   "OTF2's end-of-file record)")


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_a_missing_or_empty_event_file_names_its_location_at_record_0(tmp_path, capsys,
                                                                        damage):
    anchor = copy(MONTECARLO, tmp_path)
    evt = anchor.parent / "traces" / "2.evt"
    if damage == "missing":
        evt.unlink()
    else:
        evt.write_bytes(b"")
    err = refused(anchor, tmp_path, capsys)
    assert err.startswith(f"compensate: error: {anchor}: location 2"), err
    assert "its event file traces/2.evt" in err
    if damage == "missing":
        assert err.endswith(f"record 0: its event file traces/2.evt cannot be read: the file "
                            f"does not exist (the OTF2 library: POSIX: '{evt}')"), err
    else:
        assert err.endswith("location 2, record 0: its event file traces/2.evt is empty"), err


@pytest.mark.usefixtures("path")
def test_a_zeroed_range_of_an_event_file_names_its_location_and_record(tmp_path, capsys):
    anchor = copy(MONTECARLO, tmp_path)
    evt = anchor.parent / "traces" / "3.evt"
    data = bytearray(evt.read_bytes())
    data[4000:4064] = bytes(64)
    evt.write_bytes(bytes(data))
    err = refused(anchor, tmp_path, capsys)
    assert re.match(rf"compensate: error: {re.escape(str(anchor))}: location 3, record \d+: ",
                    err), err


def test_a_record_referring_to_an_undefined_location_names_it(tmp_path, capsys, monkeypatch):
    """A location's local definitions missing (they map its references): the record
    whose attribute names an unmapped location fails in the ``otf2`` package's
    reader callback; the line names the location, the record's index and kind,
    the undefined reference and the missing file, not ``KeyError: 3``."""
    monkeypatch.setenv("COMPENSATE_NATIVE", "0")
    anchor = copy(JACOBI, tmp_path)
    (anchor.parent / "traces" / "0.def").unlink()
    err = refused(anchor, tmp_path, capsys)
    assert err.startswith(f"compensate: error: {anchor}: location 0, record 32: Leave refers "
                          "to undefined Location 3 (the OTF2 library reported: the file does not "
                          "exist: POSIX: "), err
    assert "traces/0.def" in err


@pytest.mark.usefixtures("path")
def test_a_global_definition_referring_to_an_undefined_string_names_traces_def(
        tmp_path, capsys):
    anchor = copy(MONTECARLO, tmp_path)
    defs = anchor.parent / "traces.def"
    data = bytearray(defs.read_bytes())
    data[31734] ^= 0x40  # (a Region's name: String 147 -> 211)
    defs.write_bytes(bytes(data))
    err = refused(anchor, tmp_path, capsys)
    assert err == (f"compensate: error: {defs}: Region 114 refers to String 211, which the "
                   "archive does not define")


@pytest.mark.usefixtures("path")
def test_zeroed_bytes_in_the_global_definitions_are_said_in_words(tmp_path, capsys):
    """The zeros read as String 0 "" repeated (identical definitions, which are
    accepted) until the chunk they broke: the damage is what is named."""
    anchor = copy(MONTECARLO, tmp_path)
    defs = anchor.parent / "traces.def"
    data = bytearray(defs.read_bytes())
    data[74:138] = bytes(64)
    defs.write_bytes(bytes(data))
    err = refused(anchor, tmp_path, capsys)
    assert err.startswith(f"compensate: error: {defs}: cannot read OTF2 archive: Invalid or "
                          "inconsistent record data: "), err  # (which check fails first varies)
    assert "\n" not in err and "Duplicate" not in err


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("damage", ["cut", "missing", "empty"])
@pytest.mark.parametrize("file", ["traces.otf2", "traces.def"])
def test_a_damaged_anchor_or_global_definition_file_is_named(tmp_path, capsys, damage, file):
    anchor = copy(MONTECARLO, tmp_path)
    target = anchor.parent / file
    if damage == "missing":
        target.unlink()
    else:
        target.write_bytes(target.read_bytes()[:len(target.read_bytes()) // 2]
                           if damage == "cut" else b"")
    err = refused(anchor, tmp_path, capsys)
    assert str(anchor) in err or str(target) in err, err


def test_otf2_error_codes_become_words():
    assert library.code_words(80, "This is no chunk header!") == (
        "the file ends inside a record or a chunk is damaged (the OTF2 library: This is no "
        "chunk header!)")
    assert library.code_words(80) == "invalid data"
    assert not FORBIDDEN.search(library.code_words(92))
    assert not FORBIDDEN.search(library.code_words(123456))


PINGPONG = ROOT / "tests" / "data" / "traces" / "ping-pong-otf2"


@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streamed", "in-memory"])
def test_an_event_file_cut_after_its_last_whole_record_is_refused_every_time(
        tmp_path, capsys, mode):
    """Cut 9 bytes before its end, inside its last record: the OTF2 library read
    on past the file's end in its chunk buffer, so that the record was completed
    from bytes left there by earlier use and the file accepted (exit 0, the first
    --in-memory run of a process) or refused, by chance. It is refused always,
    before the library reads it, naming the location and the record."""
    anchor = copy(PINGPONG, tmp_path)
    evt = anchor.parent / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:-9])
    for _ in range(2):
        err = refused(anchor, tmp_path, capsys, *mode)
        assert err == (f"compensate: error: {anchor}: location 1, record 60: its event file "
                       "traces/1.evt is cut short: the file ends inside this record (it lacks "
                       "OTF2's end-of-file record)")


def test_every_cut_that_otf2_print_refuses_is_refused(tmp_path):
    """The end check agrees with otf2-print (a fresh process, whose OTF2 buffers
    hold zeros past the end) at every cut of a small event file: only the last
    byte (OTF2's end-of-buffer mark, after the end-of-file record) may go."""
    from compensate.model import TraceError

    anchor = copy(PINGPONG, tmp_path)
    evt = anchor.parent / "traces" / "0.evt"
    whole = evt.read_bytes()
    for cut in (1, 2, 3, 9, len(whole) // 2, len(whole) - 1):
        evt.write_bytes(whole[:-cut])
        try:
            library.check_file_ends(str(anchor), [0])
            accepted = True
        except TraceError as exc:
            accepted = False
            assert exc.location == 0 and "traces/0.evt is cut short" in str(exc)
        assert accepted == (cut == 1), cut
        if shutil.which("otf2-print"):
            printed = subprocess.run(["otf2-print", str(anchor)], capture_output=True)
            assert (printed.returncode == 0) == accepted, cut



@pytest.mark.usefixtures("path")
def test_a_cut_local_definition_file_names_its_location(tmp_path, capsys):
    anchor = copy(MONTECARLO, tmp_path)
    defs = anchor.parent / "traces" / "1.def"
    defs.write_bytes(defs.read_bytes()[:30])
    err = refused(anchor, tmp_path, capsys)
    assert err == (f"compensate: error: {anchor}: location 1: its local definition file "
                   "traces/1.def is cut short: it lacks OTF2's end-of-file record")


@pytest.mark.usefixtures("path")
def test_an_empty_local_definition_file_is_refused_naming_its_location(tmp_path, capsys):
    """The OTF2 library reports it as damaged ("This is no chunk header!"), though
    otf2-print goes on to print the records: what it held (mapping tables, clock
    offsets) cannot be told from them, so it is refused, not read as none."""
    anchor = copy(MONTECARLO, tmp_path)
    (anchor.parent / "traces" / "1.def").write_bytes(b"")
    if shutil.which("otf2-print"):
        printed = subprocess.run(["otf2-print", str(anchor)], capture_output=True)
        assert b"error" in printed.stderr.lower()
    err = refused(anchor, tmp_path, capsys)
    assert err == (f"compensate: error: {anchor}: location 1: its local definition file "
                   "traces/1.def is empty")
