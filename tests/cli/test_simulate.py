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


@pytest.mark.parametrize("fmt", ["trace", "otf2"])
def test_windowed_writing_equals_writing_at_once(tmp_path, fmt):
    from compensate.cli.simulate import write_windows
    from compensate.formats import write_trace
    from compensate.simulate import simulate

    trace = simulate("imbalanced", ranks=3, iterations=60).measured  # flushes included
    name = "traces.otf2" if fmt == "otf2" else "t.trace"
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    written = []
    write_windows(trace, a, written.append, windows=7)
    write_trace(trace, b)
    assert written == sorted(written) and written[-1] == trace.record_count
    files = sorted(p.relative_to(a.parent) for p in a.parent.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b.parent) for p in b.parent.rglob("*") if p.is_file())
    for f in files:
        if f.suffix != ".otf2":  # the anchor file holds a random trace id
            assert (a.parent / f).read_bytes() == (b.parent / f).read_bytes(), f


def test_simulation_progress_is_a_growing_fraction():
    from compensate.simulate import simulate

    seen = []
    simulate("stencil", ranks=4, iterations=400, progress=seen.append)
    assert seen and seen == sorted(seen) and 0 < seen[0] and seen[-1] <= 1
    assert any(f > 0.5 for f in seen)  # both runs report
