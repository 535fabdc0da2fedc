"""One command-line surface (compensate.cli.usage and the dispatch in
compensate.cli): ``compensate --help`` lists the subcommands, ``simulate`` and
``calibrate`` are subcommands too, a mistyped subcommand is a usage error that
names the nearest one, every usage line lists the command's options, ``--version``
answers everywhere, and a stdout whose reader has gone ends the printing quietly.

In-process (tests/inprocess.py) except for the one test of the real process's
closed pipe."""

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys

import pytest

from calibration import main as calibrate_main
from compensate import __version__
from compensate.cli import main, simulate_main
from compensate.cli.usage import nearest_subcommand, synopsis

from ..conftest import ROOT
from ..inprocess import run_compensate, run_main

EXAMPLE = ROOT / "examples" / "pingpong.trace"


def test_help_lists_every_subcommand():
    """``compensate --help`` did not mention ``report`` and ``export``."""
    proc = run_compensate("--help")
    assert proc.returncode == 0 and proc.stderr == ""
    usage = proc.stdout.split("\n\n")[0]
    for name in ("report", "export", "simulate", "calibrate"):
        assert f"compensate {name} " in usage, usage
        assert re.search(rf"^  {name} +\S", proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize("word, near", [("rport", "report"), ("exprot", "export"),
                                        ("simulat", "simulate"), ("calibate", "calibrate")])
def test_a_mistyped_subcommand_names_the_nearest(tmp_path, word, near):
    """``compensate rport x`` said "rport: unknown trace format"."""
    proc = run_compensate(word, "x", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first == (f"compensate: error: {word!r} is neither a subcommand nor an existing "
                     f"input (did you mean 'compensate {near}'?)")
    assert "unknown trace format" not in proc.stderr
    assert proc.stderr.splitlines()[1].startswith("usage: compensate IN OUT")


def test_an_existing_path_or_a_trace_name_is_no_typo(tmp_path):
    """A word that exists, or has a suffix or a directory, is the main job's input."""
    (tmp_path / "rport").write_text("x")
    assert nearest_subcommand(str(tmp_path / "rport")) is None
    for word in ("report.trace", "rport.otf2", "out/rport", "-rport", "xyzzy"):
        assert nearest_subcommand(word) is None, word
    proc = run_compensate("rport", "o.trace", "--overhead", "100ns", cwd=tmp_path)
    assert proc.returncode == 2 and "rport: unknown trace format" in proc.stderr


def test_simulate_and_calibrate_are_subcommands(tmp_path):
    """``compensate simulate`` is ``compensate-simulate``; ``compensate calibrate`` is
    ``calibrate``."""
    proc = run_compensate("simulate", "ring", tmp_path / "pair", "--ranks", "2",
                          "--iterations", "2", "--format", "trace")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("compensate simulate: ring, 2 ranks")
    assert (tmp_path / "pair" / "measured.trace").exists()
    proc = run_compensate("calibrate", "check", EXAMPLE, "--overhead", "10ns", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "fits" in proc.stdout
    proc = run_compensate("simulate", "rng", tmp_path / "x")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(
        "compensate simulate: error: argument PROGRAM: invalid choice: 'rng'")


@pytest.mark.parametrize("entry, args, line", [
    (main, ["--version"], f"compensate {__version__}"),
    (main, ["report", "--version"], f"compensate {__version__}"),
    (main, ["export", "--version"], f"compensate {__version__}"),
    (main, ["simulate", "--version"], f"compensate {__version__}"),
    (main, ["calibrate", "--version"], f"calibrate (compensate {__version__})"),
    (simulate_main, ["--version"], f"compensate-simulate (compensate {__version__})"),
    (calibrate_main, ["--version"], f"calibrate (compensate {__version__})"),
    (calibrate_main, ["run", "--version"], f"calibrate (compensate {__version__})"),
    (main, ["calibrate", "check", "--version"], f"calibrate (compensate {__version__})"),
])
def test_version_everywhere(entry, args, line):
    """``compensate-simulate --version`` and ``compensate report --version`` were
    usage errors."""
    proc = run_main(entry, "x", *args)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, line + "\n", "")


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [max(a.option_strings, key=len) for a in parser._actions
            if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("entry, args, prog", [
    (main, [EXAMPLE], "compensate"),
    (main, ["report"], "compensate report"),
    (main, ["export", EXAMPLE], "compensate export"),
    (main, ["simulate", "ring"], "compensate simulate"),
    (simulate_main, ["ring"], "compensate-simulate"),
])
def test_the_usage_line_lists_every_option(entry, args, prog):
    """The usage line after a usage error left out options (``--cold-calls``,
    ``--segment-records``, ``--rank-timeout``, ``--version``), and
    ``compensate-simulate`` printed argparse's usage before the error."""
    from compensate.cli.compensate import build_parser
    from compensate.cli.report import PARSERS
    from compensate.cli.simulate import build_parser as simulate_parser

    proc = run_main(entry, prog, *args)
    assert proc.returncode == 2, proc.stderr
    error, usage = proc.stderr.splitlines()
    assert error.startswith(f"{prog}: error: ")
    assert usage.startswith(f"usage: {prog} ")
    name = prog.split()[-1]
    parser = {"compensate": build_parser, "compensate-simulate": simulate_parser,
              "simulate": lambda: simulate_parser(prog)}.get(name) or PARSERS[name]
    options = _long_options(parser())
    assert options and all(f"[{o}" in usage for o in options), (options, usage)
    assert usage == synopsis(parser())


def test_every_bad_option_value_is_a_usage_error_with_the_usage_line(tmp_path):
    """Bad values of every kind of option: exit 2, the error, the usage line."""
    cases = [("--overhead", "1xs"), ("--rank-timeout", "x"), ("--max-overcompensated", "x"),
             ("--bound", "x"), ("--segment-records", "0"), ("--eager-limit", "-1")]
    for option, value in cases:
        proc = run_compensate(EXAMPLE, tmp_path / "o.trace", f"{option}={value}")
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 2, (option, proc.stderr)
        assert lines[0].startswith(f"compensate: error: argument {option}: ")
        assert lines[1].startswith("usage: compensate IN OUT [--bound")
    assert not (tmp_path / "o.trace").exists()


@contextlib.contextmanager
def _closed_pipe_stdout():
    """``sys.stdout`` on a pipe whose reader has gone (line-buffered, as on a
    terminal, so that each line is written at once)."""
    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w", buffering=1)
    try:
        with contextlib.redirect_stdout(stream):
            yield
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def test_a_closed_pipe_ends_report_quietly(tmp_path, capsys):
    """``compensate report ... | head -2`` ended in "error: Broken pipe", exit 3;
    now the report's status as without the pipe, no line, and --json written."""
    out = tmp_path / "r.json"
    with _closed_pipe_stdout():
        code = main(["report", str(EXAMPLE), "--json", str(out)])
    assert code == 0
    assert capsys.readouterr().err == ""
    assert json.loads(out.read_text())["schema"]
    with _closed_pipe_stdout():
        code = main(["--help"])
    assert code == 0 and capsys.readouterr().err == ""


def test_a_closed_pipe_ends_the_real_command_quietly(tmp_path):
    """The real process: ``compensate report T`` into a pipe nobody reads."""
    r, w = os.pipe()
    os.close(r)
    env = {k: v for k, v in os.environ.items() if k != "COMPENSATE_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    try:
        p = subprocess.run([sys.executable, "-m", "compensate", "report", str(EXAMPLE)],
                           stdout=w, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (0, "")


def test_the_quiet_stdout_leaves_other_errors_alone(tmp_path, capsys):
    """Only a closed pipe is quiet: a stdout that fails otherwise still raises."""
    from compensate.cli.usage import quiet_closed_pipe

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")

    with contextlib.redirect_stdout(Full()), quiet_closed_pipe():
        with pytest.raises(OSError, match="No space"):
            print("x")

