"""Profiles, wait states, compare() and `compensate report` (compensate/analysis/,
compensate/cli/report.py).

Wait-state values are hand-computed in the case files under tests/cases_analysis/
(see the comments at their top); the simulated pair has a dilation known exactly.
"""

import json
import math
import re
from pathlib import Path

import pytest

from compensate.analysis import (
    CATEGORIES,
    WAIT_STATES,
    breakdown,
    compare,
    profile,
    wait_states,
)
from compensate.cli import main
from compensate.cli.report import REPORT_SCHEMA, report_dict
from compensate.engine import EngineOptions, compensate
from compensate.formats import read_trace, write_trace
from compensate.matching import check_structure
from compensate.model import (
    BUFFER_FLUSH,
    ENTER,
    LEAVE,
    METRIC,
    Definitions,
    Location,
    Trace,
    TraceError,
)
from compensate.simulate import default_platform, run_program, simulate
from compensate.simulate.programs import (
    Program,
    allreduce,
    barrier,
    bcast,
    call,
    compute,
    recv,
    reduce,
    send,
    ssend,
)
from tests.rowbuilder import RowBuilder

from ..conftest import REAL_ARCHIVES, ROOT

CASES = Path(__file__).resolve().parent.parent / "cases_analysis"
NS = 1e-9


def ns(by_loc: dict) -> dict:
    """Seconds per location -> integer nanoseconds (the cases use a 1 GHz timer)."""
    return {loc: round(v / NS) for loc, v in by_loc.items()}


# ---------------------------------------------------------------------------------
# wait states on hand-made traces

def test_point_to_point_wait_states():
    w = wait_states(read_trace(CASES / "p2p.trace"))
    assert ns(w.by_location["late_sender"]) == {0: 0, 1: 3000}
    # 1000 (MPI_Ssend) + 800 (MPI_Send inferred rendezvous); the early-entered
    # receive of case 5 and the non-overlapping case 2 wait nothing
    assert ns(w.by_location["late_receiver"]) == {0: 1800, 1: 0}
    assert w.count("late_sender") == 1 and w.count("late_receiver") == 2
    for s in ("wait_nxn", "wait_barrier", "late_broadcast", "early_reduce"):
        assert w.total(s) == 0 and w.count(s) == 0
    # where the waiting starts: the receive's enter / the send's enter
    assert [(loc, round(t / NS)) for loc, t, _ in w.instances["late_sender"]] == [(1, 1000)]
    assert [(loc, round(t / NS)) for loc, t, _ in w.instances["late_receiver"]] == \
        [(0, 8000), (0, 10000)]


def test_eager_limit_decides_late_receiver_for_mpi_send():
    t = read_trace(CASES / "p2p.trace")
    eager = wait_states(t, eager_limit=1000)  # 100-byte MPI_Send is eager: only the Ssend
    assert ns(eager.by_location["late_receiver"]) == {0: 1000, 1: 0}
    rendezvous = wait_states(t, eager_limit=10)  # every MPI_Send is synchronous
    # case 5's receive entered 200 ns into the send call: a rendezvous send waited that
    assert ns(rendezvous.by_location["late_receiver"]) == {0: 1000 + 800 + 200, 1: 0}


def test_collective_wait_states():
    w = wait_states(read_trace(CASES / "collectives.trace"))
    assert ns(w.by_location["wait_barrier"]) == {0: 2000, 1: 1500, 2: 0}
    assert ns(w.by_location["wait_nxn"]) == {0: 600, 1: 600, 2: 0}
    assert ns(w.by_location["late_broadcast"]) == {0: 0, 1: 500, 2: 0}
    assert ns(w.by_location["early_reduce"]) == {0: 0, 1: 0, 2: 800}  # not the gather
    assert w.total("late_sender") == w.total("late_receiver") == 0


def test_nonblocking_wait_states():
    w = wait_states(read_trace(CASES / "nonblocking.trace"))
    # one MPI_Waitall completing two late messages waits once, for the later sender
    assert ns(w.by_location["late_sender"]) == {0: 0, 1: 2000}
    assert w.count("late_sender") == 1
    # an MPI_Ssend waits until the MPI_Irecv is posted, not until the MPI_Wait
    assert ns(w.by_location["late_receiver"]) == {0: 200, 1: 0}
    assert w.total("wait_barrier") == 0  # the Ibarrier waits in its completion call


