"""Timelines (compensate/analysis/timeline.py): render to PNG with the Agg backend, one row
per location, side-by-side alignment, and a clear error without matplotlib."""

import builtins
from pathlib import Path

import pytest

from compensate.formats import read_trace
from compensate.simulate import simulate

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from compensate.analysis.timeline import (  # noqa: E402
    plot_side_by_side,
    plot_timeline,
    record_time,
    region_colors,
)

CASES = Path(__file__).resolve().parent.parent / "cases_analysis"


def _png_is_drawn(path: Path) -> None:
    import matplotlib.image as mpimg

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    img = mpimg.imread(path)
    assert img.shape[0] > 100 and img.shape[1] > 300
    assert img[..., :3].std() > 0.05  # not a blank canvas


def _bar_rows(ax) -> list[int]:
    """The rows (y positions) that region bars were drawn in, from the figure's data."""
    from matplotlib.collections import PolyCollection

    rows = set()
    for coll in ax.collections:
        if isinstance(coll, PolyCollection):
            for path in coll.get_paths():
                y = path.vertices[:, 1]
                rows.add(round(float(y.min() + y.max()) / 2, 6))
    return sorted(rows)


def _png_bands(path: Path, ax) -> int:
    """How many horizontal bands of bars the saved PNG shows inside ``ax``: pixel rows
    that are mostly not white, counted as runs (the figure must be saved at its own dpi
    and without bbox_inches, so that display coordinates are pixels)."""
    import matplotlib.image as mpimg

    img = mpimg.imread(path)[..., :3]
    height = img.shape[0]
    box = ax.get_window_extent()
    inner = img[height - int(box.y1) + 2: height - int(box.y0) - 2,
                int(box.x0) + 2: int(box.x1) - 2]
    filled = (inner < 0.9).any(axis=2).mean(axis=1) > 0.5
    return int(filled[0]) + int(((~filled[:-1]) & filled[1:]).sum())


@pytest.mark.parametrize("ranks", [2, 5])
def test_timeline_png_has_one_row_per_location(ranks, tmp_path):
    """Always runs (simulated trace): the PNG is non-empty and shows one band of bars
    per location; the figure's data has one tick and one bar row per location."""
    trace = simulate("montecarlo", ranks=ranks, iterations=2).measured
    ax = plot_timeline(trace)
    assert len(ax.get_yticks()) == len(trace.events) == ranks
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"MPI Rank {r}" for r in range(ranks)]
    assert _bar_rows(ax) == list(range(ranks))
    out = tmp_path / "timeline.png"
    ax.figure.savefig(out, dpi=ax.figure.dpi)
    _png_is_drawn(out)
    assert _png_bands(out, ax) == ranks


def test_timeline_png_one_row_per_location(real_archive, tmp_path):
    trace = read_trace(real_archive)
    ax = plot_timeline(trace, window=(0.195, 0.1997))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(ax.get_yticks()) == len(trace.events) == 2
    assert labels == ["MPI Rank 0 / Master thread", "MPI Rank 1 / Master thread"]
    assert ax.get_xlabel() == "time [ms]"
    assert len(ax.collections) > 2  # region bars per depth and the message lines
    assert _bar_rows(ax) == [0, 1]
    out = tmp_path / "t.png"
    ax.figure.savefig(out, dpi=ax.figure.dpi)
    _png_is_drawn(out)
    assert _png_bands(out, ax) == 2


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
    assert _bar_rows(top) == _bar_rows(bottom) == [0, 1, 2]
    out = tmp_path / "sbs.png"
    fig.savefig(out, dpi=fig.dpi)
    _png_is_drawn(out)
    assert [_png_bands(out, ax) for ax in (top, bottom)] == [3, 3]


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
