"""scipy (about 0.3–0.6 s to import) is paid only by runs that fit (issue #18).

``compensate --version`` and every bound but ``fitted`` must not import it; the
fitted bound must (so the test sees the lazy import is where the fit happens).
Timing itself is measured by ``benchmarks/startup.py``, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "pingpong.trace"
FITTABLE = ROOT / "examples" / "montecarlo" / "traces.otf2"  # enough observed transfers


def _modules_after(args: list[str], tmp_path) -> set[str]:
    """The modules loaded once ``compensate ARGS`` has run (in a fresh interpreter)."""
    code = ("import sys\nfrom compensate.cli import main\n"
            "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
            "print(' '.join(sorted(sys.modules)))\nsys.exit(code or 0)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                     os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.splitlines()[-1].split())


def test_version_imports_no_scipy(tmp_path):
    mods = _modules_after(["--version"], tmp_path)
    assert not {m for m in mods if m.startswith("scipy")}
    # nor numpy, otf2 or the command (answered before it is imported)
    assert not {m for m in mods if m.split(".")[0] in ("numpy", "otf2", "_otf2")}
    assert "compensate.cli.compensate" not in mods


@pytest.mark.parametrize("bound", ["none", "lower", "upper"])
def test_bounds_that_do_not_fit_import_no_scipy(bound, tmp_path):
    mods = _modules_after([str(EXAMPLE), "out.trace", "--bound", bound, "--overhead", "100ns",
                           "--quiet"], tmp_path)
    assert "compensate.engine" in mods  # the run did happen
    assert not {m for m in mods if m.startswith("scipy")}


def test_fitted_bound_fits_without_scipy(tmp_path):
    mods = _modules_after([str(FITTABLE), "out.trace", "--bound", "fitted", "--overhead", "100ns",
                           "--quiet"], tmp_path)
    assert "compensate.engine.netmodel" in mods  # the fit did happen
    assert not {m for m in mods if m.startswith("scipy")}


def test_otf2_run_imports_no_analysis_nor_text_format(tmp_path):
    """An OTF2-to-OTF2 run does not import what it does not use (the analyses, the
    text format: ~25 ms of compiling without bytecode, ~10 ms with)."""
    mods = _modules_after([str(FITTABLE), "out/traces.otf2", "--overhead", "100ns", "--quiet"],
                          tmp_path)
    assert "compensate.engine" in mods  # the run did happen
    assert not {m for m in mods if m.startswith(("compensate.analysis", "compensate.formats.text"))}
