"""benchmarks/eztrace_realrun.py (docs/realrun.md, EZTrace): its arithmetic and its
skip line; the runs themselves take minutes (tests/calibration/test_eztrace.py runs
EZTrace where it is installed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import eztrace_realrun as er  # noqa: E402


def _row(untraced, traced, lower):
    return {"untraced": untraced, "traced": traced,
            "results": {("calibrated", "lower"): {"loop": lower, "violations": 0, "over": 0}}}


def test_removed_is_the_share_of_the_dilation_per_pair_and_of_the_medians():
    rows = [_row(1.0, 2.0, 1.1), _row(1.2, 2.0, 1.4), _row(1.0, 3.0, 1.0)]
    paired, medians = er.removed(rows, "calibrated", "lower")
    # pairs: 90 %, 75 %, 100 % -> 90; medians: untraced 1.0, traced 2.0, lower 1.1 -> 90
    assert paired == pytest.approx(90.0)
    assert medians == pytest.approx(90.0)
    assert er.quartiles(rows, "calibrated", "lower") == "82..95"  # 75, 90, 100


def test_the_whole_loops_are_reported_beside_the_loops_timed_in_parts():
    row = _row(1.0, 2.0, 1.1)
    row.update(untraced_whole=1.5, traced_whole=2.5)
    row["results"]["calibrated", "lower"]["whole"] = 2.0
    assert er.removed([row], "calibrated", "lower") == pytest.approx((90.0, 90.0))
    assert er.removed([row], "calibrated", "lower", whole=True) == pytest.approx((50.0, 50.0))


def test_without_eztrace_it_prints_one_line_and_succeeds(monkeypatch, capsys):
    real = er.shutil.which
    monkeypatch.setattr(er.shutil, "which", lambda t: None if t == "eztrace" else real(t))
    assert er.main(["--pairs", "1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["eztrace_realrun: skipped: eztrace is not installed (needs EZTrace 2.0, "
                   "MPICH and otf2-tools)"]


def test_every_program_has_its_source():
    for p in er.PROGRAMS:
        assert (er.SOURCES / f"{p.name}.c").is_file()


def test_a_compared_platform_compensates_the_same_traces():
    assert [name for name, _ in er.configs("a.json", None)] == \
        ["calibrated", "unscaled", "estimate", "per-process"]
    assert er.configs("a.json", None)[3] == ("per-process", {
        "platform": "a.json", "collective_exit": "per-process"})
    assert er.configs("a.json", None)[1] == ("unscaled", {"platform": "a.json",
                                                          "speed": "platform"})
    assert er.configs("a.json", "b.json")[-2:] == [
        ("compared", {"platform": "b.json"}),
        ("compared unscaled", {"platform": "b.json", "speed": "platform"})]
    row = _row(1.0, 2.0, 1.1)
    for config, lower, speed in (("calibrated", 1.1, 1.2), ("estimate", 1.5, None),
                                 ("compared", 1.3, 0.9)):
        for bound in er.BOUNDS:
            row["results"][config, bound] = {"loop": lower, "whole": lower, "violations": 0,
                                             "over": 0, "speed": speed}
    row.update(untraced_whole=1.0, traced_whole=2.0)
    lines = er.table({"ring": [row]})
    assert [line.split(" | ")[4] for line in lines[2:]] == \
        ["calibrated"] * 3 + ["estimate"] * 3 + ["compared"] * 3
    assert [line.split(" | ")[5] for line in lines[2::3]] == ["1.200", "-", "0.900"]
    assert lines[-1].split(" | ")[7] == "70.0"


def test_only_the_overhead_sources_asked_for_are_compensated():
    names = [name for name, _ in er.configs("a.json", "b.json", ("calibrated", "estimate"))]
    assert names == ["calibrated", "estimate", "compared"]
    names = [name for name, _ in er.configs("a.json", "b.json", ("unscaled",))]
    assert names == ["unscaled", "compared", "compared unscaled"]


def test_an_unknown_source_or_bound_is_one_usage_error(capsys):
    for flag, value in (("--configs", "calibrated,guess"), ("--bounds", "middle")):
        with pytest.raises(SystemExit) as exc:
            er.parse([flag, value])
        assert exc.value.code == 2
        assert value.split(",")[-1] in capsys.readouterr().err


def test_the_self_timed_pthreads_program_prints_its_spans(tmp_path):
    """benchmarks/eztrace/pthreads_handover.c (docs/realrun.md, "pthreads") builds
    and prints the mean round and the quantiles of its four spans, each in order."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "handover"
    subprocess.run([cc, "-O2", "-pthread", str(er.SOURCES / "pthreads_handover.c"),
                    "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "200", "50"], check=True, capture_output=True,
                         text=True).stdout
    assert float(re.search(r"^mean round us ([\d.]+)$", out, re.M).group(1)) > 0
    for span in ("work", "lock+unlock", "waiter hand-over", "last own"):
        line = re.search(rf"^{re.escape(span)} +us: (.*)$", out, re.M).group(1)
        q = [float(v) for v in re.findall(r"q\d\d ([-\d.]+)", line)]
        assert len(q) == 5 and q == sorted(q) and q[0] >= 0, (span, line)


def _scaled_row(untraced, traced, comp_scaled, comp_unscaled, speed):
    res = {("calibrated", "lower"): {"loop": comp_scaled, "violations": 0, "over": 0,
                                     "speed": speed},
           ("unscaled", "lower"): {"loop": comp_unscaled, "violations": 0, "over": 0,
                                   "speed": None}}
    return {"untraced": untraced, "traced": traced, "untraced_whole": untraced,
            "traced_whole": traced, "results": {
                k: dict(v, whole=v["loop"]) for k, v in res.items()}}


def test_the_spread_table_correlates_each_trace_s_speed_with_what_is_removed():
    # traced loops grow with the speed factor; the scaled output removes 100 %
    # of every pair, the unscaled one less the faster its trace's tracer ran
    rows = [_scaled_row(1.0, 1.0 + d, 1.0, 1.0 + d * (1 - f) / 2, f)
            for d, f in ((0.5, 0.8), (0.6, 1.0), (0.7, 1.2))]
    lines = er.spread_table({"p": rows})
    cells = {ln.split(" | ")[1]: ln.strip("| ").split(" | ") for ln in lines[2:]}
    assert set(cells) == {"calibrated", "unscaled"}
    assert cells["calibrated"][3] == "0.80..1.20"
    assert cells["calibrated"][4] == "1.00"  # speed and traced loop: a line
    assert cells["calibrated"][5] == "0.0"  # 100 % in every pair
    assert cells["calibrated"][6] == "-"  # (nothing to correlate)
    assert float(cells["unscaled"][5]) > 0
    assert float(cells["unscaled"][6]) > 0.9  # (removed % grows with the speed)


def test_rows_written_with_json_print_the_same_tables(tmp_path, capsys):
    rows = [_scaled_row(1.0, 1.0 + d, 1.0, 1.2, f) for d, f in ((0.5, 0.8), (0.6, 1.0),
                                                               (0.7, 1.2))]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(er.rows_json({"p": rows})))
    assert er.read_rows(str(path)) == {"p": rows}
    assert er.main(["--rows", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\n".join(er.table({"p": rows})) in out
    assert "\n".join(er.spread_table({"p": rows})) in out
