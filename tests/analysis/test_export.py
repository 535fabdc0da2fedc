"""`compensate export`: Chrome/Perfetto trace-event JSON (compensate/analysis/export.py)."""

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from compensate.analysis.export import trace_events, write_trace_events
from compensate.cli import main
from compensate.formats import read_trace
from compensate.matching import match
from compensate.model import KIND_NAMES, METRIC
from compensate.simulate import simulate

from ..conftest import read_bundled

ROOT = Path(__file__).resolve().parent.parent.parent
CASES = ROOT / "tests" / "cases_analysis"

REQUIRED = {
    "M": {"name", "pid", "args"},
    "X": {"name", "cat", "pid", "tid", "ts", "dur"},
    "B": {"name", "pid", "tid", "ts"},
    "E": {"pid", "tid", "ts"},
    "s": {"name", "cat", "id", "pid", "tid", "ts"},
    "f": {"name", "cat", "id", "pid", "tid", "ts", "bp"},
    "i": {"name", "pid", "tid", "ts", "s"},
    "C": {"name", "pid", "ts", "args"},
}

#: JSON Schema of the part of the trace-event format (Google's "Trace Event Format"
#: document) that `compensate export` writes, plus begin/end events ("B"/"E") so that
#: the check also covers them.
TRACE_EVENT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {"type": "array", "items": {"allOf": [
            {"type": "object", "required": ["ph", "pid"],
             "properties": {
                 "ph": {"enum": sorted(REQUIRED)},
                 "name": {"type": "string"}, "cat": {"type": "string"},
                 "pid": {"type": "integer"}, "tid": {"type": "integer"},
                 "ts": {"type": "number", "minimum": 0},
                 "dur": {"type": "number", "minimum": 0},
                 "id": {"type": ["integer", "string"]},
                 "bp": {"const": "e"},
                 "s": {"enum": ["g", "p", "t"]},
                 "args": {"type": "object"}}},
            *({"if": {"properties": {"ph": {"const": ph}}}, "then": {"required": sorted(keys)}}
              for ph, keys in REQUIRED.items()),
            {"if": {"properties": {"ph": {"const": "M"}}},
             "then": {"properties": {"name": {"enum": ["process_name", "process_sort_index",
                                                       "thread_name", "thread_sort_index"]}}}},
        ]}},
    },
}


def _validate_schema(doc: dict) -> None:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - the test extra installs it
        pytest.fail("jsonschema is needed to validate the trace-event JSON: "
                    "pip install -e '.[test]'")
    jsonschema.Draft202012Validator.check_schema(TRACE_EVENT_SCHEMA)
    # the schema judges an event by its keys, their types, the values of the enum-like
    # keys and the sign of the times: validate one event of each such shape (a
    # 70 000-event document has a few dozen; validating all of them took 13 s)
    shapes: dict[tuple, dict] = {}
    for e in doc["traceEvents"]:
        shapes.setdefault(_shape(e), e)
    sample = {**doc, "traceEvents": list(shapes.values())}
    errors = list(jsonschema.Draft202012Validator(TRACE_EVENT_SCHEMA).iter_errors(sample))
    assert not errors, "\n".join(f"{e.message}: {e.instance}" for e in errors[:10])


def _shape(e: dict) -> tuple:
    """What the schema looks at: keys, value types (int, float and bool apart), the
    values of ph, s, bp and a metadata event's name, and whether a time is negative."""
    enum_like = ("ph", "s", "bp") + (("name",) if e.get("ph") == "M" else ())

    def what(k, v):
        if k in enum_like:
            return v
        return isinstance(v, (int, float)) and v < 0 if k in ("ts", "dur") else None

    return tuple(sorted((k, type(v).__name__, what(k, v)) for k, v in e.items()))


