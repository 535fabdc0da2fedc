"""Throughput and memory benchmark: compensate vs. the OTF2 library.

For a communication-heavy program (``stencil``: 32 ranks, a halo exchange every
~7 records, little compute) and a computation-heavy one (``montecarlo``: 8 ranks,
long local runs of traced ``get_coords`` calls between messages), at about 10^5,
10^6 and 10^7 records, it generates the measured trace once with the simulator
(cached in ``--workdir``, as an OTF2 archive and a ``.trace`` file plus the
platform file), then measures every figure in a fresh child process.

OTF2 (records per CPU-second: the child's process CPU time around the operation,
interpreter start-up excluded; the machine is shared, so CPU time is the stable
measure):

  lib read      the OTF2 library's own read: its global event reader with one C
                callback per record kind that stores the record's columns (the C
                path's pass 1, compensate/formats/otf2/native.py), nothing per record
                in Python;
  our read      compensate's chunked read into the model's Events on the C path
                (``read_chunks(..., payload=False)``: pass 1 and numpy's split by
                location); ``our read, otf2 pkg``: the same read through the
                ``otf2`` package (an event object per record);
  lib copy      read and write through the library with no compensation: the C
                path's read into columns and its copy into a new archive (the I/O
                floor of an end-to-end run);
  lower, fitted ``compensate IN OUT --platform P --bound B`` end to end (read,
                match, compensate, verify, write, streamed; fitted reads twice),
                the package's modules imported from bytecode (a copy of the
                package compiled once with ``compileall`` before timing, as a pip
                install has it; the imports inside the command are timed);
  lower, no .pyc  ``lower`` with a copy of the package that has no bytecode and
                ``PYTHONDONTWRITEBYTECODE=1``: every module the command imports is
                compiled on every run (a source checkout on a machine that sets
                it, as this one and CI do);
  lower, otf2 pkg  the same with ``COMPENSATE_NATIVE=0``: the ``otf2`` package
                path (the pure-Python path; ``--no-before`` skips it);
  (``--repeat N``: each end-to-end kind N times, alternated, the median shown;
  on a machine shared with other jobs one run's CPU time varies by ~10 %)
  ratios        CPU time of compensate / CPU time of the library's read or copy;
  peak MiB      peak resident set of the e2e children (``ru_maxrss`` of ``wait4``),
                and the ratio peak(10^7) / peak(10^6).

``.trace`` (wall seconds): e2e beside the floor ``read_text`` +
``write_text``, and the engine alone (match + compensate + verify in memory).

Rows are printed as soon as they are measured.

Usage::

    python benchmarks/throughput.py [--sizes 1e5,1e6,1e7] [--programs stencil,montecarlo]
                                    [--formats otf2,trace] [--workdir DIR] [--keep-outputs]
                                    [--no-before] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: program -> (ranks, builder keyword arguments). Iterations are chosen per size.
PROGRAMS: dict[str, tuple[int, dict]] = {
    "stencil": (32, {"step_time": 2e-6}),
    "montecarlo": (8, {}),
}
OVERHEAD = 1e-6  # seconds per record in the simulated measured run
FORMATS = ("otf2", "trace")


# ---------------------------------------------------------------------------
# Child-process workers (``throughput.py _worker KIND ...``): each prints one JSON
# line on stdout with the seconds it measured.


def _worker(argv: list[str]) -> dict:
    kind = argv[0]
    if kind == "generate":
        return _generate(argv[1], int(argv[2]), Path(argv[3]))
    if kind == "e2e":
        return _e2e(*argv[1:])
    if kind == "libread":
        return _libread(argv[1])
    if kind == "ourread":
        return _ourread(argv[1], argv[2] == "1")
    if kind == "libcopy":
        return _libcopy(argv[1], argv[2])
    if kind == "floor":
        return _floor(*argv[1:3])
    if kind == "engine":
        return _engine(*argv[1:3])
    raise SystemExit(f"unknown worker {kind}")


def _iterations_for(program: str, records: int) -> int:
    """Iterations that give about ``records`` records (records are linear in them)."""
    from compensate.simulate import simulate
    ranks, kw = PROGRAMS[program]
    a = simulate(program, ranks=ranks, iterations=10, overhead=OVERHEAD, **kw)
    b = simulate(program, ranks=ranks, iterations=20, overhead=OVERHEAD, **kw)
    per_it = (b.measured.record_count - a.measured.record_count) / 10
    fixed = a.measured.record_count - 10 * per_it
    return max(1, round((records - fixed) / per_it))


def _generate(program: str, records: int, out: Path) -> dict:
    from compensate.formats.otf2 import write_otf2
    from compensate.formats.text import write_text
    from compensate.simulate import simulate
    ranks, kw = PROGRAMS[program]
    t0 = time.perf_counter()
    iterations = _iterations_for(program, records)
    sim = simulate(program, ranks=ranks, iterations=iterations, overhead=OVERHEAD, **kw)
    trace = sim.measured
    t1 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    (out / "platform.json").write_text(json.dumps(sim.platform.to_dict()))
    write_text(trace, str(out / "measured.trace.tmp"))
    os.replace(out / "measured.trace.tmp", out / "measured.trace")
    shutil.rmtree(out / "otf2.tmp", ignore_errors=True)
    write_otf2(trace, str(out / "otf2.tmp" / "traces.otf2"))
    shutil.rmtree(out / "otf2", ignore_errors=True)
    os.replace(out / "otf2.tmp", out / "otf2")
    info = {"program": program, "ranks": ranks, "iterations": iterations,
            "records": trace.record_count, "simulate_s": t1 - t0,
            "write_s": time.perf_counter() - t1}
    (out / "info.json").write_text(json.dumps(info))
    return info


def _e2e(src: str, dst: str, platform_file: str, bound: str = "lower") -> dict:
    from compensate.cli import main
    t0, c0 = time.perf_counter(), time.process_time()
    code = main([src, dst, "--platform", platform_file, "--force", "--quiet", "--bound", bound])
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
            "exit": code}


def _locations(src: str) -> tuple[int, ...]:
    from compensate.formats.otf2 import read_otf2_chunks
    defs, chunks = read_otf2_chunks(src, 1)
    chunks.close()
    return defs.otf2.location_order


def _libread(src: str) -> dict:
    """The OTF2 library's own read: its global event reader with one C callback per
    record kind that stores the record's columns (the C path's pass 1), nothing
    returned to Python per record."""
    from compensate.formats.otf2 import native
    if native.library() is None:
        raise SystemExit("the OTF2 C path is not available")
    locations = _locations(src)
    t0, c0 = time.perf_counter(), time.process_time()
    native.library_read(src, locations)
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "exit": 0}


def _ourread(src: str, columns_only: bool) -> dict:
    """compensate's chunked read into the model's Events: ``columns_only`` the C
    path (``read_chunks(..., payload=False)``: pass 1 and the numpy split), else
    the ``otf2`` package path (an event object per record)."""
    import otf2  # noqa: F401  (imports and the C library's build: not timed)

    from compensate.formats import read_chunks
    from compensate.formats.otf2 import native
    native.library()
    t0, c0 = time.perf_counter(), time.process_time()
    defs, chunks = read_chunks(src, payload=not columns_only)
    for _chunk in chunks:
        pass
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "exit": 0}


def _libcopy(src: str, dst: str) -> dict:
    """Read and write through the OTF2 library, no compensation: the C path's read
    into columns and its copy back into a new archive (the I/O floor of e2e)."""
    import otf2  # noqa: F401  (imports and the C library's build: not timed)

    from compensate.formats import TraceWriter, read_chunks
    from compensate.formats.otf2 import native
    native.library()
    shutil.rmtree(os.path.dirname(dst), ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()
    defs, chunks = read_chunks(src, payload=False)
    with TraceWriter(dst, defs) as writer:
        for chunk in chunks:
            for loc, ev in chunk.items():
                writer.write(loc, ev)
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "exit": 0}


def _floor(src: str, dst: str) -> dict:
    t0 = time.perf_counter()
    if src.endswith(".otf2"):
        _otf2_copy(src, dst)
    else:
        from compensate.formats.text import read_text, write_text
        write_text(read_text(src), dst)
    return {"seconds": time.perf_counter() - t0, "exit": 0}


def _otf2_copy(src: str, dst: str) -> None:
    """The otf2 package reading every record and writing it back unchanged."""
    import otf2

    from compensate.formats.otf2 import BATCH_EVENTS
    directory, name = os.path.split(dst)
    shutil.rmtree(directory, ignore_errors=True)
    with otf2.reader.open(src, batch_events=BATCH_EVENTS) as reader:
        with otf2.writer.open(directory, archive_name=name[:-len(".otf2")],
                              definitions=reader.definitions) as writer:
            writers: dict = {}
            for loc, ev in reader.events:
                w = writers.get(loc)
                if w is None:
                    w = writers[loc] = writer.event_writer_from_location(loc)
                w.write(ev)


def _engine(src: str, platform_file: str) -> dict:
    from compensate.engine import EngineOptions, compensate
    from compensate.formats.text import read_text
    from compensate.matching import match
    from compensate.platform import Platform
    from compensate.verify import verify
    trace = read_text(src)
    platform = Platform.load(platform_file)
    t0 = time.perf_counter()
    m = match(trace)
    result = compensate(trace, platform, EngineOptions(), m)
    check = verify(result.trace, m)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "exit": 0 if check.ok else 4, "records": trace.record_count}


# ---------------------------------------------------------------------------
# Parent: run workers in fresh processes, collect wall time and peak RSS.


def run_child(args: list[str], script: str | Path | None = None,
              env_extra: dict | None = None, root: Path = ROOT) -> tuple[dict, float]:
    """Run ``SCRIPT _worker args`` (default: this script) in a fresh process, the
    package imported from ``root``; (the JSON line it printed last, its peak RSS in
    MiB)."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    script = Path(script or __file__).resolve()
    proc = subprocess.Popen([sys.executable, str(script), "_worker", *args],
                            stdout=subprocess.PIPE, env=env, cwd=str(ROOT))
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} failed with exit code {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1]), usage.ru_maxrss / 1024.0


