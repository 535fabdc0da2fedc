"""SIGINT and SIGTERM at any moment of a run (compensate.interrupt): exit 130 / 143,
exactly one line on stderr and no traceback, nothing at OUT (no partial archive, no
temporary file or directory beside it, no directory created for it), the input
unchanged, never exit 0.

The real command runs as a subprocess on a simulated trace (OTF2 and .trace, in and
out, streaming and ``--in-memory``). Most signals are placed with the documented
test hook ``COMPENSATE_TEST_INTERRUPT=SIG:POINT:N[:DELAY]`` (the N-th time the run
reaches POINT it signals itself, at once or DELAY seconds later from a timer
thread, which lands inside whatever runs next: the OTF2 library's callbacks, the
text parser, numpy); a few at real times spread over a first, timed run.
The runs go two or three at a time to keep the module under about 40 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compensate.formats import read_trace, write_trace
from compensate.interrupt import TEST_HOOK
from compensate.simulate import simulate

from ..conftest import ROOT

MESSAGE = "{prog}: interrupted by {sig}; nothing written"

# (name, input format, output format, extra options, hook)
HOOKED = [
    # OTF2 -> OTF2, streaming: while numpy, scipy, otf2 are imported, then every
    # phase of the segment pipeline
    ("o2o-imports", "otf2", "otf2", [], "TERM:import:1:0.15"),
    ("o2o-start", "otf2", "otf2", [], "INT:open:1"),
    ("o2o-anchor", "otf2", "otf2", [], "INT:otf2-anchor:1"),  # (the read buffers' check)
    ("o2o-defs", "otf2", "otf2", [], "TERM:otf2-open:1"),
    ("o2o-create", "otf2", "otf2", [], "INT:otf2-create:1"),
    ("o2o-chunk", "otf2", "otf2", [], "INT:read:1"),
    # (the OTF2 C path reads this trace in one call: the signal lands in its scan/read)
    ("o2o-in-callbacks", "otf2", "otf2", [], "TERM:otf2-read:1:0.002"),
    ("o2o-segment", "otf2", "otf2", [], "TERM:segment:1"),
    ("o2o-matching", "otf2", "otf2", [], "INT:segment:1:0.01"),
    ("o2o-compensated", "otf2", "otf2", [], "INT:compensate:1"),
    ("o2o-write", "otf2", "otf2", [], "INT:write:3"),
    ("o2o-otf2-write", "otf2", "otf2", [], "TERM:otf2-write:6:0.0005"),
    ("o2o-otf2-write-mem", "otf2", "otf2", ["--in-memory"], "INT:otf2-write:3"),
    ("o2o-finish", "otf2", "otf2", [], "INT:finish:1"),
    ("o2o-close", "otf2", "otf2", [], "TERM:otf2-close:1"),
    ("o2o-commit", "otf2", "otf2", ["--summary", "SUMMARY"], "INT:commit:1"),
    # --in-memory
    ("mem-batch", "otf2", "otf2", ["--in-memory"], "INT:otf2-read:1:0.001"),
    ("mem-matching", "otf2", "otf2", ["--in-memory"], "TERM:phase:1"),
    ("mem-compensate", "otf2", "otf2", ["--in-memory"], "INT:phase:1:0.01"),
    ("mem-verified", "otf2", "otf2", ["--in-memory"], "INT:verified:1"),
    ("mem-commit", "trace", "otf2", ["--in-memory"], "INT:commit:1"),
    # .trace in and out
    ("t2t-parse", "trace", "trace", [], "INT:read:1:0.02"),
    ("t2t-write", "trace", "trace", [], "TERM:write:4"),
    ("t2t-commit", "trace", "trace", ["--summary", "SUMMARY"], "TERM:commit:1"),
    ("t2o-mem-parse", "trace", "otf2", ["--in-memory"], "INT:read:1:0.03"),
    ("o2t-write", "otf2", "trace", [], "INT:write:5"),
]

# (name, input format, output format, extra options, fraction of the timed run)
TIMED = [
    ("timed-imports", "otf2", "otf2", [], 0.1),
    ("timed-a", "otf2", "otf2", [], 0.45),
    ("timed-c", "otf2", "otf2", ["--in-memory"], 0.6),
    ("timed-d", "trace", "trace", [], 0.65),
]


def _digest(path: Path) -> dict[str, str]:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {str(p.relative_to(path.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("interrupt-inputs")
    sim = simulate("stencil", ranks=8, iterations=500, overhead=1e-6, seed=0)  # ~58k records
    paths = {"otf2": base / "m" / "traces.otf2", "trace": base / "m.trace"}
    for path in paths.values():
        write_trace(sim.measured, path)
    platform = base / "platform.json"
    platform.write_text(json.dumps(sim.platform.to_dict()))
    before = {fmt: _digest(p.parent if fmt == "otf2" else p) for fmt, p in paths.items()}
    return paths, platform, before


def _command(inputs, work: Path, fmt_in: str, fmt_out: str, extra: list[str]):
    paths, platform, _ = inputs
    out = work / "sub" / ("traces.otf2" if fmt_out == "otf2" else "o.trace")
    extra = [str(work / "s.json") if a == "SUMMARY" else a for a in extra]
    argv = [sys.executable, "-m", "compensate", str(paths[fmt_in]), str(out),
            "--platform", str(platform), *extra]
    return argv, out


def _env(hook: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("COMPENSATE_DEBUG", None)
    env.pop(TEST_HOOK, None)
    if hook:
        env[TEST_HOOK] = hook
    return env


def _run_hooked(inputs, base: Path, case) -> dict:
    name, fmt_in, fmt_out, extra, hook = case
    work = base / name
    work.mkdir()
    argv, out = _command(inputs, work, fmt_in, fmt_out, extra)
    p = subprocess.run(argv, capture_output=True, text=True, env=_env(hook), timeout=120)
    return {"code": p.returncode, "stderr": p.stderr, "work": work, "out": out,
            "signal": hook.split(":")[0], "sent": True}


def _run_timed(inputs, base: Path, case, duration: float) -> dict:
    name, fmt_in, fmt_out, extra, fraction = case
    work = base / name
    work.mkdir()
    argv, out = _command(inputs, work, fmt_in, fmt_out, extra)
    sig = "TERM" if len(name) % 2 else "INT"
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(None))
    time.sleep(duration * fraction)
    sent = p.poll() is None
    if sent:
        p.send_signal(getattr(signal, "SIG" + sig))
    _, err = p.communicate(timeout=120)
    return {"code": p.returncode, "stderr": err, "work": work, "out": out, "signal": sig,
            "sent": sent}


@pytest.fixture(scope="module")
def results(inputs, tmp_path_factory):
    base = tmp_path_factory.mktemp("interrupt-runs")
    # a first, timed run (which must succeed) places the real-time signals
    argv, out = _command(inputs, base / "timing", "otf2", "otf2", [])
    t = time.monotonic()
    p = subprocess.run(argv + ["--quiet"], capture_output=True, text=True, env=_env(None),
                       timeout=120)
    duration = time.monotonic() - t
    assert p.returncode == 0 and out.exists(), p.stderr
    with ThreadPoolExecutor(max_workers=3) as pool:
        # the .trace output a timed run that is interrupted too late must equal
        reference = pool.submit(_run_reference, inputs, base / "reference", "trace")
        hooked = {c[0]: pool.submit(_run_hooked, inputs, base, c) for c in HOOKED}
        timed = {c[0]: pool.submit(_run_timed, inputs, base, c, duration) for c in TIMED}
        runs = {name: f.result() for name, f in {**hooked, **timed}.items()}
        runs["reference"] = {"otf2": out, "trace": reference.result()}
        return runs


def _run_reference(inputs, work: Path, fmt: str) -> Path:
    """An uninterrupted run of ``fmt`` to ``fmt``: its output."""
    argv, out = _command(inputs, work, fmt, fmt, [])
    p = subprocess.run(argv + ["--quiet"], capture_output=True, text=True, env=_env(None),
                       timeout=120)
    assert p.returncode == 0 and out.exists(), p.stderr
    return out


def _records(path: Path) -> dict[int, tuple[list[int], list[int]]]:
    """Every location's record times and kinds (the OTF2 anchor file holds the
    archive's creation time, so outputs are compared by what they hold)."""
    trace = read_trace(str(path))
    return {loc: (ev.time.tolist(), ev.kind.tolist()) for loc, ev in trace.events.items()}


