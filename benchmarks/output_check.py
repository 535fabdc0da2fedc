"""What reading an OTF2 output back before the commit costs
(compensate/formats/otf2/check.py, called by ``Otf2EventWriter.close``).

For the simulated ``stencil`` trace of about 10^6 records (32 locations; generated
once into ``--workdir``, shared with ``benchmarks/throughput.py``), the archive is
copied record by record the ways the command writes OTF2, and the check inside
the copy is timed on its own:

  streamed   ``read_chunks(payload=False)`` + ``TraceWriter`` (the C path's copy,
             the command's default for an OTF2 input);
  package    ``read_trace`` + ``write_trace`` (the ``otf2`` package's writer, as
             ``--in-memory`` and a ``.trace`` input use it; ``--modes`` to add it).

Printed per mode: the write's seconds (check included), the check's seconds, the
check's rate (records/s) and its share of the write time.

Usage::

    python benchmarks/output_check.py [--records 1e6] [--modes streamed,package]
                                      [--workdir DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import _generate, machine_line, parse_size  # noqa: E402


def _source(work: Path, records: int) -> Path:
    case = work / f"stencil-{records}"
    anchor = case / "otf2" / "traces.otf2"
    if not anchor.exists():
        _generate("stencil", records, case)
    return anchor


def _copy(mode: str, src: Path, dst: Path) -> int:
    from compensate.formats import TraceWriter, read_chunks, read_trace, write_trace
    if mode == "package":
        trace = read_trace(src)
        write_trace(trace, dst)
        return trace.record_count
    records = 0
    defs, chunks = read_chunks(src, payload=False)
    with TraceWriter(dst, defs) as writer:
        for chunk in chunks:
            for loc, events in chunk.items():
                records += len(events)
                writer.write(loc, events)
    return records


def measure(mode: str, src: Path, scratch: Path) -> tuple[int, float, float]:
    """(records, seconds of the write with its check, seconds of the check)."""
    import compensate.formats.otf2.write as write
    spent = [0.0]
    real = write.check_archive

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    write.check_archive = timed
    dst = scratch / mode / "traces.otf2"
    shutil.rmtree(dst.parent, ignore_errors=True)
    try:
        t0 = time.perf_counter()
        records = _copy(mode, src, dst)
        total = time.perf_counter() - t0
    finally:
        write.check_archive = real
        shutil.rmtree(dst.parent, ignore_errors=True)
    return records, total, spent[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=parse_size, default=10**6)
    ap.add_argument("--modes", default="streamed")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/compensate-throughput"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    src = _source(args.workdir, args.records)
    print(machine_line())
    print(f"input {src}")
    print(f"{'mode':<10} {'records':>10} {'write s':>9} {'check s':>9} {'check rec/s':>13} "
          f"{'share':>7}")
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        for mode in args.modes.split(","):
            runs = sorted((measure(mode, src, Path(scratch)) for _ in range(args.repeat)),
                          key=lambda r: r[1])
            records, total, check = runs[len(runs) // 2]  # the median write
            print(f"{mode:<10} {records:>10,} {total:>9.3f} {check:>9.3f} "
                  f"{records / check:>13,.0f} {check / total:>7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
