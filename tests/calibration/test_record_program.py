"""The traced program runs as it would untraced (``python prog.py``): its recursion
limit, its MPI serializer, its own modules named like the tracer's packages, and
``MPI.Is_finalized`` after its ``MPI.Finalize`` (calibration/record.py,
calibration/tracer/mpi.py). Each program runs under ``python -m calibration.record``
from the project root, as a user would start it; the trace must still be written."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compensate.formats.otf2 import read_otf2
from compensate.model import KIND_CODE
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


# ---------------------------------------------------------------------------------
# 5. the program's sys.stderr and sys.excepthook; the tracer's own messages

def _untraced(tmp: Path, source: str) -> subprocess.CompletedProcess:
    """Run ``source`` (written to tmp/prog.py) as ``python prog.py``."""
    script = tmp / "prog.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=tmp)


def test_program_closing_stderr_does_not_hang(tmp_path: Path) -> None:
    """A program that closes sys.stderr ends as it does untraced (status 0) on both
    ranks instead of leaving rank 1 waiting for rank 0, which failed printing its
    summary; that summary still reaches the process's stderr."""
    proc = _traced(tmp_path, """
        import sys
        from mpi4py import MPI
        def f():
            return MPI.COMM_WORLD.allreduce(1)
        print("v", f())
        sys.stdout.flush()
        sys.stderr.close()
    """, ranks=2)
    _ok(proc, tmp_path)
    assert sorted(proc.stdout.replace(" ", "").replace("\n", "")) == ["2", "2", "v", "v"]
    assert "records of 2 ranks" in proc.stderr


def test_program_replacing_stderr_keeps_the_tracers_messages(tmp_path: Path) -> None:
    """The tracer's summary goes to the real stderr, not to the StringIO the
    program left in sys.stderr."""
    proc = _traced(tmp_path, """
        import io, sys
        from mpi4py import MPI
        sys.stderr = io.StringIO()
        sys.stdout = io.StringIO()
        print("hidden")
    """)
    _ok(proc, tmp_path)
    assert proc.stdout == ""
    assert "calibration.record: " in proc.stderr and "records of 1 ranks" in proc.stderr


def test_untraced_call_warning_is_not_written_into_the_programs_stderr(
        tmp_path: Path) -> None:
    """The tracer's warning about an untraced call, made while the program runs,
    goes to the real stderr too: it used to be written into whatever the program
    had put in sys.stderr (here a StringIO the program then prints from)."""
    proc = _traced(tmp_path, """
        import io, sys
        from mpi4py import MPI
        sys.stderr = io.StringIO()
        captured = sys.stderr
        p = MPI.COMM_WORLD.Barrier_init()
        p.Start()
        p.Wait()
        p.Free()
        print("program's stderr:", repr(captured.getvalue()))
    """)
    _ok(proc, tmp_path)
    assert "program's stderr: ''" in proc.stdout
    assert "MPI.Comm.Barrier_init is not traced" in proc.stderr


EXCEPTHOOK = """
    import sys
    from mpi4py import MPI
    def hook(t, v, tb):
        sys.stderr.write(f"CUSTOM HOOK: {t.__name__}: {v}\\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(42)
    sys.excepthook = hook
    def f():
        raise RuntimeError("bad")
    f()
"""


def test_program_excepthook_runs(tmp_path: Path) -> None:
    """An uncaught exception goes to the program's own sys.excepthook, whose output
    and exit status (Abort(42)) are those of the untraced run."""
    untraced = _untraced(tmp_path, EXCEPTHOOK)
    assert untraced.returncode == 42 and "CUSTOM HOOK: RuntimeError: bad" in untraced.stderr
    proc = _traced(tmp_path, EXCEPTHOOK)
    assert proc.returncode == 42, proc.stderr
    assert "CUSTOM HOOK: RuntimeError: bad" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_uncaught_exception_traceback_shows_only_the_programs_frames(tmp_path: Path) -> None:
    """The default hook prints the traceback the untraced run prints: no frame of
    calibration/record.py nor of the decorator's wrappers; then the job aborts."""
    source = """
        from mpi4py import MPI
        def g():
            raise RuntimeError("bad")
        def f():
            g()
        f()
    """
    untraced = _untraced(tmp_path, source)
    assert untraced.returncode == 1 and untraced.stderr.startswith("Traceback")
    proc = _traced(tmp_path, source)
    assert proc.returncode == 1
    assert untraced.stderr in proc.stderr, proc.stderr
    assert "record.py" not in proc.stderr and "<compensate-record>" not in proc.stderr