def test_late_sender_is_bounded_by_the_receive_call():
    w = wait_states(read_trace(CASES / "skew.trace"))
    assert ns(w.by_location["late_sender"]) == {0: 0, 1: 500}


# ---------------------------------------------------------------------------------
# profile on a hand-built trace

def _profile_trace() -> Trace:
    regions = {1: "A", 2: "B", 3: "MPI_Send", 4: "MPI_Init", 5: "MPI_Comm_size"}
    b0 = RowBuilder()  # nesting, recursion, flushes inside and outside MPI
    for t, kind, kw in [(0, ENTER, {"region": 1}), (100, ENTER, {"region": 2}),
                        (200, ENTER, {"region": 1}), (300, LEAVE, {"region": 1}),
                        (500, LEAVE, {"region": 2}), (600, ENTER, {"region": 3}),
                        (650, BUFFER_FLUSH, {"size": 670}), (700, LEAVE, {"region": 3}),
                        (800, BUFFER_FLUSH, {"size": 850}), (1000, LEAVE, {"region": 1})]:
        b0.add(t, kind, **kw)
    b1 = RowBuilder()  # a call still open at the end of the trace
    for t, kind, kw in [(0, ENTER, {"region": 1}), (500, ENTER, {"region": 2}),
                        (800, LEAVE, {"region": 2}), (900, METRIC, {})]:
        b1.add(t, kind, **kw)
    b2 = RowBuilder()  # an MPI call inside another counts once
    for t, kind, kw in [(0, ENTER, {"region": 4}), (100, ENTER, {"region": 5}),
                        (200, LEAVE, {"region": 5}), (400, LEAVE, {"region": 4}),
                        (500, METRIC, {})]:
        b2.add(t, kind, **kw)
    defs = Definitions(10**9, {i: Location(i, f"rank {i}", i) for i in range(3)}, regions)
    return Trace(defs, {0: b0.build(), 1: b1.build(), 2: b2.build()}, "profile-case")


def test_profile_times_regions_and_flushes():
    p = profile(_profile_trace())
    assert p.span == pytest.approx(1000 * NS)
    l0, l1, l2 = (p.locations[i] for i in range(3))
    assert (round(l0.duration / NS), round(l0.mpi / NS), round(l0.outside_mpi / NS)) == \
        (1000, 100, 900)
    assert (round(l0.flush / NS), round(l0.flush_in_mpi / NS)) == (70, 20)
    assert round(l1.duration / NS) == 900 and l1.mpi == 0
    assert round(l2.mpi / NS) == 400  # MPI_Comm_size inside MPI_Init is not added
    stats = {(r.location, r.name): (r.visits, round(r.inclusive / NS), round(r.exclusive / NS))
             for r in p.regions}
    assert stats[(0, "A")] == (2, 1000, 600)  # recursive A counted once inclusively
    assert stats[(0, "B")] == (1, 400, 300)
    assert stats[(0, "MPI_Send")] == (1, 100, 100)
    assert stats[(1, "A")] == (1, 900, 600)  # open call ends at the last record
    assert stats[(2, "MPI_Init")] == (1, 400, 300)
    totals = {r.name: r for r in p.region_totals()}
    assert totals["A"].visits == 3 and round(totals["A"].exclusive / NS) == 1200
    assert p.region_totals()[0].name == "A"  # largest exclusive time first


def test_breakdown_partitions_each_location():
    bd = breakdown(_profile_trace())
    c0 = {c: round(bd.by_location[c][0] / NS) for c in CATEGORIES}
    assert (c0["execution"], c0["flush"], c0["other_mpi"]) == (850, 70, 80)
    for tr in [_profile_trace(), read_trace(CASES / "collectives.trace"),
               read_trace(CASES / "p2p.trace")]:
        bd = breakdown(tr)
        for loc, lp in bd.profile.locations.items():
            assert sum(bd.by_location[c][loc] for c in CATEGORIES) == pytest.approx(lp.duration)


