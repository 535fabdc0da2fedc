"""Plain-text tables of a calibration, from the platform-file dict.

Working from the dict (not the measurement objects) means the same report can
be printed right after a run, by the benchmark script, or for any file later.
"""

from __future__ import annotations

from calibration.units import fmt_bytes, fmt_seconds


def _spread(entry: dict) -> str:
    q1, q3 = entry.get("iqr", [None, None])
    lo, hi = entry.get("ci95", [None, None])
    return (f"IQR {fmt_seconds(q1)} .. {fmt_seconds(q3)}, "
            f"95% CI {fmt_seconds(lo)} .. {fmt_seconds(hi)}, n={entry.get('n', '?')}")


def format_timer(timer: dict) -> str:
    """One line: clock, read cost with spread, declared and observed resolution."""
    return (f"timer: {timer['clock']}: one read {fmt_seconds(timer['read_seconds'])} "
            f"(IQR {fmt_seconds(timer['read_iqr'][0])} .. {fmt_seconds(timer['read_iqr'][1])}, "
            f"{timer['read_samples']} pairs; subtracted from every interval), "
            f"resolution {fmt_seconds(timer['resolution_seconds'])} declared, smallest "
            f"observed step {fmt_seconds(timer['observed_min_step_seconds'])}")


def format_overhead(probe: dict) -> list[str]:
    """Per-kind writer-probe table plus the pooled event_overhead."""
    procs = probe.get("processes", 1)
    lines = [f"per-record overhead, writer probe ({probe['method']}; "
             f"{probe['records_per_sample']:,} records x {probe['samples_per_kind']} samples "
             f"per kind from {procs} process{'es' if procs != 1 else ''}, harness "
             f"{fmt_seconds(probe['harness_seconds_per_record'])}/record "
             f"subtracted, {probe['flushes_during_timing']} flushes while timing; CI: "
             f"{probe.get('ci', '95 % bootstrap interval of the median')}):",
             f"  {'kind':<20} {'median':>10}   spread"]
    for kind, s in probe["kinds"].items():
        lines.append(f"  {kind:<20} {fmt_seconds(s['seconds']):>10}   {_spread(s)}")
    eo = probe["event_overhead"]
    lines.append(f"  {'event_overhead':<20} {fmt_seconds(eo['seconds']):>10}   "
                 f"{_spread(eo)} (pooled {'+'.join(probe['event_overhead_from'])})")
    return lines


def format_record_cost(calib: dict) -> list[str]:
    """Per-kind record-path table of the project's mpi4py tracer."""
    costs = calib["seconds_per_record"]
    lines = [f"per-record overhead of the mpi4py tracer ({calib['repeats']} samples of "
             f"{calib['records_per_sample']:,} records per kind; value: "
             f"{calib['statistic']}, Enter/Leave {calib['function_statistic']} of the "
             f"decorated call's dilation):",
             f"  {'kind':<20} {'p10':>10} {'median':>10} {'IQR':>10}"]
    for kind, c in costs.items():
        lines.append(f"  {kind:<20} {fmt_seconds(c['p10']):>10} {fmt_seconds(c['median']):>10} "
                     f"{fmt_seconds(c['iqr']):>10}")
    return lines


def format_tracer_cost(data: dict) -> list[str]:
    """The per-record overhead part of a report: which tracer, and its table."""
    head = (f"tracer: {data.get('tracer', 'not named')} (event_overhead "
            f"{fmt_seconds(data['event_overhead'])})")
    if "writer_probe" in data:
        return [head, *format_overhead(data["writer_probe"])]
    if "calibration" in data:
        return [head, *format_record_cost(data["calibration"])]
    if "external_probe" in data:
        return [head, format_external(data["external_probe"])]
    return [head]


