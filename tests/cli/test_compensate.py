"""The command-line contract: formats by suffix, exit codes, one-line errors, atomic
output, summary JSON.

The checks run the command's entry point ``compensate.cli.main`` in this
interpreter (``run_cli``): its exit code and everything written to file
descriptors 1 and 2 (pytest's ``capfd``, which also sees what a C library writes),
as a subprocess's would be; an escaping exception fails the test as a traceback
would. ``run_command`` runs the real ``python -m compensate`` in a fresh interpreter
for the usage errors and the README's first command, so the shell's path is tested
too (each fresh interpreter costs ~0.5 s of imports).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compensate import __version__
from compensate.cli import main

from ..conftest import CASES, ROOT, TRACES

PLATFORM = {"event_overhead": 1e-7, "copy_time": [{"bytes": 1000, "seconds": 5e-8}]}
EXAMPLE = ROOT / "examples" / "pingpong.trace"


def run_command(*args, cwd=None):
    """``python -m compensate ARGS`` in a fresh interpreter (what a user's shell runs)."""
    env = dict(os.environ)
    env.pop("COMPENSATE_DEBUG", None)
    p = subprocess.run([sys.executable, "-m", "compensate", *map(str, args)],
                       capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def run_cli(capfd, monkeypatch):
    """``compensate ARGS`` through ``compensate.cli.main`` in this interpreter:
    (exit code, stdout, stderr), stdout and stderr as file descriptors 1 and 2 saw
    them."""
    monkeypatch.delenv("COMPENSATE_DEBUG", raising=False)

    def run(*args):
        capfd.readouterr()  # drop what came before
        code = main([str(a) for a in args])
        out, err = capfd.readouterr()
        return code, out, err

    return run


@pytest.fixture
def platform_file(tmp_path):
    path = tmp_path / "platform.json"
    path.write_text(json.dumps(PLATFORM))
    return path


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp" in p.name)


def test_version_is_what_argparse_prints(run_cli, capfd):
    """``--version`` alone is answered before the command is imported; with other
    arguments argparse answers it: the same line, exit 0."""
    alone = run_cli("--version")
    assert alone == (0, f"compensate {__version__}\n", "")
    assert run_cli("--quiet", "--version") == alone  # argparse's, returned as 0


@pytest.mark.parametrize("preset", [None, "2"])
def test_blas_threads_one_unless_chosen(tmp_path, platform_file, preset):
    """The command asks OpenBLAS for no worker threads (each spins ~0.1 CPU-second
    at numpy's import) unless the user set OPENBLAS_NUM_THREADS: after a run in a
    fresh interpreter the variable is 1 and, on more than one core, numpy started
    no thread of its own."""
    code = ("import os, sys\nfrom compensate.cli import main\n"
            "rc = main(sys.argv[1:])\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))\n"
            "sys.exit(rc)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "COMPENSATE_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if preset:
        env["OPENBLAS_NUM_THREADS"] = preset
    p = subprocess.run([sys.executable, "-c", code, str(EXAMPLE), str(tmp_path / "o.trace"),
                        "--platform", str(platform_file), "--quiet"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    value, threads = p.stdout.split()
    assert value == (preset or "1")
    if preset is None and os.path.isdir("/proc/self/task"):
        assert int(threads) == 1
    elif preset and (os.cpu_count() or 1) > 1:
        assert int(threads) > 1  # the user's choice was honoured


def test_text_to_text_with_summary(run_cli, tmp_path, platform_file):
    out = tmp_path / "out.trace"
    summary = tmp_path / "s.json"
    code, stdout, stderr = run_cli(CASES / "r2_m2_gap.trace", out, "--bound", "upper",
                                   "--platform", platform_file, "--summary", summary)
    assert code == 0, stderr
    assert out.exists() and "verified" in stdout
    s = json.loads(summary.read_text())
    for key in ("bound", "records", "locations", "measured_span_s", "approximated_span_s",
                "overcompensated_records", "messages_matched", "collective_instances",
                "verification"):
        assert key in s
    assert s["bound"] == "upper" and s["messages_matched"] == 1
    assert s["verification"]["ok"] and s["verification"]["violations"] == 0
    assert s["approximated_span_s"] < s["measured_span_s"]


def test_quiet_prints_nothing(run_cli, tmp_path, platform_file):
    code, stdout, stderr = run_cli(EXAMPLE, tmp_path / "o.trace", "--platform", platform_file,
                                   "--quiet")
    assert code == 0 and stdout == "" and stderr == ""


def test_overhead_option_and_cross_format(run_cli, tmp_path):
    out = tmp_path / "arch" / "traces.otf2"
    code, _, stderr = run_cli(EXAMPLE, out, "--overhead", "250ns", "--quiet")
    assert code == 0, stderr
    assert out.exists() and (tmp_path / "arch" / "traces").is_dir()
    back = tmp_path / "back.trace"
    code, _, stderr = run_cli(out, back, "--bound", "none", "--quiet")
    assert code == 0, stderr


def test_no_platform_explains_how_to_get_one(run_cli, tmp_path):
    code, _, stderr = run_cli(EXAMPLE, tmp_path / "o.trace")
    assert code == 2  # a usage error, as the README says
    assert "--platform" in stderr and "calibrate" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.trace").exists()


@pytest.mark.parametrize("args,code", [
    ([], 2),
    (["a.trace"], 2),
    (["in.txt", "out.trace", "--overhead", "1us"], 2),
    (["x.trace", "y.trace", "--bound", "middle"], 2),
])
def test_usage_errors_exit_2(run_cli, tmp_path, monkeypatch, args, code):
    monkeypatch.chdir(tmp_path)
    got, _, stderr = run_cli(*args)
    assert got == code
    assert "Traceback" not in stderr


def test_usage_error_of_the_real_command(tmp_path):
    """``python -m compensate`` without arguments: exit 2, no traceback, in a fresh
    interpreter (the one usage error that goes through the shell's path)."""
    got, _, stderr = run_command(cwd=tmp_path)
    assert got == 2
    assert "Traceback" not in stderr and stderr.strip()


BAD_INPUTS = {
    "garbled": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\nevents\n"
               "10 0 Enter\x00@@ region\n",
    "truncated": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                 "region 1 \"f\"\nevents\n10 0 Enter region=1\n20 0",
    "unknown_kind": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\nevents\n"
                    "10 0 Entr region=1\n",
    "time_backwards": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                      "region 1 \"f\"\nevents\n10 0 Enter region=1\n5 0 Leave region=1\n",
    "recv_without_send": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                         "location 1 group=1\ncomm 0 \"w\" 0,1\nevents\n"
                         "10 1 MpiRecv sender=0 comm=0 tag=1 bytes=8\n",
    "leave_without_enter": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                           "region 1 \"f\"\nevents\n10 0 Leave region=1\n",
    "missing_member": "compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                      "location 1 group=1\ncomm 0 \"w\" 0,1\nevents\n"
                      "10 0 MpiCollectiveBegin\n"
                      "20 0 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0\n",
}
EXPECT = {
    "garbled": "bad.trace:5", "truncated": "bad.trace:7", "unknown_kind": "Entr",
    "time_backwards": "location 0", "recv_without_send": "location 1",
    "leave_without_enter": "Leave", "missing_member": "location 1",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_one_line_exit_3_no_output(run_cli, tmp_path, platform_file, name):
    src = tmp_path / "bad.trace"
    src.write_text(BAD_INPUTS[name])
    out = tmp_path / "out.trace"
    strict = ["--strict"] if name == "leave_without_enter" else []  # tolerated without
    code, stdout, stderr = run_cli(src, out, "--platform", platform_file, *strict)
    assert code == 3, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert "bad.trace" in lines[0] and EXPECT[name] in lines[0], lines[0]
    assert not out.exists() and leftovers(tmp_path) == []


def test_receive_without_send_names_record(run_cli, tmp_path, platform_file):
    src = tmp_path / "bad.trace"
    src.write_text(BAD_INPUTS["recv_without_send"])
    _, _, stderr = run_cli(src, tmp_path / "o.trace", "--platform", platform_file)
    assert "location 1, record 0" in stderr and "location 0" in stderr


def _damage(archive: Path, how: str) -> str:
    """Damage a copy of a real archive; returns what the message must name."""
    evt = sorted((archive / "traces").glob("*.evt"))[1]
    if how == "truncated-evt":
        evt.write_bytes(evt.read_bytes()[:442])
    elif how == "flipped-evt":
        data = bytearray(evt.read_bytes())
        data[len(data) // 2:len(data) // 2 + 16] = bytes(16)
        data[:8] = bytes(8)
        evt.write_bytes(bytes(data))
        return f"traces.otf2|{evt.name}"  # (the C path names the event file it cannot open)
    elif how == "missing-evt":
        evt.unlink()
        return evt.name
    elif how == "missing-local-def":
        (archive / "traces" / "0.def").unlink()
        return "0.def"
    return "traces.otf2"


@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streaming", "in-memory"])
@pytest.mark.parametrize("how", ["truncated-evt", "flipped-evt", "missing-evt",
                                 "missing-local-def"])
def test_damaged_real_archive_one_line_exit_3(run_cli, tmp_path, how, mode):
    """A damaged archive is one line naming the file, exit 3, streaming or not:
    the streaming reader's failure was an "internal error" (exit 1) after four
    [OTF2] lines, and a missing local definition file a 20-line traceback of
    the otf2 package's reader callback before the line."""
    src = TRACES / "jacobi-openmp-tasks-offload"
    if not src.exists():
        pytest.skip("real archive not available")
    shutil.copytree(src, tmp_path / "in")
    needle = _damage(tmp_path / "in", how)
    code, _, stderr = run_cli(tmp_path / "in" / "traces.otf2", tmp_path / "o" / "traces.otf2",
                              "--overhead", "250ns", *mode)
    lines = stderr.strip().splitlines()
    assert code == 3 and len(lines) == 1, stderr
    assert lines[0].startswith("compensate: error: ")
    assert any(name in lines[0] for name in needle.split("|")), lines[0]
    assert not (tmp_path / "o").exists()


def test_send_without_receive_is_compensated_with_a_note(run_cli, tmp_path,
                                                         platform_file):
    """A send no receive matches (the receiver's call failed, or the program
    ended with it in flight) constrains nothing: compensated, and said."""
    src = tmp_path / "send.trace"
    src.write_text("compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\n"
                   "location 1 group=1\ncomm 0 \"w\" 0,1\nevents\n"
                   "10 0 MpiSend receiver=1 comm=0 tag=1 bytes=8\n")
    code, stdout, stderr = run_cli(src, tmp_path / "o.trace", "--platform", platform_file)
    assert code == 0 and "verified" in stdout, stderr
    assert "1 sends have no matching receive" in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("content,needle", [
    ({"copy_time": []}, "event_overhead"),
    ({"event_overhead": 1e-6}, "copy_time"),
    ({"event_overhead": "fast", "copy_time": []}, "platform"),
    ({"event_overhead": 1e-6, "copy_time": [{"bytes": 10}]}, "platform"),
    ({"event_overhead": -1, "copy_time": []}, "event_overhead"),
])
def test_bad_platform_exit_3(run_cli, tmp_path, content, needle):
    pf = tmp_path / "p.json"
    pf.write_text(json.dumps(content))
    code, _, stderr = run_cli(EXAMPLE, tmp_path / "o.trace", "--platform", pf)
    assert code == 3 and needle in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.trace").exists()


def test_out_equal_in_is_refused(run_cli, tmp_path, platform_file):
    src = tmp_path / "x.trace"
    shutil.copy(EXAMPLE, src)
    before = src.read_bytes()
    code, _, stderr = run_cli(src, src, "--platform", platform_file, "--force")
    assert code == 3 and "overwrite the input" in stderr
    assert src.read_bytes() == before


def test_out_equal_in_otf2_is_refused(run_cli, tmp_path, real_archive):
    arch = tmp_path / "a"
    shutil.copytree(real_archive.parent, arch)
    code, _, stderr = run_cli(arch / "traces.otf2", arch / "traces.otf2", "--overhead", "1us",
                              "--force")
    assert code == 3 and "overwrite the input" in stderr
    code, _, stderr = run_cli(arch / "traces.otf2", arch / "other.otf2", "--overhead", "1us")
    assert code == 3


def test_existing_output_needs_force(run_cli, tmp_path, platform_file):
    out = tmp_path / "o.trace"
    out.write_text("keep me")
    code, _, stderr = run_cli(EXAMPLE, out, "--platform", platform_file)
    assert code == 3 and "--force" in stderr and out.read_text() == "keep me"
    code, _, stderr = run_cli(EXAMPLE, out, "--platform", platform_file, "--force", "--quiet")
    assert code == 0 and out.read_text() != "keep me"


def test_force_refuses_to_delete_a_foreign_directory(run_cli, tmp_path, platform_file):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("precious")
    code, _, stderr = run_cli(EXAMPLE, d / "traces.otf2", "--platform", platform_file, "--force")
    assert code == 3 and (d / "thesis.tex").read_text() == "precious"


def test_force_replaces_an_archive(run_cli, tmp_path, platform_file):
    out = tmp_path / "arch" / "traces.otf2"
    assert run_cli(EXAMPLE, out, "--platform", platform_file, "--quiet")[0] == 0
    assert run_cli(EXAMPLE, out, "--platform", platform_file, "--quiet")[0] == 3
    code, _, stderr = run_cli(EXAMPLE, out, "--platform", platform_file, "--quiet", "--force")
    assert code == 0, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arch", "platform.json"]


@pytest.mark.parametrize("path", [[], ["--in-memory"]], ids=["streaming", "in-memory"])
@pytest.mark.parametrize("suffix", ["o.trace", "o/traces.otf2"])
def test_verification_failure_exit_4_nothing_written(tmp_path, platform_file, monkeypatch,
                                                     path, suffix):
    """A (simulated) engine bug must never reach the output."""
    import compensate.pipeline.segment as segment_step
    from compensate.verify import Verification

    def broken(*a, **k):
        return Verification(messages=1, examples=["x"])

    monkeypatch.setattr(segment_step, "verify", broken)  # every way of running
    out = tmp_path / suffix
    code = main([str(EXAMPLE), str(out), "--platform", str(platform_file), "--quiet", *path])
    assert code == 4 and not out.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_real_archives_compensate(run_cli, tmp_path, real_archive, bound):
    out = tmp_path / "c" / "traces.otf2"
    code, stdout, stderr = run_cli(real_archive, out, "--bound", bound, "--overhead", "100ns")
    assert code == 0, stderr
    if shutil.which("otf2-print") is None:
        pytest.skip("otf2-print not installed")

    def per_location(path):
        text = subprocess.run(["otf2-print", str(path)], capture_output=True, text=True,
                              check=True).stdout
        counts = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0].isupper() and parts[1].isdigit():
                counts[parts[1]] = counts.get(parts[1], 0) + 1
        return counts

    assert per_location(out) == per_location(real_archive)


def test_quick_start_example(tmp_path):
    """The README's first command, on the bundled real trace, as the shell runs it."""
    example = ROOT / "examples" / "montecarlo"
    out = tmp_path / "out" / "traces.otf2"
    summary = tmp_path / "s.json"
    code, stdout, stderr = run_command(example / "traces.otf2", out, "--platform",
                                       example / "platform.json", "--summary", summary)
    assert code == 0, stderr
    s = json.loads(summary.read_text())
    assert s["locations"] == 4 and s["verification"]["ok"]
    assert s["dependencies"]["messages"] > 50 and s["overcompensated_records"] == 0
    assert 0 < s["approximated_span_s"] < s["measured_span_s"]


# -- overcompensation: a finding, not a hint ------------------------------------------

PING_PONG = ROOT / "tests" / "data" / "traces" / "ping-pong-otf2" / "traces.otf2"


@pytest.fixture
def ping_pong():
    if not PING_PONG.exists():
        pytest.skip(f"{PING_PONG} is not bundled")
    return PING_PONG


@pytest.mark.parametrize("mode", [[], ["--in-memory"]], ids=["streaming", "in-memory"])
def test_overcompensation_is_reported_even_with_quiet(run_cli, tmp_path, ping_pong, mode):
    # 1 ms per record is far more than the gaps between this run's records
    summary = tmp_path / "s.json"
    code, stdout, stderr = run_cli(ping_pong, tmp_path / "o" / "traces.otf2", "--overhead",
                                   "1ms", "--quiet", "--summary", summary, *mode)
    assert code == 0 and stdout == ""
    assert stderr.splitlines() == [stderr.strip()]
    s = json.loads(summary.read_text())
    n, by_kind = s["overcompensated_records"], s["overcompensated_by_kind"]
    assert n > 0 and sum(by_kind.values()) == n
    assert set(by_kind) <= {"Enter", "Leave", "MpiSend", "MpiRecv", "ProgramBegin",
                            "ProgramEnd"}
    # the largest shortfall is less than the overhead of one record
    assert 0 < s["overcompensated_max_s"] <= 1e-3
    line = stderr.strip()
    assert line.startswith(f"compensate: warning: {n:,} of {s['records']:,} records")
    for kind, count in by_kind.items():
        assert f"{kind} {count:,}" in line


def test_overcompensation_counted_by_kind_by_hand(run_cli, tmp_path, platform_file):
    # r1_overcomp: one 50 ns gap after a 100 ns record (its Leave is clamped)
    summary = tmp_path / "s.json"
    code, _, stderr = run_cli(CASES / "r1_overcomp.trace", tmp_path / "o.trace", "--overhead",
                              "100ns", "--quiet", "--summary", summary)
    s = json.loads(summary.read_text())
    assert code == 0 and s["overcompensated_by_kind"] == {"Leave": 1}
    assert s["overcompensated_max_s"] == pytest.approx(50e-9)
    assert "by up to 50 ns" in stderr


def test_no_overcompensation_no_line(run_cli, tmp_path, platform_file):
    code, _, stderr = run_cli(EXAMPLE, tmp_path / "o.trace", "--platform", platform_file,
                              "--quiet", "--max-overcompensated", "0")
    assert code == 0 and stderr == ""


@pytest.mark.parametrize("limit,code", [("10", 5), ("0", 5), ("0.5%", 5), ("120", 0),
                                        ("90%", 0)])
def test_max_overcompensated(run_cli, tmp_path, ping_pong, limit, code):
    out = tmp_path / "o" / "traces.otf2"
    summary = tmp_path / "s.json"
    got, _, stderr = run_cli(ping_pong, out, "--overhead", "1ms", "--quiet",
                             "--max-overcompensated", limit, "--summary", summary)
    n = json.loads(summary.read_text())["overcompensated_records"]
    assert got == code, stderr
    if code == 5:
        line = stderr.strip()
        assert len(stderr.splitlines()) == 1
        assert line.startswith(f"compensate: error: {n:,} records overcompensated, more "
                               f"than --max-overcompensated ")
        assert f"nothing written to {out}" in line
        assert not out.exists() and sorted(os.listdir(tmp_path)) == ["s.json"]
    else:
        assert out.exists()


@pytest.mark.parametrize("limit", ["-1", "x", "150%", "nan%"])
def test_max_overcompensated_bad_value_is_usage(run_cli, tmp_path, limit):
    code, _, stderr = run_cli(EXAMPLE, tmp_path / "o.trace", "--overhead", "1ns",
                              "--max-overcompensated", limit)
    assert code == 2 and "--max-overcompensated" in stderr


def test_api_summary_counts_overcompensation_by_kind(ping_pong):
    import compensate as c

    r = c.compensate(c.read(ping_pong), overhead="1ms")
    assert r.summary["overcompensated_records"] == sum(
        r.summary["overcompensated_by_kind"].values()) > 0
    json.dumps(r.summary)


# -- option values, special files, a platform that contradicts the trace ---------------

@pytest.mark.parametrize("option, value, allowed", [
    ("--segment-records", "0", "a whole number of records from 1 to 2^63-1"),
    ("--segment-records", "-5", "a whole number of records from 1 to 2^63-1"),
    ("--eager-limit", "-1", "a whole number of bytes from 0 to 2^63-1"),
    ("--eager-limit", str(2 ** 63), "a whole number of bytes from 0 to 2^63-1"),
    ("--overhead", "1e300", "a duration from 0 to 3600 s (an hour)"),
    ("--overhead", "-1ns", "a duration from 0 to 3600 s (an hour)"),
    ("--overhead", "7200s", "a duration from 0 to 3600 s (an hour)"),
])
def test_numeric_option_out_of_range_is_a_usage_error(run_cli, tmp_path, option, value,
                                                      allowed):
    """--segment-records 0 and --eager-limit -1 ended in an internal error (exit 1),
    --overhead 1e300 in a run that exited 0 with NaN-cast times."""
    out = tmp_path / "out.trace"
    code, _, err = run_cli(EXAMPLE, out, "--overhead", "1us", f"{option}={value}")
    first = err.splitlines()[0]
    assert code == 2, err
    assert first.startswith(f"compensate: error: argument {option}: invalid value "
                            f"'{value}': {allowed}")
    assert err.splitlines()[1].startswith("usage: compensate IN OUT") and not out.exists()


def test_trace_input_that_is_a_fifo_or_device_is_named(run_cli, tmp_path):
    """Such an input was reported as 'no such file'."""
    fifo = tmp_path / "in.trace"
    os.mkfifo(fifo)
    zero = tmp_path / "in.otf2"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO (named pipe)"), (zero, "a character device")):
        code, _, err = run_cli(path, tmp_path / "out.trace", "--overhead", "1us")
        assert (code, err) == (3, f"compensate: error: {path}: is {kind}, not a regular "
                                  f"file\n")


def test_otf2_archive_member_that_is_a_fifo_is_refused_at_once(tmp_path):
    """A FIFO in place of traces.def or an event file made the OTF2 library wait for
    a writer forever (a fresh interpreter with a deadline: the unfixed code fails)."""
    archive = tmp_path / "in"
    shutil.copytree(ROOT / "examples" / "montecarlo", archive)
    evt = archive / "traces" / "1.evt"
    evt.unlink()
    os.mkfifo(evt)
    code, _, err = run_command(archive / "traces.otf2", tmp_path / "out.trace",
                               "--overhead", "1us")
    assert (code, err) == (3, f"compensate: error: {archive / 'traces.otf2'}: {evt} is a "
                              f"FIFO (named pipe), not a regular file\n")


def _slow_copies(tmp_path: Path, seconds: float) -> Path:
    path = tmp_path / f"copy{seconds}.json"
    path.write_text(json.dumps({"event_overhead": 1e-6,
                                "copy_time": [{"bytes": 64, "seconds": seconds}]}))
    return path


def test_a_span_a_little_longer_is_said_in_percent_and_against_the_aligned_span():
    """Under twice the measured span the warning gives the excess in percent (not
    '1x as long'); with the clocks aligned it compares with the aligned span, and
    the summary line says both spans and whether the output is shorter or longer."""
    from compensate.cli.compensate import copy_line, span_text

    found = {"output_longer": True, "records": 0}
    plain = {"measured_span_s": 1.0, "approximated_span_s": 1.003,
             "copy_contradictions": found}
    assert copy_line(plain).startswith(
        "compensate: warning: the compensated trace is 0.3 % longer than the measured "
        "one (1.003 s vs 1 s): ")
    assert span_text(plain) == "span 1 s -> 1.003 s (0.3 % longer)"
    aligned = dict(plain, clock_alignment={"aligned_span_s": 1.002})
    assert "0.1 % longer than the measured one with its clocks aligned (1.003 s vs 1.002 s)" \
        in copy_line(aligned)
    assert span_text(dict(aligned, approximated_span_s=0.9)) == \
        "span 1 s (1.002 s with its clocks aligned) -> 0.9 s (10.2 % shorter)"


def test_copy_table_that_contradicts_the_trace_is_a_finding(run_cli, tmp_path):
    """A copy table 6,000x too slow for the trace made the output 251x longer than
    measured, exit 0, no word: now a warning naming copy_time and the worst record,
    the count in the summary, and --max-overcompensated refuses it (exit 5)."""
    platform, out, summary = _slow_copies(tmp_path, 1e-4), tmp_path / "o.trace", \
        tmp_path / "s.json"
    code, _, err = run_cli(EXAMPLE, out, "--platform", platform, "--summary", summary,
                           "--quiet")
    assert code == 0 and out.exists()
    assert err.splitlines() == [
        "compensate: warning: the compensated trace is 251x as long as the measured one "
        "(25.64 ms vs 102 us); 16 of 16 message records (MpiRecv 8, MpiSend 8) have a "
        "measured gap shorter than the platform's copy_time, by up to 12.8 ms (MpiSend of "
        "8,192 bytes on location 0, record 21: copy 12.8 ms, gap 2.248 us): the platform's "
        "copy_time contradicts the trace (was it measured on this machine, in "
        "seconds?)"]
    found = json.loads(summary.read_text())["copy_contradictions"]
    assert (found["records"], found["checked"], found["output_longer"]) == (16, 16, True)
    assert found["by_kind"] == {"MpiRecv": 8, "MpiSend": 8}
    refused = tmp_path / "r.trace"
    code, _, err = run_cli(EXAMPLE, refused, "--platform", platform,
                           "--max-overcompensated", "0", "--quiet")
    assert code == 5 and not refused.exists()
    assert err.splitlines()[-1] == (
        f"compensate: error: 16 records overcompensated (16 of them message records whose "
        f"measured gap cannot hold the platform's copy), more than --max-overcompensated 0 "
        f"records; nothing written to {refused}")


def test_copy_table_that_fits_costs_no_second_read(run_cli, tmp_path):
    """A platform that fits the trace (the output shorter than measured) prints no
    warning and reads the input once: no ``copy_contradictions`` in the summary;
    with --max-overcompensated the records are counted (none)."""
    platform, summary = _slow_copies(tmp_path, 1.6e-8), tmp_path / "s.json"
    code, _, err = run_cli(EXAMPLE, tmp_path / "o.trace", "--platform", platform,
                           "--summary", summary, "--quiet")
    assert (code, err) == (0, "")
    assert "copy_contradictions" not in json.loads(summary.read_text())
    code, _, err = run_cli(EXAMPLE, tmp_path / "o2.trace", "--platform", platform,
                           "--summary", summary, "--quiet", "--max-overcompensated", "0")
    assert (code, err) == (0, "")
    found = json.loads(summary.read_text())["copy_contradictions"]
    assert (found["records"], found["checked"], found["output_longer"]) == (0, 16, False)


def test_a_whole_trace_the_memory_cannot_hold_is_refused_before_it_is_read(
        tmp_path, monkeypatch, capsys):
    """Read whole (``--in-memory``, or a trace that cannot be streamed), a trace
    larger than the memory available is refused in one line, exit 3, nothing
    written, instead of being killed by the kernel half way."""
    import compensate.formats as formats
    import compensate.pipeline.memory as memory

    anchor = TRACES / "ping-pong-otf2" / "traces.otf2"
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)
    # (the reader's buffers, checked first, are tests/pipeline/test_memory.py's)
    monkeypatch.setattr(formats, "read_buffers", lambda path: (0, 0, 0))
    out = tmp_path / "o" / "traces.otf2"
    assert main([str(anchor), str(out), "--overhead", "100ns", "--in-memory"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reading the whole trace (--in-memory) needs about" in err[0]
    assert "GiB available; nothing written" in err[0]
    assert not out.parent.exists()
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 40)
    assert main([str(anchor), str(out), "--overhead", "100ns", "--quiet", "--in-memory"]) == 0


REGION_PLATFORM = dict(PLATFORM, event_overhead_by_region={
    "MPI_Recv": {"Enter": 3e-7, "Leave": 2e-7}, "MPI_Recieve": {"Enter": 1e-7}},
    overhead_before_stamp_by_region={"MPI_Send": {"Leave": 5e-8}})


def _region_records(path, names):
    """Enter/Leave records of each region name, counted from the trace itself."""
    from compensate.formats import read_trace
    from compensate.model import KIND_CODE
    trace = read_trace(str(path))
    ids = {n: [r for r, name in trace.definitions.regions.items() if name == n] for n in names}
    counts = dict.fromkeys(names, 0)
    for ev in trace.events.values():
        el = (ev.kind == KIND_CODE["Enter"]) | (ev.kind == KIND_CODE["Leave"])
        for n in names:
            counts[n] += int(np.count_nonzero(el & np.isin(ev.region, ids[n])))
    return counts


def test_region_overheads_are_reported_and_an_unmatched_one_warned(run_cli, tmp_path):
    """The summary holds the per-region costs and the records each entry was
    charged to, alike in memory and streamed; an entry that matched nothing (a
    misspelt name) is one warning line, even with --quiet, and no failure."""
    pf = tmp_path / "p.json"
    pf.write_text(json.dumps(REGION_PLATFORM))
    want = _region_records(EXAMPLE, ["MPI_Recieve", "MPI_Recv", "MPI_Send"])
    assert want["MPI_Recv"] > 0 and want["MPI_Send"] > 0
    outputs = []
    for i, mode in enumerate(([], ["--segment-records", "8"], ["--in-memory"])):
        out, summary = tmp_path / f"o{i}.trace", tmp_path / f"s{i}.json"
        code, stdout, stderr = run_cli(EXAMPLE, out, "--platform", pf, "--summary", summary,
                                       "--quiet", *mode)
        assert code == 0 and stdout == ""
        assert stderr.splitlines() == [
            'compensate: warning: the platform\'s per-region overhead for "MPI_Recieve" '
            "names no region the trace defines, while its other entries do (is the region "
            "name spelt as the trace defines it?)"]
        s = json.loads(summary.read_text())
        assert s["region_overhead_records"] == want
        assert s["platform"]["event_overhead_by_region"] == \
            REGION_PLATFORM["event_overhead_by_region"]
        assert s["platform"]["overhead_before_stamp_by_region"] == \
            REGION_PLATFORM["overhead_before_stamp_by_region"]
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] == outputs[2]
    # no entry matched (a platform that measured calls this trace does not make): silent
    pf.write_text(json.dumps({**REGION_PLATFORM, "event_overhead_by_region": {
        "pthread_mutex_lock": {"Enter": 3e-7}}, "overhead_before_stamp_by_region": {}}))
    code, _, stderr = run_cli(EXAMPLE, tmp_path / "none.trace", "--platform", pf,
                              "--summary", tmp_path / "none.json", "--quiet")
    assert code == 0 and stderr == ""
    none = json.loads((tmp_path / "none.json").read_text())
    assert none["region_overhead_records"] == {"pthread_mutex_lock": 0}
    assert none["region_overhead_undefined"] == ["pthread_mutex_lock"]
    plain = tmp_path / "plain.trace"
    assert run_cli(EXAMPLE, plain, "--platform", tmp_path / "p.json", "--quiet")[0] == 0
    (tmp_path / "k.json").write_text(json.dumps(PLATFORM))
    assert run_cli(EXAMPLE, tmp_path / "k.trace", "--platform", tmp_path / "k.json",
                   "--quiet")[0] == 0
    assert (tmp_path / "k.trace").read_text() != outputs[0]  # the regions' costs count


@pytest.mark.parametrize("overhead", ["1us", "estimate"])
def test_overhead_option_drops_the_region_overheads(run_cli, tmp_path, overhead):
    """``--overhead DURATION|estimate`` replaces the overhead, the per-region costs
    with it: the output is the one of the file without them, nothing is counted or
    warned."""
    pf, kf = tmp_path / "p.json", tmp_path / "k.json"
    pf.write_text(json.dumps(REGION_PLATFORM))
    kf.write_text(json.dumps(PLATFORM))
    got = {}
    for name, path in (("regions", pf), ("kinds", kf)):
        out, summary = tmp_path / f"{name}.trace", tmp_path / f"{name}.json"
        code, _, stderr = run_cli(EXAMPLE, out, "--platform", path, "--overhead", overhead,
                                  "--summary", summary, "--quiet")
        assert code == 0 and stderr == ""
        got[name] = (out.read_text(), json.loads(summary.read_text()))
    assert got["regions"][0] == got["kinds"][0]
    s = got["regions"][1]
    assert "region_overhead_records" not in s
    assert "event_overhead_by_region" not in s["platform"]
    assert "overhead_before_stamp_by_region" not in s["platform"]


def test_a_region_defined_but_never_called_is_no_mistake(run_cli, tmp_path):
    """EZTrace defines every Pthread region in a trace of its pthread module: a
    program that locks but has no barrier leaves the barrier's entry at 0
    records, silently; an entry the trace does not define is warned of."""
    trace = ROOT / "tests" / "data" / "eztrace" / "mutex" / "eztrace_log.otf2"
    costs = {"pthread_mutex_lock": {"Enter": 2e-7}, "pthread_barrier_wait": {"Enter": 3e-7}}
    pf = tmp_path / "p.json"
    misspelt = {"pthread_mutex_lok": {"Enter": 2e-7}}
    for extra, warned in (({}, None), (misspelt, "pthread_mutex_lok")):
        pf.write_text(json.dumps(dict(PLATFORM, event_overhead_by_region={**costs, **extra})))
        out, summary = tmp_path / f"o{len(extra)}" / "t.otf2", tmp_path / f"s{len(extra)}.json"
        code, _, stderr = run_cli(trace, out, "--platform", pf, "--summary", summary, "--quiet")
        s = json.loads(summary.read_text())
        assert code == 0
        assert s["region_overhead_records"]["pthread_mutex_lock"] > 0
        assert s["region_overhead_records"]["pthread_barrier_wait"] == 0
        assert s["region_overhead_undefined"] == ([warned] if warned else [])
        assert (f'"{warned}" names no region the trace defines' in stderr) if warned \
            else "per-region" not in stderr


@pytest.mark.parametrize("output, package", [("o/traces.otf2", False), ("o.trace", True)],
                         ids=["otf2-output", "trace-output"])
def test_in_memory_reads_the_otf2_package_only_for_a_text_output(tmp_path, monkeypatch,
                                                                 output, package):
    """``--in-memory`` with an OTF2 output reads the input by the C path (the
    writer copies each record from the input); a ``.trace`` output needs each
    record's fields, read through the ``otf2`` package. The output is the
    streamed run's either way."""
    from compensate.formats import read_trace
    from compensate.formats.otf2 import read as otf2_read
    from compensate.formats.otf2.native import available

    archive = TRACES / "ping-pong-otf2" / "traces.otf2"
    if not archive.exists() or not available():
        pytest.skip("the archive or the OTF2 C path is not available")
    opened = []
    real = otf2_read.Otf2Chunks
    monkeypatch.setattr(otf2_read, "Otf2Chunks",
                        lambda *a, **k: opened.append(a[2]) or real(*a, **k))
    args = ["--overhead", "100ns", "--quiet"]
    assert main([str(archive), str(tmp_path / output), *args, "--in-memory"]) == 0
    assert bool(opened) == package
    streamed = tmp_path / ("s/traces.otf2" if output.endswith(".otf2") else "s.trace")
    assert main([str(archive), str(streamed), *args]) == 0
    got, want = read_trace(tmp_path / output), read_trace(streamed)
    for loc, ev in want.events.items():
        assert np.array_equal(got.events[loc].time, ev.time), loc


#: a barrier of two members, the second leaving 9,800 ticks (ns) after the first
#: (a member descheduled on a busy machine)
_SPREAD_EXITS = ("compensate-trace 1\ntimer_resolution 1000000000\nlocation 0 group=0\n"
                 "location 1 group=1\ncomm 0 \"w\" 0,1\nevents\n"
                 "100 0 MpiCollectiveBegin\n150 1 MpiCollectiveBegin\n"
                 "200 0 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0\n"
                 "10000 1 MpiCollectiveEnd op=BARRIER comm=0 root=- sent=0 received=0\n")


@pytest.mark.parametrize("bound,exits,note", [
    ("upper", "uniform", True), ("upper", "per-process", False),
    ("lower", "uniform", True), ("none", "uniform", False)])
def test_a_span_shortened_beyond_the_overhead_is_said(run_cli, tmp_path, bound, exits,
                                                      note):
    """The uniform exit lets the second member leave with the first (at the last
    enter, 150, plus the first exit's 50 less the last enter's 1 ns: 199): the
    span 100..10,000 becomes 100..199, 9.801 us off a run whose 4 records carry
    4 ns of overhead. The note says so and names the way out; per-process exits
    keep the second member's exit: no note."""
    src = tmp_path / "spread.trace"
    src.write_text(_SPREAD_EXITS)
    code, stdout, stderr = run_cli(src, tmp_path / "o.trace", "--overhead", "1ns",
                                   "--bound", bound, "--collective-exit", exits)
    assert code == 0, stderr
    found = [line for line in stderr.splitlines() if "tracer overhead taken out" in line]
    assert bool(found) == note, stderr
    if note:
        assert "9.801 us shorter than the measured one, 2,450 times the 4 ns" in found[0]
        assert "--collective-exit per-process keeps" in found[0]
        assert ("lower bound times each transfer" in found[0]) == (bound == "lower")


def test_the_note_needs_both_a_multiple_and_a_share_of_the_span():
    from compensate.cli.compensate import model_note
    s = {"bound": "upper", "collective_exit": "uniform", "measured_span_s": 1.0,
         "dependencies": {"collectives": {"n-to-n": 3}}}
    assert model_note({**s, "approximated_span_s": 0.995, "overhead_removed_s": 1e-4}) == ""
    assert model_note({**s, "approximated_span_s": 0.95, "overhead_removed_s": 0.03}) == ""
    line = model_note({**s, "approximated_span_s": 0.95, "overhead_removed_s": 0.02})
    assert "50 ms shorter than the measured one, 2.5 times the 20 ms" in line
    assert "lower" not in line and "n-to-n" in line
    no_nton = model_note({**s, "approximated_span_s": 0.95, "overhead_removed_s": 0.0,
                          "dependencies": {"collectives": {}}})
    assert "more than the 0 ns" in no_nton and "n-to-n" not in no_nton