def test_bad_nesting_is_tolerated_and_refused_when_strict():
    """A Leave without an open Enter of its region closes nothing; a Leave out of
    order closes its own region's call (docs/design.md §4): the profile is built,
    and strict checking refuses the same location."""
    b = RowBuilder()
    b.add(0, ENTER, region=1)
    b.add(10, LEAVE, region=2)  # no open B: closes nothing
    b.add(20, ENTER, region=2)
    b.add(30, LEAVE, region=1)  # A left while B is open: A lasts 0..30
    b.add(50, LEAVE, region=2)  # B: 20..50
    defs = Definitions(10**9, {0: Location(0)}, {1: "A", 2: "B"})
    trace = Trace(defs, {0: b.build()}, "bad")
    prof = profile(trace)
    incl = {r.name: r.inclusive * 1e9 for r in prof.regions}
    excl = {r.name: r.exclusive * 1e9 for r in prof.regions}
    assert incl == pytest.approx({"A": 30, "B": 30})
    # B's time inside A (20..30) is not A's own; nothing is negative
    assert excl == pytest.approx({"A": 20, "B": 30})
    with pytest.raises(TraceError, match="record 1: Leave without a matching Enter"):
        check_structure(trace, 0, trace.events[0], strict=True)


# ---------------------------------------------------------------------------------
# compare() on simulated pairs whose dilation is known

def _tracer_late_sender():
    """Rank 0 writes 20 empty calls (40 records of 1 us) before its send; rank 1
    computes 5 us and receives. Truth: the send starts at 0, before the receive (no
    wait). Measured: Enter(MPI_Send) at 42 us, Enter(MPI_Recv) at 7 us: a Late Sender
    of 35 us made entirely by the tracer."""
    prog = Program("tracer-late-sender", [[call("f", 0.0) for _ in range(20)] + [send(1, 8)],
                                          [compute(5e-6), recv(0)]])
    return run_program(prog, default_platform(1e-6), quantize=True)


def test_compare_attributes_a_tracer_made_late_sender():
    sim = _tracer_late_sender()
    assert ns(wait_states(sim.measured).by_location["late_sender"]) == {0: 0, 1: 35000}
    assert wait_states(sim.truth).total("late_sender") == 0
    c = compare(sim.measured, sim.truth)
    assert round(c.diff("late_sender") / NS) == 35000
    assert c.share("late_sender", 1) == pytest.approx(100.0)
    assert c.top_location("late_sender") == (1, pytest.approx(100.0))
    m, t = c.measured.profile, c.approximated.profile
    assert c.total_diff == pytest.approx(m.duration - t.duration)
    assert c.span_diff == pytest.approx(sim.info["span_measured"] - sim.info["span_truth"])
    assert sum(c.percent(k) for k in CATEGORIES) == pytest.approx(100.0)
    assert sum(c.location_percent(loc) for loc in c.locations) == pytest.approx(100.0)


def test_late_sender_disappears_after_compensation():
    sim = _tracer_late_sender()
    approx = compensate(sim.measured, sim.platform, EngineOptions("lower")).trace
    assert wait_states(approx).total("late_sender") == 0
    c = compare(sim.measured, approx)
    assert round(c.diff("late_sender") / NS) == 35000


# Every pattern made by the tracer alone: the "slow" rank writes 20 empty calls (40
# records of 1 us) before the operation, the other computes 5 us untraced. Measured,
# the other rank waits 35 us; in the truth (and after compensation) the slow rank is
# first. For the n-to-n patterns the truth keeps a real wait of 5 us on the slow rank.
_SLOW = [call("f", 0.0) for _ in range(20)]
_FAST = [compute(5e-6)]


