"""The refusal policy holds on every way of running: a violation of any of the
verifier's counters, found in memory, in a streamed segment, on a rank of the
distributed run or in a rank's streamed segment, ends in exit 4 with nothing at
OUT (compensate/pipeline/outcome.py). The streamed run once summed its segments'
verification by a hand-kept list of fields that left out the RMA counter."""

from __future__ import annotations

from pathlib import Path

import pytest

import compensate.families as families
from compensate.cli.compensate import main
from compensate.pipeline.outcome import EXIT_VERIFY
from compensate.verify.result import COUNTERS

from ..conftest import ROOT

CASE = ROOT / "tests" / "cases" / "r10_fence.trace"
WAYS = ("in-memory", "streamed", "distributed", "distributed-streamed")


def _inject(monkeypatch, counter: str) -> None:
    """Every verification finds one violation of ``counter`` (an engine bug)."""
    def broken(trace, matching, v) -> None:
        setattr(v, counter, getattr(v, counter) + 1)
        if len(v.examples) < 10:
            v.examples.append(f"injected {counter} violation")
            v.keys.append((len(families.CHECKS),))

    monkeypatch.setattr(families, "CHECKS", [*families.CHECKS, broken])


def _distributed(tmp: Path, argv: list[str], streamed: bool) -> list[int]:
    """The command's distributed run on two thread ranks: each rank's exit status."""
    from compensate.cli import compensate as cli
    from compensate.parallel import command
    from compensate.pipeline.options import Job
    from tests.threadranks import run_threads

    args = cli.build_parser().parse_args(argv)
    platform, args.overhead_info = cli.choose_overhead(args)
    target = cli.output_target(args.input, args.output, args.force)
    job = Job(str(args.input), str(args.output), cli.run_options(args), platform,
              in_memory=not streamed)
    return run_threads(2, lambda t: command._run(
        t, job, lambda: cli._Outputs(args, target, in_parts=True),
        lambda outputs, run, seconds, extra, write: cli.finish(
            args, outputs, platform, False, run, seconds, write, extra)))


def _run(way: str, tmp_path: Path) -> list[int]:
    out = tmp_path / "out" / "traces.otf2"
    argv = [str(CASE), str(out), "--overhead", "100ns", "--quiet"]
    if way == "in-memory":
        return [main([*argv, "--in-memory"])]
    if way == "streamed":
        return [main(argv)]
    return _distributed(tmp_path, argv, streamed=way == "distributed-streamed")


@pytest.mark.parametrize("way", WAYS)
def test_the_case_is_written_on_every_way(way, tmp_path):
    """Without an injected violation each way writes the case (so that the refusals
    below are the violation's doing)."""
    assert set(_run(way, tmp_path)) == {0}
    assert (tmp_path / "out" / "traces.otf2").exists()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("counter", COUNTERS)
def test_every_counter_refuses_on_every_way(way, counter, tmp_path, monkeypatch, capsys):
    _inject(monkeypatch, counter)
    assert set(_run(way, tmp_path)) == {EXIT_VERIFY}
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary left either
    if way in ("in-memory", "streamed"):
        assert "verification failed" in capsys.readouterr().err
