"""An OTF2 archive with many locations and few records each (one process per
location, ``Enter main``, ``Enter work``, ``Leave work``, ``Leave main``): for
reading and writing more locations than the soft limit of open files
(tests/formats/otf2/test_limits.py, benchmarks/many_locations.py).

``python -m tests.formats.otf2.manylocations DIR N`` writes ``DIR/traces.otf2``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import otf2
import otf2.events as E

RECORDS_PER_LOCATION = 4


def _archive(anchor_dir: Path) -> otf2.writer.Writer:
    # (small chunks: the OTF2 library allocates a chunk per location's writers)
    return otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000,
                            chunk_size_events=256 * 1024, chunk_size_definitions=256 * 1024)


def write_many_locations(anchor_dir: Path, n: int) -> Path:
    """Write an archive of ``n`` locations into ``anchor_dir``; its anchor file.
    Every location has the same records: one location's event and local
    definition files are written by the ``otf2`` package and copied to each
    location (writing ``n`` locations through it takes a minute for 10^4), and
    the global definitions declare each location's count."""
    anchor_dir = Path(anchor_dir)
    one = anchor_dir.with_name(anchor_dir.name + ".one")
    with _archive(one) as w:
        d = w.definitions
        main, work = d.region("main"), d.region("work")
        node = d.system_tree_node("node")
        loc = d.location("thread 0", group=d.location_group("rank 0",
                                                             system_tree_parent=node))
        ew = w.event_writer_from_location(loc)
        for rec in (E.Enter(1000, main), E.Enter(1100, work), E.Leave(1200, work),
                    E.Leave(1300, main)):
            ew(rec)
    with _archive(anchor_dir) as w:
        d = w.definitions
        d.region("main"), d.region("work")  # (the same references as above)
        node = d.system_tree_node("node")
        for r in range(n):
            d.location("thread 0", number_of_events=RECORDS_PER_LOCATION,
                       group=d.location_group(f"rank {r}", system_tree_parent=node))
    data = anchor_dir / "traces"
    data.mkdir(exist_ok=True)
    evt, local = (one / "traces" / "0.evt").read_bytes(), (one / "traces" / "0.def").read_bytes()
    for r in range(n):
        (data / f"{r}.evt").write_bytes(evt)
        (data / f"{r}.def").write_bytes(local)
    shutil.rmtree(one)
    return anchor_dir / "traces.otf2"


if __name__ == "__main__":
    print(write_many_locations(Path(sys.argv[1]), int(sys.argv[2])))
