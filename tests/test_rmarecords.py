"""RMA records and windows through both formats (R10, issue #19): text -> OTF2 ->
text keeps every field, OTF2 -> text -> OTF2 keeps every record, the archive
opens in otf2-print, and bad fields are one-line errors naming the record."""

import pytest

import compensate as c
from compensate.formats.fields import fields_of
from compensate.formats.rma import RMA_FIELDS, RMA_KINDS
from compensate.formats.text import read_text, write_text
from compensate.model import KIND_CODE, KIND_NAMES, TraceError

from .conftest import ROOT
from .formats.test_otf2 import _need_otf2_print, otf2_print

CASE = ROOT / "tests" / "data" / "rma_records.trace"


def _rma_fields(trace):
    out = []
    for loc, ev in sorted(trace.events.items()):
        for i, k in enumerate(ev.kind.tolist()):
            if k in RMA_KINDS:
                out.append((loc, int(ev.time[i]), KIND_NAMES[k],
                            fields_of(KIND_NAMES[k], ev.payload[i])))
    return out


def test_text_otf2_text_keeps_every_rma_field(tmp_path):
    t = read_text(CASE)
    assert t.definitions.windows[0].comm == 0
    c.write(t, tmp_path / "a" / "traces.otf2")
    t2 = c.read(tmp_path / "a" / "traces.otf2")
    assert t2.definitions.windows == t.definitions.windows
    assert _rma_fields(t2) == _rma_fields(t)
    # OTF2 -> text -> OTF2 -> text: the text is the same both times
    write_text(t2, tmp_path / "b.trace")
    c.write(read_text(tmp_path / "b.trace"), tmp_path / "c" / "traces.otf2")
    write_text(c.read(tmp_path / "c" / "traces.otf2"), tmp_path / "d.trace")
    assert (tmp_path / "b.trace").read_text() == (tmp_path / "d.trace").read_text()
    kinds = {f[2] for f in _rma_fields(t)}
    assert {"RmaPut", "RmaGroupSync", "RmaCollectiveEnd", "RmaAtomic",
            "RmaRequestLock", "RmaReleaseLock"} <= kinds


def test_rma_archive_opens_in_otf2_print(tmp_path):
    _need_otf2_print()
    c.write(read_text(CASE), tmp_path / "a" / "traces.otf2")
    out = otf2_print(tmp_path / "a" / "traces.otf2")
    assert "RMA_PUT" in out and "RMA_GROUP_SYNC" in out and "Window: \"win\" <0>" in out
    assert "Level of Synchronicity: {PROCESS, MEMORY}" in out


def test_every_rma_kind_has_fields():
    assert {KIND_NAMES[k] for k in RMA_KINDS} == set(RMA_FIELDS)
    assert all(name in KIND_CODE for name in RMA_FIELDS)


def test_missing_field_is_one_line_error(tmp_path):
    bad = CASE.read_text().replace("RmaPut win=0 remote=1", "RmaPut remote=1")
    (tmp_path / "bad.trace").write_text(bad)
    with pytest.raises(TraceError) as err:
        c.write(read_text(tmp_path / "bad.trace"), tmp_path / "o" / "traces.otf2")
    msg = str(err.value)
    assert "\n" not in msg and "RmaPut" in msg and "win" in msg and "location 0" in msg


def test_window_of_undefined_comm_is_an_error(tmp_path):
    bad = CASE.read_text().replace('window 0 "win" comm=0', 'window 0 "win" comm=7')
    (tmp_path / "bad.trace").write_text(bad)
    with pytest.raises(TraceError, match="window 0: comm 7 is not defined"):
        read_text(tmp_path / "bad.trace")
