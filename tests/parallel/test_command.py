"""``mpiexec -n P compensate`` (compensate/parallel/command.py) under real MPI: the
outputs and summaries equal the one-process run's, on two simulated programs (one
with trimmed ghosts; a platform with per-region costs) and a real archive, for P = 2
and 3; a bad input gives every rank the same status, one line and no output. Two
launches, several commands each (tests/parallel/mpi_runs.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compensate.cli.compensate import main
from compensate.simulate import simulate

from ..conftest import ROOT, TRACES, mpiexec
from ..fingerprint_gen import _output_bytes
from .test_exchange import CYCLE

PER_RUN = {"seconds", "output", "ranks", "parallel",  # honestly per run (docs/parallel.md)
           "segments"}  # (the ranks agree on their own cuts: compensate/parallel/cutting.py)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mpi")
    sim = simulate("mixed", ranks=4, seed=2, iterations=1)
    from compensate.formats import write_trace
    write_trace(sim.measured, str(tmp / "mixed.trace"))
    # (its ranks trim each other's locations: compensate/parallel/trim.py)
    write_trace(simulate("stencil", ranks=6, seed=2, iterations=2).measured,
                str(tmp / "stencil.trace"))
    # with a network model: the MPI_Sendrecv of "mixed" then take R2's exchange test
    # (compensate/engine/fit.py, exchange_arrival), on every rank as in one process
    sim.platform.network = (1e-6, 2e-10)
    # and per-region costs: every rank binds the names and charges them alike
    sim.platform.overhead_by_region = {"MPI_Recv": {"Enter": 6e-7, "Leave": 8e-7},
                                       "MPI_Send": {"Leave": 5e-7}}
    (tmp / "platform.json").write_text(json.dumps(sim.platform.to_dict()))
    (tmp / "cycle.trace").write_text(CYCLE)
    return tmp


def commands(tmp: Path, tag: str) -> list[tuple[str, list[str]]]:
    """(output name, arguments after IN OUT's output) of each case."""
    real = TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2"
    if not real.exists():
        pytest.skip(f"{real} not available")
    plat = ["--platform", str(tmp / "platform.json")]
    # every other bundled real archive, each under another bound, rotated between the
    # two launches, so that the real launches cover every bound on real input
    # (docs/parallel.md "Tests": the whole matrix, archives x bounds x P = 2, 3,
    # streamed and --in-memory, was run by hand)
    bounds = ["lower", "upper", "fitted", "none"]
    shift = tag.endswith("3")
    names = ["hip-two-gpu-metrics", "jacobi-openmp-tasks-offload", "ping-pong-otf2",
             "ping-pong-otf2-papi"]
    others = [(name, bounds[(i + shift) % 4]) for i, name in enumerate(names)
              if (TRACES / name / "traces.otf2").exists()]
    return [
        *[(f"{name}_{bound}_{tag}/traces.otf2",
           [str(TRACES / name / "traces.otf2"),
            str(tmp / f"{name}_{bound}_{tag}" / "traces.otf2"), "--overhead", "100ns",
            "--bound", bound]) for name, bound in others],
        # fitted, streamed within each rank: the fit reduced across ranks, several segments
        (f"mixed_fitted_streamed_{tag}.trace",
         [str(tmp / "mixed.trace"), str(tmp / f"mixed_fitted_streamed_{tag}.trace"), *plat,
          "--bound", "fitted", "--segment-records", "32"]),
        # the whole-share path (--in-memory) with trimmed ghosts
        (f"stencil_{tag}.trace",
         [str(tmp / "stencil.trace"), str(tmp / f"stencil_{tag}.trace"), *plat,
          "--in-memory"]),
        # streamed within each rank (compensate/parallel/segments.py), several segments
        (f"stencil_streamed_{tag}.trace",
         [str(tmp / "stencil.trace"), str(tmp / f"stencil_streamed_{tag}.trace"), *plat,
          "--segment-records", "64"]),
        # --overhead estimate made on the ranks (compensate/parallel/estimate.py):
        # the same overhead object and output
        (f"stencil_estimate_{tag}.trace",
         [str(tmp / "stencil.trace"), str(tmp / f"stencil_estimate_{tag}.trace"),
          "--overhead", "estimate", "--segment-records", "64"]),
        (f"real_{tag}/traces.otf2",
         [str(real), str(tmp / f"real_{tag}" / "traces.otf2"), "--overhead", "100ns"]),
        # EZTrace's gaps among a channel's receives, streamed: the ranks read ahead
        # and cut after the gaps (compensate/parallel/cutting.py, the look-ahead)
        (f"gaps_streamed_{tag}/traces.otf2",
         [str(ROOT / "tests" / "data" / "eztrace" / "gaps" / "eztrace_log.otf2"),
          str(tmp / f"gaps_streamed_{tag}" / "traces.otf2"), "--overhead", "20ns",
          "--segment-records", "16"]),
    ]


def one_process(tmp: Path, cases) -> None:
    for name, args in cases:
        out = Path(args[1])
        args = [args[0], str(out.parent / ("one_" + out.name)) if out.suffix == ".trace"
                else str(tmp / ("one_" + out.parent.name) / out.name), *args[2:]]
        # the one-process run the distributed one equals: streamed unless it is not
        # streamed either (--in-memory: the whole-share path)
        whole = "--in-memory" in args
        assert main([*args, *(["--in-memory"] if whole else []), "--quiet", "--summary",
                     str(tmp / f"one_{name.replace('/', '_')}.json")]) == 0


@pytest.mark.parametrize("ranks", [2, 3])
def test_mpiexec_equals_one_process(inputs, ranks, capfd):
    """At P = 2 the engine's C loop sends and takes the replay's messages itself
    (the MPICH wheel's ABI: compensate/parallel/transport.py, wire_path); at P = 3
    they go through mpi4py (COMPENSATE_MPI_WIRE=0, as under any other MPI)."""
    tmp = inputs
    cases = commands(tmp, f"p{ranks}")
    one_process(tmp, cases)
    capfd.readouterr()
    runs = [[*args, "--quiet", "--summary", str(tmp / f"{name.replace('/', '_')}.json")]
            for name, args in cases]
    # a trace whose dependencies form a cycle: every rank exits 3, nothing written
    runs.append([str(tmp / "cycle.trace"), str(tmp / f"cycle_{ranks}.trace"),
                 "--overhead", "10ns"])
    status_dir = tmp / f"status{ranks}"
    status_dir.mkdir()
    wired = ranks == 2
    env = dict(os.environ, COMPENSATE_MPI_WIRE="1" if wired else "0")
    proc = subprocess.run(
        [mpiexec(), "-n", str(ranks), sys.executable, "-m", "tests.parallel.mpi_runs",
         str(status_dir), json.dumps(runs)], capture_output=True, text=True, timeout=240,
        cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    for rank in range(ranks):
        assert json.loads((status_dir / f"rank{rank}.json").read_text()) == \
            [0] * len(cases) + [3]
    # one line for the failure, from rank 0 only
    errors = [x for x in proc.stderr.splitlines() if x.startswith("compensate:")]
    assert len(errors) == 1 and "cycle" in errors[0], proc.stderr
    assert not (tmp / f"cycle_{ranks}.trace").exists()
    for name, args in cases:
        out = Path(args[1])
        ref = (out.parent / ("one_" + out.name) if out.suffix == ".trace"
               else tmp / ("one_" + out.parent.name) / out.name)
        assert _output_bytes(out) == _output_bytes(ref), name
        s1 = json.loads((tmp / f"one_{name.replace('/', '_')}.json").read_text())
        s2 = json.loads((tmp / f"{name.replace('/', '_')}.json").read_text())
        assert s2["ranks"] == ranks
        if "streamed" in name:
            assert s2["segments"]["count"] >= (20 if "gaps" in name else 3)  # really cut
        par = s2["parallel"]
        if wired:  # (every message the C loop's, unless its values were known first)
            assert sum(par["wire_messages"]) <= sum(par["messages"]), name
        else:
            assert sum(par["wire_messages"]) == 0, name
        assert {k: v for k, v in s1.items() if k not in PER_RUN} == \
            {k: v for k, v in s2.items() if k not in PER_RUN}, name
        if "--platform" in args:  # the records charged per region, summed over the ranks
            assert sum(s2["region_overhead_records"].values()) > 0, name
    stencil = json.loads((tmp / f"stencil_streamed_p{ranks}.trace.json").read_text())
    assert (sum(stencil["parallel"]["wire_messages"]) > 0) == wired


def test_launcher_detection_from_the_environment(monkeypatch):
    """The distributed path starts when a launcher says there are several ranks; only
    rank 0 prints. Nothing imports mpi4py to find out."""
    from compensate.parallel import command

    for name in command._SIZE_VARS + command._RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(command, "available", lambda: True)
    assert not command.launched()
    assert not command.silent_rank(["in.trace", "out.trace"])
    monkeypatch.setenv("PMI_SIZE", "1")
    assert not command.launched()
    monkeypatch.setenv("PMI_SIZE", "3")
    monkeypatch.setenv("PMI_RANK", "0")
    assert command.launched() and not command.silent_rank([])
    monkeypatch.setenv("PMI_RANK", "2")
    assert command.silent_rank([])
    monkeypatch.setattr(command, "available", lambda: False)
    assert not command.launched()
    assert command.silent_rank(["--mpi"])


def test_mpi_without_mpi4py_is_a_usage_error(monkeypatch, capsys, tmp_path):
    from compensate.parallel import command

    monkeypatch.setattr(command, "available", lambda: False)
    (tmp_path / "in.trace").write_text(CYCLE)
    assert main([str(tmp_path / "in.trace"), str(tmp_path / "out.trace"), "--overhead",
                 "1ns", "--mpi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["compensate: error: --mpi needs mpi4py: pip install 'compensate[mpi]'"]
    assert not (tmp_path / "out.trace").exists()


def _thread_command(tmp: Path, argv: list[str], ranks: int, streamed: bool = False
                    ) -> list[int]:
    """The command's distributed run (compensate.parallel.command._run, as
    run_parallel calls it) on thread ranks: each rank's exit status. Without
    ``streamed`` the whole-share path only (compensate/parallel/segments.py not
    tried)."""
    from compensate.cli import compensate as cli
    from compensate.parallel import command
    from compensate.pipeline.options import Job
    from tests.threadranks import run_threads

    args = cli.build_parser().parse_args(argv)
    platform, args.overhead_info = cli.choose_overhead(args)
    target = cli.output_target(args.input, args.output, args.force)
    job = Job(str(args.input), str(args.output), cli.run_options(args), platform,
              in_memory=args.in_memory or not streamed)
    return run_threads(ranks, lambda t: command._run(
        t, job, lambda: cli._Outputs(args, target, in_parts=True),
        lambda outputs, run, seconds, extra, write: cli.finish(
            args, outputs, platform, False, run, seconds, write, extra)))


@pytest.fixture(scope="module")
def threads_case(inputs):
    """The one-process output of the simulated program, to compare with."""
    one = inputs / "one_threads.trace"
    assert main([str(inputs / "mixed.trace"), str(one), "--platform",
                 str(inputs / "platform.json"), "--in-memory", "--quiet"]) == 0
    return inputs, one


def test_each_rank_reads_and_writes_only_its_own_locations(threads_case, monkeypatch):
    """Every rank reads the definitions and its own locations' records only (the
    selections partition the trace), writes them as its part, and the output is the
    one-process output byte for byte."""
    import compensate.formats as formats
    from compensate.formats import parts, read_trace

    tmp, one = threads_case
    read, written = [], []
    real_read, real_part = formats.read_blocks, parts.write_part

    def spy_read(path, locations, **kw):
        read.append(None if locations is None else sorted(locations))
        return real_read(path, locations, **kw)

    def spy_part(tmp_dir, part, source, locations):
        written.append((part, sorted(locations), sorted(source.events)))
        return real_part(tmp_dir, part, source, locations)

    monkeypatch.setattr(formats, "read_blocks", spy_read)
    monkeypatch.setattr(parts, "write_part", spy_part)
    out = tmp / "threads.trace"
    assert _thread_command(tmp, [str(tmp / "mixed.trace"), str(out), "--platform",
                                 str(tmp / "platform.json"), "--quiet"], 3) == [0, 0, 0]
    assert None not in read  # nobody read the whole trace
    selections = [s for s in read if s]
    locations = sorted(read_trace(tmp / "mixed.trace", []).definitions.locations)
    assert len(selections) == 3 and sorted(sum(selections, [])) == locations
    assert sorted(p for p, _, _ in written) == [0, 1, 2]
    assert all(mine == held for _, mine, held in written)  # a part holds only its own
    assert sorted(sum((m for _, m, _ in written), [])) == locations
    assert out.read_bytes() == one.read_bytes()
    assert not list(tmp.glob(".threads.trace.tmp-*"))


def test_a_streamed_rank_reads_each_own_record_once(threads_case, monkeypatch):
    """Streamed within each rank, over several segments: the cut agreement and the
    segments take one read of a rank's own locations (every record read from the
    input once, by its owner), and the output is the one-process output. A rank
    reads its own locations once more only to read ahead (no cut found in
    LOOKAHEAD_AFTER segments' records: compensate.pipeline.unclosed), as one
    process does, and every rank then does so once."""
    import compensate.formats as formats

    tmp, one = threads_case
    real = formats.read_chunks
    reads: list[dict[int, int]] = []  # each read of some locations: records per location

    def spy(path, *args, locations=None, **kwargs):
        defs, chunks = real(path, *args, locations=locations, **kwargs)
        counts: dict[int, int] = {}
        reads.append(counts)

        def counted():
            for chunk in chunks:
                for loc, ev in chunk.items():
                    counts[loc] = counts.get(loc, 0) + len(ev)
                yield chunk
        return defs, counted()

    monkeypatch.setattr(formats, "read_chunks", spy)
    out = tmp / "threads_once.trace"
    summary = tmp / "threads_once.json"
    assert _thread_command(tmp, [str(tmp / "mixed.trace"), str(out), "--platform",
                                 str(tmp / "platform.json"), "--segment-records", "32",
                                 "--quiet", "--summary", str(summary)], 3,
                           streamed=True) == [0, 0, 0]
    assert json.loads(summary.read_text())["segments"]["count"] >= 3
    trace = formats.read_trace(str(tmp / "mixed.trace"))
    whole = {loc: len(ev) for loc, ev in trace.events.items() if len(ev)}
    reads = [r for r in reads if r]
    for r in reads:  # every read is of whole locations, each of one rank's
        assert all(n == whole[loc] for loc, n in r.items())
    seen = [loc for r in reads for loc in r]
    assert set(seen) == set(whole)
    again = len(reads) - 3  # (three ranks: one read each, and the look-ahead's)
    assert again in (0, 3) and all(seen.count(loc) == 1 + again // 3 for loc in whole)
    assert out.read_bytes() == one.read_bytes()


@pytest.mark.parametrize("source,bound", [("skewed", "lower"), ("skewed", "fitted"),
                                          ("ringf", "lower"), ("clockring", "fitted")])
def test_ranks_stream_a_trace_whose_clocks_disagree_aligned_as_one_process(tmp_path, source,
                                                                          bound):
    """A trace whose processes' clocks disagree (a receive stamped before its send:
    a simulated program with clocks per process shifted apart, and EZTrace's
    ringf and clockring, whose processes count time from their own start; clockring's
    channels also have gaps, whose pairing compares times across processes) is not
    read whole on the ranks: rank 0 finds the offsets as one process does (its clock
    pass over the whole trace, streamed), every rank streams its own records moved
    by them, and the output and the summary (the alignment, the spans) are the
    one-process streamed run's."""
    from compensate.formats.text import write_text
    from tests.pipeline.test_run import _skewed

    if source == "skewed":
        path = tmp_path / "skewed.trace"
        write_text(_skewed({1: -300_000, 3: -70_000}), str(path))
        out_name, segment = "out.trace", "300"
    else:
        path = Path(__file__).parents[1] / "data" / "eztrace" / source / "eztrace_log.otf2"
        out_name, segment = "traces.otf2", "16"
    got = {}
    for name in ("one", "ranks"):
        out, summary = tmp_path / name / out_name, tmp_path / f"{name}.json"
        argv = [str(path), str(out), "--overhead", "100ns", "--segment-records", segment,
                "--bound", bound, "--quiet", "--summary", str(summary)]
        if name == "one":
            assert main(argv) == 0
        else:
            assert _thread_command(tmp_path, argv, 2, streamed=True) == [0, 0]
        got[name] = (_output_bytes(out), json.loads(summary.read_text()))
    (one, s_one), (ranks, s_ranks) = got["one"], got["ranks"]
    assert ranks == one
    assert s_ranks["clock_alignment"] == s_one["clock_alignment"]
    assert s_ranks["clock_alignment"]["receives_before_send"] > 0
    assert s_ranks["segments"]["count"] > 1  # streamed, not read whole
    for key in ("measured_span_s", "approximated_span_s", "records", "verification"):
        assert s_ranks[key] == s_one[key], key


@pytest.mark.parametrize("shifts,ranks", [({1: -300_000, 3: -70_000}, 2),
                                          ({2: 250_000}, 3), ({1: 90_000, 2: -40_000}, 4)])
def test_the_ranks_clock_pass_finds_the_whole_traces_offsets(tmp_path, shifts, ranks):
    """The ranks' clock pass (each over its own locations' segments, the orders
    whose later record it owns, merged) finds the offsets that align the whole
    trace in memory (compensate.matching.clocks.align_clocks), with its count and
    largest inversion, on every rank."""
    from compensate.formats.text import write_text
    from compensate.parallel.command import _clock_offsets, _plan
    from compensate.pipeline.options import Job, RunOptions
    from tests.pipeline.test_run import _skewed, _whole
    from tests.threadranks import run_threads

    trace = _skewed(shifts, "stencil")
    path = tmp_path / "skewed.trace"
    write_text(trace, str(path))
    _, expected = _whole(trace)
    assert expected.inverted > 0
    job = Job(str(path), str(tmp_path / "out.trace"), RunOptions("lower", segment_records=120))
    found = run_threads(ranks, lambda t: _clock_offsets(t, job, _plan(t, job)))
    assert all(f == expected for f in found), (found[0], expected)


def test_a_rank_failing_while_writing_leaves_no_output(threads_case, monkeypatch, capsys):
    """A part that cannot be written: every rank exits 3 with that rank's line and
    nothing is at OUT (the parts are aborted)."""
    from compensate.formats import parts

    tmp, _ = threads_case
    real_part = parts.write_part

    def failing(tmp_dir, part, source, locations):
        if part == 1:
            raise OSError(28, "No space left on device", str(tmp_dir))
        return real_part(tmp_dir, part, source, locations)

    monkeypatch.setattr(parts, "write_part", failing)
    out = tmp / "failed.trace"
    assert _thread_command(tmp, [str(tmp / "mixed.trace"), str(out), "--platform",
                                 str(tmp / "platform.json"), "--quiet"], 2) == [3, 3]
    assert not out.exists() and not list(tmp.glob(".failed.trace.tmp-*"))


def test_refused_output_is_written_by_no_rank(threads_case, monkeypatch, capsys):
    """--max-overcompensated refuses (exit 5) on rank 0: no rank writes a part."""
    from compensate.formats import parts

    tmp, _ = threads_case
    monkeypatch.setattr(parts, "write_part", lambda *a: pytest.fail("a part was written"))
    out = tmp / "refused.trace"
    statuses = _thread_command(tmp, [str(tmp / "mixed.trace"), str(out), "--overhead", "1ms",
                                     "--max-overcompensated", "0", "--quiet"], 2)
    assert statuses[0] == 5
    assert not out.exists() and not list(tmp.glob(".refused.trace.tmp-*"))


def test_the_distributed_run_takes_the_outputs_lock_and_checks_at_the_commit(
        threads_case, monkeypatch, capsys):
    """Rank 0 holds the output's lock as one process does: with another run writing
    OUT every rank exits 3 at once; an OUT written by another run after the start
    is not replaced without --force (every rank exits 3, OUT is the other's)."""
    from compensate.formats import parts
    from compensate.formats.paths import AtomicOutput

    tmp, _ = threads_case
    out = tmp / "locked.trace"
    argv = [str(tmp / "mixed.trace"), str(out), "--platform", str(tmp / "platform.json"),
            "--quiet"]
    other = AtomicOutput(out)  # another run, writing OUT
    try:
        assert _thread_command(tmp, argv, 2) == [3, 3]
        assert "another run is writing" in capsys.readouterr().err
    finally:
        other.discard()
    real_part = parts.write_part

    def and_meanwhile(tmp_dir, part, source, locations):
        if part == 0:
            out.write_text("theirs\n")  # another run finished OUT meanwhile
        return real_part(tmp_dir, part, source, locations)

    monkeypatch.setattr(parts, "write_part", and_meanwhile)
    assert _thread_command(tmp, argv, 2) == [3, 3]
    assert "exists (use --force to replace it)" in capsys.readouterr().err
    assert out.read_text() == "theirs\n"
    assert not list(tmp.glob(".locked.trace.*"))


def test_the_summary_counts_of_the_hand_computed_three_location_case(tmp_path):
    """The summary's ``parallel`` on tests/parallel/data/three_locations.trace (rank 0
    owns locations 0 and 1, rank 1 location 2), by hand from the case's comments:
    rank 0 owns 6 + 3 records and holds location 2's 9 as ghosts, rank 1 the other
    way round; anchors (each location's first record and its receives): 2 + 2 and 2;
    values: rank 1 sends loc 2's two sends (records 1 and 7), rank 0 loc 0's send
    (record 4), each a (request id, value) pair of 16 bytes. The replay's collective
    calls: the setup, the statistics' reduction and the phase agreement."""
    data = Path(__file__).parent / "data" / "three_locations.trace"
    plat = next(x for x in data.read_text().splitlines() if x.startswith("# platform:"))
    (tmp_path / "platform.json").write_text(plat.split(":", 1)[1])
    summary = tmp_path / "s.json"
    assert _thread_command(tmp_path, [str(data), str(tmp_path / "out.trace"), "--platform",
                                      str(tmp_path / "platform.json"), "--quiet",
                                      "--summary", str(summary)], 2) == [0, 0]
    par = json.loads(summary.read_text())["parallel"]
    assert par["ranks"] == 2 and len(par["waits"]) == 2  # (times a rank waited: timing)
    assert par["messages"] == par["replay"]["messages"]  # (one replay in this run)
    assert par["records"] == [9, 9] and par["ghost_records"] == [9, 9]
    assert par["anchors"] == [4, 2]
    assert par["values_sent"] == [1, 2] and par["values_received"] == [2, 1]
    # the setup step is the replay's one blocking collective call (the statistics'
    # reduction and the phase agreement after it), the values travel point to point
    assert par["replay"]["collectives"] == [3, 3]
    rep = par["replay"]
    assert rep["message_bytes"] == [16 * n for n in par["values_sent"]]  # (id, value) pairs
    assert all(1 <= m <= n for m, n in zip(rep["messages"], par["values_sent"], strict=True))
    assert all(w >= 1 for w in rep["waves"]) and len(set(rep["waves"])) == 1
    for phase in ("definitions", "read", "ghosts", "match", "replay", "times", "verify"):
        assert len(par["seconds"][phase]) == 2 and min(par["seconds"][phase]) >= 0
    assert "gather" not in par["seconds"]  # every rank verifies its own dependencies
    assert all(x > 0 for x in par["cpu_seconds"] + par["peak_mib"])


def test_payload_bytes_counts_the_data_not_the_objects():
    import numpy as np

    from compensate.parallel.transport import payload_bytes
    assert payload_bytes((np.zeros(3, np.int64), np.zeros(2, np.float32), None)) == 32
    assert payload_bytes({"ab": [1, 2.0], 3: b"xyz"}) == 2 + 16 + 8 + 3


def test_an_otf2_output_reads_no_payload_objects(tmp_path, monkeypatch):
    """A rank reads an OTF2 input without payload objects (the C path) when the
    output is OTF2, which copies the records from the input, and with them when it
    is a .trace file; both outputs equal the one-process run's."""
    import compensate.formats as formats

    real = TRACES / "ping-pong-otf2" / "traces.otf2"
    if not real.exists():
        pytest.skip(f"{real} not available")
    asked, real_read = [], formats.read_blocks

    def spy(path, locations=None, *, payload=True, **kw):
        if locations is not None:  # (a rank's own; the one-process run reads whole)
            asked.append(payload)
        return real_read(path, locations, payload=payload, **kw)

    monkeypatch.setattr(formats, "read_blocks", spy)
    for out in (tmp_path / "p" / "traces.otf2", tmp_path / "p.trace"):
        one = out.parent / ("one_" + out.name) if out.suffix == ".trace" \
            else tmp_path / "one" / out.name
        assert main([str(real), str(one), "--overhead", "100ns", "--in-memory",
                     "--quiet"]) == 0
        asked.clear()
        assert _thread_command(tmp_path, [str(real), str(out), "--overhead", "100ns",
                                          "--quiet"], 2) == [0, 0]
        assert asked == [out.suffix == ".trace"] * 2
        assert _output_bytes(out) == _output_bytes(one)


def test_streamed_thread_ranks_and_their_fallback(inputs, tmp_path, capsys):
    """The command streamed within each rank (compensate/parallel/segments.py) writes
    the one-process streamed output and summary; a trace the one-process command
    cannot stream (a receive without its send: a segment error, the in-memory path
    names the record) falls back on every rank to the whole-share path, which exits
    3 with the one-process line."""
    plat = ["--platform", str(inputs / "platform.json"), "--segment-records", "64"]
    one, par = tmp_path / "one.trace", tmp_path / "par.trace"
    assert main([str(inputs / "stencil.trace"), str(one), *plat, "--quiet", "--summary",
                 str(tmp_path / "one.json")]) == 0
    assert _thread_command(inputs, [str(inputs / "stencil.trace"), str(par), *plat, "--quiet",
                                    "--summary", str(tmp_path / "par.json")], 2,
                           streamed=True) == [0, 0]
    assert par.read_bytes() == one.read_bytes()
    s1, s2 = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "par"))
    assert s2["segments"]["count"] >= 3
    assert {k: v for k, v in s1.items() if k not in PER_RUN} == \
        {k: v for k, v in s2.items() if k not in PER_RUN}
    # --bound fitted streams too: the fit reduced across ranks (a real archive with a linear fit);
    # the output and the summary with its fit report are the one-process run's
    real = str(TRACES / "ping-pong-otf2" / "traces.otf2")
    fitted = ["--overhead", "200ns", "--bound", "fitted", "--segment-records", "40",
              "--quiet", "--summary"]
    assert main([real, str(tmp_path / "one_fit" / "traces.otf2"), *fitted,
                 str(tmp_path / "one_fit.json")]) == 0
    assert _thread_command(inputs, [real, str(tmp_path / "fit" / "traces.otf2"), *fitted,
                                    str(tmp_path / "fit.json")], 2, streamed=True) == [0, 0]
    assert _output_bytes(tmp_path / "fit" / "traces.otf2") == \
        _output_bytes(tmp_path / "one_fit" / "traces.otf2")
    s1, s2 = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one_fit", "fit"))
    assert s2["segments"]["count"] >= 3 and s2["fit"]["bound_used"] == "fitted"
    assert {k: v for k, v in s1.items() if k not in PER_RUN} == \
        {k: v for k, v in s2.items() if k not in PER_RUN}
    capsys.readouterr()
    lines = [x for x in (inputs / "stencil.trace").read_text().splitlines(keepends=True)
             if " MpiSend " not in x or not x.split()[1] == "0"]  # location 0 sends nothing
    bad = tmp_path / "bad.trace"
    bad.write_text("".join(lines))
    assert main([str(bad), str(tmp_path / "one_bad.trace"), *plat, "--in-memory"]) == 3
    want = capsys.readouterr().err.strip().splitlines()[-1]
    assert _thread_command(inputs, [str(bad), str(tmp_path / "bad_out.trace"), *plat], 2,
                           streamed=True) == [3, 3]
    assert capsys.readouterr().err.strip().splitlines()[-1] == want
    assert not (tmp_path / "bad_out.trace").exists() and not list(tmp_path.glob(".bad_out*"))


def test_a_share_the_memory_cannot_hold_is_refused_before_it_is_read(
        threads_case, monkeypatch, capsys):
    """The whole-share path (--in-memory, or a trace no rank can stream): a share
    larger than the memory available ends every rank with exit 3 and one line
    naming the rank, before any record is read, and nothing is written."""
    import compensate.formats as formats
    import compensate.parallel.command as command
    import compensate.pipeline.memory as memory

    tmp, _ = threads_case
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)
    # (the reader's buffers, checked first, are tests/pipeline/test_memory.py's)
    monkeypatch.setattr(command, "room_for_readers", lambda *a, **k: None)
    monkeypatch.setattr(formats, "read_blocks",
                        lambda *a, **k: pytest.fail("a share was read"))
    out = tmp / "too_large" / "traces.otf2"  # (an OTF2 input declares its records)
    anchor = TRACES / "ping-pong-otf2" / "traces.otf2"
    assert _thread_command(tmp, [str(anchor), str(out), "--overhead", "100ns", "--quiet"],
                           2) == [3, 3]
    err = capsys.readouterr().err
    assert "reading its whole share needs about" in err and "nothing written" in err
    assert not out.parent.exists()
