"""``compensate ARGS`` in this interpreter, returned as a subprocess's would be
(and :func:`run_main` for another command's entry point, such as ``calibrate``'s).

A fresh ``python -m compensate`` costs ~0.5 s of interpreter start and imports
before it reads a record; a test that checks what the command returns and prints
gets the same from :func:`run_compensate`, which calls the entry point
``compensate.cli.main`` (what ``python -m compensate`` runs) with file descriptors
1 and 2 redirected to files, so that what a C library writes there is seen too,
and ``sys.stdout`` / ``sys.stderr`` redirected for what Python prints. An
exception escaping ``main`` fails the calling test, as a traceback on a
subprocess's stderr would. Tests of the real command line (the shell's path,
signals, a fresh interpreter's imports) keep their subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# environment variables that change what the command does (tracebacks, test hooks)
_UNSET = ("COMPENSATE_DEBUG", "COMPENSATE_TEST_INTERRUPT")


def run_compensate(*args: object, cwd: str | Path | None = None
                   ) -> subprocess.CompletedProcess:
    """``compensate ARGS`` through ``compensate.cli.main``: its exit code, stdout and
    stderr (Python's output first, then what was written to the descriptors)."""
    from compensate.cli import main

    return run_main(main, "compensate", *args, cwd=cwd)


def run_main(main: Callable[[list[str]], int], prog: str, *args: object,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``PROG ARGS`` through its entry point ``main(argv)``, as :func:`run_compensate`
    does for ``compensate``: what a child process the command starts writes to the
    inherited descriptors 1 and 2 is captured too, as a subprocess's pipes would."""
    argv = [str(a) for a in args]
    saved_env = {k: os.environ.pop(k) for k in _UNSET if k in os.environ}
    here = os.getcwd()
    py_out, py_err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryFile() as fd_out, tempfile.TemporaryFile() as fd_err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        try:
            os.dup2(fd_out.fileno(), 1)
            os.dup2(fd_err.fileno(), 2)
            if cwd is not None:
                os.chdir(cwd)
            with contextlib.redirect_stdout(py_out), contextlib.redirect_stderr(py_err):
                code = main(argv)
        finally:
            os.chdir(here)
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            os.environ.update(saved_env)
        fd_out.seek(0)
        fd_err.seek(0)
        out = py_out.getvalue() + fd_out.read().decode(errors="replace")
        err = py_err.getvalue() + fd_err.read().decode(errors="replace")
    return subprocess.CompletedProcess([prog, *argv], code, out, err)
