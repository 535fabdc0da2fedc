"""The Python API (``import compensate as c``, compensate/api.py): the README's one-liner,
the same results as the ``compensate`` command, platforms given three ways, one-line
errors, the DataFrame view, and an ``import compensate`` that stays light."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import compensate as c
from compensate.cli import main
from compensate.simulate import simulate
from compensate.verify import Verification

from .conftest import CASES, ROOT

EXAMPLE = ROOT / "examples" / "pingpong.trace"
EXAMPLE_PLATFORM = ROOT / "examples" / "platform.json"
# what differs between two runs of the same compensation, or says where files are
RUN_KEYS = {"input", "output", "seconds", "segments"}


def python(code: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COMPENSATE_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def counts(trace) -> dict[int, int]:
    return {loc: len(ev) for loc, ev in trace.events.items()}


def test_the_one_liner(tmp_path):
    p = python(f"import compensate as c; t = c.read({str(EXAMPLE)!r}); "
               f"r = c.compensate(t, bound='lower', overhead=1e-6); "
               f"c.write(r.trace, 'x/traces.otf2')", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "" and p.stderr == ""
    written = tmp_path / "x" / "traces.otf2"
    assert written.is_file()
    assert sorted(q.name for q in tmp_path.iterdir()) == ["x"]  # no temporary left
    back = c.read(written)
    assert counts(back) == counts(c.read(EXAMPLE))


def test_import_does_not_import_numpy(tmp_path):
    p = python("import sys, compensate\n"
               "assert 'numpy' not in sys.modules, 'numpy'\n"
               "assert not [m for m in sys.modules if m.startswith('compensate.')], "
               "sorted(m for m in sys.modules if m.startswith('compensate.'))\n"
               "print(compensate.__version__)", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == c.__version__


def test_the_commands_entry_imports_numpy_only_when_it_runs(tmp_path):
    """``compensate.cli`` and the distributed run's launcher test read the
    environment only: numpy, otf2 and the pipeline are imported inside the
    command's import region, where a signal is one line (compensate.interrupt)."""
    p = python("import sys, compensate.cli, compensate.parallel.command\n"
               "heavy = [m for m in ('numpy', 'otf2', 'mpi4py', 'compensate.pipeline')\n"
               "         if m in sys.modules]\n"
               "assert not heavy, heavy\n", tmp_path)
    assert p.returncode == 0, p.stderr


def test_public_names():
    import compensate.api
    import compensate.engine

    assert c.compensate is compensate.api.compensate and callable(c.compensate)
    assert c.compensate is not compensate.engine.compensate
    # the API checks its arguments against copies, so as not to import the engine early
    assert compensate.api.BOUNDS == compensate.engine.BOUNDS
    assert compensate.api.COLLECTIVE_EXITS == compensate.engine.COLLECTIVE_EXITS
    for name in c.__all__:
        assert getattr(c, name) is not None
        assert name in dir(c)
    for name in ("read", "write", "compensate", "to_dataframe", "profile", "wait_states",
                 "compare"):
        assert name in c.__all__
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        c.nonesuch  # noqa: B018


def summary_of_command(tmp_path, src, out_name, *args):
    out, summary = tmp_path / out_name, tmp_path / f"{out_name}.json"
    assert main([str(src), str(out), "--summary", str(summary), "--quiet", *args]) == 0
    return c.read(out), json.loads(summary.read_text())


