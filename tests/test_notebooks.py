"""The notebooks in notebooks/: committed without outputs, and each runs top to bottom
in a fresh Jupyter kernel (nbclient + ipykernel, the `notebooks` extra).

The execution tests are skipped where the extra is not installed; CI installs it. The
kernel is this interpreter (a private kernelspec, so that an installed "python3"
kernel of another Python cannot be picked up) with this checkout first on its path,
the Agg backend, a fresh IPython profile and a private temporary directory.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["before_after.ipynb", "ground_truth.ipynb"]
CELL_TIMEOUT = 120  # seconds per cell; each notebook takes well under a minute in all


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    assert nb["nbformat"] == 4
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    cells = _code_cells(nb)
    assert cells
    for k, cell in enumerate(cells):
        assert cell["outputs"] == [], f"{name}: code cell {k} has outputs"
        assert cell["execution_count"] is None, f"{name}: code cell {k} has an execution count"
    assert "widgets" not in nb["metadata"]


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """Environment for a fresh kernel of this interpreter; returns its kernel name."""
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    name = "compensate-test"
    spec = tmp_path / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python {sys.version_info.major}.{sys.version_info.minor} (test)",
        "language": "python",
    }))
    for sub in ("runtime", "ipython", "tmp"):
        (tmp_path / sub).mkdir()
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return name


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_in_a_fresh_kernel(name, kernel_env, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    # one more cell (in memory only) says which interpreter and checkout ran the notebook
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, compensate\nprint(sys.executable)\nprint(compensate.__file__)"))
    # shutdown_kernel="immediate": the kernel is stopped once the last cell's outputs
    # are in, instead of a graceful shutdown request and ~1 s of waiting for it
    client = NotebookClient(nb, kernel_name=kernel_env, timeout=CELL_TIMEOUT,
                            startup_timeout=120, allow_errors=False,
                            shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    start = time.monotonic()
    client.execute()  # raises CellExecutionError on the first failing cell
    elapsed = time.monotonic() - start
    assert elapsed < 60, f"{name} took {elapsed:.0f} s"
    *cells, probe = _code_cells(nb)
    # the two prints may come as one stream output or as two (kernel timing)
    where = "".join(o.get("text", "") for o in probe["outputs"]
                    if o["output_type"] == "stream").split()
    assert where == [sys.executable, str(ROOT / "compensate" / "__init__.py")]
    assert all(c["execution_count"] is not None for c in cells)
    for k, cell in enumerate(cells):
        kinds = [o["output_type"] for o in cell["outputs"]]
        assert "error" not in kinds
        stderr = [o["text"] for o in cell["outputs"] if o.get("name") == "stderr"]
        assert not stderr, f"{name}: code cell {k} wrote to stderr: {stderr}"
        if _source(cell).rstrip().endswith("\nfig"):  # a figure cell shows a PNG
            assert any("image/png" in o.get("data", {}) for o in cell["outputs"]), \
                f"{name}: code cell {k} shows no figure"
    text = "".join(o.get("text", "") for c in cells for o in c["outputs"])
    if name == "before_after.ipynb":
        assert "% of the removed time" in text and "by location" in text
        # the real examples run in every clone (none is skipped for want of a file
        # outside the repository): the bundled traced run and the Score-P archive
        for example in ("examples/montecarlo/traces.otf2", "examples/pingpong.trace",
                        "tests/data/traces/ping-pong-otf2/traces.otf2"):
            assert f"== {example}\n" in text, f"{name} did not compensate {example}"
        exports = sorted(p.name for p in (tmp_path / "tmp").rglob("*.json"))
        assert exports == ["lower_bound.json", "measured.json", "upper_bound.json"]
    else:
        assert "dilation removed" in text and "fitted" in text
