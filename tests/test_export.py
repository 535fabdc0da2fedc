"""`compensate export`: Chrome/Perfetto trace-event JSON (compensate/export.py)."""

import json
from collections import defaultdict
from pathlib import Path

import pytest

from compensate.cli import main
from compensate.export import trace_events, write_trace_events
from compensate.matching import match
from compensate.simulate import simulate
from compensate.traceio import read_trace

CASES = Path(__file__).resolve().parent / "cases_analysis"

REQUIRED = {
    "M": {"name", "pid", "args"},
    "X": {"name", "cat", "pid", "tid", "ts", "dur"},
    "s": {"name", "cat", "id", "pid", "tid", "ts"},
    "f": {"name", "cat", "id", "pid", "tid", "ts", "bp"},
    "i": {"name", "pid", "tid", "ts", "s"},
}


def check_trace_event_document(doc: dict) -> dict:
    """Validate the parts of the trace-event format we use; return counts by phase."""
    assert isinstance(doc["traceEvents"], list)
    counts: dict[str, int] = defaultdict(int)
    slices: dict[tuple, list] = defaultdict(list)
    flows: dict[int, dict[str, dict]] = defaultdict(dict)
    for e in doc["traceEvents"]:
        ph = e["ph"]
        assert ph in REQUIRED, ph
        assert REQUIRED[ph] <= set(e), (ph, e)
        counts[ph] += 1
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if ph == "X":
            assert e["dur"] >= 0
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph in "sf":
            assert ph not in flows[e["id"]], f"duplicate flow {ph} for id {e['id']}"
            flows[e["id"]][ph] = e
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
    # every flow has one start and one (enclosing-slice bound) end
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is not paired"
        assert pair["f"]["bp"] == "e"
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
    assert counts["X"] == regions
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {"MPI Rank 0", "MPI Rank 1"}
    assert doc["otherData"]["timer_resolution"] == trace.definitions.timer_resolution


def test_flows_sit_inside_the_send_and_receive_slices():
    trace = read_trace(CASES / "p2p.trace")
    doc = trace_events(trace)
    check_trace_event_document(doc)
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for e in doc["traceEvents"]:
        if e["ph"] not in "sf":
            continue
        want = "MPI_Recv" if e["ph"] == "f" else ("MPI_Send", "MPI_Ssend")
        inner = [x for x in xs if x["tid"] == e["tid"] and x["ts"] <= e["ts"] <= x["ts"] + x["dur"]]
        assert min(inner, key=lambda x: x["dur"])["name"] in want
    # times are microseconds from the earliest record: the first receive enter at 1 us
    recv = [x for x in xs if x["name"] == "MPI_Recv"]
    assert recv[0]["ts"] == pytest.approx(1.0) and recv[0]["dur"] == pytest.approx(4.1)


def test_collectives_and_flushes(tmp_path):
    trace = read_trace(CASES / "collectives.trace")
    counts = check_trace_event_document(trace_events(trace))
    assert counts["i"] == 5 * 3  # one instant per member of each of the 5 collectives
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