@pytest.mark.parametrize("state, ops, waiter, truth_ns", [
    ("late_sender", [_SLOW + [send(1, 8)], _FAST + [recv(0)]], 1, {0: 0, 1: 0}),
    ("late_receiver", [_FAST + [ssend(1, 8)], _SLOW + [recv(0)]], 0, {0: 0, 1: 0}),
    ("wait_barrier", [_SLOW + [barrier()], _FAST + [barrier()]], 1, {0: 5000, 1: 0}),
    ("wait_nxn", [_SLOW + [allreduce(8)], _FAST + [allreduce(8)]], 1, {0: 5000, 1: 0}),
    ("late_broadcast", [_SLOW + [bcast(8, 0)], _FAST + [bcast(8, 0)]], 1, {0: 0, 1: 0}),
    ("early_reduce", [_SLOW + [reduce(8, 1)], _FAST + [reduce(8, 1)]], 1, {0: 0, 1: 0}),
])
@pytest.mark.parametrize("bound", ["lower", "upper"])
def test_tracer_made_wait_state_disappears_after_compensation(state, ops, waiter, truth_ns,
                                                              bound):
    sim = run_program(Program(state, ops), default_platform(1e-6), quantize=True)
    measured = ns(wait_states(sim.measured).by_location[state])
    assert measured == {waiter: 35000, 1 - waiter: 0}
    assert ns(wait_states(sim.truth).by_location[state]) == truth_ns
    approx = compensate(sim.measured, sim.platform, EngineOptions(bound)).trace
    assert ns(wait_states(approx).by_location[state]) == truth_ns  # gone, and real waits kept
    c = compare(sim.measured, approx)
    assert round(c.diff(state, waiter) / NS) == 35000
    assert c.top_location(state) == (waiter, pytest.approx(100.0 * 35000 / (
        35000 - sum(truth_ns.values()))))


def test_compare_montecarlo_breakdown_is_consistent():
    sim = simulate("montecarlo", ranks=4, overhead=1e-6, iterations=3)
    c = compare(sim.measured, sim.truth)
    assert c.total_diff > 0
    m, t = c.measured.profile.locations, c.approximated.profile.locations
    for loc in c.locations:
        d = m[loc].duration - t[loc].duration
        assert c.location_diff(loc) == pytest.approx(d)
    assert sum(c.percent(k) for k in CATEGORIES) == pytest.approx(100.0)
    # the tracer's cost is mostly dilated execution on the workers, and the master
    # (location 0) carries most of the Late Sender it caused
    assert c.percent("execution") > 40
    assert c.top_location("late_sender")[0] == 0


def test_compare_needs_the_same_locations():
    a = read_trace(CASES / "p2p.trace")
    b = read_trace(CASES / "collectives.trace")
    with pytest.raises(TraceError, match="different locations"):
        compare(a, b)


# ---------------------------------------------------------------------------------
# `compensate report`

@pytest.fixture(scope="module", params=REAL_ARCHIVES, ids=lambda p: p.parent.name)
def compensated_pair(request, tmp_path_factory):
    """(measured, approximated) paths of each real archive."""
    archive = request.param
    if not archive.exists():
        pytest.skip(f"{archive} not available")
    out = tmp_path_factory.mktemp("report") / "approx" / "traces.otf2"
    assert main([str(archive), str(out), "--overhead", "100ns", "--quiet"]) == 0
    return archive, out


def test_report_one_real_archive(real_archive, capsys):
    assert main(["report", str(real_archive)]) == 0
    out = capsys.readouterr().out
    assert "2 locations" in out
    assert re.search(r"^Late Sender\s+\d", out, re.M)
    assert re.search(r"^MPI_Send\s+16\s", out, re.M)  # 8 round trips, 2 ranks
    assert re.search(r"^total\s", out, re.M)