def format_copy(entries: list[dict], calib: dict) -> list[str]:
    """Copy-cost table: size, median, IQR, CI, per-byte cost, fresh median."""
    lines = [f"copy cost ({calib['method']}; table = {calib['table']} buffers, "
             f"{len(entries)} sizes, call overhead "
             f"{fmt_seconds(calib['call_overhead_seconds'])} subtracted):",
             f"  {'bytes':>10} {'size':>9} {'median':>10} {'IQR':>23} {'95% CI':>23} "
             f"{'n':>4} {'GB/s':>7} {'other':>10}"]
    other_key = "fresh" if calib["table"] == "warm" else "warm"
    for e in entries:
        q1, q3 = e["iqr"]
        lo, hi = e["ci95"]
        rate = e["bytes"] / e["seconds"] / 1e9 if e["seconds"] > 0 else float("nan")
        other = fmt_seconds(e[other_key]["seconds"]) if other_key in e else "-"
        lines.append(f"  {e['bytes']:>10} {fmt_bytes(e['bytes']):>9} "
                     f"{fmt_seconds(e['seconds']):>10} "
                     f"{fmt_seconds(q1):>10} .. {fmt_seconds(q3):>10} "
                     f"{fmt_seconds(lo):>10} .. {fmt_seconds(hi):>10} "
                     f"{e['n']:>4} {rate:>7.2f} {other:>10}")
    lines.append(f"  ('other' = {other_key} buffers; GB/s = bytes / median)")
    return lines


def format_steps(calib: dict) -> list[str]:
    """Detected cache steps, non-monotone neighbours and unresolved sizes."""
    lines = []
    steps = calib.get("steps", [])
    if not steps:
        lines.append("cache steps: none detected")
    for st in steps:
        label = st["cache"] or "no cache level matches (memcpy strategy change?)"
        lines.append(f"cache step: {fmt_bytes(st['from_bytes'])} -> {fmt_bytes(st['to_bytes'])}: "
                     f"per-byte cost x{st['ratio']:.2f} "
                     f"({st['per_byte_from'] * 1e12:.1f} -> {st['per_byte_to'] * 1e12:.1f} ps/B); "
                     f"{label}")
    for nm in calib.get("non_monotone", []):
        lines.append(f"note: copying {fmt_bytes(nm['to_bytes'])} ({fmt_seconds(nm['to_seconds'])}) "
                     f"was faster than {fmt_bytes(nm['from_bytes'])} "
                     f"({fmt_seconds(nm['from_seconds'])}) beyond the spread")
    if calib.get("unresolved"):
        sizes = ", ".join(f"{fmt_bytes(u['bytes'])} ({fmt_seconds(u['seconds'])})"
                          for u in calib["unresolved"])
        lines.append(f"note: not resolved (median below 10 ns or 95% CI wider than +-25 %), "
                     f"left out of copy_time: {sizes}; below the table the reader holds the "
                     f"smallest listed size's per-byte cost")
    return lines


def format_run(data: dict, path: str | None = None) -> str:
    """The whole report of a ``calibrate run`` platform file."""
    m = data.get("machine", {})
    head = (f"calibrate: {data.get('mode', '?')} run of {data.get('duration_seconds', 0):.1f} s "
            f"on {m.get('hostname', '?')} ({m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} "
            f"CPUs), {data.get('date', '?')}")
    if path:
        head += f"; wrote {path}"
    lines = [head, format_timer(data["timer"]), *format_tracer_cost(data),
             *format_copy(data["copy_time"], data["copy_calibration"]),
             *format_steps(data["copy_calibration"])]
    return "\n".join(lines)


def format_external(result: dict) -> str:
    """The external probe's fits and the overhead per record."""
    inst, base = result["instrumented"], result["baseline_fit"]
    lines = [f"{'n':>12} {'instrumented':>14} {'baseline':>14}   (median seconds per run)"]
    for n, t in inst["median_seconds_by_n"].items():
        b = base["median_seconds_by_n"].get(n)
        lines.append(f"{int(n):>12,} {t:>14.6f} {b if b is None else format(b, '14.6f'):>14}")
    lines.append(f"slope instrumented {fmt_seconds(inst['slope_seconds_per_iteration'])}/iteration "
                 f"+- {fmt_seconds(inst['slope_stderr'])} (r = {inst['r']:.4f}), baseline "
                 f"{fmt_seconds(base['slope_seconds_per_iteration'])}/iteration "
                 f"+- {fmt_seconds(base['slope_stderr'])}")
    lo, hi = result["ci95"]
    lines.append(f"overhead per record: {fmt_seconds(result['overhead_seconds'])} "
                 f"+- {fmt_seconds(result['stderr_seconds'])} (standard error; 95% CI "
                 f"{fmt_seconds(lo)} .. {fmt_seconds(hi)}; K = {result['events_per_iteration']:g} "
                 f"records per iteration, {result['timing']} timing)")
    return "\n".join(lines)
