"""Throughput and memory benchmark (issue #7): compensate vs. the I/O floor.

For a communication-heavy program (``stencil``: 32 ranks, a halo exchange every
~7 records, little compute) and a computation-heavy one (``montecarlo``: 8 ranks,
long local runs of traced ``get_coords`` calls between messages), at about 10^5,
10^6 and 10^7 records, it generates the measured trace once with the simulator
(cached in ``--workdir``, as an OTF2 archive and a ``.trace`` file plus the
platform file), then measures, every figure in a fresh child process:

  e2e rec/s     ``compensate IN OUT --platform P`` end to end (read, match,
                compensate, verify, write), timed inside the child around
                ``compensate.cli.main`` (interpreter start-up excluded);
  floor rec/s   the I/O floor: the same read + write with no compensation. OTF2:
                the ``otf2`` package reads every record and writes it back
                unchanged (global reader, batch of BATCH_EVENTS, one event writer
                per location). ``.trace``: our ``read_text`` + ``write_text``;
  ratio         e2e time / floor time (targets: OTF2 <= 1.5, .trace <= 2);
  engine rec/s  match + compensate + verify on the in-memory model (read from the
                ``.trace`` file first, not timed; target >= 10^6 on the 10^7
                communication-heavy trace);
  peak MiB      the e2e child's peak resident set (``ru_maxrss`` from ``wait4``),
                and per program/format the ratio peak(10^7) / peak(10^6)
                (target <= 1.5).

Rows are printed as soon as they are measured. This machine is shared and noisy:
compare ratios from one run, not across runs.

Usage::

    python benchmarks/throughput.py [--sizes 1e5,1e6,1e7] [--programs stencil,montecarlo]
                                    [--formats otf2,trace] [--workdir DIR] [--keep-outputs]
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
        return _e2e(*argv[1:4])
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


def _e2e(src: str, dst: str, platform_file: str) -> dict:
    from compensate.cli import main
    t0 = time.perf_counter()
    code = main([src, dst, "--platform", platform_file, "--force", "--quiet"])
    return {"seconds": time.perf_counter() - t0, "exit": code}


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


def run_child(args: list[str], script: str | Path | None = None) -> tuple[dict, float]:
    """Run ``SCRIPT _worker args`` (default: this script) in a fresh process; (the JSON
    line it printed last, its peak RSS in MiB)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    script = Path(script or __file__).resolve()
    proc = subprocess.Popen([sys.executable, str(script), "_worker", *args],
                            stdout=subprocess.PIPE, env=env, cwd=str(ROOT))
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} failed with exit code {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1]), usage.ru_maxrss / 1024.0


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
    print("| program | records | format | e2e s | e2e rec/s | floor s | floor rec/s | "
          "ratio | engine rec/s | peak MiB | floor peak MiB |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    peaks: dict[tuple[str, str, int], float] = {}
    results = []
    for program in programs:
        for size in sizes:
            case = work / f"{program}-{size}"
            if not (case / "info.json").exists():
                info, _ = run_child(["generate", program, str(size), str(case)])
                print(f"# generated {program} {info['records']:,} records "
                      f"({info['ranks']} ranks, {info['iterations']} iterations): simulate "
                      f"{info['simulate_s']:.1f} s, write {info['write_s']:.1f} s", flush=True)
            info = json.loads((case / "info.json").read_text())
            n = info["records"]
            engine, _ = run_child(["engine", str(case / "measured.trace"),
                                   str(case / "platform.json")])
            if engine["exit"] != 0:
                raise RuntimeError(f"{program} {n}: verification failed")
            for fmt in formats:
                src = case / ("otf2/traces.otf2" if fmt == "otf2" else "measured.trace")
                scratch = work / "out"
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir()
                out = scratch / ("e2e/traces.otf2" if fmt == "otf2" else "e2e.trace")
                floor_out = scratch / ("floor/traces.otf2" if fmt == "otf2" else "floor.trace")
                floor, floor_peak = run_child(["floor", str(src), str(floor_out)])
                e2e, peak = run_child(["e2e", str(src), str(out), str(case / "platform.json")])
                if e2e["exit"] != 0:
                    raise RuntimeError(f"{program} {n} {fmt}: compensate exit {e2e['exit']}")
                if not args.keep_outputs:
                    shutil.rmtree(scratch, ignore_errors=True)
                peaks[(program, fmt, size)] = peak
                row = {"program": program, "records": n, "format": fmt,
                       "e2e_s": e2e["seconds"], "floor_s": floor["seconds"],
                       "engine_s": engine["seconds"], "peak_mib": peak,
                       "floor_peak_mib": floor_peak}
                results.append(row)
                print(f"| {program} | {n:,} | {fmt} | {e2e['seconds']:.2f} | "
                      f"{n / e2e['seconds']:,.0f} | {floor['seconds']:.2f} | "
                      f"{n / floor['seconds']:,.0f} | {e2e['seconds'] / floor['seconds']:.2f} | "
                      f"{n / engine['seconds']:,.0f} | {peak:,.0f} | {floor_peak:,.0f} |",
                      flush=True)
    if 10**6 in sizes and 10**7 in sizes:
        print("\n| program | format | peak MiB 10^6 | peak MiB 10^7 | ratio |")
        print("|---|---|---:|---:|---:|")
        for program in programs:
            for fmt in formats:
                a, b = peaks.get((program, fmt, 10**6)), peaks.get((program, fmt, 10**7))
                if a and b:
                    print(f"| {program} | {fmt} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |")
    (work / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\n# total wall time {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
