"""Would reading/writing OTF2 in parallel across locations lower wall time?

Measures, on one OTF2 archive, with N worker processes each taking every N-th
location (multiprocessing, fork):

  read serial      ``read_otf2`` (columns + the event objects the writer needs);
  read parallel    each worker reads its locations (``reader.events(locations)``)
                   and sends back only the numpy columns: the event objects cannot
                   cross a process boundary cheaply (they point into the
                   definition registry; pickling them costs more than reading);
  copy serial      the otf2 package reading every record and writing it back;
  copy parallel    each worker copies its own locations into its own archive: the
                   best case for a parallel write (a real one would also have to
                   merge the per-worker archives into one).

Usage: python benchmarks/parallel_io.py ARCHIVE/traces.otf2 [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import otf2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compensate.formats.otf2 import BATCH_EVENTS, read_otf2  # noqa: E402
from compensate.formats.otf2.columns import collect_events  # noqa: E402


def _read_part(args: tuple[str, int, int]) -> dict:
    path, part, parts = args
    with otf2.reader.open(path, batch_events=BATCH_EVENTS) as reader:
        locs = list(reader.definitions.locations)[part::parts]
        events = collect_events(reader.events(locs), tuple(loc._ref for loc in locs), path)
    return {ref: (ev.time, ev.kind, ev.region, ev.peer, ev.comm, ev.tag, ev.size)
            for ref, ev in events.items()}


def _copy_part(args: tuple[str, str, int, int]) -> int:
    path, out, part, parts = args
    n = 0
    with otf2.reader.open(path, batch_events=BATCH_EVENTS) as reader:
        locs = list(reader.definitions.locations)[part::parts]
        with otf2.writer.open(os.path.join(out, f"part{part}"), archive_name="traces",
                              definitions=reader.definitions) as writer:
            writers: dict = {}
            for loc, ev in reader.events(locs):
                w = writers.get(loc)
                if w is None:
                    w = writers[loc] = writer.event_writer_from_location(loc)
                w.write(ev)
                n += 1
    return n


def _timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    path, n = args.archive, args.workers
    ctx = mp.get_context("fork")
    t_read, trace = _timed(read_otf2, path)
    records = trace.record_count
    del trace
    with ctx.Pool(n) as pool:
        t_pread, parts = _timed(pool.map, _read_part, [(path, i, n) for i in range(n)])
    assert sum(len(cols[0]) for p in parts for cols in p.values()) == records
    assert all(isinstance(c, np.ndarray) for p in parts for cols in p.values() for c in cols)
    out = tempfile.mkdtemp(prefix="parallel-io-")
    try:
        t_copy, _ = _timed(_copy_part, (path, out, 0, 1))
        shutil.rmtree(out)
        os.makedirs(out)
        with ctx.Pool(n) as pool:
            t_pcopy, counts = _timed(pool.map, _copy_part, [(path, out, i, n) for i in range(n)])
        assert sum(counts) == records
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"# {path}: {records:,} records, {n} workers, {os.cpu_count()} cores")
    print("| step | serial s | parallel s | speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| read (serial: columns + event objects; parallel: columns only) | {t_read:.2f} | "
          f"{t_pread:.2f} | {t_read / t_pread:.2f} |")
    print(f"| copy: otf2 read + write | {t_copy:.2f} | {t_pcopy:.2f} | {t_copy / t_pcopy:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
