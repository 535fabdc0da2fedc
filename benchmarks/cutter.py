"""The stream cutter's search alone (``compensate.pipeline.cuts.Cutter``): CPU
seconds to regroup a simulated trace's chunks into segments at safe cuts, for
small chunks (the tests' ``--segment-records 4 .. 120``, a few records per
location and chunk) and for a trace of many locations read in the default chunks.
Prints one line per case: program, ranks, records, chunk and segment records,
the number of segments, the best of ``--repeat`` CPU times, and a digest of the
segments' record times (the same at every commit that cuts the same way).

    PYTHONPATH=. python benchmarks/cutter.py [--repeat 3]

Runs on the public pipeline API and tests/pipelines.py's ``trace_chunks``, so
the same script times an older commit's cutter checked out elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compensate.pipeline.cuts import Cutter, cut_segments  # noqa: E402
from compensate.simulate import simulate  # noqa: E402
from tests.pipelines import trace_chunks  # noqa: E402

#: (program, ranks, iterations, chunk records, segment records)
CASES = [("stencil", 8, None, 1, 4), ("stencil", 8, None, 7, 20),
         ("imbalanced", 8, None, 53, 120), ("hybrid_halo", 8, None, 7, 20),
         ("stencil", 512, 40, 1 << 18, 1 << 18), ("stencil", 512, 40, 4096, 16384)]


def _run(trace, chunks: list, segment_records: int) -> tuple[int, str]:
    """(segments, digest of their record times)."""
    h = hashlib.sha256()
    segs = list(cut_segments(Cutter(trace.definitions, segment_records), chunks))
    for seg in segs:
        for loc, ev in sorted(seg.items()):
            h.update(loc.to_bytes(8, "little") + ev.time.tobytes())
    return len(segs), h.hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for program, ranks, iterations, chunk, segment in CASES:
        kw = {"iterations": iterations} if iterations else {}
        trace = simulate(program, ranks=ranks, seed=1, **kw).measured
        chunks = list(trace_chunks(trace, chunk))
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.process_time()
            n, digest = _run(trace, chunks, segment)
            best = min(best, time.process_time() - t0)
        print(f"{program:12s} {ranks:4d} ranks {trace.record_count:8d} records  chunk "
              f"{chunk:6d}  segment {segment:6d}  {n:4d} segments  {best:6.2f} s CPU  "
              f"{digest}", flush=True)


if __name__ == "__main__":
    main()