def check_trace_event_document(doc: dict, open_calls: int = 0) -> dict:
    """Validate a trace-event document: the schema (required keys per phase, types),
    then what a schema cannot say: every process and thread is named, begin/end events
    match (``open_calls`` begin events may stay open: calls a truncated trace never
    left), slices on a thread nest, and every flow id has exactly one start and one
    end, each inside a slice of its thread, the end not before the start. Return the
    number of events by phase."""
    _validate_schema(doc)
    counts: dict[str, int] = defaultdict(int)
    slices: dict[tuple, list] = defaultdict(list)
    open_b: dict[tuple, list] = defaultdict(list)
    flows: dict[object, dict[str, dict]] = defaultdict(dict)
    named_pids, named_tids, used = set(), set(), set()
    for e in doc["traceEvents"]:
        ph = e["ph"]
        counts[ph] += 1
        if ph == "M":
            if e["name"] == "process_name":
                named_pids.add(e["pid"])
            elif e["name"] == "thread_name":
                named_tids.add((e["pid"], e["tid"]))
            continue
        key = (e["pid"], e["tid"])
        used.add(key)
        if ph == "X":
            slices[key].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "B":
            open_b[key].append(e)
        elif ph == "E":  # closes the innermost open "B" of its thread (and names it, if named)
            assert open_b[key], f"{key}: end event at {e['ts']} without a begin"
            b = open_b[key].pop()
            assert e.get("name", b["name"]) == b["name"], f"{key}: {b['name']} ended as {e}"
            assert e["ts"] >= b["ts"], f"{key}: {b['name']} ends before it begins"
            slices[key].append((b["ts"], e["ts"], b["name"]))
        elif ph in "sf":
            assert ph not in flows[e["id"]], f"duplicate flow {ph} for id {e['id']}"
            flows[e["id"]][ph] = e
        elif ph == "C":  # a counter's series are its numeric args
            assert e["args"] and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                     for v in e["args"].values()), f"counter {e}"
    still_open = sum(len(stack) for stack in open_b.values())
    assert still_open == open_calls, \
        f"{still_open} calls begun and never ended: {dict(open_b)}"[:500]
    for pid, tid in used:
        assert pid in named_pids and (pid, tid) in named_tids, f"unnamed {(pid, tid)}"
    # slices on one thread nest: sorted by start (longest first), each one ends
    # within the innermost slice still open at its start
    eps = 1e-6
    for key, evs in slices.items():
        stack: list[tuple] = []
        for ts, te, name in sorted(evs, key=lambda x: (x[0], -(x[1] - x[0]))):
            while stack and stack[-1][1] <= ts + eps and stack[-1][0] < ts:
                stack.pop()
            if stack:
                top = stack[-1]
                assert te <= top[1] + eps, f"{key}: {name} [{ts}, {te}] overlaps {top}"
            stack.append((ts, te, name))

    def inside_a_slice(e: dict) -> bool:
        return any(a - eps <= e["ts"] <= b + eps for a, b, _ in slices[(e["pid"], e["tid"])])

    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is not paired"
        s_, f_ = pair["s"], pair["f"]
        assert f_["bp"] == "e" and s_["name"] == f_["name"] and s_["cat"] == f_["cat"]
        assert f_["ts"] >= s_["ts"] - eps, f"flow {fid} goes back in time"
        assert inside_a_slice(s_) and inside_a_slice(f_), f"flow {fid} not bound to a slice"
    return dict(counts)


def test_real_archive_export(real_archive, tmp_path):
    out = tmp_path / "t.json"
    assert main(["export", str(real_archive), str(out)]) == 0
    doc = json.loads(out.read_text())
    counts = check_trace_event_document(doc)
    trace = read_trace(real_archive)
    m = match(trace)
    assert counts["s"] == counts["f"] == len(m.messages) == 16
    regions = sum(int((ev.kind == 0).sum()) for ev in trace.events.values())  # Enter records
    assert counts["B"] == counts["E"] == regions
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {"MPI Rank 0", "MPI Rank 1"}
    assert doc["otherData"]["timer_resolution"] == trace.definitions.timer_resolution