def assert_same_as_command(result, command_trace, command_summary):
    assert counts(result.trace) == counts(command_trace)
    for loc, ev in command_trace.events.items():
        assert np.array_equal(result.trace.events[loc].time, ev.time), loc
    ours = {k: v for k, v in result.summary.items() if k not in RUN_KEYS}
    theirs = {k: v for k, v in command_summary.items() if k not in RUN_KEYS}
    assert ours == theirs
    # and the summary is the command's JSON, plain types only
    assert json.loads(json.dumps(result.summary)) == result.summary


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "in-memory"])
@pytest.mark.parametrize("bound", ["lower", "upper", "fitted", "none"])
def test_same_as_command(tmp_path, bound, streamed):
    args = ["--bound", bound, "--platform", str(EXAMPLE_PLATFORM)]
    trace, summary = summary_of_command(tmp_path, EXAMPLE, "out.trace", *args,
                                        *([] if streamed else ["--in-memory"]))
    result = c.compensate(c.read(EXAMPLE), bound=bound, platform=EXAMPLE_PLATFORM)
    assert_same_as_command(result, trace, summary)
    assert result.summary["bound"] == bound and result.verification.ok
    assert result.summary["input"] == str(EXAMPLE) and result.summary["output"] is None
    assert result.stats.messages == summary["messages_matched"]
    assert len(result.matching.table) == summary["messages_matched"]


@pytest.mark.parametrize("case", ["r2_m2_gap", "r3_nton", "r5_eager_limit", "r6_flush"])
def test_same_as_command_options(tmp_path, case):
    src = CASES / f"{case}.trace"
    args = ["--overhead", "250ns", "--collective-exit", "per-process", "--eager-limit", "0"]
    trace, summary = summary_of_command(tmp_path, src, "out.trace", *args)
    result = c.compensate(c.read(src), overhead="250ns", collective_exit="per-process",
                          eager_limit=0)
    assert_same_as_command(result, trace, summary)


def test_fitted_bound_fits_as_the_command_does(tmp_path):
    sim = simulate("stencil", ranks=4, iterations=40, overhead=1e-6, quantize=True)
    src, plat = tmp_path / "measured.trace", tmp_path / "platform.json"
    c.write(sim.measured, src)
    plat.write_text(json.dumps(sim.platform.to_dict()))
    trace, summary = summary_of_command(tmp_path, src, "fitted.trace", "--bound", "fitted",
                                        "--platform", str(plat))
    result = c.compensate(c.read(src), bound="fitted", platform=sim.platform)
    assert_same_as_command(result, trace, summary)
    fit = result.summary["fit"]
    assert not fit["fallback"] and fit["bound_used"] == "fitted"
    assert fit["observations"] >= 10 and fit["latency_s"] > 0 and fit["used"] > 0
    # and on the simulated trace in memory, without a file in between
    direct = c.compensate(sim.measured, bound="fitted", platform=sim.platform)
    assert direct.summary["fit"] == fit
    lower = c.compensate(sim.measured, bound="lower", platform=sim.platform)
    assert direct.summary["approximated_span_s"] != lower.summary["approximated_span_s"]


def test_fitted_bound_falls_back_to_lower():
    t = c.read(EXAMPLE)  # 8 messages: too few transfers to fit
    fitted = c.compensate(t, bound="fitted", platform=EXAMPLE_PLATFORM)
    lower = c.compensate(t, bound="lower", platform=EXAMPLE_PLATFORM)
    assert fitted.summary["fit"]["fallback"] and fitted.summary["fit"]["bound_used"] == "lower"
    assert "lower bound" in fitted.summary["fit"]["fallback_reason"]
    for loc, ev in lower.trace.events.items():
        assert np.array_equal(fitted.trace.events[loc].time, ev.time)


def test_platform_as_path_as_platform_and_overhead_as_string():
    t = c.read(EXAMPLE)
    by_path = c.compensate(t, platform=EXAMPLE_PLATFORM)
    by_str_path = c.compensate(t, platform=str(EXAMPLE_PLATFORM))
    by_object = c.compensate(t, platform=c.Platform.load(EXAMPLE_PLATFORM))
    for r in (by_str_path, by_object):
        assert r.summary["platform"] == by_path.summary["platform"]
        assert r.summary["approximated_span_s"] == by_path.summary["approximated_span_s"]
    # overhead as seconds or as a duration: the same
    a = c.compensate(t, overhead="250ns")
    b = c.compensate(t, overhead=250e-9)  # the nearest float, as parse_duration gives
    assert a.summary["platform"] == b.summary["platform"]
    assert a.summary["platform"]["event_overhead"] == pytest.approx(250e-9)
    assert a.summary["platform"]["copy_time"] == []
    assert a.summary["approximated_span_s"] == b.summary["approximated_span_s"]
    # overhead overrides the platform's per-record overhead, keeps its copy costs
    both = c.compensate(t, platform=EXAMPLE_PLATFORM, overhead="250ns")
    assert both.summary["platform"]["event_overhead"] == pytest.approx(250e-9)
    assert both.summary["platform"]["copy_time"] == by_path.summary["platform"]["copy_time"]
    assert both.summary["approximated_span_s"] > by_path.summary["approximated_span_s"]


