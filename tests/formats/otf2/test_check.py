"""Reading a written archive back before the commit (compensate/formats/otf2/check.py,
and Otf2EventWriter.close, which calls it): a record lost between the writer and
the file — a truncated event file, a record the library dropped — or definitions
that do not declare what was written are an OutputError naming the location and
the counts, and the staged output is never moved into place."""

from __future__ import annotations

import os
import re
import shutil

import pytest

import compensate.formats.otf2.records as records
import compensate.formats.otf2.write as write
from compensate.formats import OutputError, read_trace, write_trace
from compensate.formats.otf2 import Otf2EventWriter, write_otf2
from compensate.formats.otf2.check import check_archive, count_events, declared_events
from compensate.model import ENTER

from ...conftest import ROOT, read_bundled

MONTECARLO = ROOT / "examples" / "montecarlo" / "traces.otf2"


@pytest.fixture(scope="module")
def trace():
    return read_bundled(MONTECARLO)


@pytest.fixture
def archive(tmp_path, trace):
    out = tmp_path / "a" / "traces.otf2"
    write_otf2(trace, str(out))
    return out


def test_a_complete_archive_passes_and_counts_every_record(archive, trace):
    handed = {loc: len(ev) for loc, ev in trace.events.items()}
    assert declared_events(str(archive)) == handed
    assert count_events(str(archive), handed) == {loc: (n, "") for loc, n in handed.items()}
    check_archive(str(archive), handed)


def test_a_truncated_event_file_is_an_incomplete_output(archive, trace):
    handed = {loc: len(ev) for loc, ev in trace.events.items()}
    loc = max(handed, key=handed.get)
    evt = archive.parent / "traces" / f"{loc}.evt"
    os.truncate(evt, evt.stat().st_size // 2)
    with pytest.raises(OutputError, match=rf"traces.otf2: the output is incomplete: location "
                                          rf"{loc} has [\d,]+ of {handed[loc]:,} records "
                                          r"written; its event file breaks off: .*\(a full "
                                          r"disk or a file-size limit\?\)$") as info:
        check_archive(str(archive), handed)
    got = int(str(info.value).split(" has ")[1].split(" of ")[0].replace(",", ""))
    assert 0 < got < handed[loc]


def test_counts_the_definitions_do_not_declare_are_refused(archive, trace):
    handed = {loc: len(ev) for loc, ev in trace.events.items()}
    loc = min(handed)
    with pytest.raises(OutputError, match=rf"definitions declare {handed[loc]:,} records for "
                                          rf"location {loc}, {handed[loc] + 1:,} were written"):
        check_archive(str(archive), {**handed, loc: handed[loc] + 1})
    with pytest.raises(OutputError, match=r"location 999 is not defined"):
        check_archive(str(archive), {**handed, 999: 0})


def test_lost_definitions_are_refused(archive, trace):
    (archive.parent / "traces.def").unlink()
    with pytest.raises(OutputError, match=r"the output's definitions cannot be read back: "):
        check_archive(str(archive), {loc: len(ev) for loc, ev in trace.events.items()})


def _drop_third_enter(monkeypatch):
    """Make the library silently lose the third Enter record written directly."""
    real = records._function(ENTER)
    calls = [0]

    def lossy(*args):
        calls[0] += 1
        return 0 if calls[0] == 3 else real(*args)

    monkeypatch.setitem(records._functions, ENTER, lossy)
    return calls


def test_a_record_the_library_drops_is_caught_before_the_commit(tmp_path, trace, monkeypatch):
    calls = _drop_third_enter(monkeypatch)
    out = tmp_path / "o" / "traces.otf2"
    with pytest.raises(OutputError, match=r"o/traces.otf2: the output is incomplete: "
                                          r"location \d+ has [\d,]+ of [\d,]+ records written "
                                          r"\(a full disk") as info:
        write_trace(trace, out)
    assert calls[0] > 3
    loc, got, n = (int(x.replace(",", "")) for x in re.findall(
        r"location (\d+) has ([\d,]+) of ([\d,]+)", str(info.value))[0])
    assert got == n - 1 == len(trace.events[loc]) - 1
    assert os.listdir(tmp_path) == []  # nothing at OUT, no staging left


def test_a_file_truncated_between_write_and_check_is_caught(tmp_path, trace, monkeypatch):
    real = write.check_archive

    def truncate_then_check(anchor, *args, **kwargs):
        evt = max((os.path.join(anchor[:-5], f) for f in os.listdir(anchor[:-5])
                   if f.endswith(".evt")), key=os.path.getsize)
        os.truncate(evt, os.path.getsize(evt) - 100)
        return real(anchor, *args, **kwargs)

    monkeypatch.setattr(write, "check_archive", truncate_then_check)
    out = tmp_path / "o" / "traces.otf2"
    with pytest.raises(OutputError, match=r"the output is incomplete: location \d+ has"):
        write_trace(trace, out)
    assert os.listdir(tmp_path) == []


def test_a_part_writer_checks_its_own_event_files(tmp_path, trace, monkeypatch):
    """A part of a parallel output writes no global definitions: its event files
    are counted all the same."""
    loc = max(trace.events, key=lambda r: len(trace.events[r]))
    _drop_third_enter(monkeypatch)
    writer = Otf2EventWriter(str(tmp_path / "p" / "traces.otf2"), trace.definitions,
                             locations=(loc,), global_definitions=False)
    writer.write(loc, trace.events[loc])
    n = len(trace.events[loc])
    with pytest.raises(OutputError, match=rf"location {loc} has {n - 1:,} of {n:,} records"):
        writer.close()
    shutil.rmtree(tmp_path / "p")


def test_read_trace_of_a_checked_archive_agrees(archive, trace):
    """What the check counts is what a reader reads."""
    again = read_trace(archive)
    assert {loc: len(ev) for loc, ev in again.events.items()} == \
        {loc: len(ev) for loc, ev in trace.events.items()}
