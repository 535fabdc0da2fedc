"""One base class for refusals (compensate/errors.py): TraceError, PlatformError
and OutputError are Refusals whose one-line message is made of their fields, with
the texts of before the base class (docs/messages.md), exit status 3."""

from __future__ import annotations

import pickle

import pytest

from compensate.cli.failure import EXIT_INPUT, failure_status
from compensate.errors import Refusal, records_named, renumber
from compensate.formats import AtomicOutput, OutputError, output_target
from compensate.model import TraceError
from compensate.platform import PlatformError, parse_duration


def _old_trace_error(message, source="", location=None, index=None):
    """TraceError's message as compensate/model.py built it before the base class."""
    where = source or "<trace>"
    if location is not None:
        where += f": location {location}"
        if index is not None:
            where += f", record {index}"
    return f"{where}: {message}"


@pytest.mark.parametrize("source", ["", "in.trace", "in.trace:12", "a/traces.otf2"])
@pytest.mark.parametrize("location, index", [(None, None), (3, None), (3, 17), (None, 17),
                                             (0, 0)])
def test_a_trace_error_reads_as_before(source, location, index):
    exc = TraceError("why (location 1, record 2)", source=source, location=location,
                     index=index)
    assert str(exc) == _old_trace_error("why (location 1, record 2)", source, location, index)
    assert isinstance(exc, Refusal)
    assert (exc.file, exc.location, exc.record, exc.reason) == \
        (source or None, location, index, "why (location 1, record 2)")


def test_the_fields_make_the_message():
    exc = Refusal("reason")
    assert str(exc) == "reason"
    assert str(Refusal("reason", file="f")) == "f: reason"
    assert str(Refusal("reason", location=2, record=5)) == "location 2, record 5: reason"
    exc = Refusal("reason", file="f", location=2, record=5)
    assert exc.message(record=9, reason="other") == "f: location 2, record 9: other"
    assert str(exc) == "f: location 2, record 5: reason"  # (message() changes nothing)
    exc.update(record=9)
    assert (str(exc), exc.record) == ("f: location 2, record 9: reason", 9)
    with pytest.raises(TypeError, match="not a field"):
        exc.update(index=1)


def test_a_refusal_pickles_with_its_fields():
    exc = TraceError("bad", source="in.trace", location=1, index=4)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is TraceError
    assert str(back) == str(exc) == "in.trace: location 1, record 4: bad"
    assert (back.file, back.location, back.record, back.reason) == ("in.trace", 1, 4, "bad")


def test_every_refusal_is_one_line_and_status_3(tmp_path, capsys):
    (tmp_path / "out.trace").write_text("")
    caught = []
    for make in (lambda: output_target(tmp_path / "in.trace", tmp_path / "out.trace", False),
                 lambda: parse_duration("fast"),
                 lambda: (_ for _ in ()).throw(TraceError("bad", source="x.trace",
                                                          location=0, index=1))):
        with pytest.raises(Refusal) as info:
            make()
        caught.append(info.value)
    assert [type(e) for e in caught] == [OutputError, PlatformError, TraceError]
    assert str(caught[0]) == f"{tmp_path / 'out.trace'}: exists (use --force to replace it)"
    assert caught[0].file == str(tmp_path / "out.trace")
    for exc in caught:
        assert failure_status("compensate", exc) == EXIT_INPUT
        err = capsys.readouterr().err
        assert err == f"compensate: error: {exc}\n" and err.count("\n") == 1


def test_a_failed_write_names_the_output_in_the_fields_too(tmp_path):
    """AtomicOutput.discard renames the temporary path to the output's in the
    message and in the fields it is made of."""
    out = AtomicOutput(tmp_path / "o.trace")
    try:
        try:
            raise TraceError("cannot write", source=out.path, location=1, index=2)
        except TraceError as exc:
            out.discard()
            caught = exc
    finally:
        out.discard()
    assert caught.file == str(tmp_path / "o.trace")
    assert str(caught) == f"{tmp_path / 'o.trace'}: location 1, record 2: cannot write"


def test_renumber_maps_every_record_a_line_names():
    """A verification example names records as "location L, record R" and, for a
    record of the location just named, "record R": each is mapped by its location;
    other numbers are left as they are."""
    text = ("location 0, record 38: collective exit not after its own enter (record 36); "
            "location 2, record 1: receive not after its send (location 0, record 5); "
            "3 records, record 7 of nothing")
    assert records_named("record 7: x; location 4, record 2") == [(4, 2)]
    assert records_named(text)[:4] == [(0, 38), (0, 36), (2, 1), (0, 5)]
    out = renumber(text, lambda loc, r: 1000 * (loc + 1) + r)
    assert out == ("location 0, record 1038: collective exit not after its own enter "
                   "(record 1036); location 2, record 3001: receive not after its send "
                   "(location 0, record 1005); 3 records, record 1007 of nothing")
