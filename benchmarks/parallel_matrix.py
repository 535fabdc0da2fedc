"""The distributed run's parity, case by case: ``mpiexec -n P compensate`` against the
one-process run on every simulated program (the hybrid ones too) and every
bundled real archive, under every bound, streamed with the default segments and
cut into many segments, for each P (docs/parallel.md "Tests").

Every case is run once in this process (the one-process command) and once in one
``mpiexec -n P`` job per P (``tests/parallel/mpi_runs.py``: one launch runs every
command); the outputs are compared byte for byte (OTF2: every definition and event
file) and the summaries but for what is per run (``seconds``, ``output``, ``ranks``,
``parallel``). Prints, per P, how many cases were identical and names every one
that was not; exits 1 if any was not. The CI suite runs a sample of these
(``tests/parallel/test_command.py``); this is the whole matrix (about 7 minutes on
two shared cores at the defaults).

Usage::

    python benchmarks/parallel_matrix.py [--ranks 2,3] [--workdir DIR] [--segment-records 200]
                                         [--programs a,b|none] [--no-archives]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compensate.cli.compensate import main as compensate  # noqa: E402
from compensate.formats import write_trace  # noqa: E402
from compensate.simulate.hybrid import HYBRID_PROGRAMS, HYBRID_RANKS  # noqa: E402
from compensate.simulate.programs import PROGRAMS  # noqa: E402
from compensate.simulate.simulator import simulate  # noqa: E402
from tests.fingerprint_gen import _output_bytes  # noqa: E402

BOUNDS = ("lower", "upper", "fitted", "none")
PER_RUN = {"seconds", "output", "ranks", "parallel", "segments"}  # (segments: agreed cuts)
ARCHIVES = ROOT / "tests" / "data" / "traces"


def cases(work: Path, programs: list[str], archives: bool, segment_records: int,
          bounds: tuple[str, ...] = BOUNDS) -> list[tuple[str, list[str], str]]:
    """(name, arguments with OUT as a placeholder, output suffix) of every case."""
    out: list[tuple[str, list[str], str]] = []
    for name in programs:
        sim = simulate(name, ranks=HYBRID_RANKS.get(name, 4), seed=3)
        write_trace(sim.measured, str(work / f"{name}.trace"))
        (work / f"{name}.json").write_text(json.dumps(sim.platform.to_dict()))
        plat = ["--platform", str(work / f"{name}.json")]
        for bound in bounds:
            for seg in ([], [f"--segment-records={segment_records}"]):
                tag = f"{name}-{bound}{'-cut' if seg else ''}"
                out.append((tag, [str(work / f"{name}.trace"), "OUT", *plat, "--bound", bound,
                                  *seg], ".trace"))
    if archives:
        for anchor in sorted(ARCHIVES.glob("*/traces.otf2")):
            for bound in bounds:
                for mode in ([], ["--in-memory"]):
                    tag = f"{anchor.parent.name}-{bound}{'-mem' if mode else ''}"
                    out.append((tag, [str(anchor), "OUT", "--overhead", "100ns", "--bound",
                                      bound, *mode], "/traces.otf2"))
    return out


def target(work: Path, prefix: str, tag: str, suffix: str) -> Path:
    return work / f"{prefix}-{tag}{suffix}"


def with_output(args: list[str], out: Path, summary: Path) -> list[str]:
    return [args[0], str(out), *args[2:], "--quiet", "--force", "--summary", str(summary)]


def compare(work: Path, tag: str, suffix: str, p: int) -> str | None:
    """None if the P-rank case equals the one-process one, else what differs."""
    one, par = target(work, "one", tag, suffix), target(work, f"p{p}", tag, suffix)
    if one.exists() != par.exists():
        return "one of the two wrote no output"
    if one.exists() and _output_bytes(one) != _output_bytes(par):
        return "output"
    s1 = json.loads((work / f"one-{tag}.json").read_text())
    s2 = json.loads((work / f"p{p}-{tag}.json").read_text())
    differ = sorted(k for k in set(s1) | set(s2) if k not in PER_RUN and s1.get(k) != s2.get(k))
    return f"summary: {', '.join(differ)}" if differ else None


def run(ranks: list[int], work: Path, programs: list[str], archives: bool,
        segment_records: int, bounds: tuple[str, ...] = BOUNDS) -> int:
    todo = cases(work, programs, archives, segment_records, bounds)
    start = time.perf_counter()
    expected = []
    for tag, args, suffix in todo:
        expected.append(compensate(with_output(args, target(work, "one", tag, suffix),
                                               work / f"one-{tag}.json")))
    print(f"{len(todo)} cases, one process: {time.perf_counter() - start:.1f} s, "
          f"exit statuses {sorted(set(expected))}", flush=True)
    bad = 0
    for p in ranks:
        start = time.perf_counter()
        runs = [with_output(args, target(work, f"p{p}", tag, suffix), work / f"p{p}-{tag}.json")
                for tag, args, suffix in todo]
        status = work / f"status{p}"
        status.mkdir(exist_ok=True)
        proc = subprocess.run(["mpiexec", "-n", str(p), sys.executable, "-m",
                               "tests.parallel.mpi_runs", str(status), json.dumps(runs)],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            print(f"P = {p}: mpiexec exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
            bad += 1
            continue
        got = json.loads((status / "rank0.json").read_text())
        same = 0
        for (tag, _, suffix), want, rc in zip(todo, expected, got, strict=True):
            why = f"exit {rc}, one process {want}" if rc != want else \
                compare(work, tag, suffix, p)
            if why is None:
                same += 1
            else:
                bad += 1
                print(f"P = {p}: {tag} differs ({why})")
        print(f"P = {p}: {same} of {len(todo)} identical "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if bad else 0


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="2,3")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--segment-records", type=int, default=200,
                    help="the cut-into-many-segments variant's segment size")
    ap.add_argument("--programs", default=None,
                    help="default: every simulated program; 'none': only the archives")
    ap.add_argument("--no-archives", action="store_true")
    ap.add_argument("--bounds", default=",".join(BOUNDS),
                    help="comma-separated; default: every bound")
    a = ap.parse_args(argv)
    bounds = tuple(a.bounds.split(","))
    programs = ([] if a.programs == "none" else a.programs.split(",")) if a.programs \
        else [*PROGRAMS, *HYBRID_PROGRAMS]
    ranks = [int(x) for x in a.ranks.split(",")]
    if a.workdir:
        Path(a.workdir).mkdir(parents=True, exist_ok=True)
        return run(ranks, Path(a.workdir), programs, not a.no_archives, a.segment_records,
                   bounds)
    with tempfile.TemporaryDirectory() as d:
        return run(ranks, Path(d), programs, not a.no_archives, a.segment_records, bounds)


if __name__ == "__main__":
    sys.exit(cli())
