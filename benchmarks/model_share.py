"""How much of a compensated span's shortening is tracer overhead, and how much the
models' (docs/compensation.md, "Shorter than the overhead explains").

For every bundled archive (``tests/data/eztrace/*``, ``tests/data/traces/*``, the
Monte-Carlo example) and any ``--archives``, compensates in memory under the upper
bound (or the ``--bounds`` given) with uniform and with per-process collective exits,
with the overhead ``--overhead`` (default ``estimate``: from the trace), and
prints per run: how much shorter the span got (against the measured span, clocks
aligned where they were), the tracer overhead taken out of all records
(the summary's ``overhead_removed_s``), their ratio, the shortening as a share of the span,
and whether the command's note would be printed (``compensate.cli.compensate
.model_note``). With per-process exits the upper bound's ratio is at most 1.

Usage::

    python benchmarks/model_share.py [--overhead estimate] [--bounds upper]
                                     [--archives A.otf2,...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compensate import api  # noqa: E402
from compensate.cli.compensate import model_note, span_reference  # noqa: E402
from compensate.model import TraceError  # noqa: E402


def bundled() -> list[Path]:
    """The bundled archives' anchor files (not the refused ones)."""
    found = sorted(p for p in (ROOT / "tests" / "data" / "eztrace").glob("*/*.otf2")
                   if p.parent.name != "refused")
    found += sorted((ROOT / "tests" / "data" / "traces").glob("*/traces.otf2"))
    return [*found, ROOT / "examples" / "montecarlo" / "traces.otf2"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overhead", default="estimate")
    ap.add_argument("--bounds", default="upper", help="comma-separated bounds")
    ap.add_argument("--archives", default="", help="more OTF2 archives (anchor files)")
    a = ap.parse_args()
    paths = bundled() + [Path(x) for x in a.archives.split(",") if x]
    print(f"{'archive':<28} {'bound':<6} {'exits':<12} {'shorter':>11} {'overhead':>11} "
          f"{'ratio':>8} {'% span':>7}  note")
    for path in paths:
        try:
            trace = api.read(path)
        except TraceError as exc:
            print(f"{path.parent.name:<28} not read: {exc}")
            continue
        for bound in a.bounds.split(","):
            for exits in ("uniform", "per-process"):
                r = api.compensate(trace, bound=bound, overhead=a.overhead,
                                   collective_exit=exits)
                s = r.summary
                removed = s["overhead_removed_s"]
                ref = span_reference(s)
                shorter = ref - s["approximated_span_s"]
                ratio = shorter / removed if removed > 0 else float("nan")
                note = "yes" if model_note(s) else "-"
                print(f"{path.parent.name:<28} {bound:<6} {exits:<12} {shorter:>11.6f} "
                      f"{removed:>11.6f} {ratio:>8.2f} {100 * shorter / ref:>7.2f}  {note}")


if __name__ == "__main__":
    main()
