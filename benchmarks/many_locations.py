"""Archives with many locations under a soft limit of 1,024 open files: the time
to read one (the OTF2 C path) and to compensate it (read and written), for
10^4 locations of 4 records each by default.

    PYTHONPATH=. python benchmarks/many_locations.py [LOCATIONS ...] [--soft 1024]

Each run is a fresh ``python`` process whose soft RLIMIT_NOFILE is lowered to
``--soft`` (the hard limit stays); the archive is written by
tests/formats/otf2/manylocations.py into /dev/shm where there is one (else the
temporary directory). Prints one line per size: locations, seconds to write the
archive, to read it, to compensate it, and the exit statuses.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.formats.otf2.manylocations import write_many_locations  # noqa: E402

_READ = ("import sys\n"
         "from compensate.formats.otf2 import read_otf2_chunks\n"
         "defs, chunks = read_otf2_chunks(sys.argv[1], None, payload=False)\n"
         "print(sum(len(e) for c in chunks for e in c.values()))\n")


def _timed(args: list[str], soft: int) -> tuple[float, int, str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    run = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                         preexec_fn=limit, env=env)
    return time.perf_counter() - t, run.returncode, run.stderr.strip()[-300:]


def measure(n: int, soft: int) -> None:
    shm = "/dev/shm"
    base = Path(tempfile.mkdtemp(dir=shm if os.access(shm, os.W_OK) else None))
    try:
        t = time.perf_counter()
        anchor = write_many_locations(base / "in", n)
        written = time.perf_counter() - t
        read_s, read_rc, read_err = _timed(["-c", _READ, str(anchor)], soft)
        comp_s, comp_rc, comp_err = _timed(
            ["-m", "compensate", str(anchor), str(base / "out" / "traces.otf2"),
             "--overhead", "10ns", "--quiet"], soft)
        print(f"{n:>7,} locations, soft limit {soft}: archive written in {written:.1f} s; "
              f"read {read_s:.1f} s (exit {read_rc}); compensated {comp_s:.1f} s "
              f"(exit {comp_rc})", flush=True)
        for err in (read_err, comp_err):
            if err:
                print(f"    {err}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locations", nargs="*", type=int, default=[10_000])
    parser.add_argument("--soft", type=int, default=1024)
    args = parser.parse_args()
    print(f"(machine: {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; hard limit of open files "
          f"{resource.getrlimit(resource.RLIMIT_NOFILE)[1]})")
    for n in args.locations:
        measure(n, args.soft)


if __name__ == "__main__":
    main()
