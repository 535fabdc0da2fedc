"""The tracer's errors before the ranks meet (``mpiexec -n P python -m
calibration.record ...`` with a bad argument) are printed once per job: by the
rank its launcher numbers 0, not by every rank. In-process: the launcher's
environment (PMI_RANK) is set by hand; these errors come before MPI is imported."""

import pytest

from calibration.record import main as record_main

CASES = [
    ["-o", "r/traces.otf2", "--", "nonexistent.py"],  # no such program
    ["-o", "r/traces.txt", "--", "prog.py"],  # not an anchor file
    ["-o", "r/traces.otf2", "--layer-period", "999", "--", "prog.py"],
    ["-o", "r/traces.otf2", "--bogus", "--", "prog.py"],  # argparse's usage error
]


@pytest.mark.parametrize("argv", CASES)
def test_an_early_error_is_printed_by_rank_0_only(tmp_path, monkeypatch, capfd, argv):
    """Every rank used to print ``calibration.record: error: no such program: ...``."""
    (tmp_path / "prog.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PMI_SIZE", "2")
    statuses, errors = [], []
    for rank in ("0", "1"):
        monkeypatch.setenv("PMI_RANK", rank)
        capfd.readouterr()
        try:
            status = record_main(argv)
        except SystemExit as stop:  # argparse's own exit
            status = stop.code
        statuses.append(status)
        errors.append(capfd.readouterr().err)
    assert statuses == [2, 2]
    assert "error: " in errors[0] and errors[0].count("error: ") == 1, errors[0]
    assert errors[1] == ""
    assert not (tmp_path / "r").exists()