def test_report_two_traces_with_json(compensated_pair, tmp_path, capsys):
    measured, approx = compensated_pair
    js = tmp_path / "r.json"
    assert main(["report", str(measured), str(approx), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    for label in ("total execution time (span)", "execution (outside MPI)", "Late Sender",
                  "other MPI", "by location"):
        assert label in out
    doc = json.loads(js.read_text())
    _check_report_json(doc)
    assert len(doc["traces"]) == 2 and doc["comparison"] is not None
    cats = doc["comparison"]["categories"]
    total = doc["comparison"]["total_difference"]
    assert sum(v["difference"] for v in cats.values()) == pytest.approx(total)
    assert doc["comparison"]["span"]["difference"] > 0  # compensation removed time


def test_report_json_one_trace_on_simulated_pair(tmp_path, capsys):
    sim = simulate("montecarlo", ranks=3, iterations=2)
    paths = [tmp_path / "measured.trace", tmp_path / "truth.trace"]
    write_trace(sim.measured, paths[0])
    write_trace(sim.truth, paths[1])
    js = tmp_path / "one.json"
    assert main(["report", str(paths[0]), "--json", str(js)]) == 0
    doc = json.loads(js.read_text())
    _check_report_json(doc)
    assert doc["comparison"] is None
    assert main(["report", str(paths[0]), str(paths[1])]) == 0
    assert "Late Sender" in capsys.readouterr().out


def test_report_on_a_simulated_master_worker_pair(tmp_path, capsys):
    """The paper's master/worker program, measured and compensated as a user would:
    OTF2 in, `compensate`, then `compensate report` on one and on both traces."""
    sim = simulate("montecarlo", ranks=4, iterations=3)
    measured = tmp_path / "measured" / "traces.otf2"
    approx = tmp_path / "approx" / "traces.otf2"
    platform = tmp_path / "platform.json"
    write_trace(sim.measured, measured)
    platform.write_text(json.dumps(sim.platform.to_dict()))
    assert main([str(measured), str(approx), "--platform", str(platform), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(measured)]) == 0
    out = capsys.readouterr().out
    assert "4 locations" in out and re.search(r"^total\s", out, re.M)
    assert re.search(r"^Late Sender\s+\d", out, re.M) and re.search(r"^get_coords\s", out, re.M)
    js = tmp_path / "report.json"
    assert main(["report", str(measured), str(approx), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    for rank in range(4):
        assert re.search(rf"^{rank} MPI Rank {rank}\s+\d", out, re.M)
    doc = json.loads(js.read_text())
    _check_report_json(doc)
    cmp = doc["comparison"]
    assert cmp["span"]["difference"] > 0.5 * (sim.info["span_measured"] - sim.info["span_truth"])
    late = cmp["categories"]["late_sender"]
    assert late["difference"] > 0
    assert max(late["by_location"], key=lambda k: late["by_location"][k]["difference"]) == "0"


def _schema_validator():
    """A JSON Schema validator for REPORT_SCHEMA (jsonschema is in the test extra:
    the report is always validated, never skipped)."""
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - the test extra installs it
        pytest.fail("jsonschema is needed to validate `compensate report --json`: "
                    "pip install -e '.[test]'")
    cls = jsonschema.validators.validator_for(REPORT_SCHEMA)
    cls.check_schema(REPORT_SCHEMA)  # the schema itself is valid (draft 2020-12)
    return cls(REPORT_SCHEMA)


def _check_report_json(doc: dict) -> None:
    """The documented schema plus the key invariants."""
    errors = sorted(_schema_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert doc["schema"] == "compensate-report/1" and doc["unit"] == "s"
    for tr in doc["traces"]:
        assert set(tr["wait_states"]) == set(WAIT_STATES)
        assert set(tr["breakdown"]) == set(CATEGORIES)
        for lp in tr["profile"]["locations"]:
            assert lp["mpi"] + lp["outside_mpi"] == pytest.approx(lp["duration"])


def test_documented_schema_matches_the_code():
    text = (ROOT / "docs" / "analysis.md").read_text()
    block = re.search(r"<!-- schema -->\s*```json\n(.*?)```", text, re.S)
    assert block, "docs/analysis.md lacks the report JSON schema block"
    assert json.loads(block.group(1)) == json.loads(json.dumps(REPORT_SCHEMA))


def _two_trace_report() -> dict:
    measured = read_trace(CASES / "p2p.trace")
    approx = measured.with_times({loc: ev.time // 2 for loc, ev in measured.events.items()})
    c = compare(measured, approx)
    return json.loads(json.dumps(report_dict([(measured, c.measured), (approx, c.approximated)],
                                             c), allow_nan=False))


def _break(path: str, value=None, *, delete: bool = False):
    """A mutation of the report document: set (or delete) the item at a ``/`` path."""
    def apply(doc: dict) -> None:
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if delete:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return apply


def _append_third_trace(doc: dict) -> None:
    doc["traces"].append(doc["traces"][0])


@pytest.mark.parametrize("mutate", [
    pytest.param(_break("comparison", delete=True), id="no comparison"),
    pytest.param(_break("comparison", []), id="comparison not an object"),
    pytest.param(_break("schema", "compensate-report/2"), id="schema id"),
    pytest.param(_break("unit", "ms"), id="unit"),
    pytest.param(_break("traces", []), id="no traces"),
    pytest.param(_append_third_trace, id="three traces"),
    pytest.param(_break("traces/0/records", 1.5), id="records not an integer"),
    pytest.param(_break("traces/0/profile/span", "1.0"), id="span a string"),
    pytest.param(_break("traces/0/profile/locations/0/label", delete=True), id="no label"),
    pytest.param(_break("traces/1/wait_states/late_sender", delete=True), id="no late sender"),
    pytest.param(_break("traces/1/wait_states/wait_nxn/count", True), id="count a boolean"),
    pytest.param(_break("traces/0/breakdown/execution/by_location/0", None), id="null time"),
    pytest.param(_break("comparison/categories/other_mpi/percent", "n/a"), id="percent text"),
    pytest.param(_break("comparison/categories/flush/by_location/1/share", delete=True),
                 id="no share"),
    pytest.param(_break("comparison/locations/0/difference", None), id="null difference"),
])
def test_report_schema_rejects_broken_documents(mutate):
    """The validation the report tests rely on can fail: every broken copy of a valid
    document is rejected."""
    doc = _two_trace_report()
    _check_report_json(doc)
    validator = _schema_validator()
    mutate(doc)
    assert list(validator.iter_errors(doc)), "a broken report passed the schema"


@pytest.mark.parametrize("argv, code, message", [
    (["report"], 2, "required: TRACE"),
    (["report", "a.txt"], 2, "unknown trace format"),
    (["report", "missing.otf2"], 3, "no such file"),
    (["report", str(CASES / "p2p.trace"), str(CASES / "collectives.trace")], 3,
     "different locations"),
    (["report", str(CASES / "p2p.trace"), "--top", "x"], 2, "invalid value 'x': a whole number"),
])
def test_report_errors_are_one_line(argv, code, message, capsys):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.startswith("compensate report: error:")


@pytest.mark.parametrize("command", ["report", "export"])
def test_a_trace_whose_read_buffers_do_not_fit_is_refused_first(tmp_path, monkeypatch,
                                                               capsys, command):
    """16 locations x 16 MiB (EZTrace's event chunks) + 16 MiB against 100 MiB:
    one line, exit 3, before anything is read, no JSON written."""
    import compensate.pipeline.memory as memory

    nested = ROOT / "tests" / "data" / "eztrace" / "nested" / "eztrace_log.otf2"
    monkeypatch.setattr(memory, "available_memory", lambda: 100 << 20)
    out = tmp_path / "r.json"
    argv = [command, str(nested), str(out)] if command == "export" else \
        [command, str(nested), "--json", str(out)]
    assert main(argv) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"compensate {command}: error: {nested}: reading its 16 locations needs "
                   f"about 272 MiB for the OTF2 library's read buffers alone (an event chunk "
                   f"of 16 MiB per location, as the archive's writer sized them), more than "
                   f"the 100 MiB available; nothing written"]
    assert not out.exists()


def test_report_bad_nesting_is_a_note_and_exit_3_when_strict(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    bad.write_text("compensate-trace 1\ntimer_resolution 10\nlocation 0\nregion 1 \"A\"\n"
                   "events\n0 0 Leave region=1\n")
    assert main(["report", str(bad)]) == 0
    err = capsys.readouterr().err
    assert "1 Leave records do not nest" in err and "location 0, record 0" in err
    assert main(["report", str(bad), "--strict"]) == 3
    err = capsys.readouterr().err
    assert "Leave without a matching Enter" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("compensate report: error:")


def test_nan_percentages_when_nothing_changed():
    t = read_trace(CASES / "p2p.trace")
    c = compare(t, t)
    assert c.total_diff == 0 and math.isnan(c.percent("execution"))
    assert c.to_dict()["categories"]["execution"]["percent"] is None