def test_bound_none_needs_no_platform():
    t = c.read(EXAMPLE)
    r = c.compensate(t, bound="none")
    assert r.summary["platform"] is None
    assert r.summary["approximated_span_s"] == r.summary["measured_span_s"]


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert "\n" not in text and text
    return text


def test_no_platform_nor_overhead_is_refused():
    with pytest.raises(c.PlatformError) as exc:
        c.compensate(c.read(EXAMPLE))
    text = one_line(exc)
    assert "no platform" in text and "platform=" in text and "overhead=" in text


@pytest.mark.parametrize("kwargs,error,needle", [
    ({"bound": "middle", "overhead": 1e-6}, ValueError, "bound must be one of"),
    ({"collective_exit": "sometimes", "overhead": 1e-6}, ValueError, "collective_exit"),
    ({"eager_limit": -1, "overhead": 1e-6}, ValueError, "eager_limit"),
    ({"eager_limit": "64k", "overhead": 1e-6}, ValueError, "eager_limit"),
    ({"overhead": "fast"}, c.PlatformError, "cannot parse duration"),
    ({"overhead": -1e-6}, c.PlatformError, "event_overhead"),
    ({"overhead": [1e-6]}, TypeError, "overhead must be"),
    ({"platform": 1e-6}, TypeError, "platform must be"),
    ({"platform": "/nonexistent/platform.json"}, c.PlatformError, "not found"),
])
def test_bad_arguments(kwargs, error, needle):
    with pytest.raises(error) as exc:
        c.compensate(c.read(EXAMPLE), **kwargs)
    assert needle in one_line(exc)


def test_not_a_trace():
    with pytest.raises(TypeError, match=r"compensate\.read"):
        c.compensate(str(EXAMPLE), overhead=1e-6)


def test_read_errors(tmp_path):
    with pytest.raises(c.TraceError) as exc:
        c.read(tmp_path / "missing.trace")
    assert "no such file" in one_line(exc)
    with pytest.raises(ValueError) as exc:
        c.read(tmp_path / "trace.txt")
    assert "unknown trace format" in one_line(exc)
    bad = tmp_path / "bad.trace"
    bad.write_text("compensate-trace 1\ntimer_resolution 1000\nlocation 0 group=0\nevents\n"
                   "10 0 Entr region=1\n")
    with pytest.raises(c.TraceError) as exc:
        c.read(bad)
    assert "bad.trace" in one_line(exc)


def test_verification_failure_raises_and_writes_nothing(monkeypatch):
    import compensate.pipeline.segment as segment_step

    def failing(trace, matching, **_):
        return Verification(messages=1, examples=["location 1, record 6: before its send"])

    monkeypatch.setattr(segment_step, "verify", failing)
    with pytest.raises(c.VerificationError) as exc:
        c.compensate(c.read(EXAMPLE), overhead=1e-6)
    text = one_line(exc)
    assert "1 happened-before violations" in text and "record 6" in text
    assert exc.value.verification.messages == 1
    assert exc.value.summary["verification"]["ok"] is False


