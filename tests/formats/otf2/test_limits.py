"""Archives with more locations than the soft limit of open files
(compensate/formats/otf2/limits.py): read and written after the soft limit is
raised to the hard one; refused in one line naming the limit where even the hard
limit is too small."""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from compensate.formats.otf2 import limits, native

from .manylocations import RECORDS_PER_LOCATION, write_many_locations

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory in memory-backed /dev/shm where there is one (creating 4,096
    files on a loaded disk takes seconds)."""
    shm = "/dev/shm"
    base = Path(tempfile.mkdtemp(dir=shm)) if os.access(shm, os.W_OK) \
        else tmp_path_factory.mktemp("many")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _limited(soft: int, hard: int | None = None):
    def limit() -> None:
        h = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard is None else hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, h))
    return limit


def _python(args: list[str], soft: int, hard: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          preexec_fn=_limited(soft, hard), env=env, timeout=600)


def _hard_allows(n: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < n + limits.RESERVE:
        pytest.skip(f"the hard limit of open files ({hard}) is below {n}")


_READ = ("import sys\n"
         "from compensate.formats.otf2 import read_otf2_chunks\n"
         "defs, chunks = read_otf2_chunks(sys.argv[1], None, payload=False)\n"
         "print(type(chunks).__name__, sum(len(e) for c in chunks for e in c.values()))\n")


def test_2048_locations_are_read_under_a_soft_limit_of_1024(scratch):
    """(The OTF2 library keeps every location's event file open while it reads.)"""
    _hard_allows(2048)
    anchor = write_many_locations(scratch / "a2048", 2048)
    run = _python(["-c", _READ, str(anchor)], soft=1024)
    assert run.returncode == 0, run.stderr
    expected = "NativeChunks" if native.available() else "Otf2Chunks"
    assert run.stdout.split() == [expected, str(2048 * RECORDS_PER_LOCATION)]


def test_more_locations_than_the_soft_limit_are_compensated(scratch):
    """Read and written (the writer holds files open too), under a soft limit of
    256 open files for 600 locations (fewer than above: the engine's time grows
    with the locations)."""
    _hard_allows(600)
    anchor = write_many_locations(scratch / "a600", 600)
    out = scratch / "out600" / "traces.otf2"
    run = _python(["-m", "compensate", str(anchor), str(out), "--overhead", "10ns",
                   "--quiet"], soft=256)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert len(list(out.with_suffix("").glob("*.evt"))) == 600


def test_a_hard_limit_below_the_locations_is_refused_naming_it(scratch):
    anchor = write_many_locations(scratch / "a300", 300)
    out = scratch / "refused" / "traces.otf2"
    run = _python(["-m", "compensate", str(anchor), str(out), "--overhead", "10ns"],
                  soft=256, hard=256)
    assert run.returncode == 3
    assert run.stderr == (
        f"compensate: error: {anchor}: reading its 300 locations needs 364 open files, "
        "more than the limit of open files of this process (256, hard limit 256): "
        "raise it, e.g. with ulimit -n 364 before the command (beyond the hard limit: "
        "/etc/security/limits.conf, or the batch system's settings)\n")
    assert not out.parent.exists()


def test_the_soft_limit_is_raised_only_up_to_what_is_wanted():
    code = ("import resource\n"
            "from compensate.formats.otf2 import limits\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))\n"
            "print(limits.raise_open_files_limit(300), limits.raise_open_files_limit(100),"
            " limits.raise_open_files_limit(), limits.raise_open_files_limit(10**6))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert run.stdout.split() == ["300", "300", "4096", "4096"], run.stderr