# ---------------------------------------------------------------------------------
# 6. a script that does not compile

@pytest.mark.parametrize("source", [b"from mpi4py import MPI\ndef f(:\n    pass\n",
                                    b"x = 1\n\x00\n"], ids=["syntax", "null-byte"])
def test_syntax_error_reported_as_python_does(tmp_path: Path, source: bytes) -> None:
    """A script Python cannot compile: the message ``python prog.py`` prints (no
    tracer traceback), and status 1."""
    script = tmp_path / "prog.py"
    script.write_bytes(source)
    untraced = subprocess.run([sys.executable, str(script)], capture_output=True,
                              text=True, timeout=60)
    assert untraced.returncode == 1
    cmd = [sys.executable, "-m", "calibration.record", "-o", str(tmp_path / "run" / "t.otf2"),
           "--calibration-records", "0", "--", str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    if source.startswith(b"from"):
        assert proc.stderr == untraced.stderr
    else:  # ast.parse words it "source code string cannot ...", python "source code ..."
        assert proc.stderr.splitlines()[-1].startswith("SyntaxError: source code")
        assert proc.stderr.splitlines()[-1].endswith("cannot contain null bytes")


def test_syntax_error_on_two_ranks_is_printed_once(tmp_path: Path) -> None:
    """Every rank exits 1 (none waits for another) and rank 0 alone prints."""
    proc = _traced(tmp_path, "def f(:\n    pass\n", ranks=2)
    assert proc.returncode == 1
    assert proc.stderr.count("SyntaxError: invalid syntax") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------
# 7. an interrupted or failed archive write leaves no archive

#: Runs calibration.record with archive writing patched to fail after some events:
#: argv[1] is "int" (the process sends itself SIGINT, as mpiexec forwards Ctrl-C)
#: or "oserror"; the rest are record's arguments.
FAILING_WRITE = """
import os, signal, sys
from calibration import record
from calibration.tracer import evtwrite
how, calls = sys.argv[1], [0]
real = evtwrite.write_rows
def write_rows(*a, **k):
    written = real(*a, **k)  # the first location's records, then the failure
    calls[0] += 1
    if calls[0] == 1:
        if how == "int":
            os.kill(os.getpid(), signal.SIGINT)
        else:
            raise OSError("disk full")
    return written
evtwrite.write_rows = write_rows
sys.exit(record.main(sys.argv[2:]))
"""


def _failing_write(tmp: Path, how: str, ranks: int = 0) -> subprocess.CompletedProcess:
    script = tmp / "prog.py"
    script.write_text("from mpi4py import MPI\n"
                      "def f(x):\n    return x + 1\n"
                      "print(MPI.COMM_WORLD.allreduce(sum(f(i) for i in range(50))))\n")
    cmd = [sys.executable, "-c", FAILING_WRITE, how, "-o", str(tmp / "run" / "traces.otf2"),
           "--calibration-records", "0", "--", str(script)]
    if ranks:
        cmd = [mpiexec(), "-n", str(ranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_interrupted_write_leaves_no_archive(tmp_path: Path) -> None:
    """SIGINT while rank 0 writes: one line, status 130 on every rank (rank 1,
    waiting for rank 0, does not hang), nothing at the output path, and the next
    run needs no --force."""
    proc = _failing_write(tmp_path, "int", ranks=2)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        "calibration.record: interrupted; no trace written", proc.stderr
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == []
    again = _traced(tmp_path, "print('ok')\n")
    _ok(again, tmp_path)


def test_failed_write_leaves_no_archive(tmp_path: Path) -> None:
    """A write that fails part way: the error in one line, status 1, no archive."""
    proc = _failing_write(tmp_path, "oserror")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "calibration.record: error: cannot write"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any((tmp_path / "run").iterdir())


def test_argv_and_file_as_python_sets_them(tmp_path: Path) -> None:
    """``sys.argv[0]`` is the script as the command line named it (relative here),
    ``__file__`` its absolute path: what ``python prog.py`` gives the program."""
    (tmp_path / "prog.py").write_text("import sys\nprint(repr(sys.argv), repr(__file__))\n")
    untraced = subprocess.run([sys.executable, "prog.py", "a", "-b"], capture_output=True,
                              text=True, timeout=60, cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    traced = subprocess.run([sys.executable, "-m", "calibration.record", "-o", "run/t.otf2",
                             "--calibration-records", "0", "--", "prog.py", "a", "-b"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env=env)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == untraced.stdout == (
        f"['prog.py', 'a', '-b'] {str(tmp_path / 'prog.py')!r}\n")


def test_os_exit_says_that_no_trace_is_written(tmp_path: Path) -> None:
    """``os._exit`` skips the tracer's finalization: the run says so once (not for
    the forked child that multiprocessing ends with ``os._exit``), keeps the
    program's status and leaves no archive."""
    proc = _traced(tmp_path, """
        import multiprocessing, os, sys
        def child():
            pass
        if __name__ == "__main__":
            p = multiprocessing.get_context("fork").Process(target=child)
            p.start()
            p.join()
            print("child", p.exitcode)
            sys.stdout.flush()
            os._exit(3)
    """)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "child 0\n"
    assert proc.stderr.count("called os._exit(3)") == 1, proc.stderr
    assert "no trace is written" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_force_keeps_the_old_archive_until_the_new_one_is_written(tmp_path: Path) -> None:
    """``--force`` replaces an archive when the new one is complete, not before
    the program runs: a program that fails leaves the old archive as it was."""
    _ok(_traced(tmp_path, "def f():\n    return 1\nf()\n"), tmp_path)
    run = tmp_path / "run"
    old = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    script = tmp_path / "prog.py"
    script.write_text("raise RuntimeError('the program failed')\n")
    proc = subprocess.run([sys.executable, "-m", "calibration.record", "-o",
                           str(run / "traces.otf2"), "--force", "--calibration-records", "0",
                           "--", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == old


def test_a_forked_child_that_ends_the_script_does_not_finalize_the_tracer(
        tmp_path: Path) -> None:
    """A child made by ``os.fork`` that runs to the end of the script (or raises)
    ends there with its status; only the parent writes the trace."""
    proc = _traced(tmp_path, """
        import os, sys
        def work():
            return 3
        pids = []
        for how in ("exit", "raise"):
            pid = os.fork()
            if pid == 0:
                work()
                if how == "raise":
                    raise ValueError("child failed")
                sys.exit(0)
            pids.append(pid)
        print("parent", [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids])
    """)
    _ok(proc, tmp_path)
    assert proc.stdout == "parent [0, 1]\n"
    assert proc.stderr.count("ValueError: child failed") == 1, proc.stderr
    assert proc.stderr.count("records of 1 ranks") == 1, proc.stderr


def test_main_namespace_as_python_gives_it(tmp_path: Path) -> None:
    """The script's globals: ``__builtins__`` the module (a program may set an
    attribute on it), ``__cached__``, ``__annotations__`` and a source loader, as
    under ``python prog.py`` (plus the tracer's decorator name)."""
    source = """
        import builtins
        __builtins__.answer = 42
        names = sorted(k for k in globals() if k != "__compensate_record__")
        print(names, answer, __cached__, __annotations__,
              type(__loader__).__name__, __builtins__ is builtins)
    """
    proc = _traced(tmp_path, source)
    _ok(proc, tmp_path)
    untraced = subprocess.run([sys.executable, str(tmp_path / "prog.py")],
                              capture_output=True, text=True, timeout=60)
    assert untraced.returncode == 0, untraced.stderr
    assert proc.stdout == untraced.stdout


def test_atexit_handlers_find_the_programs_classes(tmp_path: Path) -> None:
    """The program's module stays ``__main__`` after it ends: an atexit handler
    pickling an instance of one of its classes works, as untraced."""
    proc = _traced(tmp_path, """
        import atexit, pickle
        class State:
            steps = 5
        STATE = State()
        def save():
            print("checkpoint", len(pickle.dumps(STATE)) > 0)
        atexit.register(save)
    """)
    _ok(proc, tmp_path)
    assert proc.stdout == "checkpoint True\n", proc.stderr


def test_a_directory_program_runs_its_main_and_a_zipapp_is_refused(tmp_path: Path) -> None:
    """``python DIR`` runs DIR/__main__.py with DIR first on sys.path: so does the
    tracer, recording its functions; a zip application is refused in one line."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text("import sys, helper\n"
                                     "def main():\n    return helper.f()\n"
                                     "print(sys.argv[0], main())\n")
    (app / "helper.py").write_text("def f():\n    return 7\n")
    untraced = subprocess.run([sys.executable, "app"], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    record = [sys.executable, "-m", "calibration.record", "-o", "run/t.otf2",
              "--calibration-records", "0", "--"]
    traced = subprocess.run([*record, "app"], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path, env=env)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == untraced.stdout == "app 7\n"
    names = read_otf2(str(tmp_path / "run" / "t.otf2")).definitions.regions.values()
    assert "main" in names
    subprocess.run([sys.executable, "-m", "zipapp", "app", "-o", "app.pyz"], check=True,
                   cwd=tmp_path, timeout=60)
    zipped = subprocess.run([*record, "app.pyz"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=env)
    assert zipped.returncode == 2
    assert zipped.stderr == ("calibration.record: error: app.pyz is a zip application, "
                             "which the tracer cannot instrument: unpack it and trace its "
                             "directory\n")
    module = subprocess.run([*record, "-m", "app"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=env)
    assert module.returncode == 2
    assert module.stderr.startswith("calibration.record: error: -m MODULE is not "
                                    "supported: give the module's script")


def test_a_program_catching_recursion_error_reaches_about_its_untraced_depth(
        tmp_path: Path) -> None:
    """The scaled limit leaves room for the decorator's frames, not more: a
    recursion that catches its RecursionError ends about as deep as untraced
    (it went 1.5x as deep with room for three frames per call)."""
    source = ("def probe(n=0):\n    try:\n        return probe(n + 1)\n"
              "    except RecursionError:\n        return n\nprint(probe())\n")
    proc = _traced(tmp_path, source)
    _ok(proc, tmp_path)
    untraced = subprocess.run([sys.executable, str(tmp_path / "prog.py")],
                              capture_output=True, text=True, timeout=60)
    depth, plain = int(proc.stdout), int(untraced.stdout)
    assert 0.9 * plain <= depth <= 1.15 * plain, (depth, plain)


def test_an_mpi_error_traceback_shows_no_tracer_frames(tmp_path: Path) -> None:
    """An uncaught MPI error raised through a traced call: the traceback goes from
    the program's lines to mpi4py's, as untraced (no decorator wrapper, no
    ``calibration/tracer`` frame)."""
    proc = _traced(tmp_path, """
        from mpi4py import MPI
        import numpy as np
        def send():
            MPI.COMM_WORLD.Send(np.zeros(1), dest=5)
        send()
    """)
    assert proc.returncode == 1
    head = proc.stderr.split("mpi4py.MPI.Exception")[0]
    files = [ln.split('"')[1] for ln in head.splitlines() if ln.startswith('  File "')]
    assert files[:2] == [str(tmp_path / "prog.py")] * 2, head
    assert "calibration" not in head and "<compensate-record>" not in head, head


def test_relative_output_is_resolved_before_the_program_changes_directory(
        tmp_path: Path) -> None:
    """A relative ``-o`` names a path in the launch directory, whatever the
    program's ``os.chdir`` does: the archive goes there (not into the program's
    new working directory, where an archive of that name is not replaced without
    ``--force``), and the final line names its absolute path."""
    launch, elsewhere = tmp_path / "launch", tmp_path / "elsewhere"
    launch.mkdir()
    (elsewhere / "run").mkdir(parents=True)
    (elsewhere / "run" / "traces.otf2").write_text("an older archive\n")
    (launch / "prog.py").write_text(f"import os\nos.chdir({str(elsewhere)!r})\n"
                                    "def f():\n    return os.getcwd()\nprint(f())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "calibration.record", "-o",
                           "run/traces.otf2", "--calibration-records", "0", "--", "prog.py"],
                          capture_output=True, text=True, timeout=120, cwd=launch, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{elsewhere}\n"
    assert (launch / "run" / "traces.otf2").is_file(), proc.stderr
    assert (elsewhere / "run" / "traces.otf2").read_text() == "an older archive\n"
    assert proc.stderr.rstrip().endswith(f"-> {launch / 'run' / 'traces.otf2'}"), proc.stderr


def test_os_exit_0_exits_non_zero_as_no_trace_is_written(tmp_path: Path) -> None:
    """``os._exit(0)`` loses the trace, a failure: the process exits 1 (never 0
    after a failure) and says so; a non-zero status is kept
    (test_os_exit_says_that_no_trace_is_written)."""
    proc = _traced(tmp_path, """
        import os, sys
        print("bye")
        sys.stdout.flush()
        os._exit(0)
    """)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "bye\n"
    assert proc.stderr.count("called os._exit(0)") == 1, proc.stderr
    assert "no trace is written" in proc.stderr and "exiting with status 1" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_program_that_initializes_mpi_itself(tmp_path: Path) -> None:
    """``mpi4py.rc.initialize = False`` and the program's own ``MPI.Init_thread``:
    MPI is initialized already (by the tracer), so it returns the level MPI
    provides instead of failing, the program's lower level is noted once per rank
    on stderr, and its communication and MPI.Finalize() work as untraced."""
    proc = _traced(tmp_path, """
        import mpi4py
        mpi4py.rc.initialize = False
        from mpi4py import MPI
        def main():
            provided = MPI.Init_thread(MPI.THREAD_FUNNELED)
            comm = MPI.COMM_WORLD
            x = comm.allreduce(comm.Get_rank() + 1)
            seen = comm.gather((x, provided == MPI.Query_thread() >= MPI.THREAD_FUNNELED))
            MPI.Finalize()
            if seen:
                print(seen, MPI.Is_finalized())
        main()
    """, ranks=2)
    _ok(proc, tmp_path)
    assert proc.stdout == "[(3, True), (3, True)] True\n"
    note = ("calibration.record: note: MPI was initialized by the tracer with thread level "
            "MULTIPLE; the program's MPI.Init_thread(FUNNELED) returns that level")
    assert proc.stderr.count(note) == 1, proc.stderr  # once per job
    trace = read_otf2(str(tmp_path / "run" / "traces.otf2"))
    for ev in trace.events.values():  # each rank's allreduce is recorded
        entered = [trace.definitions.regions[int(r)]
                   for r in ev.region[ev.kind == KIND_CODE["Enter"]].tolist()]
        assert entered.count("MPI_Allreduce") == 1, entered


def test_program_init_and_rc_thread_level(tmp_path: Path) -> None:
    """``MPI.Init()`` of a program with ``rc.initialize = False`` does nothing (the
    tracer initialized MPI); an ``mpi4py.rc.thread_level`` below the level the
    tracer's initialization provides is noted once, when the program asks."""
    proc = _traced(tmp_path, """
        import mpi4py
        mpi4py.rc.initialize = False
        mpi4py.rc.thread_level = "funneled"
        from mpi4py import MPI
        MPI.Init()
        print(MPI.Is_initialized())
        mpi4py.rc.initialize = True
        print(MPI.Query_thread() == MPI.Query_thread() == MPI.THREAD_MULTIPLE)
    """)
    _ok(proc, tmp_path)
    assert proc.stdout.split() == ["True", "True"]
    assert proc.stderr.count("calibration.record: note: MPI was initialized by the tracer "
                             "with thread level MULTIPLE; the program's "
                             "mpi4py.rc.thread_level = 'funneled' has no effect") == 1, \
        proc.stderr
