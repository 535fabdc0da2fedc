"""Timelines (compensate/timeline.py): render to PNG with the Agg backend, one row
per location, side-by-side alignment, and a clear error without matplotlib."""

import builtins
from pathlib import Path

import pytest

from compensate.simulate import simulate
from compensate.traceio import read_trace

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from compensate.timeline import (  # noqa: E402
    plot_side_by_side,
    plot_timeline,
    record_time,
    region_colors,
)

CASES = Path(__file__).resolve().parent / "cases_analysis"


def _png_is_drawn(path: Path) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    img = mpimg.imread(path)
    assert img.shape[0] > 100 and img.shape[1] > 300
    assert img[..., :3].std() > 0.05  # not a blank canvas


def test_timeline_png_one_row_per_location(real_archive, tmp_path):
    trace = read_trace(real_archive)
    ax = plot_timeline(trace, window=(0.195, 0.1997))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(ax.get_yticks()) == len(trace.events) == 2
    assert labels == ["MPI Rank 0 / Master thread", "MPI Rank 1 / Master thread"]
    assert ax.get_xlabel() == "time [ms]"
    assert len(ax.collections) > 2  # region bars per depth and the message lines
    out = tmp_path / "t.png"
    ax.figure.savefig(out, dpi=80)
    _png_is_drawn(out)


def test_side_by_side_aligned_at_a_record(tmp_path):
    sim = simulate("stencil", ranks=3, iterations=3)
    fig = plot_side_by_side(sim.measured, sim.truth, align=(1, 10),
                            titles=("measured", "truth"))
    top, bottom = fig.axes[:2]
    assert [len(a.get_yticks()) for a in (top, bottom)] == [3, 3]
    assert top.get_title(loc="left") == "measured" and bottom.get_title(loc="left") == "truth"
    assert top.get_xlim() == bottom.get_xlim()  # one time axis
    lo, hi = top.get_xlim()
    assert lo < 0 < hi  # record 10 of location 1 is at 0
    assert "record 10 of location 1" in bottom.get_xlabel()
    assert record_time(sim.measured, 1, 10) > record_time(sim.truth, 1, 10)
    out = tmp_path / "sbs.png"
    fig.savefig(out, dpi=70)
    _png_is_drawn(out)


def test_colors_mark_mpi_red_and_window_clips():
    t = read_trace(CASES / "collectives.trace")
    colors = region_colors(t)
    assert colors["MPI_Barrier"] == colors["MPI_Bcast"] == "#d62728"
    assert colors["main"] != "#d62728"
    ax = plot_timeline(t, window=(4e-6, 5.1e-6), legend=False)
    assert ax.get_xlabel() == "time [µs]" and ax.get_xlim() == pytest.approx((4.0, 5.1))
    assert ax.get_legend() is None


def test_missing_matplotlib_gives_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(ImportError, match=r"compensate\[plot\]"):
        plot_timeline(read_trace(CASES / "p2p.trace"))


def test_compare_notebook_runs_top_to_bottom(monkeypatch, tmp_path):
    """notebooks/compare.ipynb is committed without outputs, and its code cells run in
    order in one namespace (in-process: IPython magics like `%matplotlib inline` are
    dropped, Figures are not displayed). No Jupyter kernel is needed."""
    import json

    path = Path(__file__).resolve().parent.parent / "notebooks" / "compare.ipynb"
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells and all(c["outputs"] == [] and c["execution_count"] is None for c in cells)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ns: dict = {"__name__": "__notebook__"}
    for k, c in enumerate(cells):
        src = "".join(c["source"])
        code = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("%"))
        exec(compile(code, f"compare.ipynb[cell {k}]", "exec"), ns)  # noqa: S102
    cmp = ns["cmp"]
    assert cmp.total_diff > 0 and cmp.percent("execution") > 40
    fig = ns["fig"]
    assert len(fig.axes) >= 2  # the side-by-side timeline was drawn
    assert len(list(tmp_path.rglob("*.json"))) == 2  # the Perfetto exports
