"""``--overhead estimate`` made on the ranks (compensate/parallel/estimate.py): every
rank gets the one-process command's platform and summary object, from the ranks'
pass over their own locations or, where one process takes the gaps alone, from the
one-process estimate on every rank. (Under real MPI: the ``stencil_estimate`` case
of tests/parallel/test_command.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from compensate.overhead import KindGaps
from compensate.simulate import simulate


def test_merged_gaps_are_the_smallest_and_their_numbers_summed():
    gaps = KindGaps(None)
    gaps.best = {1: (2e-7, 3), 4: (5e-8, 1)}
    gaps.merge({1: (1e-7, 2), 7: (3e-7, 5)})
    assert gaps.best == {1: (1e-7, 5), 4: (5e-8, 1), 7: (3e-7, 5)}


@pytest.mark.parametrize("source,ranks,whole", [
    ("stencil", 2, False), ("stencil", 3, False), ("hybrid", 2, False),
    ("nested", 3, False), ("requests", 3, False), ("waits", 3, True), ("ringf", 2, True)])
def test_the_ranks_estimate_is_the_one_process_estimate(tmp_path, source, ranks, whole):
    """``--overhead estimate`` made on the ranks (each its own locations' gaps and
    its own receives' transfers over agreed cuts, merged) gives every rank the
    one-process command's platform and summary object. Where the first records
    show clocks that disagree (EZTrace's waits and ringf) every rank makes the
    one-process estimate (gaps alone), as one process does; elsewhere the ranks'
    pass, not the whole one."""
    from compensate.cli import compensate as cli
    from compensate.formats.text import write_text
    from compensate.parallel.command import _plan
    from compensate.parallel.estimate import made_on_ranks
    from compensate.pipeline.options import Job
    from tests.threadranks import run_threads

    if source == "stencil":
        path = tmp_path / "stencil.trace"
        write_text(simulate("stencil", ranks=6, seed=3, iterations=3).measured, str(path))
    else:
        path = Path(__file__).parents[1] / "data" / "eztrace" / source / "eztrace_log.otf2"
    argv = [str(path), str(tmp_path / "o" / "traces.otf2"), "--overhead", "estimate",
            "--segment-records", "48"]
    args = cli.build_parser().parse_args(argv)
    expected = cli.choose_overhead(args)
    later = cli.estimate_later(args)
    one, calls = later.whole, []
    later.whole = lambda: calls.append(1) or one()
    job = Job(str(path), str(args.output), cli.run_options(args), estimate=later)
    found = run_threads(ranks, lambda t: made_on_ranks(t, job, lambda: _plan(t, job)).platform)
    assert all(p.to_dict() == expected[0].to_dict() for p in found)
    assert later.info == expected[1] and expected[1]["source"] == "estimate"
    assert len(calls) == (ranks if whole else 0)
