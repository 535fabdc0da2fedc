"""The format registry (compensate/formats/registry.py): a path's format by its
suffix, the properties callers branch on, and that nothing in the formats package
compares format names any more."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from compensate.formats import (
    FORMATS,
    TRACE_FORMATS,
    AtomicOutput,
    format_named,
    format_of,
    input_format,
    trace_format,
)
from compensate.formats.registry import OTF2, TEXT
from compensate.model import TraceError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path, fmt", [
    ("out/traces.otf2", OTF2), ("a/B.OTF2", OTF2), ("x.trace", TEXT), ("x.Trace", TEXT),
])
def test_a_path_names_its_format_by_suffix(path, fmt):
    assert format_of(path) is fmt
    assert trace_format(path) == fmt.name
    assert format_named(fmt.name) is fmt


def test_an_unknown_suffix_is_the_usage_message():
    with pytest.raises(ValueError, match=r"^in\.txt: unknown trace format \(use an OTF2 "
                                         r"anchor file '\*\.otf2' or a text trace '\*\.trace'\)$"):
        format_of("in.txt")
    with pytest.raises(KeyError):
        format_named("trace")


def test_an_input_must_exist(tmp_path):
    missing = tmp_path / "no.trace"
    with pytest.raises(TraceError, match=r"no\.trace: no such file$"):
        format_of(missing, must_exist=True)
    with pytest.raises(TraceError, match="no such file"):
        input_format(missing)
    missing.write_text("")
    assert format_of(missing, must_exist=True) is TEXT


def test_the_properties_callers_branch_on(tmp_path):
    assert FORMATS == {".otf2": "otf2", ".trace": "text"}
    assert TRACE_FORMATS == (OTF2, TEXT)
    # an archive replaces its anchor's directory and is read without payloads to be
    # written (its records are copied from the input); a text file is one merged file
    assert (OTF2.archive, OTF2.needs_payload, OTF2.global_order) == (True, False, False)
    assert (TEXT.archive, TEXT.needs_payload, TEXT.global_order) == (False, True, True)
    out = tmp_path / "out" / "traces.otf2"
    assert OTF2.target(out) == tmp_path / "out"
    assert TEXT.target(tmp_path / "x.trace") == tmp_path / "x.trace"
    output = AtomicOutput(out)
    try:
        assert output.trace_format is OTF2 and output.format == "otf2"
        assert output.target == tmp_path / "out"
    finally:
        output.discard()


def test_looking_a_format_up_loads_no_format_package():
    """The OTF2 package loads the OTF2 library: the registry imports a format's
    package only when one of its functions is called."""
    code = ("import sys; from compensate.formats import format_of; format_of('x.otf2'); "
            "print(sorted(m for m in sys.modules if m.startswith(('compensate.formats.otf2', "
            "'compensate.formats.text', 'otf2'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert run.stdout.strip() == "[]"


def test_no_format_name_is_compared():
    """Code that reads or writes traces asks the format's entry, never its name."""
    compared = re.compile(r"""[!=]=\s*["'](otf2|text)["']|["'](otf2|text)["']\s*[!=]=""")
    files = [*sorted((ROOT / "compensate" / "formats").rglob("*.py")),
             ROOT / "compensate" / "cli" / "simulate.py"]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if compared.search(line)]
    assert found == []