def _assert_interrupted(r: dict, prog: str = "compensate") -> None:
    sig = "SIG" + r["signal"]
    assert r["code"] == 128 + getattr(signal, sig), r["stderr"]
    assert r["stderr"].splitlines() == [MESSAGE.format(prog=prog, sig=sig)], r["stderr"]
    assert "Traceback" not in r["stderr"]
    assert not r["out"].exists()
    # nothing beside OUT: no archive directory, no temporary file or directory, no
    # directory created for the output, no summary
    assert sorted(os.listdir(r["work"])) == []


@pytest.mark.parametrize("case", [c[0] for c in HOOKED])
def test_interrupt_at_a_point(results, case):
    _assert_interrupted(results[case])


@pytest.mark.parametrize("case", [c[0] for c in TIMED])
def test_interrupt_at_a_time(results, case):
    r = results[case]
    if not r["sent"]:  # the run ended before its moment: then it must have succeeded
        assert r["code"] == 0 and r["out"].exists(), r["stderr"]
        return
    sig = getattr(signal, "SIG" + r["signal"])
    if r["out"].exists():
        # the signal came after the commit point, from which the command ignores it
        # to the end of the process, the interpreter's shutdown included
        # (compensate.interrupt): exit 0, and the output went into place complete,
        # as an uninterrupted run's
        assert r["code"] == 0 and "Traceback" not in r["stderr"], r["stderr"]
        fmt = "otf2" if r["out"].suffix == ".otf2" else "trace"
        assert _records(r["out"]) == _records(results["reference"][fmt])
        return
    if r["code"] == -sig:
        # the signal came while the interpreter was still starting, before the first
        # line of ours could install a handler (on a loaded machine 10 % of a short run
        # can be that early): the process ended by the signal itself, as any program
        # does then — not exit 0, nothing opened, nothing written, no traceback
        assert r["stderr"] == "" and not r["out"].exists()
        assert sorted(os.listdir(r["work"])) == []
        return
    _assert_interrupted(r)


