"""compensate-simulate writes a truth/measured pair plus the platform it used."""

import json

import pytest

from compensate.cli import main as compensate_main
from compensate.cli.simulate import main
from compensate.formats.text import read_text
from compensate.simulate.validation import accuracy


@pytest.mark.parametrize("fmt", ["trace", "otf2"])
def test_pair_then_compensate(tmp_path, fmt, capsys):
    out = tmp_path / "pair"
    assert main(["ring", str(out), "--ranks", "3", "--iterations", "20", "--overhead",
                 "500ns", "--format", fmt, "--report"]) == 0
    text = capsys.readouterr().out
    assert "lower:" in text and "0 violations" in text
    platform = json.loads((out / "platform.json").read_text())
    assert platform["event_overhead"] == pytest.approx(5e-7)
    src = out / ("measured.trace" if fmt == "trace" else "measured/traces.otf2")
    approx = tmp_path / "approx.trace"
    assert compensate_main([str(src), str(approx), "--platform", str(out / "platform.json"),
                            "--quiet"]) == 0
    if fmt == "trace":
        truth, measured = read_text(str(out / "truth.trace")), read_text(str(src))
        acc = accuracy(truth, measured, read_text(str(approx)))
        assert acc.removed_total > 0.99 and acc.violations == 0


def test_refuses_non_empty_outdir(tmp_path, capsys):
    (tmp_path / "x").write_text("keep")
    assert main(["ring", str(tmp_path)]) == 3
    assert "not empty" in capsys.readouterr().err
