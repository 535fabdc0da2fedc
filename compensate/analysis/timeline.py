"""Vampir-like timelines with matplotlib (an optional dependency: ``pip install
'compensate[plot]'``).

* :func:`plot_timeline`: one row per location, each region call a bar coloured by
  region name (MPI calls red, nested calls drawn over their parents so the innermost
  call shows), buffer flushes black, messages as lines from send to receive,
  collectives as a marker on every member's exit joined by a dashed line.
* :func:`plot_side_by_side`: the measured and the approximated trace stacked, on
  one time axis, aligned at a chosen record (e.g. the k-th record of a location),
  like the paper's Figure 3.

matplotlib is imported inside the functions, so ``import compensate.analysis.timeline`` works
without it and only drawing raises a clear ImportError. Figures are created with
``matplotlib.figure.Figure`` (no pyplot state, any backend); save them with
``fig.savefig("t.png")``; a notebook shows a returned figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compensate.analysis.calls import calls_of, is_mpi, location_label, region_name, trace_origin
from compensate.matching import Matching, match
from compensate.model import BUFFER_FLUSH, COLLECTIVE_OP_NAMES, Trace

MPI_COLOR = "#d62728"
FLUSH_COLOR = "#222222"
MESSAGE_COLOR = "#000000"
COLLECTIVE_COLOR = "#7b1fa2"
# qualitative colours for user regions (no reds: red means MPI)
_PALETTE = ("#1f77b4", "#2ca02c", "#ff7f0e", "#17becf", "#bcbd22", "#8c564b", "#aec7e8",
            "#98df8a", "#ffbb78", "#9edae5", "#dbdb8d", "#c49c94", "#7f7f7f", "#c7c7c7",
            "#9467bd", "#c5b0d5", "#e377c2", "#f7b6d2")


def _require_matplotlib() -> Any:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("compensate.analysis.timeline needs matplotlib: "
                          "pip install 'compensate[plot]' (or pip install matplotlib)") from exc
    return Figure


def region_colors(*traces: Trace) -> dict[str, str]:
    """A colour per region name used in ``traces``: MPI red, others from a palette in
    name order (so the same region has the same colour in every panel)."""
    names: set[str] = set()
    for tr in traces:
        for ev in tr.events.values():
            for r in np.unique(ev.region[ev.region >= 0]):
                names.add(region_name(tr.definitions, r))
    colors: dict[str, str] = {}
    user = sorted(n for n in names if not is_mpi(n))
    for k, n in enumerate(user):
        colors[n] = _PALETTE[k % len(_PALETTE)]
    for n in names:
        if is_mpi(n):
            colors[n] = MPI_COLOR
    return colors


def time_unit(seconds: float) -> tuple[str, float]:
    """(label, scale) of a readable unit for an axis ``seconds`` long."""
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def record_time(trace: Trace, loc: int, index: int) -> float:
    """Seconds from the trace origin to record ``index`` of location ``loc`` (negative
    indices count from the end)."""
    ev = trace.events[loc]
    return (int(ev.time[index]) - trace_origin(trace)) / trace.definitions.timer_resolution


def plot_timeline(trace: Trace, *, ax: Any = None, window: tuple[float, float] | None = None,
                  shift: float = 0.0, unit: tuple[str, float] | None = None,
                  locations: Sequence[int] | None = None, messages: bool = True,
                  collectives: bool = True, colors: dict[str, str] | None = None,
                  legend: bool = True, title: str | None = None,
                  matching: Matching | None = None) -> Any:
    """Draw the timeline of ``trace`` into ``ax`` (a new figure if None); return ``ax``.

    Times on the x axis are seconds from the trace's earliest record minus ``shift``
    (so an alignment point can sit at 0), scaled to ``unit`` (default: chosen from
    the window). ``window`` = (start, end) in the same shifted seconds; calls,
    messages and collectives outside it are not drawn. ``locations`` selects and
    orders the rows (default: all, by id; the first row is at the top).
    """
    Figure = _require_matplotlib()
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    defs = trace.definitions
    res = float(defs.timer_resolution)
    origin = trace_origin(trace)
    locs = list(locations) if locations is not None else sorted(trace.events)
    row = {loc: k for k, loc in enumerate(locs)}
    colors = colors if colors is not None else region_colors(trace)
    if window is None:
        ends = [int(trace.events[loc].time[-1]) for loc in locs if len(trace.events[loc])]
        window = (-shift, ((max(ends) - origin) / res if ends else 0.0) - shift)
    w0, w1 = float(window[0]), float(window[1])
    if w1 <= w0:  # an empty or one-instant trace: show one microsecond
        w1 = w0 + 1e-6
    unit = unit or time_unit(max(w1 - w0, 0.0))
    uname, k = unit
    if ax is None:
        fig = Figure(figsize=(11, 0.5 + 0.45 * max(len(locs), 2)), layout="constrained")
        ax = fig.add_subplot()

    def x(ticks: np.ndarray | int) -> np.ndarray:
        return ((np.asarray(ticks, dtype=np.int64) - origin) / res - shift)

    calls = calls_of(trace)
    visible_time: dict[str, float] = {}
    for loc in locs:
        c = calls[loc]
        y = row[loc]
        if len(c):
            x0, x1 = x(c.t0), x(c.t1)
            keep = (x1 >= w0) & (x0 <= w1)
            names = {int(r): region_name(defs, r) for r in np.unique(c.region)}
            for depth in np.unique(c.depth[keep]):
                sel = np.flatnonzero(keep & (c.depth == depth))
                a, b = np.clip(x0[sel], w0, w1), np.clip(x1[sel], w0, w1)
                cols = [colors.get(names[int(r)], "#999999") for r in c.region[sel]]
                ax.broken_barh(list(zip((a * k).tolist(), ((b - a) * k).tolist(), strict=True)),
                               (y - 0.4, 0.8), facecolors=cols, edgecolor="none",
                               zorder=1 + int(depth))
                for r, dur in zip(c.region[sel].tolist(), (b - a).tolist(), strict=True):
                    visible_time[names[r]] = visible_time.get(names[r], 0.0) + dur
        ev = trace.events[loc]
        fl = np.flatnonzero(ev.kind == BUFFER_FLUSH)
        if fl.size:
            a, b = np.clip(x(ev.time[fl]), w0, w1), np.clip(x(ev.size[fl]), w0, w1)
            ok = b > a
            if ok.any():
                ax.broken_barh(list(zip((a[ok] * k).tolist(), ((b - a)[ok] * k).tolist(),
                                        strict=True)), (y - 0.4, 0.8),
                               facecolors=FLUSH_COLOR, zorder=100)
    handles = []
    matching = matching if matching is not None or not (messages or collectives) \
        else match(trace)
    if messages and matching is not None and matching.messages:
        segs = []
        for m in matching.messages:
            if m.send_loc not in row or m.recv_loc not in row:
                continue
            xs = float(x(trace.events[m.send_loc].time[m.send_idx]))
            xr = float(x(trace.events[m.recv_loc].time[m.recv_idx]))
            if xr < w0 or xs > w1:
                continue
            segs.append(((xs * k, row[m.send_loc]), (xr * k, row[m.recv_loc])))
        if segs:
            ax.add_collection(LineCollection(segs, colors=MESSAGE_COLOR, linewidths=0.8,
                                             zorder=200))
            handles.append(Line2D([], [], color=MESSAGE_COLOR, lw=0.8, label="message"))
    if collectives and matching is not None and matching.instances:
        drawn = False
        for ins in matching.instances:
            pts = sorted((row[loc], float(x(trace.events[loc].time[e])))
                         for loc, e in zip(ins.locs, ins.end_idx, strict=True) if loc in row)
            if not pts or all(p[1] < w0 or p[1] > w1 for p in pts):
                continue
            ys = [p[0] for p in pts]
            xs = [p[1] * k for p in pts]
            ax.plot(xs, ys, color=COLLECTIVE_COLOR, lw=0.9, ls="--", marker="v", ms=4,
                    zorder=210)
            drawn = True
        if drawn:
            ops = sorted({COLLECTIVE_OP_NAMES.get(int(i.op), "?") for i in matching.instances})
            label = "collective" + (f" ({', '.join(ops[:3])})" if ops else "")
            handles.append(Line2D([], [], color=COLLECTIVE_COLOR, lw=0.9, ls="--", marker="v",
                                  ms=4, label=label))
    ax.set_xlim(w0 * k, w1 * k)
    ax.set_ylim(len(locs) - 0.5, -0.5)  # first location on top
    ax.set_yticks(range(len(locs)))
    ax.set_yticklabels([location_label(defs, loc) for loc in locs])
    ax.set_xlabel(f"time [{uname}]")
    ax.grid(axis="x", color="#dddddd", lw=0.5, zorder=0)
    ax.set_axisbelow(True)
    if title:
        ax.set_title(title, loc="left", fontsize="medium")
    if legend:
        top = sorted(visible_time, key=lambda n: -visible_time[n])
        user = [n for n in top if not is_mpi(n)][:8]
        patches = [Patch(color=colors.get(n, "#999999"), label=n) for n in user]
        if any(is_mpi(n) for n in top):
            patches.append(Patch(color=MPI_COLOR, label="MPI"))
        ax.legend(handles=patches + handles, loc="upper left", bbox_to_anchor=(1.005, 1.0),
                  fontsize="small", frameon=False)
    return ax


def plot_side_by_side(measured: Trace, approximated: Trace, *,
                      align: tuple[int, int] | None = None,
                      window: tuple[float, float] | None = None,
                      titles: tuple[str, str] = ("measured", "approximated"),
                      figsize: tuple[float, float] | None = None, **kwargs: Any) -> Any:
    """Two timelines stacked on one time axis; return the figure.

    ``align=(loc, k)``: in both traces, time 0 is record ``k`` of location ``loc``
    (the same record, since compensation keeps every record); default: each trace's
    earliest record. ``window``: (start, end) seconds relative to that point;
    default: everything of both. Other keyword arguments go to :func:`plot_timeline`.
    """
    Figure = _require_matplotlib()
    shifts = (0.0, 0.0)
    if align is not None:
        loc, k = align
        shifts = (record_time(measured, loc, k), record_time(approximated, loc, k))
    if window is None:
        lo, hi = [], []
        for tr, s in zip((measured, approximated), shifts, strict=True):
            res = tr.definitions.timer_resolution
            o = trace_origin(tr)
            ends = [int(ev.time[-1]) for ev in tr.events.values() if len(ev)]
            lo.append(-s)
            hi.append((max(ends) - o) / res - s if ends else -s)
        window = (min(lo), max(hi))
    unit = time_unit(window[1] - window[0])
    colors = region_colors(measured, approximated)
    n = max(len(measured.events), len(approximated.events))
    fig = Figure(figsize=figsize or (11, 1.2 + 0.9 * max(n, 2)), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    for ax, tr, s, t in zip(axes, (measured, approximated), shifts, titles, strict=True):
        plot_timeline(tr, ax=ax, window=window, shift=s, unit=unit, colors=colors, title=t,
                      **kwargs)
    if align is not None:
        for ax in axes:
            ax.axvline(0.0, color="#555555", lw=0.8, ls=":", zorder=300)
        axes[1].set_xlabel(f"time [{unit[0]}] (0 = record {align[1]} of location {align[0]})")
    axes[0].set_xlabel("")
    return fig


__all__ = ["plot_side_by_side", "plot_timeline", "record_time", "region_colors", "time_unit"]