#: the record kinds each drawn phase stands for (instants of category "record" are
#: named after their kind; collective instants are MpiCollectiveEnd records)
def records_of_events(doc: dict) -> Counter:
    """Count the records a document's events stand for, by kind."""
    seen: Counter = Counter()
    for e in doc["traceEvents"]:
        ph = e["ph"]
        if ph == "M":
            continue
        if ph in "BE":
            seen["Enter" if ph == "B" else "Leave"] += 1
        elif ph == "C":
            seen["Metric"] += 1
        elif ph == "X":
            assert e["cat"] == "tracer"
            seen["BufferFlush"] += 1
        elif ph in "sf":
            seen[e["args"]["record"]] += 1
        elif e["cat"] == "collective":
            seen["MpiCollectiveEnd"] += 1
        else:
            assert e["cat"] == "record"
            seen[e["name"]] += 1
    return seen


def records_of_trace(trace) -> Counter:
    return Counter(KIND_NAMES[k] for ev in trace.events.values() for k in ev.kind.tolist())


BUNDLED = sorted((ROOT / "tests" / "data" / "traces").glob("*/traces.otf2"))


@pytest.mark.parametrize("archive", BUNDLED, ids=lambda p: p.parent.name)
def test_every_record_of_every_bundled_archive_is_exported(archive):
    """Records in == events out, by kind (the PAPI trace's Metric records included)."""
    trace = read_bundled(archive)
    doc = trace_events(trace)
    check_trace_event_document(doc)
    events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert len(events) == trace.record_count
    assert records_of_events(doc) == records_of_trace(trace)


def test_metrics_are_counter_tracks_named_by_their_members():
    papi = ROOT / "tests" / "data" / "traces" / "ping-pong-otf2-papi" / "traces.otf2"
    if not papi.exists():
        pytest.skip(f"{papi} not available")
    trace = read_trace(papi)
    doc = trace_events(trace)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == 84
    assert {e["name"] for e in counters} == {"PAPI_TOT_CYC, PAPI_L2_TCM, PAPI_BR_MSP"}
    first = trace.events[counters[0]["tid"]]
    i = int(np.flatnonzero(first.kind == METRIC)[0])
    assert counters[0]["args"] == dict(zip(("PAPI_TOT_CYC", "PAPI_L2_TCM", "PAPI_BR_MSP"),
                                           first.payload[i].values, strict=True))
    assert all(e["id"] == e["tid"] for e in counters)


def test_text_metric_and_unmatched_records_are_kept():
    from compensate.analysis.export import metric_values

    assert metric_values({"metric_ref": "0", "values": "1523,88"}) == \
        ("metric 0", {"value 0": 1523, "value 1": 88})
    assert metric_values(None) == ("Metric", {"value": 0})


def test_non_finite_metric_members_are_left_out_of_valid_json():
    """A plugin's or PAPI's derived metric can report NaN or infinity; JSON has no
    such numbers (``JSON.parse`` refuses ``NaN``), so those members are left out."""
    import json
    import types

    from compensate.analysis.export import metric_values

    metric = types.SimpleNamespace(members=[types.SimpleNamespace(name=n)
                                            for n in ("a", "b", "c", "d")])
    event = types.SimpleNamespace(metric=metric,
                                  values=[1.5, float("nan"), float("inf"), -float("inf")])
    name, args = metric_values(event)
    assert (name, args) == ("a, b, c, d", {"a": 1.5})
    assert metric_values({"metric_ref": "1", "values": "nan,2,inf"}) == \
        ("metric 1", {"value 1": 2})

    def strict(token: str) -> None:
        raise ValueError(token)

    json.loads(json.dumps({"args": args}), parse_constant=strict)


def _slices(doc: dict) -> list[dict]:
    """Calls as {name, tid, ts, end} from the begin/end events."""
    open_b: dict[int, list] = defaultdict(list)
    out = []
    for e in doc["traceEvents"]:
        if e["ph"] == "B":
            open_b[e["tid"]].append(e)
        elif e["ph"] == "E":
            b = open_b[e["tid"]].pop()
            out.append({"name": b["name"], "tid": b["tid"], "ts": b["ts"], "end": e["ts"]})
    return out