def package_copies(work: Path) -> tuple[Path, Path]:
    """Two fresh copies of the ``compensate`` package under ``work``: (one compiled
    to bytecode with ``compileall``, one with none). The end-to-end runs import
    from them, so whether the modules are compiled on every run does not depend on
    what earlier runs left in the source tree."""
    import compileall
    copies = []
    for name in ("pkg-pyc", "pkg-src"):
        root = work / name
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(ROOT / "compensate", root / "compensate",
                        ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(root)
    if not compileall.compile_dir(str(copies[0] / "compensate"), quiet=1):
        raise RuntimeError("compileall failed")
    return copies[0], copies[1]


def machine_line() -> str:
    from calibration.machine import cpu_model
    cpu = cpu_model()
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    import numpy
    import otf2
    return (f"{cpu}, {os.cpu_count()} cores, {mem} RAM, Linux {pyplatform.release()}, "
            f"Python {pyplatform.python_version()}, numpy {numpy.__version__}, "
            f"otf2 {getattr(otf2, '__version__', '?')}")


def parse_size(text: str) -> int:
    return int(float(text))


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "-"


def _scratch(work: Path) -> Path:
    scratch = work / "out"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    return scratch


def _median_run(runs: list[tuple[dict, float]]) -> tuple[dict, float]:
    """The run of median CPU time (of an odd count; the upper middle of an even)."""
    return sorted(runs, key=lambda r: r[0]["cpu"])[len(runs) // 2]


def _otf2_table(cases: list, work: Path, args: argparse.Namespace, peaks: dict,
                results: list) -> None:
    """OTF2: the library's own read and copy beside compensate, per CPU-second."""
    print("\nOTF2, records per CPU-second (process CPU time of each child around the "
          "operation):\n")
    compiled, source = package_copies(work)
    print("| program | records | lib read | our read | our read, otf2 pkg | lib copy | lower | "
          "fitted | lower, no .pyc | lower, otf2 pkg | lib read / lower | lib copy / lower | "
          "lib copy / fitted | peak MiB lower | peak MiB fitted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
          flush=True)
    for program, size, case in cases:
        n = json.loads((case / "info.json").read_text())["records"]
        src = str(case / "otf2" / "traces.otf2")
        platform_file = str(case / "platform.json")
        scratch = _scratch(work)
        read, _ = run_child(["libread", src])
        ours, _ = run_child(["ourread", src, "1"])
        ours_pkg = None
        if not args.no_before:
            ours_pkg, _ = run_child(["ourread", src, "0"])
        copy, _ = run_child(["libcopy", src, str(scratch / "copy" / "traces.otf2")])
        runs: dict[str, list] = {"lower": [], "fitted": [], "nopyc": []}
        for _ in range(args.repeat):  # alternated, the median of each kept
            for bound in ("lower", "fitted", "nopyc"):
                out = scratch / bound / "traces.otf2"
                if bound == "nopyc":
                    run = run_child(["e2e", src, str(out), platform_file, "lower"],
                                    env_extra={"PYTHONDONTWRITEBYTECODE": "1"}, root=source)
                else:
                    run = run_child(["e2e", src, str(out), platform_file, bound],
                                    root=compiled)
                if run[0]["exit"] != 0:
                    raise RuntimeError(f"{program} {n} {bound}: exit {run[0]['exit']}")
                runs[bound].append(run)
        runs = {bound: _median_run(r) for bound, r in runs.items()}
        for bound in ("lower", "fitted"):
            peaks[(program, f"otf2 {bound}", size)] = runs[bound][1]
        no_pyc = runs["nopyc"][0]
        before = None
        if not args.no_before:
            before, _ = run_child(["e2e", src, str(scratch / "before" / "traces.otf2"),
                                   platform_file, "lower"], env_extra={"COMPENSATE_NATIVE": "0"},
                                  root=compiled)
        if not args.keep_outputs:
            shutil.rmtree(scratch, ignore_errors=True)
        lower, fitted = runs["lower"][0], runs["fitted"][0]
        results.append({"program": program, "records": n, "format": "otf2",
                        "lib_read_cpu": read["cpu"], "our_read_cpu": ours["cpu"],
                        "our_read_pkg_cpu": ours_pkg["cpu"] if ours_pkg else None,
                        "lib_copy_cpu": copy["cpu"],
                        "lower_cpu": lower["cpu"], "fitted_cpu": fitted["cpu"],
                        "lower_no_pyc_cpu": no_pyc["cpu"],
                        "before_cpu": before["cpu"] if before else None,
                        "peak_lower_mib": runs["lower"][1],
                        "peak_fitted_mib": runs["fitted"][1]})
        print(f"| {program} | {n:,} | {_rate(n, read['cpu'])} | {_rate(n, ours['cpu'])} | "
              f"{_rate(n, ours_pkg['cpu']) if ours_pkg else '-'} | {_rate(n, copy['cpu'])} | "
              f"{_rate(n, lower['cpu'])} | {_rate(n, fitted['cpu'])} | "
              f"{_rate(n, no_pyc['cpu'])} | {_rate(n, before['cpu']) if before else '-'} | "
              f"{lower['cpu'] / read['cpu']:.1f} | {lower['cpu'] / copy['cpu']:.1f} | "
              f"{fitted['cpu'] / copy['cpu']:.1f} | {runs['lower'][1]:,.0f} | "
              f"{runs['fitted'][1]:,.0f} |", flush=True)


def _trace_table(cases: list, work: Path, args: argparse.Namespace, peaks: dict,
                 results: list) -> None:
    """.trace: compensate beside read_text + write_text (wall seconds)."""
    print("\n.trace, wall seconds:\n")
    print("| program | records | e2e s | e2e rec/s | floor s | floor rec/s | ratio | "
          "engine rec/s | peak MiB | floor peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for program, size, case in cases:
        n = json.loads((case / "info.json").read_text())["records"]
        engine, _ = run_child(["engine", str(case / "measured.trace"),
                               str(case / "platform.json")])
        if engine["exit"] != 0:
            raise RuntimeError(f"{program} {n}: verification failed")
        src = case / "measured.trace"
        scratch = _scratch(work)
        floor, floor_peak = run_child(["floor", str(src), str(scratch / "floor.trace")])
        e2e, peak = run_child(["e2e", str(src), str(scratch / "e2e.trace"),
                               str(case / "platform.json")])
        if e2e["exit"] != 0:
            raise RuntimeError(f"{program} {n} trace: compensate exit {e2e['exit']}")
        if not args.keep_outputs:
            shutil.rmtree(scratch, ignore_errors=True)
        peaks[(program, "trace", size)] = peak
        results.append({"program": program, "records": n, "format": "trace",
                        "e2e_s": e2e["seconds"], "floor_s": floor["seconds"],
                        "engine_s": engine["seconds"], "peak_mib": peak,
                        "floor_peak_mib": floor_peak})
        print(f"| {program} | {n:,} | {e2e['seconds']:.2f} | {_rate(n, e2e['seconds'])} | "
              f"{floor['seconds']:.2f} | {_rate(n, floor['seconds'])} | "
              f"{e2e['seconds'] / floor['seconds']:.2f} | {_rate(n, engine['seconds'])} | "
              f"{peak:,.0f} | {floor_peak:,.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":
        print(json.dumps(_worker(argv[1:])), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e5,1e6,1e7", help="target record counts")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--workdir", default="/tmp/compensate-throughput",
                    help="cache of generated traces and scratch outputs")
    ap.add_argument("--keep-outputs", action="store_true", help="keep compensated outputs")
    ap.add_argument("--repeat", type=int, default=1,
                    help="OTF2 end-to-end runs of each kind (alternated); the median is shown")
    ap.add_argument("--no-before", action="store_true",
                    help="skip the otf2-package run (COMPENSATE_NATIVE=0) of --bound lower")
    args = ap.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    programs = args.programs.split(",")
    formats = args.formats.split(",")
    for p in programs:
        if p not in PROGRAMS:
            ap.error(f"unknown program {p} (known: {', '.join(PROGRAMS)})")
    for f in formats:
        if f not in FORMATS:
            ap.error(f"unknown format {f} (known: {', '.join(FORMATS)})")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    print(f"# throughput benchmark: {' '.join(['python benchmarks/throughput.py', *argv])}")
    print(f"# machine: {machine_line()}")
    print(f"# workdir: {work}; simulated overhead {OVERHEAD * 1e6:g} us/record")
    if "otf2" in formats:
        print("# OTF2 end to end: lower and fitted import compensate from a copy compiled "
              "to bytecode; 'lower, no .pyc' from a copy without (PYTHONDONTWRITEBYTECODE=1); "
              f"median of {args.repeat} run(s) each")
    cases = []
    for program in programs:
        for size in sizes:
            case = work / f"{program}-{size}"
            if not (case / "info.json").exists():
                info, _ = run_child(["generate", program, str(size), str(case)])
                print(f"# generated {program} {info['records']:,} records "
                      f"({info['ranks']} ranks, {info['iterations']} iterations): simulate "
                      f"{info['simulate_s']:.1f} s, write {info['write_s']:.1f} s", flush=True)
            cases.append((program, size, case))
    peaks: dict[tuple[str, str, int], float] = {}
    results: list[dict] = []
    if "otf2" in formats:
        _otf2_table(cases, work, args, peaks, results)
    if "trace" in formats:
        _trace_table(cases, work, args, peaks, results)
    if 10**6 in sizes and 10**7 in sizes:
        print("\n| program | run | peak MiB 10^6 | peak MiB 10^7 | ratio |")
        print("|---|---|---:|---:|---:|")
        for program in programs:
            for run in ("otf2 lower", "otf2 fitted", "trace"):
                a, b = peaks.get((program, run, 10**6)), peaks.get((program, run, 10**7))
                if a and b:
                    print(f"| {program} | {run} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |")
    (work / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n# total wall time {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
