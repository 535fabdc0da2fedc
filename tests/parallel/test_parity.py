"""The distributed run (compensate/parallel/driver.py, command.py) gives the one-process output
where the one-process run changes its input or its fit: processes on clocks of their
own (compensate/parallel/clocks.py, compensate.matching.clocks) and a fit clamped on
most of its uses (compensate.engine.fit.clamp_check), on thread ranks with trimmed
views as the command's ranks run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compensate.formats import read_trace
from compensate.formats.text import read_text
from compensate.pipeline import in_memory
from compensate.pipeline.options import RunOptions
from compensate.platform import Platform
from compensate.simulate import simulate
from tests.pipelines import Result, assemble
from tests.threadranks import run_threads

from ..conftest import ROOT
from ..matching.test_clocks import COLLECTIVE, HEAD, SKEWED
from .test_driver import assert_same


def both(trace, platform, bound, size=2):
    """The one-process run and rank 0's distributed run (``size`` thread ranks on
    trimmed views), each as (tests.pipelines tuple, Run)."""
    from compensate.parallel.driver import run_rank
    from compensate.parallel.ghosts import complete_trimmed
    from compensate.parallel.ownership import owners

    options = RunOptions(bound, "uniform", None, False)
    one = in_memory(trace, platform, options)

    def rank(t):
        owner = owners(trace.definitions, list(trace.events), t.size)
        own = {loc: ev for loc, ev in trace.events.items() if owner[loc] == t.rank}
        view, index = complete_trimmed(trace.definitions, own, t, owner, trace.source)
        return run_rank(view, platform, options, t, owner, index)

    ranks = run_threads(size, rank)
    single = (Result(one.trace, one.stats, one.matching), one.matching, one.fit,
              one.verification)
    return (single, one), (assemble(trace, ranks), ranks[0].run)


def assert_parity(one, par) -> None:
    assert_same(one[0], par[0])
    assert one[1].clock_alignment == par[1].clock_alignment
    assert one[1].measured_span == par[1].measured_span
    assert one[1].approximated_span == par[1].approximated_span


@pytest.mark.parametrize("body", [SKEWED, COLLECTIVE], ids=["messages", "collective"])
def test_skewed_clocks_are_aligned_as_one_process_aligns_them(tmp_path, body):
    """Rank 1 stamps 500 ticks early: each rank sees only its own receives, the
    reduced bounds give every rank the one-process offset (401) and the output is
    the one-process output record for record."""
    path = tmp_path / "t.trace"
    path.write_text(HEAD + body)
    trace = read_text(str(path))
    one, par = both(trace, Platform(1e-8), "lower")
    assert one[1].clock_alignment.offsets == {1: 401}
    assert_parity(one, par)


def test_an_eztrace_ring_with_an_early_rank_is_aligned_as_one_process_aligns_it():
    """tests/data/eztrace/ring: EZTrace writes no ClockOffset, rank 1 is ~70 us early."""
    trace = read_trace(str(ROOT / "tests" / "data" / "eztrace" / "ring" / "eztrace_log.otf2"))
    one, par = both(trace, Platform(1e-7), "lower")
    assert one[1].clock_alignment is not None and one[1].clock_alignment.inverted
    assert_parity(one, par)


def test_a_fit_clamped_on_most_uses_is_replaced_as_one_process_replaces_it(absurd_fit):
    """A fit that times every transfer at 1 s is overridden by the upper bound on
    every use: the one-process run compensates again with the fallback, and so do
    the ranks (the clamp counts reduced), with the same output and the same outcome."""
    sim = simulate("pipeline", ranks=4, overhead=1e-6, seed=0, quantize=True)
    one, par = both(sim.measured, sim.platform, "fitted", size=2)
    assert one[1].fit.rejected.startswith("outside [lower, upper] on ")
    assert one[1].fit == par[1].fit
    assert_parity(one, par)


def commands(tmp_path, trace, extra, ranks=2):
    """The one-process command's (streamed) and the distributed streamed command's
    (thread ranks) output bytes and summaries of ``trace``."""
    from compensate.cli.compensate import main
    from compensate.formats import write_trace

    from .test_command import _thread_command

    write_trace(trace, str(tmp_path / "in.trace"))
    got = []
    for name in ("one", "par"):
        argv = [str(tmp_path / "in.trace"), str(tmp_path / f"{name}.trace"), *extra,
                "--summary", str(tmp_path / f"{name}.json"), "--quiet"]
        if name == "one":
            assert main(argv) == 0
        else:
            assert _thread_command(tmp_path, argv, ranks, streamed=True) == [0] * ranks
        got.append(((tmp_path / f"{name}.trace").read_bytes(),
                    json.loads((tmp_path / f"{name}.json").read_text())))
    return got


def test_the_streamed_command_refits_as_one_process_does(tmp_path, absurd_fit):
    """The distributed streamed command (compensate/parallel/command.py): the same
    output bytes and the same rejected fit as the one-process command's."""
    sim = simulate("pipeline", ranks=4, overhead=1e-6, seed=0, quantize=True)
    (tmp_path / "p.json").write_text(json.dumps(sim.platform.to_dict()))
    one, par = commands(tmp_path, sim.measured,
                        ["--platform", str(tmp_path / "p.json"), "--bound", "fitted"])
    assert one[1]["fit"]["rejected"].startswith("outside [lower, upper] on ")
    assert one[1]["fit"] == par[1]["fit"]
    assert one[0] == par[0]


def test_the_streamed_command_aligns_clocks_as_one_process_does(tmp_path):
    """A skewed trace: the one-process command falls back to memory and aligns;
    the distributed command's ranks fall back to their shares and align the same."""
    path = tmp_path / "t.trace"
    path.write_text(HEAD + SKEWED)
    one, par = commands(tmp_path, read_text(str(path)), ["--overhead", "10ns"])
    assert one[1]["clock_alignment"]["offsets_s"] == {"1": 401e-9}
    assert one[1]["clock_alignment"] == par[1]["clock_alignment"]
    assert one[0] == par[0]


def skewed(trace, seed):
    """``trace`` with each process's records shifted by its own random constant
    (up to 0.4 ms), as if each process had its own clock."""
    from compensate.model import BUFFER_FLUSH

    rng = np.random.default_rng(seed)
    defs = trace.definitions
    procs = sorted({defs.process_of(loc) for loc in trace.events})
    off = dict(zip(procs, rng.integers(0, 400_000, len(procs)).tolist(), strict=True))
    times, sizes = {}, {}
    for loc, ev in trace.events.items():
        shift = np.int64(off[defs.process_of(loc)])
        times[loc] = ev.time + shift
        flush = ev.kind == BUFFER_FLUSH
        sizes[loc] = np.where(flush, ev.size + shift, ev.size) if flush.any() else ev.size
    return trace.with_times(times, sizes)


@pytest.mark.parametrize("name", ["collectives", "mixed", "hybrid_halo"])
def test_simulated_programs_on_clocks_of_their_own_give_the_one_process_output(name):
    """Four processes, each on its own clock, three ranks: the same offsets, the
    same output (messages, collectives, threads)."""
    sim = simulate(name, ranks=4, seed=3, iterations=1)
    one, par = both(skewed(sim.measured, 7), sim.platform, "fitted", size=3)
    assert one[1].clock_alignment is not None
    assert_parity(one, par)