def test_flows_sit_inside_the_send_and_receive_slices():
    trace = read_trace(CASES / "p2p.trace")
    doc = trace_events(trace)
    check_trace_event_document(doc)
    xs = _slices(doc)
    for e in doc["traceEvents"]:
        if e["ph"] not in "sf":
            continue
        want = "MPI_Recv" if e["ph"] == "f" else ("MPI_Send", "MPI_Ssend")
        inner = [x for x in xs if x["tid"] == e["tid"] and x["ts"] <= e["ts"] <= x["end"]]
        assert min(inner, key=lambda x: x["end"] - x["ts"])["name"] in want
    # times are microseconds from the earliest record: the first receive enter at 1 us
    recv = [x for x in xs if x["name"] == "MPI_Recv"]
    assert recv[0]["ts"] == pytest.approx(1.0) and recv[0]["end"] - recv[0]["ts"] == \
        pytest.approx(4.1)


def test_collectives_and_flushes(tmp_path):
    trace = read_trace(CASES / "collectives.trace")
    counts = check_trace_event_document(trace_events(trace))
    collective = [e for e in trace_events(trace)["traceEvents"] if e.get("cat") == "collective"]
    assert len(collective) == 5 * 3  # one instant per member of each of the 5 collectives
    assert counts["i"] >= len(collective)
    sim = simulate("imbalanced", ranks=3, iterations=30)  # flushes every 25 iterations
    path = tmp_path / "sim.json"
    n = write_trace_events(sim.measured, path)
    doc = json.loads(path.read_text())
    assert n == len(doc["traceEvents"])
    counts = check_trace_event_document(doc)
    flushes = [e for e in doc["traceEvents"] if e.get("cat") == "tracer"]
    assert flushes and all(e["dur"] > 0 for e in flushes)
    assert counts["i"] > 0


