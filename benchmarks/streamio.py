"""Streaming I/O benchmark: whole-trace copy vs. chunked copy, time and peak memory.

For a simulated ``stencil`` trace (32 ranks) of about 10^6 (and 10^7) records,
in both formats, each in a fresh child process (peak resident set from
``wait4``'s ``ru_maxrss``; time measured inside the child, interpreter start-up
excluded):

  whole    ``read_trace`` + ``write_trace`` (everything in memory);
  chunked  ``read_chunks`` + ``TraceWriter``, copying chunk by chunk
           (default chunk of 2^18 records).

The chunked copy's output is checked against the whole copy's (text: the same
bytes; OTF2: the same files except the anchor file's random trace id). Traces
are generated once into ``--workdir`` (default ``/tmp/compensate-throughput``,
shared with ``benchmarks/throughput.py``: an existing ``stencil-N`` directory
there is reused).

Usage::

    python benchmarks/streamio.py [--sizes 1e6,1e7] [--formats otf2,trace]
                                  [--chunk-records N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import _generate, machine_line, parse_size  # noqa: E402
from benchmarks.throughput import run_child as throughput_child  # noqa: E402

FORMATS = ("otf2", "trace")


def _source(case: Path, fmt: str) -> Path:
    return case / "otf2" / "traces.otf2" if fmt == "otf2" else case / "measured.trace"


def _worker(argv: list[str]) -> dict:
    mode, src, dst = argv[:3]
    t0 = time.perf_counter()
    records = 0
    if mode == "whole":
        from compensate.formats import read_trace, write_trace
        trace = read_trace(src)
        records = trace.record_count
        write_trace(trace, dst)
    else:
        from compensate.formats import TraceWriter, read_chunks
        defs, chunks = read_chunks(src, int(argv[3]))
        with TraceWriter(dst, defs) as writer:
            for chunk in chunks:
                for loc, events in chunk.items():
                    records += len(events)
                    writer.write(loc, events)
    return {"seconds": time.perf_counter() - t0, "records": records}


def run_child(args: list[str]) -> tuple[dict, float]:
    """Run ``streamio.py _worker args`` in a fresh process; (its JSON, peak RSS MiB)."""
    return throughput_child(args, __file__)


def _same_output(a: Path, b: Path, fmt: str) -> bool:
    if fmt == "trace":
        return filecmp.cmp(a, b, shallow=False)
    ra, rb = a.parent, b.parent
    files = sorted(p.relative_to(ra) for p in ra.rglob("*") if p.is_file())
    if files != sorted(p.relative_to(rb) for p in rb.rglob("*") if p.is_file()):
        return False
    return [str(f) for f in files if not filecmp.cmp(ra / f, rb / f, shallow=False)] \
        == [a.name]  # the anchor file holds a random trace id


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_worker":
        print(json.dumps(_worker(argv[1:])), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6", help="target record counts, e.g. 1e6,1e7")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--chunk-records", type=int, default=1 << 18)
    ap.add_argument("--workdir", default="/tmp/compensate-throughput")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    scratch = work / "streamio-out"
    print(f"# streaming I/O benchmark: {' '.join(['python benchmarks/streamio.py', *argv])}")
    print(f"# machine: {machine_line()}")
    print(f"# stencil, 32 ranks; chunk {args.chunk_records} records; workdir {work}")
    print("| records | format | whole s | whole peak MiB | chunked s | chunked peak MiB | "
          "time ratio | same output |")
    print("|---:|---|---:|---:|---:|---:|---:|---|", flush=True)
    for size in (parse_size(s) for s in args.sizes.split(",")):
        case = work / f"stencil-{size}"
        if not (case / "info.json").exists():
            info = _generate("stencil", size, case)
            print(f"# generated {info['records']:,} records in "
                  f"{info['simulate_s'] + info['write_s']:.0f} s", flush=True)
        for fmt in args.formats.split(","):
            src = _source(case, fmt)
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            name = "traces.otf2" if fmt == "otf2" else "copy.trace"
            whole_out = scratch / "whole" / name if fmt == "otf2" else scratch / ("w-" + name)
            chunk_out = scratch / "chunked" / name if fmt == "otf2" else scratch / ("c-" + name)
            whole, whole_mib = run_child(["whole", str(src), str(whole_out)])
            chunked, chunk_mib = run_child(["chunked", str(src), str(chunk_out),
                                            str(args.chunk_records)])
            assert whole["records"] == chunked["records"]
            same = _same_output(whole_out, chunk_out, fmt)
            print(f"| {whole['records']:,} | {fmt} | {whole['seconds']:.2f} | {whole_mib:.0f} | "
                  f"{chunked['seconds']:.2f} | {chunk_mib:.0f} | "
                  f"{chunked['seconds'] / whole['seconds']:.2f} | {'yes' if same else 'NO'} |",
                  flush=True)
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