def test_input_unchanged(inputs, results):
    paths, _, before = inputs
    assert len(HOOKED) >= 20
    for fmt, p in paths.items():
        assert _digest(p.parent if fmt == "otf2" else p) == before[fmt]


def test_without_hook_the_run_succeeds(results, inputs, tmp_path):
    # the hook costs nothing unset, and a point name nobody reaches changes nothing
    argv, out = _command(inputs, tmp_path, "trace", "trace", ["--quiet"])
    p = subprocess.run(argv, capture_output=True, text=True, env=_env("INT:nowhere:1"),
                       timeout=120)
    assert p.returncode == 0 and p.stderr == "" and out.exists()


# -- the other commands ----------------------------------------------------------------

def _run(argv: list[str], hook: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          env=_env(hook), timeout=120)


def test_export_interrupted_before_commit(inputs, tmp_path):
    paths, _, _ = inputs
    out = tmp_path / "sub" / "e.json"
    p = _run(["-m", "compensate", "export", str(paths["trace"]), str(out)], "TERM:commit:1")
    _assert_interrupted({"code": p.returncode, "stderr": p.stderr, "out": out,
                         "work": tmp_path, "signal": "TERM"}, "compensate export")


def test_report_json_interrupted_before_commit(inputs, tmp_path):
    paths, _, _ = inputs
    out = tmp_path / "sub" / "r.json"
    p = _run(["-m", "compensate", "report", str(paths["trace"]), "--json", str(out)],
             "INT:commit:1")
    _assert_interrupted({"code": p.returncode, "stderr": p.stderr, "out": out,
                         "work": tmp_path, "signal": "INT"}, "compensate report")


def test_simulate_interrupted_removes_its_outdir(tmp_path):
    out = tmp_path / "sim"
    p = _run(["-m", "compensate.cli.simulate", "pingpong", str(out), "--format", "trace"],
             "INT:commit:2")
    _assert_interrupted({"code": p.returncode, "stderr": p.stderr, "out": out,
                         "work": tmp_path, "signal": "INT"}, "compensate-simulate")