def test_export_cli_refuses_and_reports(tmp_path, capsys):
    src = str(CASES / "p2p.trace")
    out = tmp_path / "x.json"
    assert main(["export", src, str(out)]) == 0
    assert "trace events" in capsys.readouterr().out
    assert main(["export", src, str(out)]) == 3  # exists
    assert "--force" in capsys.readouterr().err
    assert main(["export", src, str(out), "--force"]) == 0
    assert main(["export", src, str(tmp_path / "x.txt")]) == 2
    assert main(["export", str(tmp_path / "none.trace"), str(tmp_path / "y.json")]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no such file" in err
    assert not (tmp_path / "y.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_export_of_measured_and_compensated_simulation():
    from compensate.engine import EngineOptions, compensate

    sim = simulate("montecarlo", ranks=4, iterations=3)
    for trace in (sim.measured, compensate(sim.measured, sim.platform,
                                           EngineOptions("lower")).trace):
        counts = check_trace_event_document(json.loads(json.dumps(trace_events(trace))))
        assert counts["s"] == counts["f"] == len(match(trace).messages) > 0
        assert counts["B"] == sum(int((ev.kind == 0).sum()) for ev in trace.events.values())


# ---------------------------------------------------------------------------------
# the checker itself: a small valid document with begin/end events, and broken copies

def _small_document() -> dict:
    meta = [{"ph": "M", "name": "process_name", "pid": p, "args": {"name": f"rank {p}"}}
            for p in (0, 1)]
    meta += [{"ph": "M", "name": "thread_name", "pid": p, "tid": p, "args": {"name": "main"}}
             for p in (0, 1)]
    x = {"cat": "MPI", "ph": "X"}
    return {"traceEvents": meta + [
        {"ph": "B", "name": "main", "pid": 0, "tid": 0, "ts": 0.0},
        {**x, "name": "MPI_Send", "pid": 0, "tid": 0, "ts": 1.0, "dur": 1.0},
        {"ph": "s", "name": "message", "cat": "p2p", "id": 7, "pid": 0, "tid": 0, "ts": 1.5},
        {"ph": "E", "pid": 0, "tid": 0, "ts": 10.0},
        {"ph": "B", "name": "main", "pid": 1, "tid": 1, "ts": 0.0},
        {**x, "name": "MPI_Recv", "pid": 1, "tid": 1, "ts": 0.5, "dur": 4.5},
        {"ph": "f", "bp": "e", "name": "message", "cat": "p2p", "id": 7, "pid": 1, "tid": 1,
         "ts": 4.0},
        {"ph": "i", "s": "t", "name": "BARRIER", "pid": 1, "tid": 1, "ts": 6.0},
        {"ph": "E", "name": "main", "pid": 1, "tid": 1, "ts": 9.0},
    ]}


def test_checker_accepts_begin_end_and_flows():
    assert check_trace_event_document(_small_document()) == {
        "M": 4, "B": 2, "E": 2, "X": 2, "s": 1, "f": 1, "i": 1}


def _without(index: int, key: str):
    def apply(events: list) -> None:
        del events[index][key]
    return apply


def _set(index: int, key: str, value):
    def apply(events: list) -> None:
        events[index][key] = value
    return apply


def _drop(index: int):
    def apply(events: list) -> None:
        del events[index]
    return apply


def _second_flow_end(events: list) -> None:
    events[6] = {**events[10], "pid": 0, "tid": 0, "ts": 1.5}  # the start becomes an end


@pytest.mark.parametrize("mutate, message", [
    pytest.param(_without(5, "dur"), "'dur' is a required property", id="slice without dur"),
    pytest.param(_without(6, "id"), "'id' is a required property", id="flow without id"),
    pytest.param(_without(10, "bp"), "'bp' is a required property", id="flow end not bound"),
    pytest.param(_set(5, "ph", "Z"), "'Z' is not one of", id="unknown phase"),
    pytest.param(_set(5, "ts", -1.0), "less than the minimum", id="negative time"),
    pytest.param(_set(5, "pid", "0"), "is not of type 'integer'", id="pid a string"),
    pytest.param(_set(5, "dur", 20.0), "overlaps", id="slice overlaps its parent"),
    pytest.param(_drop(7), "begun and never ended", id="begin without end"),
    pytest.param(_drop(4), "without a begin", id="end without begin"),
    pytest.param(_set(12, "name", "other"), "ended as", id="end of another slice"),
    pytest.param(_drop(10), "not paired", id="flow without end"),
    pytest.param(_set(10, "id", 8), "not paired", id="flow ids not paired"),
    pytest.param(_second_flow_end, "duplicate flow f", id="two flow ends"),
    pytest.param(_set(10, "ts", 1.0), "back in time", id="flow backwards"),
    pytest.param(_set(10, "ts", 9.5), "not bound to a slice", id="flow end outside a slice"),
    pytest.param(_drop(2), "unnamed", id="unnamed thread"),
])
def test_checker_rejects_broken_documents(mutate, message):
    doc = _small_document()
    mutate(doc["traceEvents"])
    with pytest.raises(AssertionError, match=message):
        check_trace_event_document(doc)


@pytest.mark.parametrize("archive, package", [
    (ROOT / "tests" / "data" / "traces" / "ping-pong-otf2" / "traces.otf2", False),
    (ROOT / "tests" / "data" / "traces" / "hip-two-gpu-metrics" / "traces.otf2", True)],
    ids=["no-metrics", "metrics"])
def test_the_export_command_reads_the_package_only_for_metric_values(
        archive, package, tmp_path, monkeypatch):
    """``compensate export`` reads an archive without metric samples by the C path
    (no event object per record) and one with them through the ``otf2`` package,
    whose payloads hold the values; the document is the one written from
    ``read_trace``'s trace either way."""
    import compensate.cli.report as report

    if not archive.exists():
        pytest.skip(f"{archive} not available")
    whole = tmp_path / "whole.json"
    write_trace_events(read_trace(archive), whole)
    used = []
    real = report.read_trace
    monkeypatch.setattr(report, "read_trace", lambda path: used.append(path) or real(path))
    out = tmp_path / "t.json"
    assert main(["export", str(archive), str(out)]) == 0
    assert used == ([str(archive)] if package else [])
    assert json.loads(out.read_text()) == json.loads(whole.read_text())
