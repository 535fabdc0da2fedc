"""Writing the mpi4py tracer's records as OTF2: the ``otf2`` event objects against
the direct path of :mod:`calibration.tracer.evtwrite`.

Builds one rank's synthetic records (a program calling a small function over
and over: Enter/Leave pairs, with an MpiSend, MpiRecv, a collective, a lock and
an Isend/request test every few hundred records), gives every record the in-situ
cost attribute, as a real run gives nearly all of them, and writes the same
archive twice with :func:`calibration.tracer.archive.write_archive`: through the
event objects only, then with the direct path. Prints, by process CPU time
(``time.process_time``), the whole write and the records' part of it
(``evtwrite.write_rows``), as records/s and µs/record, and the speed-up; checks
that the two archives' event files are the same.

    python benchmarks/tracer_write.py [--records 200000]
"""

from __future__ import annotations

import argparse
import filecmp
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from calibration.tracer import buffer as tb
from calibration.tracer import evtwrite, insitu
from calibration.tracer.archive import RankData, ThreadData, write_archive

REGIONS = [("f", "prog.f", "prog.py", 1, "user", "FUNCTION"),
           ("MPI_Send", "MPI_Send", "", 0, "mpi", "POINT2POINT")]
COMM = ((0,), 0)


def synthetic(n: int) -> RankData:
    """About ``n`` records of one rank (see the module docstring)."""
    data, extra, ints = array("q"), [], array("q")
    t = 10**9

    def add(kind: int, index: int) -> None:
        nonlocal t
        t += 120
        data.extend((t, kind | index << tb.KIND_BITS))

    def rec(kind: int, *fields: Any) -> None:
        add(kind, len(extra))
        extra.append(fields)

    i = 0
    while len(data) // 2 < n:
        add(tb.ENTER, 0)
        add(tb.LEAVE, 0)
        i += 1
        if i % 200 == 0:
            add(tb.ENTER, 1)
            rec(tb.MPI_SEND, 0, 0, 1, 800)
            add(tb.LEAVE, 1)
            rec(tb.MPI_RECV, 0, 0, 1, 800)
            rec(tb.COLL_BEGIN)
            rec(tb.COLL_END, 10, 0, -1, 8, 8)
            add(tb.THREAD_ACQUIRE_LOCK, len(ints))
            ints.extend((1, i))
            add(tb.THREAD_RELEASE_LOCK, len(ints))
            ints.extend((1, i))
            rec(tb.MPI_ISEND, 0, 0, 2, 64, i)
            rec(tb.MPI_REQUEST_TEST, i)
            rec(tb.MPI_ISEND_COMPLETE, i)
    thread = ThreadData("Master thread", 0, data, extra, ints)
    return RankData(0, "node", [thread], list(REGIONS), [COMM],
                    realtime=(10**9, 1_700_000_000 * 10**9))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    n_want = ap.parse_args().records
    rank = synthetic(n_want)
    real_costs, real_write = insitu.record_overheads, evtwrite.write_rows

    def costs(*args: Any, **kwargs: Any) -> np.ndarray:  # every record bracketed
        out = real_costs(*args, **kwargs)
        out[out < 0] = 150
        return out

    insitu.record_overheads = costs
    spent = [0.0]
    results = {}
    with tempfile.TemporaryDirectory(prefix="tracer_write.") as tmp:
        for name, direct in (("otf2 event objects", False), ("evtwrite direct", True)):
            def timed(*args: Any, _direct: bool = direct, **kwargs: Any) -> int:
                t0 = time.process_time()
                try:
                    return real_write(*args, **{**kwargs, "direct": _direct})
                finally:
                    spent[0] += time.process_time() - t0

            evtwrite.write_rows = timed
            spent[0] = 0.0
            path = Path(tmp) / name.split()[0] / "traces.otf2"
            t0 = time.process_time()
            n = write_archive(str(path), [rank])
            results[name] = (time.process_time() - t0, spent[0], n, path)
        evtwrite.write_rows, insitu.record_overheads = real_write, real_costs
        (old_total, old_rows, n, old), (new_total, new_rows, _, new) = results.values()
        same = filecmp.cmp(old.parent / "traces" / "0.evt", new.parent / "traces" / "0.evt",
                           shallow=False)
    print(f"{n:,} records, one location, every record with the UINT64 attribute")
    print(f"{'path':20s} {'part':14s} {'CPU s':>8s} {'records/s':>12s} {'µs/record':>10s}")
    for name, (total, rows, _, _) in results.items():
        for part, sec in (("write_archive", total), ("write_rows", rows)):
            print(f"{name:20s} {part:14s} {sec:8.3f} {n / sec:12,.0f} {1e6 * sec / n:10.2f}")
    print(f"speed-up: write_rows {old_rows / new_rows:.1f}x, "
          f"write_archive {old_total / new_total:.1f}x; event files identical: {same}")


if __name__ == "__main__":
    main()
