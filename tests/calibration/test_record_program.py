"""The traced program runs as it would untraced (``python prog.py``): its recursion
limit, its MPI serializer, its own modules named like the tracer's packages, and
``MPI.Is_finalized`` after its ``MPI.Finalize`` (calibration/record.py,
calibration/tracer/mpi.py). Each program runs under ``python -m calibration.record``
from the project root, as a user would start it; the trace must still be written."""

from __future__ import annotations

import marshal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import mpiexec

ROOT = Path(__file__).resolve().parent.parent.parent


def _traced(tmp: Path, source: str, *args: str, ranks: int = 0) -> subprocess.CompletedProcess:
    """Run ``source`` (written to tmp/prog.py) under the tracer, on ``ranks``
    processes by mpiexec (0: one process, no mpiexec), from the project root."""
    script = tmp / "prog.py"
    script.write_text(textwrap.dedent(source))
    cmd = [sys.executable, "-m", "calibration.record", "-o", str(tmp / "run" / "traces.otf2"),
           "--calibration-records", "0", "--", str(script), *args]
    if ranks:
        cmd = [mpiexec(), "-n", str(ranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def _ok(proc: subprocess.CompletedProcess, tmp: Path) -> None:
    """The run ended normally and wrote its archive."""
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "run" / "traces.otf2").is_file(), proc.stderr


# ---------------------------------------------------------------------------------
# 1. recursion: every traced call is 2-3 frames; the program keeps its own limit

def test_recursion_near_the_default_limit_works_traced(tmp_path: Path) -> None:
    """900 levels work untraced under the default limit of 1000; traced as well,
    and the program reads its own limit back."""
    proc = _traced(tmp_path, """
        import sys
        from mpi4py import MPI
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        print("limit", sys.getrecursionlimit(), "depth", depth(int(sys.argv[1])))
    """, "900")
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["limit", "1000", "depth", "900"]


def test_program_sets_its_own_recursion_limit(tmp_path: Path) -> None:
    """A program raising its limit to 5000 recurses 4500 levels and reads 5000; the
    invalid limits raise as they do untraced."""
    proc = _traced(tmp_path, """
        import sys
        from mpi4py import MPI
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        sys.setrecursionlimit(5000)
        print("limit", sys.getrecursionlimit(), "depth", depth(4500))
        for bad in (0, "x"):
            try:
                sys.setrecursionlimit(bad)
            except (ValueError, TypeError) as exc:
                print(type(exc).__name__)
        print("limit", sys.getrecursionlimit())
    """)
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["limit", "5000", "depth", "4500", "ValueError",
                                   "TypeError", "limit", "5000"]


def test_program_catches_infinite_recursion(tmp_path: Path) -> None:
    """Infinite recursion still ends in a RecursionError the program catches."""
    proc = _traced(tmp_path, """
        from mpi4py import MPI
        def forever(n):
            return forever(n + 1)
        try:
            forever(0)
        except RecursionError:
            print("caught")
        MPI.COMM_WORLD.Barrier()
    """)
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["caught"]


# ---------------------------------------------------------------------------------
# 2. the program's serializer (MPI.pickle.__init__)

def test_pickled_size_uses_the_configured_serializer() -> None:
    """Sizes are mpi4py's own dumps, with the serializer the program set; an object
    that serializer refuses has size 0 and raises nothing into the program."""
    MPI = pytest.importorskip("mpi4py.MPI")
    from calibration.tracer import buffer as tb

    def dumps(obj, *_):
        return marshal.dumps(obj.__code__)

    def loads(data, *_):  # pragma: no cover - never called
        return data

    def f(x):
        return x * 3

    saved = tb.set_serializer(MPI.pickle.dumps)
    try:
        assert tb.pickled_size([1, 2, 3]) == len(MPI.pickle.dumps([1, 2, 3]))
        MPI.pickle.__init__(dumps, loads)
        assert tb.pickled_size(f) == len(marshal.dumps(f.__code__))
        assert tb.pickled_size(42) == 0  # an int has no __code__: dumps raises
    finally:
        MPI.pickle.__init__()
        tb.set_serializer(saved)


def test_program_serializer_sends_and_is_left_set(tmp_path: Path) -> None:
    """A program sends a lambda with a marshal serializer and never restores the
    default: its message is sized by that serializer, and the tracer's own gather
    after the program still works."""
    otf2 = pytest.importorskip("otf2")
    proc = _traced(tmp_path, """
        import marshal, types
        from mpi4py import MPI
        def dumps(obj, *a):
            return marshal.dumps(obj.__code__)
        def loads(b, *a):
            return types.FunctionType(marshal.loads(bytes(b)), globals())
        MPI.pickle.__init__(dumps, loads)
        comm = MPI.COMM_WORLD
        if comm.Get_rank() == 0:
            f = lambda x: x * 3
            print("size", len(dumps(f)))
            comm.send(f, dest=1)
        else:
            print("f(2)", comm.recv(source=0)(2))
    """, ranks=2)
    _ok(proc, tmp_path)
    lines = dict(line.split() for line in proc.stdout.splitlines())  # rank order varies
    assert lines.keys() == {"size", "f(2)"} and lines["f(2)"] == "6", proc.stdout
    size = int(lines["size"])
    sizes = []
    with otf2.reader.open(str(tmp_path / "run" / "traces.otf2")) as trace:
        for _, ev in trace.events:
            if type(ev).__name__ in ("MpiSend", "MpiRecv"):
                sizes.append(ev.msg_length)
    assert sizes == [size, size]


# ---------------------------------------------------------------------------------
# 3. sys.path and the program's own modules named like the tracer's packages

def test_program_module_named_calibration(tmp_path: Path) -> None:
    """The script's directory comes first on sys.path, the tracer's working
    directory is not added, and the program's own ``calibration`` and
    ``compensate`` modules are the ones it imports."""
    (tmp_path / "calibration.py").write_text("def factor():\n    return 42\n")
    (tmp_path / "compensate.py").write_text("NAME = 'mine'\n")
    proc = _traced(tmp_path, f"""
        import os, sys
        from mpi4py import MPI
        import calibration, compensate
        print(calibration.factor(), compensate.NAME)
        print(sys.path[0] == {str(tmp_path)!r}, {str(ROOT)!r} in sys.path)
        MPI.COMM_WORLD.Barrier()
    """)
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["42", "mine", "True", "False"]


# ---------------------------------------------------------------------------------
# 4. MPI.Finalize

def test_is_finalized_after_the_programs_finalize(tmp_path: Path) -> None:
    """After its MPI.Finalize() the program sees MPI finalized (the tracer keeps
    MPI until the trace is gathered)."""
    proc = _traced(tmp_path, """
        from mpi4py import MPI
        print(MPI.Is_finalized())
        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()
        print(MPI.Is_finalized())
    """)
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["False", "True"]