# -- after the commit: the exit status agrees with the output -----------------------------

EXAMPLE = ROOT / "examples" / "pingpong.trace"

#: the command as its console script runs it (no argv: the whole process), with the
#: interpreter's shutdown held open for a second (an atexit hook registered first
#: runs last), so that a signal lands in it
_SLOW_EXIT = ("import atexit, sys, time; atexit.register(time.sleep, 1.0); "
              "from compensate.cli import main; sys.exit(main())")


@pytest.mark.parametrize("stdout", ["full-device", "closed-pipe"])
def test_a_stdout_that_fails_after_the_commit_is_a_warning_and_exit_0(tmp_path, stdout):
    """The summary line to ``> /dev/full`` or to a pipe nobody reads: the output
    is in place, so the status is 0 and, for the full device, the one line says
    OUT is complete (it used to be exit 3, "error: Broken pipe", with the
    complete output in place); a closed pipe (``| head``) ends quietly, without a
    line; the interpreter does not fail again at exit ("Exception ignored", 120)."""
    if stdout == "full-device" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    out = tmp_path / "o.trace"
    argv = [sys.executable, "-m", "compensate", str(EXAMPLE), str(out), "--overhead", "100ns"]
    if stdout == "full-device":
        with open("/dev/full", "w") as sink:
            p = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, text=True,
                               env=_env(None), timeout=120)
    else:
        r, w = os.pipe()
        os.close(r)  # every write to the pipe fails: EPIPE
        try:
            p = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, text=True,
                               env=_env(None), timeout=120)
        finally:
            os.close(w)
    lines = p.stderr.splitlines()
    assert p.returncode == 0, p.stderr
    if stdout == "closed-pipe":
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("compensate: warning: "), p.stderr
        assert lines[0].endswith(f"; {out} is complete")
    reference = tmp_path / "ref.trace"
    assert subprocess.run([*argv[:4], str(reference), *argv[5:], "--quiet"], env=_env(None),
                          timeout=120).returncode == 0
    assert out.read_text() == reference.read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_commit_is_ignored_to_the_end_of_the_process(tmp_path, sig):
    """SIGTERM/SIGINT while the interpreter shuts down after a run that put its
    output in place: exit 0, nothing printed about it (SIGTERM used to end the
    process by the signal, which a shell reads as 143, "nothing written")."""
    out = tmp_path / "o.trace"
    p = subprocess.Popen([sys.executable, "-c", _SLOW_EXIT, str(EXAMPLE), str(out),
                          "--overhead", "100ns", "--quiet"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_env(None))
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # past the command's end, into the one-second shutdown
        assert p.poll() is None, "the run ended before the signal"
        p.send_signal(sig)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0, stderr
    assert stdout == "" and stderr == ""
    assert out.exists()


@pytest.mark.parametrize("out", ["o.trace", "out/traces.otf2", "new/traces.otf2"])
def test_the_staging_entries_of_a_killed_run_are_removed_by_the_next_one(tmp_path, out):
    """SIGKILL right before the commit (no handler runs) leaves the complete
    temporary output and the lock file; the next run of the same output takes the
    lock (the kernel dropped the dead one's), removes them and leaves nothing but
    its output."""
    target = tmp_path / out.split("/")[0]
    if out.startswith("out/"):
        target.mkdir()  # an existing archive directory: staged inside it
    argv = [sys.executable, "-m", "compensate", str(EXAMPLE), str(tmp_path / out),
            "--overhead", "100ns", "--quiet"]
    p = subprocess.run(argv, capture_output=True, text=True, env=_env("KILL:commit:1"),
                       timeout=120)
    assert p.returncode == -signal.SIGKILL
    left = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob(".*"))
    assert any(".tmp-" in str(p) for p in left), left
    p = subprocess.run(argv, capture_output=True, text=True, env=_env(None), timeout=120)
    assert p.returncode == 0 and p.stderr == ""
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob(".*")) == []
    assert (tmp_path / out).exists()
