"""Numeric option values (compensate.cli.values): each command's parser refuses a
value outside its range with a usage error (exit 2) naming the option and the
range, before any work."""

import argparse

import pytest

from calibration.cli import main as calibrate_main
from compensate.cli.simulate import main as simulate_main
from compensate.cli.values import duration, real, whole

from ..conftest import ROOT
from ..inprocess import run_compensate, run_main

EXAMPLE = ROOT / "examples" / "pingpong.trace"


@pytest.mark.parametrize("args, message", [
    (("--top", "0"), "argument --top: invalid value '0': a whole number of regions from 1 "
                     "to 2^63-1"),
    (("--top=-5",), "argument --top: invalid value '-5': a whole number of regions from 1 "
                    "to 2^63-1"),
    (("--eager-limit=-1",), "argument --eager-limit: invalid value '-1': a whole number of "
                            "bytes from 0 to 2^63-1"),
])
def test_report_options(args, message):
    """``--top -5`` dropped the last five regions of the profile; ``--top 0`` and a
    negative eager limit were taken as given."""
    proc = run_compensate("report", EXAMPLE, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[0] == f"compensate report: error: {message}"


@pytest.mark.parametrize("args, message", [
    (("--iterations", "0"), "argument --iterations: invalid value '0': a whole number of "
                            "iterations from 1 to 2^63-1"),
    (("--ranks", "0"), "argument --ranks: invalid value '0': a whole number of ranks from "
                       "1 to 65,536"),
    (("--overhead", "1e300"), "argument --overhead: invalid value '1e300': a duration from "
                              "0 to 3600 s (an hour), e.g. 250ns, 1.5us, 2e-6"),
])
def test_simulate_options(tmp_path, capsys, args, message):
    """``--iterations 0`` ended in a ZeroDivisionError traceback."""
    assert simulate_main(["pingpong", str(tmp_path / "sim"), *args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"compensate-simulate: error: {message}"
    assert err[1].startswith("usage: compensate-simulate PROGRAM OUTDIR [--ranks N]")
    assert not (tmp_path / "sim").exists()


@pytest.mark.parametrize("args, message", [
    (("check", str(EXAMPLE), "--overhead", "1e300"),
     "argument --overhead: invalid value '1e300': a duration from 0 to 3600 s (an hour)"),
    (("overhead", "--command", "x {n}", "--baseline", "y {n}", "--events-per-iteration", "0"),
     "argument --events-per-iteration: invalid value '0': a number of records > 0"),
    (("overhead", "--command", "x {n}", "--baseline", "y {n}", "--events-per-iteration", "2",
      "--n", "0,100"), "argument --n: cannot parse iteration counts '0,100': whole numbers"),
    (("overhead", "--command", "x {n}", "--baseline", "y {n}", "--events-per-iteration", "2",
      "--n", "1e400"), "argument --n: cannot parse iteration counts '1e400': whole numbers"),
    (("overhead", "--command", "x {n}", "--baseline", "y {n}", "--events-per-iteration", "2",
      "--repeats", "0"), "argument --repeats: invalid value '0': a whole number of runs"),
    (("run", "-o", "p.json", "--seed=-1"), "argument --seed: invalid value '-1': a whole "
                                           "number from 0 to 2^63-1"),
])
def test_calibrate_options(tmp_path, args, message):
    """``--n 1e400`` ended in an OverflowError traceback, ``--n 0,100`` and
    ``--events-per-iteration 0`` in a fit over nothing, ``--seed -1`` in numpy's
    ValueError after the measurement."""
    proc = run_main(calibrate_main, "calibrate", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[0].startswith(f"calibrate: error: {message}")
    assert not (tmp_path / "p.json").exists()


def test_whole_real_and_duration_bounds():
    assert whole(1)("7") == 7 and whole(0, 10)("10") == 10
    for bad in ("0", "-1", "1.5", "1e3", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            whole(1, 100)(bad)
    assert real(0, 10, open_low=True)("10") == 10.0
    for bad in ("0", "nan", "inf", "10.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            real(0, 10, open_low=True)(bad)
    assert duration(("insitu",))("insitu") == "insitu"
    assert duration()("3600s") == "3600s" and duration()("0") == "0"
    for bad in ("3601s", "1e99999", "insitu", "-1ns", "fast"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration()(bad)
