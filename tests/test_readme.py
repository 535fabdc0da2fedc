"""The README's commands run as written, in order, in a fresh clone.

:func:`test_readme_commands_run_in_a_fresh_clone` clones the repository under
test (its committed HEAD) into a temporary directory and runs every ``sh`` block
of the clone's README.md there, in order, each with ``bash -e``: every command
must exit 0, as the README documents. Afterwards ``git status`` of the clone must
be clean, so that .gitignore covers what the commands leave behind.

The environment the suite runs in is never changed: ``pip`` is a stand-in that
installs nothing, the package is found through ``PYTHONPATH`` (the clone), and the
console scripts ``compensate``, ``compensate-simulate`` and ``calibrate`` are
small scripts with the entry points of setup.cfg, run by this interpreter. The
block that runs the test suite itself (``python -m pytest``) is left out.

:func:`test_accuracy_claims_are_the_tables_minimums` holds the README's
accuracy figures to docs/accuracy.md's table.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: console scripts of setup.cfg: name -> (module, function)
SCRIPTS = {"compensate": ("compensate.cli", "main"),
           "compensate-simulate": ("compensate.cli", "simulate_main"),
           "calibrate": ("calibration", "main")}


def sh_blocks(readme: str) -> list[str]:
    """The ``sh`` fenced blocks of ``readme``, in order."""
    return re.findall(r"^```sh\n(.*?)^```", readme, flags=re.M | re.S)


def runs_the_suite(block: str) -> bool:
    return "pytest" in block


def test_the_readme_has_command_blocks() -> None:
    """The extraction finds the quick start (guards against a pattern that finds
    nothing and a test that then checks nothing)."""
    blocks = sh_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    assert any("compensate examples/montecarlo/traces.otf2" in b for b in blocks)
    assert sum(runs_the_suite(b) for b in blocks) == 1
    assert 'pip install -e ".[test,mpi,notebooks]" && python -m pytest -q' in blocks[1]


def _stand_ins(bindir: Path) -> None:
    """``pip`` that installs nothing, ``python`` this interpreter, and the console
    scripts."""
    bindir.mkdir()
    scripts = {"pip": "#!/bin/sh\necho \"pip $* (not run by the test)\"\n",
               "python": f"#!/bin/sh\nexec {sys.executable} \"$@\"\n"}
    for name, (module, func) in SCRIPTS.items():
        scripts[name] = (f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\n"
                         f"sys.exit({func}())\n")
    for name, text in scripts.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)


def _clone(tmp_path: Path) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the README test clones the repository: needs git and a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True,
                   capture_output=True, timeout=120)
    return clone


@pytest.mark.slow
@pytest.mark.readme
def test_readme_commands_run_in_a_fresh_clone(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py", reason="the README's tracer example needs the [mpi] extra")
    if shutil.which("mpiexec") is None:
        pytest.skip("the README's tracer example needs mpiexec (the [mpi] extra)")
    clone = _clone(tmp_path)
    _stand_ins(tmp_path / "bin")
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=str(clone), MPLBACKEND="Agg")
    env.pop("COMPENSATE_DEBUG", None)
    blocks = sh_blocks((clone / "README.md").read_text(encoding="utf-8"))
    for block in blocks:
        if runs_the_suite(block):
            continue
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=clone,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (f"README block exited {proc.returncode}:\n{block}\n"
                                      f"stderr: {proc.stderr[-3000:]}")
    assert (clone / "out" / "traces.otf2").is_file()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=clone, capture_output=True, text=True, check=True).stdout
    assert status == "", f"the README's commands leave files .gitignore misses:\n{status}"


def _table_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "accuracy.md").read_text(encoding="utf-8")
    table = text.split("## The table", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| program")]


def test_accuracy_claims_are_the_tables_minimums() -> None:
    """The README says what docs/accuracy.md's table says at its worst rows: the
    least `fitted` removes, how many rows are below 97 %, the least the better of
    lower/upper removes, and the number of rows."""
    rows = _table_rows()
    assert len(rows) > 20
    fitted = [float(r[7].split()[0]) for r in rows]
    better = [max(float(r[5]), float(r[6])) for r in rows]
    below = sum(f < 97 for f in fitted)
    words = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
             7: "seven", 8: "eight", 9: "nine"}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    expected = [f"({len(rows)} rows:",
                f"`--bound fitted` removes at least {min(fitted):.1f} %",
                f"less than 97 % on {words.get(below, str(below))} rows",
                f"of `lower` and `upper` removes at least {min(better):.1f} %"]
    missing = [claim for claim in expected if claim not in readme]
    assert not missing, f"README.md's accuracy claims differ from docs/accuracy.md: {missing}"
