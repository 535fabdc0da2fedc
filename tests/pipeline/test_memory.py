"""Running out of memory (compensate/pipeline/memory.py): a MemoryError anywhere in
a run, in memory or streamed, ends in one line, exit 3, and nothing at OUT or
beside it (no temporary left), never an internal error's "please report it". A read
whose OTF2 buffers alone would not fit is refused before the library fills them."""

from __future__ import annotations

import subprocess
import sys

import pytest

import compensate.pipeline.memory as memory
import compensate.pipeline.run as pipeline_run
from compensate.formats import read_buffers
from compensate.parallel.command import room_for_readers
from tests.inprocess import run_compensate

from ..conftest import CASES, ROOT

TRACE = CASES / "r2_m1_a1.trace"
#: 16 locations, written by EZTrace with 16 MiB event and definition chunks
NESTED = ROOT / "tests" / "data" / "eztrace" / "nested" / "eztrace_log.otf2"
MIB = 1 << 20


def out_of_memory(*args, **kwargs):
    raise MemoryError


def assert_one_line(proc, doing: str, tmp_path) -> None:
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines == [f"compensate: error: out of memory while {doing}; nothing written; "
                     f"try without --in-memory / with fewer records per segment "
                     f"(--segment-records)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no temporary


@pytest.mark.parametrize("out", ["out/traces.otf2", "out.trace"])
def test_in_memory_run_out_of_memory(tmp_path, monkeypatch, out):
    monkeypatch.setattr(pipeline_run, "run_segment", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / out, "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "compensating", tmp_path)


def test_matching_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_run, "match", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out.trace", "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "matching", tmp_path)


def test_streamed_run_out_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline_run, "_stream_segment", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out" / "traces.otf2", "--overhead", "100ns")
    assert_one_line(proc, "streaming the trace", tmp_path)


def test_out_of_memory_outside_the_run(tmp_path, monkeypatch):
    """Reading (the command's own step): the same line, saying less."""
    import compensate.cli.compensate as command

    monkeypatch.setattr(command, "read_blocks", out_of_memory)
    proc = run_compensate(TRACE, tmp_path / "out.trace", "--overhead", "100ns", "--in-memory")
    assert_one_line(proc, "running", tmp_path)


def test_the_read_buffers_are_the_anchor_files_chunks_per_location():
    assert read_buffers(NESTED) == (16 * MIB, 16 * MIB, 16)
    assert read_buffers(TRACE) == (0, 0, 0)  # (a text trace: nothing worth counting)


@pytest.mark.parametrize("available, refused", [(272 * MIB, False), (272 * MIB - 1, True)])
def test_a_read_whose_buffers_alone_do_not_fit_is_refused_first(tmp_path, monkeypatch,
                                                                 available, refused):
    # 16 locations x 16 MiB + 16 MiB = 272 MiB
    monkeypatch.setattr(memory, "available_memory", lambda: available)
    proc = run_compensate(NESTED, tmp_path / "out" / "traces.otf2", "--overhead", "10ns",
                          "--quiet")
    if not refused:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"compensate: error: {NESTED}: reading its 16 locations needs about 272 MiB for "
        f"the OTF2 library's read buffers alone (an event chunk of 16 MiB per location, "
        f"as the archive's writer sized them), more than the 272 MiB available; nothing "
        f"written; `mpiexec -n P compensate` reads each rank's locations only "
        f"(docs/parallel.md)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_rank_counts_the_buffers_of_its_own_locations(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 80 * MIB)  # 4 x 16 + 16
    room_for_readers(str(NESTED), 1, [1, 2, 3, 4])
    with pytest.raises(memory.OutOfMemory) as got:
        room_for_readers(str(NESTED), 1, [1, 2, 3, 4, 5])
    assert str(got.value).startswith(f"{NESTED}: rank 1: reading its 5 locations needs")
    assert str(got.value).endswith("; more ranks (on more machines) read fewer locations each")
    monkeypatch.setattr(memory, "available_memory", lambda: 1)
    room_for_readers(str(TRACE), 0, [0, 1])  # (a text trace: never refused for its reader)


def test_the_heap_kept_between_segments_grows_with_the_segment():
    assert memory.heap_to_keep(1) == memory.KEEP_FREE_HEAP == 64 * MIB
    assert memory.heap_to_keep(131072) == 64 * MIB  # (512 bytes a record)
    assert memory.heap_to_keep(131073) == 64 * MIB + 512
    assert memory.heap_to_keep(1 << 18) == 128 * MIB


@pytest.mark.parametrize("records, kept", [(None, 128 * MIB), (1 << 19, 256 * MIB),
                                           (1000, 64 * MIB)])
def test_the_command_keeps_what_its_segments_free(tmp_path, monkeypatch, records, kept):
    seen = []
    monkeypatch.setattr(memory, "steady_malloc", seen.append)
    extra = [] if records is None else ["--segment-records", str(records)]
    proc = run_compensate(TRACE, tmp_path / "out.trace", "--overhead", "100ns", *extra)
    assert proc.returncode == 0, proc.stderr
    assert seen == [kept]


#: a fresh interpreter's glibc malloc, free and mallinfo2 (malloc's thresholds are
#: the whole process's); prints "skip" and ends where there is no glibc 2.33
LIBC = """
import ctypes, sys
import compensate.pipeline.memory as memory
libc = ctypes.CDLL(None)
if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallinfo2"):
    print("skip"); sys.exit(0)
libc.mallinfo2.restype = memory.MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
"""


def _fresh(code: str) -> list[str]:
    """What :data:`LIBC` then ``code`` print in a fresh interpreter, split."""
    p = subprocess.run([sys.executable, "-c", LIBC + code], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    if p.stdout.strip() == "skip":
        pytest.skip("not glibc 2.33 or newer")
    return p.stdout.split()


def test_steady_malloc_keeps_blocks_in_the_heap():
    """After steady_malloc an 8 MiB block comes from glibc's heap, not a mapping of
    its own (``mallinfo2().hblks`` counts those); before, glibc maps it."""
    assert _fresh("""
def mapped(size):
    before = libc.mallinfo2().hblks
    p = libc.malloc(size)
    n = libc.mallinfo2().hblks - before
    libc.free(p)
    return n
a = mapped(8 << 20)
memory.steady_malloc()
print(a, mapped(8 << 20))
""") == ["1", "0"]


def test_release_keeps_the_free_heap_the_run_set():
    """96 MiB freed in 1 MiB blocks stay in the heap under a 128 MiB bound, and go
    back to the system under the 64 MiB one."""
    kept, trimmed = map(int, _fresh("""
def free_after(keep):
    memory.steady_malloc(keep)
    blocks = [libc.malloc(1 << 20) for _ in range(96)]
    for p in blocks:
        libc.free(p)
    memory.release_memory()
    return libc.mallinfo2().fordblks >> 20
print(free_after(128 << 20), free_after(64 << 20))
"""))
    assert kept >= 90 and trimmed < 64


def test_a_bound_beyond_an_int_reaches_glibc_as_the_largest_int(monkeypatch):
    """glibc's mallopt takes an int: ``--segment-records 10000000`` keeps 5.12 GB,
    which ctypes would wrap to another number (or a negative one)."""
    import ctypes

    calls = []

    class Libc:
        gnu_get_libc_version = object()

        @staticmethod
        def mallopt(option, value):
            calls.append((option, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    monkeypatch.setattr(memory, "_keep", [memory.KEEP_FREE_HEAP])
    memory.steady_malloc(memory.heap_to_keep(10_000_000))
    assert dict(calls)[-1] == (1 << 31) - 1  # M_TRIM_THRESHOLD
    assert dict(calls)[-3] == 32 << 20  # M_MMAP_THRESHOLD
    assert memory._keep == [5_120_000_000]  # (what release_memory compares with)