def test_write_never_overwrites_without_force(tmp_path):
    r = c.compensate(c.read(EXAMPLE), overhead=1e-6)
    out = tmp_path / "out.trace"
    out.write_text("keep me\n")
    with pytest.raises(c.OutputError) as exc:
        c.write(r.trace, out)
    assert "force=True" in one_line(exc) and "--force" not in str(exc.value)
    assert out.read_text() == "keep me\n"
    c.write(r.trace, out, force=True)
    assert counts(c.read(out)) == counts(r.trace)
    # an OTF2 archive directory, too
    archive = tmp_path / "arch" / "traces.otf2"
    c.write(r.trace, archive)
    with pytest.raises(c.OutputError, match="force=True"):
        c.write(r.trace, archive)
    c.write(r.trace, archive, force=True)
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name) == []


def test_write_never_over_the_input(tmp_path):
    src = tmp_path / "in.trace"
    src.write_text(EXAMPLE.read_text())
    r = c.compensate(c.read(src), overhead=1e-6)
    with pytest.raises(c.OutputError, match="overwrite the input"):
        c.write(r.trace, src, force=True)
    assert src.read_text() == EXAMPLE.read_text()


def test_write_a_simulated_trace(tmp_path):
    sim = simulate("montecarlo", ranks=2)
    c.write(sim.measured, tmp_path / "sim" / "traces.otf2")
    assert counts(c.read(tmp_path / "sim" / "traces.otf2")) == counts(sim.measured)


def test_analysis_entry_points():
    t = c.read(EXAMPLE)
    r = c.compensate(t, platform=EXAMPLE_PLATFORM)
    assert c.profile(t).span == pytest.approx(t.span_seconds)
    assert c.wait_states(t) is not None
    cmp = c.compare(t, r.trace)
    assert sum(cmp.percent(k) for k in ("execution", "other_mpi", "late_sender")) > 0
    assert "verified" in repr(r) and "records" in repr(r)


def test_to_dataframe():
    pd = pytest.importorskip("pandas")
    from compensate.analysis.frame import FRAME_COLUMNS

    t = c.read(EXAMPLE)
    df = c.to_dataframe(t)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(FRAME_COLUMNS)
    assert len(df) == t.record_count
    assert df.groupby("location").size().to_dict() == counts(t)
    res = t.definitions.timer_resolution
    first = min(int(ev.time[0]) for ev in t.events.values())
    for loc, ev in t.events.items():
        rows = df[df.location == loc]
        assert rows.record.tolist() == list(range(len(ev)))
        assert rows.time.tolist() == ev.time.tolist()
        assert np.allclose(rows.seconds, (ev.time - first) / res)
    enter = df[df.kind == "Enter"]
    assert enter.region.notna().all() and "MPI_Send" in set(enter.region)
    assert df[~df.kind.isin(["Enter", "Leave"])].region.isna().all()
    sends = df[df.kind == "MpiSend"]
    assert len(sends) == 8
    assert sends.bytes.notna().all() and sends.tag.notna().all() and sends.comm.notna().all()
    # on two locations, each sends to the other
    assert (sends.peer_location != sends.location).all()
    assert df[df.kind == "Enter"].bytes.isna().all()
    coll = df[df.kind == "MpiCollectiveEnd"]
    assert coll.op.notna().all()
    assert df.attrs["timer_resolution"] == res
    # compensated: the same records, row by row
    approx = c.to_dataframe(c.compensate(t, platform=EXAMPLE_PLATFORM).trace)
    assert (approx.kind == df.kind).all() and (approx.seconds <= df.seconds + 1e-12).all()


def test_to_dataframe_of_a_simulated_trace():
    pytest.importorskip("pandas")
    from compensate.model import COLLECTIVE_OPS

    sim = simulate("collectives", ranks=4, overhead=1e-6)
    df = c.to_dataframe(sim.measured)
    assert len(df) == sim.measured.record_count
    ops = set(df.op.dropna())
    assert ops and ops <= set(COLLECTIVE_OPS)


def test_to_dataframe_without_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(ImportError) as exc:
        c.to_dataframe(c.read(EXAMPLE))
    assert "pip install compensate[pandas]" in one_line(exc)
