"""An output the file system cuts short — a file-size limit (``ulimit -f``) or a
full file system — ends in exit 3 with one line naming OUT, and nothing at OUT
or beside it, on every write path: ``.trace`` to OTF2, OTF2 to OTF2 streamed
(the C path), ``--in-memory`` and ``COMPENSATE_NATIVE=0`` (the ``otf2``
package), and text outputs. Real conditions: the command runs in a child process
whose RLIMIT_FSIZE is set (Python ignores SIGXFSZ, so writes fail with EFBIG),
and on a small tmpfs where this machine lets the test mount one.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

MONTECARLO = ROOT / "examples" / "montecarlo" / "traces.otf2"


@pytest.fixture(scope="module")
def stencil(tmp_path_factory) -> Path:
    """A .trace input of 2,888 records (two event files of ~11 KiB as OTF2)."""
    from compensate.formats.text import write_text
    from compensate.simulate import simulate
    sim = simulate("stencil", ranks=2, iterations=100, overhead=1e-7, step_time=2e-6)
    path = tmp_path_factory.mktemp("in") / "stencil.trace"
    write_text(sim.measured, str(path))
    return path


def compensate(args: list[str], limit: int | None = None,
               native: str | None = None) -> subprocess.CompletedProcess:
    """The command in a child process whose files may not grow beyond ``limit``
    bytes (None: no limit)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if native is not None:
        env["COMPENSATE_NATIVE"] = native

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "compensate", *args, "--overhead", "100ns"],
                          env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=None if limit is None else limit_file_size)


def refused(proc: subprocess.CompletedProcess, out: Path, root: Path) -> str:
    """Exit 3, one line naming OUT, nothing at OUT, no staging left in ``root``."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"compensate: error: {out}: "), lines[0]
    assert "Traceback" not in proc.stderr and ".tmp-" not in proc.stderr
    assert not re.search(r"\b[A-Z]\w*Error\b", lines[0]), lines[0]  # no exception name
    assert not out.exists()
    assert os.listdir(root) == []
    return lines[0]


# name: (input, output, extra options, COMPENSATE_NATIVE, file-size limit in KiB: above
# the output's definition files, below its largest event file or its text file)
CASES = {
    "trace-to-otf2": ("stencil", "o/traces.otf2", [], None, 4),
    "otf2-streamed": ("montecarlo", "o/traces.otf2", [], None, 8),
    "otf2-in-memory": ("montecarlo", "o/traces.otf2", ["--in-memory"], None, 8),
    "otf2-package": ("montecarlo", "o/traces.otf2", [], "0", 8),
    "trace-to-trace": ("stencil", "o.trace", [], None, 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_file_size_limit_is_exit_3_and_nothing_at_out(tmp_path, stencil, case):
    src, name, options, native, kib = CASES[case]
    inp = stencil if src == "stencil" else MONTECARLO
    root = tmp_path / "out"
    root.mkdir()
    out = root / name
    proc = compensate([str(inp), str(out), *options], limit=kib * 1024, native=native)
    line = refused(proc, out, root)
    assert "File too large" in line or "File is too large" in line, line


@pytest.fixture
def small_fs(tmp_path):
    """A 12 KiB tmpfs (skipped where mounting is not permitted): the OTF2 output
    of ``stencil`` needs ~23 KiB."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(mnt)],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("cannot mount a tmpfs here")
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_a_full_file_system_is_exit_3_and_nothing_at_out(small_fs, stencil):
    out = small_fs / "o" / "traces.otf2"
    proc = compensate([str(stencil), str(out)])
    line = refused(proc, out, small_fs)
    assert "No space left on device" in line, line


def test_a_signal_while_the_output_is_read_back_writes_nothing(tmp_path, stencil):
    """The read-back check calls back into Python (the definitions reader): a signal
    meanwhile is raised when it is done, never swallowed into a failed check."""
    root = tmp_path / "out"
    root.mkdir()
    out = root / "o" / "traces.otf2"
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               COMPENSATE_TEST_INTERRUPT="TERM:otf2-check:1")
    proc = subprocess.run([sys.executable, "-m", "compensate", str(stencil), str(out),
                           "--overhead", "100ns"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr == "compensate: interrupted by SIGTERM; nothing written\n"
    assert os.listdir(root) == []
