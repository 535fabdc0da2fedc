"""Fingerprints of what compensate writes, taken before the package layout changed.

``python -m tests.fingerprint_gen`` (run from the project root) recomputes every
fingerprint and rewrites ``tests/data/fingerprints.json``; ``tests/
test_fingerprints.py`` recomputes them and compares. A fingerprint is a SHA-256
over the bytes the ``compensate`` command wrote (the ``.trace`` text, which holds
every record and time) and its ``--summary`` without the timings, for:

* every hand-computed case under ``tests/cases`` and ``tests/cases_analysis``,
  both bounds (and both collective exits);
* every simulated program (the simulator's truth and measured traces, and the
  compensated one under lower, upper and fitted);
* the real Score-P archives bundled under ``tests/data/traces`` at 100 ns and
  3 µs per record (a refusal is fingerprinted by its exit code and message);
* OTF2 output (the ``.def`` and ``.evt`` files) of the simulated programs and the
  real archives under the lower bound;
* ``compensate report --json`` and ``compensate export`` of the cases, the real
  archives and each simulated program (measured against its approximation).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
FINGERPRINTS = DATA / "fingerprints.json"
CASE_DIRS = [HERE / "cases", HERE / "cases_analysis"]
REAL = sorted(p / "traces.otf2" for p in (DATA / "traces").iterdir()
              if (p / "traces.otf2").exists()) if (DATA / "traces").exists() else []
PROGRAM_KW = {"ranks": 4, "seed": 3, "iterations": 3}
SUMMARY_VOLATILE = {"timings", "seconds", "input", "output", "summary", "platform_file"}


def _cli_main():
    from compensate.cli import main
    return main


def _simulate(name: str, **kw):
    from compensate.simulate import simulate
    return simulate(name, **kw)


def _programs() -> list[str]:
    from compensate.simulate.programs import PROGRAMS
    return sorted(PROGRAMS)


def _write_trace(trace, path: Path) -> None:
    from compensate.formats import write_trace
    write_trace(trace, str(path))


def _write_platform(platform, path: Path) -> None:
    path.write_text(json.dumps(platform.to_dict()))


#: keys the summary gained after the fingerprints were taken, and which they do not
#: cover: the fitted model's plausibility (``fit.rejected`` ...) and its count of
#: uses overridden by [lower, upper]; the dependencies a tracer did not record
#: (``dependencies.unrecorded_calls``, ``collective_begins_without_end``), the
#: point-to-point records that carry no message (``proc_null_records``, ...) and the
#: Pthread locks left local (``dependencies.threads.local_locks``,
#: :data:`THREADS_ADDED`); the measured span with the clocks aligned
#: (``clock_alignment.aligned_span_s``); every key they did cover is still hashed
SUMMARY_ADDED = {"fit": {"rejected", "rejected_model", "quality", "overridden"},
                 "clock_alignment": {"aligned_span_s"},
                 "p2p_cases": {"m2_fitted_overridden"},
                 "dependencies": {"unrecorded_calls", "collective_begins_without_end",
                                  "proc_null_records", "unidentified_receives",
                                  "receives_left_unmatched", "receives_past_a_gap"}}
THREADS_ADDED = {"local_locks"}


def _stable(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if k not in SUMMARY_VOLATILE}
    for key, added in SUMMARY_ADDED.items():
        if isinstance(out.get(key), dict):
            out[key] = {k: v for k, v in out[key].items() if k not in added}
    threads = out.get("dependencies", {}).get("threads")
    if isinstance(threads, dict):
        out["dependencies"]["threads"] = {k: v for k, v in threads.items()
                                          if k not in THREADS_ADDED}
    return out


def _output_bytes(out: Path) -> bytes:
    """A ``.trace`` file's bytes, or an OTF2 archive's definition and event files
    (the anchor file holds the creation time, so it differs from run to run)."""
    if out.suffix == ".trace":
        return out.read_bytes()
    files = sorted(p for p in out.parent.rglob("*") if p.suffix in (".def", ".evt"))
    return b"".join(p.relative_to(out.parent).as_posix().encode() + p.read_bytes()
                    for p in files)


def run_cli(args: list[str], tmp: Path, otf2: bool = False) -> str:
    """Run the command in-process; hash its exit code, output and summary."""
    out = tmp / "otf2out" / "traces.otf2" if otf2 else tmp / "out.trace"
    summ = tmp / "summary.json"
    summ.unlink(missing_ok=True)
    if otf2:
        shutil.rmtree(out.parent, ignore_errors=True)
    else:
        out.unlink(missing_ok=True)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = _cli_main()([*args, str(out), "--summary", str(summ), "--quiet", "--force"])
    h = hashlib.sha256(f"exit {code}\n".encode())
    if code == 0:
        h.update(_output_bytes(out))
        # paths in the summary (the first mis-nested record's file) are absolute: hash
        # them relative to the checkout, so that the fingerprint does not depend on it
        h.update(json.dumps(_stable(json.loads(summ.read_text())), sort_keys=True)
                 .replace(str(HERE.parent) + "/", "").encode())
    else:
        # the message names the input path: keep only what follows it
        msg = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""
        h.update(msg.split(str(tmp))[-1].split("tests/")[-1].encode())
    return h.hexdigest()[:16]


def run_analysis(trace: Path, tmp: Path, compared: Path | None = None) -> str:
    """``compensate report --json`` (one trace, or measured vs approximated) and
    ``compensate export``: hash both outputs and the printed report."""
    rep, exp = tmp / "report.json", tmp / "export.json"
    for p in (rep, exp):
        p.unlink(missing_ok=True)
    h = hashlib.sha256()
    text = io.StringIO()
    second = [str(compared)] if compared else []
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(text):
        codes = (_cli_main()(["report", str(trace), *second, "--json", str(rep)]),
                 _cli_main()(["export", str(trace), str(exp), "--force"]))
    h.update(repr(codes).encode())
    for p in (rep, exp):
        if p.exists():
            h.update(p.read_bytes().replace(str(tmp).encode(), b"").replace(
                str(HERE).encode(), b""))
    h.update(text.getvalue().replace(str(tmp), "").replace(str(HERE), "").encode())
    return h.hexdigest()[:16]


PARTS = ("cases", "sims", "real")


def compute(parts: tuple[str, ...] = PARTS,
            archives: list[str] | None = None) -> dict[str, str]:
    """Every fingerprint of the inputs in ``parts`` (the hand-computed cases, the
    simulated programs, the real archives; of these only the ones whose directory
    is named in ``archives``, if given); the parts are independent, so that they
    can be computed in separate processes at once."""
    real = [a for a in REAL if archives is None or a.parent.name in archives]
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for cdir in CASE_DIRS if "cases" in parts else []:
            for case in sorted(cdir.glob("*.trace")):
                platform = None
                for line in case.read_text().splitlines():
                    if line.startswith("# platform:"):
                        platform = line.split(":", 1)[1].strip()
                pargs = ["--overhead", "100ns"]
                if platform:
                    pf = tmp / "case_platform.json"
                    pf.write_text(platform)
                    pargs = ["--platform", str(pf)]
                for bound, cx in (("lower", "uniform"), ("upper", "per-process")):
                    key = f"case:{cdir.name}/{case.stem}:{bound}:{cx}"
                    out[key] = run_cli([str(case), *pargs, "--bound", bound,
                                        "--collective-exit", cx], tmp)
                out[f"analysis:{cdir.name}/{case.stem}"] = run_analysis(case, tmp)
        for name in _programs() if "sims" in parts else []:
            sim = _simulate(name, **PROGRAM_KW)
            for which in ("truth", "measured"):
                p = tmp / f"{which}.trace"
                _write_trace(getattr(sim, which), p)
                out[f"sim:{name}:{which}"] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            pf = tmp / "sim_platform.json"
            _write_platform(sim.platform, pf)
            measured = tmp / "measured.trace"
            for bound in ("lower", "upper", "fitted"):
                out[f"sim:{name}:{bound}"] = run_cli(
                    [str(measured), "--platform", str(pf), "--bound", bound], tmp)
            out[f"sim:{name}:lower:otf2"] = run_cli(
                [str(measured), "--platform", str(pf), "--bound", "lower"], tmp, otf2=True)
            out[f"analysis:sim:{name}"] = run_analysis(
                measured, tmp, tmp / "otf2out" / "traces.otf2")
        for anchor in real if "real" in parts else []:
            for ovh in ("100ns", "3us"):
                for bound in ("lower", "upper"):
                    out[f"real:{anchor.parent.name}:{ovh}:{bound}"] = run_cli(
                        [str(anchor), "--overhead", ovh, "--bound", bound], tmp)
                out[f"real:{anchor.parent.name}:{ovh}:lower:otf2"] = run_cli(
                    [str(anchor), "--overhead", ovh, "--bound", "lower"], tmp, otf2=True)
            out[f"analysis:real:{anchor.parent.name}"] = run_analysis(anchor, tmp)
    return out


if __name__ == "__main__":
    prints = compute()
    FINGERPRINTS.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    print(f"{len(prints)} fingerprints written to {FINGERPRINTS}", file=sys.stderr)
