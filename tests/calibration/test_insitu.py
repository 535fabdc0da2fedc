"""The tracer's in-situ overhead (calibration/tracer/insitu.py): brackets turned into
per-record costs by hand-computed cases, and a short real traced run whose table
is in the archive and is what ``compensate`` uses by default."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import numpy as np
import otf2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.tracer import buffer as tb
from calibration.tracer import insitu
from calibration.tracer.functions import LAYER_PERIOD
from compensate import compensate as compensate_api
from compensate.cli.compensate import main
from compensate.formats.otf2 import read_otf2
from compensate.model import KIND_CODE
from tests.conftest import mpiexec as _mpiexec

ROOT = Path(__file__).resolve().parent.parent.parent


def test_samples_hand_computed() -> None:
    """Two wrapper runs: (100, 140) handed back at 900, (1100, 1150) at 1300; the
    records at 1000 and 5000 are the program's (not bracketed). A record followed
    by one of its run costs the gap, the last of a run the time to the hand-back
    plus the bracket's own cost (10 ns here)."""
    times = np.array([100, 140, 1000, 1100, 1150, 5000])
    backs = np.array([100, 900, 1100, 1300])
    got = insitu.samples(times, backs, 10.0)
    assert got.tolist() == [40, 770, -1, 50, 160, -1]


def _buffer_of(calls: list[tuple[int, int, int]]) -> tb.Buffer:
    """A buffer of MPI_Send calls (Enter, MpiSend stamped 40 ns later, handed back
    after ``work`` ns, Leave ``mpi`` ns later, handed back 100 ns later), each
    followed by a traced function f (Enter, Leave 300 ns later) ``gap`` ns later."""
    buf = tb.Buffer()
    t = 1000
    for work, mpi, gap in calls:
        buf.enter_at(t, 1)
        buf.add_record(t + 40, tb.MPI_SEND, (1, 0, 0, 8))
        buf.backs.extend((t, t + 40 + work))
        leave = t + 40 + work + mpi
        buf.leave_at(leave, 1)
        buf.backs.extend((leave, leave + 100))
        t = leave + 100 + gap
        buf.enter_at(t, 0)
        buf.leave_at(t + 300, 0)
        t += 300 + 500
    return buf


def test_location_table_means_bounds_and_defaults() -> None:
    buf = _buffer_of([(1000, 5000, 200), (1200, 5000, 200), (1500, 5000, 50)])
    table = insitu.location_table(buf.data, buf.backs, ["f", "MPI_Send"],
                                  {"Enter": 250e-9, "Leave": 150e-9, "MpiRecv": 1e-7},
                                  back_ns=10.0, sched={"cpu_s": 1.0})
    ns = {k: round(v * 1e9) for k, v in table["by_kind"].items()}
    # MpiSend: brackets 1010, 1210, 1510 -> mean 3730 / 3 = 1243.3, whole ns 1243
    # (its gaps of 6000+ allow it)
    assert ns["MpiSend"] == 1243
    # Enter/Leave of MPI_Send, per region: the 40 ns gap; 110 ns brackets, capped by
    # the smallest gap after such a Leave (100 + 50 = 150 ns: not binding)
    assert {k: round(v * 1e9) for k, v in table["by_region"]["MPI_Send"].items()} == \
        {"Enter": 40, "Leave": 110}
    # f's Enter/Leave: not bracketed: the calibrated values, capped by f's bounds
    # (300 ns after an Enter f; the Leave f's gap is 500 ns)
    assert ns["Enter"] == 250 and ns["Leave"] == 150
    assert table["source"] == {"MpiSend": "in-situ", "Enter": "calibration",
                               "Leave": "calibration"}
    assert "MpiRecv" not in table["by_kind"]  # no such records here
    m = table["measured"]["MpiSend"]
    assert m["n"] == 3 and round(m["median"] * 1e9) == 1210 and round(m["min"] * 1e9) == 1010
    assert round(m["mean"] * 1e9) == 1243 and m["used"] == ns["MpiSend"] * 1e-9
    assert table["sched"] == {"cpu_s": 1.0}
    # an overhead larger than a gap of the trace is capped by it
    capped = insitu.location_table(buf.data, buf.backs, ["f", "MPI_Send"],
                                   {"Enter": 400e-9}, back_ns=10.0)
    assert round(capped["by_kind"]["Enter"] * 1e9) == 300


def test_a_rare_expensive_record_counts_with_its_whole_cost() -> None:
    """Three MPI_Send calls whose wrapper work before the MPI call took 1000 ns and
    one where it took 31000 ns (an interrupt in the tracer's code): the run paid
    34000 + 4 x 10 ns (the bracket's own cost) for its four MpiSend records, so the
    table says 34040 / 4 = 8510 ns each, where the median (1010 ns) would leave
    30000 ns of it in the trace. Every gap after an MpiSend is 51000 ns or more,
    so the bound does not bind."""
    buf = _buffer_of([(1000, 50000, 200)] * 3 + [(31000, 50000, 200)])
    table = insitu.location_table(buf.data, buf.backs, ["f", "MPI_Send"], {},
                                  back_ns=10.0)
    m = table["measured"]["MpiSend"]
    assert round(m["median"] * 1e9) == 1010 and round(m["mean"] * 1e9) == 8510
    assert round(table["by_kind"]["MpiSend"] * 1e9) == 8510


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40000), st.integers(0, 60000),
                          st.integers(0, 3000)), min_size=1, max_size=12))
def test_table_times_count_is_the_runs_total_within_the_bound(
        calls: list[tuple[int, int, int]]) -> None:
    """Property: for every bracketed key, the value used times the number of such
    records is the sum of their in-situ samples (to the half ns per record of
    whole-ns rounding), unless the key's bound caps it; it never exceeds the
    bound, so no gap of the trace is overcompensated."""
    buf = _buffer_of(calls)
    names = ["f", "MPI_Send"]
    table = insitu.location_table(buf.data, buf.backs, names, {}, back_ns=10.0)
    pairs = np.asarray(buf.data, dtype=np.int64).reshape(-1, 2)
    cost = insitu.samples(pairs[:, 0], np.asarray(buf.backs, dtype=np.int64), 10.0)
    keys = insitu.record_keys(pairs[:, 1])
    for label, m in table["measured"].items():
        used, bound, n = m["used"] * 1e9, m["bound"] * 1e9, m["n"]
        if label == "MpiSend":
            key = tb.MPI_SEND
        else:
            name, kname = label.split("/")
            kind = tb.ENTER if kname == "Enter" else tb.LEAVE
            key = kind | names.index(name) << tb.KIND_BITS
        s = cost[(keys == key) & (cost >= 0)]
        assert len(s) == n
        assert used <= bound + 1e-6
        if s.mean() <= bound - 1:
            assert abs(used * n - s.sum()) <= 0.5 * n + 1e-6


def test_residues_go_to_the_wrapper_leaves_only() -> None:
    """The wrapper residue (ns per call outside the brackets) is added to the
    mean of an MPI or lock wrapper's Leave, capped by that Leave's bound; the
    program's functions and the other kinds keep their values."""
    buf = _buffer_of([(1000, 5000, 200), (1200, 5000, 200), (1500, 5000, 50)])
    names = ["f", "MPI_Send"]
    defaults = {"Enter": 250e-9, "Leave": 150e-9}
    table = insitu.location_table(buf.data, buf.backs, names, defaults, back_ns=10.0,
                                  residues={"mpi": 30.0, "lock": 500.0})
    region = {k: round(v * 1e9) for k, v in table["by_region"]["MPI_Send"].items()}
    assert region == {"Enter": 40, "Leave": 140}  # 110 + 30, under the bound of 150
    assert round(table["measured"]["MPI_Send/Leave"]["residue"] * 1e9) == 30
    ns = {k: round(v * 1e9) for k, v in table["by_kind"].items()}
    assert ns["MpiSend"] == 1243 and ns["Enter"] == 250 and ns["Leave"] == 150
    assert {k: round(v * 1e9) for k, v in table["residue_s"].items()} == \
        {"mpi": 30, "lock": 500}
    capped = insitu.location_table(buf.data, buf.backs, names, defaults, back_ns=10.0,
                                   residues={"mpi": 100.0})
    assert round(capped["by_region"]["MPI_Send"]["Leave"] * 1e9) == 150  # the bound
    assert [insitu.residue_key(n) for n in ("MPI_Waitall", "threading.Lock.acquire",
                                            "threading.RLock.release",
                                            "threading.Thread.join", "get_coords")] == \
        ["mpi", "lock", "lock", None, None]


def test_cold_curve_names_the_entered_regions() -> None:
    """With the rank's cold ladder the table carries it under ``cold``, and
    ``regions`` maps every region entered on the location to its curve: the
    program's functions ``function``, MPI wrappers ``mpi``, lock wrappers
    ``lock``, thread start/join none; compensate reads it back."""
    buf = _buffer_of([(1000, 5000, 200), (1200, 5000, 200)])
    cold = {"w_s": [0.0, 2e-6], "extra_s": {"function": [0.0, 1e-7], "mpi": [0.0, 2e-7],
                                           "lock": [0.0, 3e-7]}, "raw_ns": {}}
    table = insitu.location_table(buf.data, buf.backs, ["f", "MPI_Send"], {}, back_ns=10.0,
                                  cold=cold)
    assert table["cold"]["regions"] == {"f": "function", "MPI_Send": "mpi"}
    assert table["cold"]["extra_s"] == cold["extra_s"]
    assert [insitu.cold_curve_of(n) for n in ("MPI_Wait", "threading.Lock.release",
                                              "threading.Thread.start", "step")] == \
        ["mpi", "lock", None, "function"]
    assert "cold" not in insitu.location_table(buf.data, buf.backs, ["f", "MPI_Send"], {},
                                               back_ns=10.0)
    from compensate import insitu as reader  # noqa: PLC0415

    assert reader.parse(insitu.to_json(table), "t", 0)["cold"]["regions"]["f"] == "function"


def test_back_cost_is_positive_and_whole_ns() -> None:
    cost = insitu.back_cost(calls=200, repeats=3)
    assert cost > 0 and cost == int(cost)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short Monte-Carlo run on 2 ranks (few records, small calibration)."""
    mpiexec = _mpiexec()
    out = tmp_path_factory.mktemp("insitu") / "run" / "traces.otf2"
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-m", "calibration.record", "-o", str(out),
         "--calibration-records", "200", "--", "examples/montecarlo_pi.py",
         "--rounds", "20", "--pairs", "20"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return out


def test_record_overheads_hand_computed() -> None:
    """Two MPI_Send calls of _buffer_of (work 1000 and 1500 ns, MPI 5000 ns, then
    200 and 50 ns to f): Enter 40 (the gap to its MpiSend), MpiSend work + 10 (the
    bracket's own cost), Leave 100 + 10 + the residue, capped by the gap to f's
    Enter (100 + 200 = 300 ns after the first Leave, 100 + 50 = 150 after the
    second); f's records are not bracketed (-1). Residue 30: both Leaves 140 ns.
    Residue 100: 210 ns, the second capped to its 150 ns gap."""
    buf = _buffer_of([(1000, 5000, 200), (1500, 5000, 50)])
    got = insitu.record_overheads(buf.data, buf.backs, 10.0, ["f", "MPI_Send"],
                                  {"mpi": 30.0})
    assert got.tolist() == [40, 1010, 140, -1, -1, 40, 1510, 140, -1, -1]
    got = insitu.record_overheads(buf.data, buf.backs, 10.0, ["f", "MPI_Send"],
                                  {"mpi": 100.0})
    assert got.tolist() == [40, 1010, 210, -1, -1, 40, 1510, 150, -1, -1]


def test_each_bracketed_record_carries_its_own_cost(short_run: Path) -> None:
    """The archive carries, as the OTF2 attribute ``COMPENSATE::OVERHEAD``, each
    bracketed record's own cost: every MpiSend has one, the decorated functions'
    records only on their sampled calls (one in ``LAYER_PERIOD``: the second
    layer's time on top of the table's), none exceeds the gap after its record;
    and each key's table
    value is the mean of these costs (with the residue, on a wrapper's Leave)
    wherever no cap binds (otf2-print shows the attribute; other tools ignore
    it)."""
    trace = read_otf2(str(short_run))
    names = trace.definitions.regions
    cost: dict[int, list[int]] = {}
    with otf2.reader.open(str(short_run)) as reader:
        attr = next(a for a in reader.definitions.attributes if a.name == insitu.ATTRIBUTE)
        for loc, ev in reader.events:
            cost.setdefault(loc._ref, []).append(
                ev.attributes.get(attr, -1) if ev.attributes else -1)
    decorated = 0
    for loc, ev in trace.events.items():
        own = np.array(cost[loc])
        assert len(own) == len(ev)
        assert ev.overhead.tolist() == own.tolist()  # the reader's overhead column
        gap = np.append(np.diff(ev.time), np.iinfo(np.int64).max)
        assert (own <= gap).all()
        send = ev.kind == KIND_CODE["MpiSend"]
        assert send.any() and (own[send] >= 0).all()
        region = np.array([names.get(int(r), "") for r in ev.region])
        coords = np.isin(ev.kind, [KIND_CODE["Enter"], KIND_CODE["Leave"]]) & \
            np.isin(region, ["get_coords", "count_inside"])
        # the functions the sampled layers valued carry their part on every record;
        # the others (count_inside: too few samples) only on their sampled calls
        per_record = {n for n in ("get_coords", "count_inside")
                      if trace.definitions.insitu[loc]["measured"].get(
                          f"{n}/Layer", {}).get("per_record")}
        valued = coords & np.isin(region, list(per_record))
        assert (own[valued] >= 0).all()
        rest = coords & ~valued
        assert int((own[rest] >= 0).sum()) <= 2 * rest.sum() / LAYER_PERIOD + 2
        decorated += int(coords.sum())
        table = trace.definitions.insitu[loc]
        m = table["measured"]["MpiSend"]
        if (own[send] <= m["bound"] * 1e9).all():  # no cap: the attribute is the sample
            assert own[send].mean() == pytest.approx(m["mean"] * 1e9, abs=0.5)
    assert decorated > 0  # the worker's get_coords and count_inside


def test_real_run_carries_and_uses_its_insitu_overhead(short_run: Path, capsys) -> None:
    trace = read_otf2(str(short_run))
    assert set(trace.definitions.insitu) == set(trace.events) == {0, 1}
    for table in trace.definitions.insitu.values():
        assert table["source"]["MpiSend"] == "in-situ"
        assert table["source"]["Enter"] == "calibration"
        assert {"MPI_Send", "MPI_Recv", "MPI_Allreduce"} <= set(table["by_region"])
        assert table["measured"]["MpiSend"]["n"] >= 20
        # the wrapper's work lies after the MpiSend stamp: more than a record store
        assert table["by_kind"]["MpiSend"] > 100e-9
        # each rank measured its wrappers' frames outside the brackets, and the
        # MPI regions' Leaves carry them
        assert set(table["residue_s"]) == {"lock", "mpi"}
        assert "residue" in table["measured"]["MPI_Recv/Leave"] or \
            table["residue_s"]["mpi"] <= 0
        # and the cold-call curves (issue #22, cold22): from w = 0, extra >= 0,
        # non-decreasing, for the decorated functions and the MPI wrappers
        cold = table["cold"]
        assert cold["w_s"][0] == 0 and set(cold["extra_s"]) == {"function", "mpi", "lock"}
        for curve in cold["extra_s"].values():
            assert curve[0] == 0 and all(b >= a >= 0 for a, b in pairwise(curve))
        assert cold["regions"]["MPI_Send"] == "mpi"
    # the worker's get_coords (400 calls) is valued by its sampled layers and takes
    # no cold curve; count_inside (20 calls: too few samples) keeps the curve
    worker = trace.definitions.insitu[1]
    assert worker["measured"]["get_coords/Layer"]["n"] >= insitu.LAYER_MIN_SAMPLES
    assert set(worker["by_region"]["get_coords"]) == {"Enter", "Leave"}
    assert "get_coords" not in worker["cold"]["regions"]
    assert worker["cold"]["regions"]["count_inside"] == "function"
    # the tracer's own work (reservations after a wrapper's Leave, decorations
    # in the program's code) is never inside an MPI call
    names = trace.definitions.regions
    for ev in trace.events.values():
        inside = 0
        for kind, region in zip(ev.kind.tolist(), ev.region.tolist(), strict=True):
            mpi = names.get(region, "").startswith("MPI_")
            if kind == KIND_CODE["Enter"] and mpi:
                inside += 1
            elif kind == KIND_CODE["Leave"] and mpi:
                inside -= 1
            elif kind == KIND_CODE["BufferFlush"]:
                assert inside == 0
    summary = short_run.parent / "summary.json"
    assert main([str(short_run), str(short_run.parent.parent / "out" / "traces.otf2"),
                 "--summary", str(summary)]) == 0
    assert "overhead from trace in-situ" in capsys.readouterr().out
    s = json.loads(summary.read_text())
    assert s["overhead"]["source"] == "trace in-situ" and s["overhead"]["locations"] == 2
    assert s["verification"]["violations"] == 0
    assert s["overcompensated_records"] == 0


def test_the_real_run_compensates_alike_streamed_in_memory_and_on_ranks(
        short_run: Path, tmp_path: Path) -> None:
    """The records' own overheads travel with them: the streamed run (in segments
    of 200 records, so that context records cross the cuts), the in-memory run and
    two ranks under mpiexec give the same output; and they matter: without them
    (the tables alone) the output differs."""
    outs = {}
    for name, extra in {"streamed": ["--segment-records", "200"],
                        "memory": ["--in-memory"]}.items():
        out = tmp_path / name / "traces.otf2"
        assert main([str(short_run), str(out), "--quiet", *extra]) == 0
        outs[name] = read_otf2(str(out))
    out = tmp_path / "ranks" / "traces.otf2"
    proc = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "compensate",
                           str(short_run), str(out), "--mpi", "--quiet"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    outs["ranks"] = read_otf2(str(out))
    ref = outs.pop("memory")
    for name, got in outs.items():
        for loc, ev in ref.events.items():
            assert got.events[loc].time.tolist() == ev.time.tolist(), (name, loc)
    tables = read_otf2(str(short_run))
    for ev in tables.events.values():
        ev.overhead[:] = -1
    alone = compensate_api(tables).trace
    assert any(alone.events[loc].time.tolist() != ev.time.tolist()
               for loc, ev in ref.events.items())


def _with_layers(records: list[tuple[int, int, int]]) -> tb.Buffer:
    """A buffer of (time, kind, region) records, layer records included."""
    buf = tb.Buffer()
    for t, kind, region in records:
        buf.add(t)
        buf.add(kind | region << tb.KIND_BITS)
    return buf


E, L, LE, LL = tb.ENTER, tb.LEAVE, tb.LAYER_ENTER, tb.LAYER_LEAVE


def test_split_layers_hand_computed() -> None:
    """f (region 0) sampled around a call of g (region 1), then sampled as a
    leaf, then cut by the end of the run (a LayerEnter without its LayerLeave).
    The layer records go; each complete sampled call gives (outer Enter, last
    record before the outer Leave, pre = 250 - 100, post = 920 - 800, f)."""
    buf = _with_layers([(100, E, 0), (250, LE, 0), (600, E, 1), (700, L, 1),
                        (800, LL, 0), (920, L, 0),
                        (2000, E, 0), (2150, LE, 0), (2300, LL, 0), (2420, L, 0),
                        (3000, E, 0), (3100, LE, 0), (3500, L, 0)])
    data, rows = insitu.split_layers(buf.data)
    pairs = np.asarray(data).reshape(-1, 2)
    assert pairs[:, 0].tolist() == [100, 600, 700, 920, 2000, 2420, 3000, 3500]
    assert ((pairs[:, 1] & tb.KIND_MASK) < LE).all()
    assert rows.tolist() == [[0, 2, 150, 120, 0], [4, 4, 150, 120, 0]]
    # a buffer without layers comes back as it is
    plain = _with_layers([(100, E, 0), (200, L, 0)])
    same, none = insitu.split_layers(plain.data)
    assert same is plain.data and none.shape == (0, len(insitu.LAYER_COLUMNS))


def test_record_overheads_charge_the_sampled_layer_where_it_lay() -> None:
    """The buffer above, no brackets, table Enter 100 / Leave 80 ns: f's outer
    Enter carries 100 + 150 (pre), g's Leave (the last record before f's outer
    Leave) 80 + 120 (post), the leaf call's Enter 100 + 150 + 120; the rest none.
    With f's own table value (Enter 130) its Enters carry 30 more. Each stays
    within the gap after it (g's Leave: 220 ns)."""
    buf = _with_layers([(100, E, 0), (250, LE, 0), (600, E, 1), (700, L, 1),
                        (800, LL, 0), (920, L, 0),
                        (2000, E, 0), (2150, LE, 0), (2300, LL, 0), (2420, L, 0)])
    data, rows = insitu.split_layers(buf.data)
    table = {"by_kind": {"Enter": 100e-9, "Leave": 80e-9}, "by_region": {}}
    got = insitu.record_overheads(data, (), 10.0, ["f", "g"], None, rows, table)
    assert got.tolist() == [250, -1, 200, -1, 370, -1]
    table["by_region"]["f"] = {"Enter": 130e-9, "Leave": 80e-9}
    got = insitu.record_overheads(data, (), 10.0, ["f", "g"], None, rows, table)
    assert got.tolist() == [280, -1, 200, -1, 400, -1]
    # f valued by its layers: every f record carries its part (Enter 120, Leave 90),
    # the sampled ones with pre and post on top; g's records keep the table's
    table["measured"] = {"f/Layer": {"per_record": {"Enter": 120e-9, "Leave": 90e-9}}}
    got = insitu.record_overheads(data, (), 10.0, ["f", "g"], None, rows, table)
    assert got.tolist() == [270, -1, 200, 90, 390, 90]
    # ... each capped by its own gap (the leaf call's Enter: 420 ns to its Leave)
    table["measured"]["f/Layer"]["per_record"]["Enter"] = 200e-9
    got = insitu.record_overheads(data, (), 10.0, ["f", "g"], None, rows, table)
    assert got.tolist() == [350, -1, 200, 90, 420, 90]
    # without the table the layers are not charged (the writer always passes it)
    assert insitu.record_overheads(data, (), 10.0, ["f", "g"]).tolist() == [-1] * 6


def _sampled_calls(layers: list[int], normal: int = 5, body: int = 400,
                   gap: int = 5000) -> tb.Buffer:
    """Leaf calls of f: one sampled call per layer cost d (pre = d // 2, post =
    the rest) around a 1000 ns body, then ``normal`` unsampled calls of ``body``
    ns, each followed by ``gap`` ns before the next call (5 µs after the sampled
    ones)."""
    records, t = [], 10_000
    for d in layers:
        pre = d // 2
        records += [(t, E, 0), (t + pre, LE, 0), (t + pre + 1000, LL, 0),
                    (t + d + 1000, L, 0)]
        t += d + 6000
    for _ in range(normal):
        records += [(t, E, 0), (t + body, L, 0)]
        t += body + gap
    return _with_layers(records)


def test_location_table_values_functions_by_their_layers() -> None:
    """Ten samples of f's layer: nine of 400 ns and one interrupted (4000 ns,
    clipped to 4 x the median: 1600): mean 520 ns, split as the calibration
    splits the decorator (Enter 250 : Leave 150): Enter 325, Leave 195, each
    under its bound (Enter: 400 ns, the unsampled body). Where a part's bound
    binds, what it cannot hold goes to the other part: gaps of 100 ns after f's
    Leave leave it 100, and the Enter takes 325 + 95 = 420 (its bound, the
    1000 ns body, allows it); bodies of 200 ns cap a 400 ns layer's Enter (250)
    at 200 and its Leave takes 150 + 50. The samples' statistics are under
    ``f/Layer``; f gets no cold curve. Seven samples are too few: f keeps the
    calibrated values, and the statistics say ``used`` None."""
    defaults = {"Enter": 250e-9, "Leave": 150e-9}
    cold = {"w_s": [0.0, 2e-6], "extra_s": {"function": [0.0, 1e-7]}}

    def values(buf: tb.Buffer, **kw) -> dict:
        data, rows = insitu.split_layers(buf.data)
        table = insitu.location_table(data, (), ["f"], defaults, back_ns=10.0, layers=rows,
                                      **kw)
        return table, {k: round(v * 1e9) for k, v in table["by_region"].get("f", {}).items()}

    table, ns = values(_sampled_calls([400] * 9 + [4000]), cold=cold)
    assert ns == {"Enter": 325, "Leave": 195}
    st = table["measured"]["f/Layer"]
    assert st["n"] == 10 and round(st["median"] * 1e9) == 400
    assert round(st["used"] * 1e9) == 520 and st["enter_share"] == 0.625
    # per record: split where the median gaps leave room (here as the table)
    assert {k: round(v * 1e9) for k, v in st["per_record"].items()} == \
        {"Enter": 325, "Leave": 195}
    assert table["cold"]["regions"] == {}
    assert values(_sampled_calls([400] * 9 + [4000], body=1000, gap=100))[1] == \
        {"Enter": 420, "Leave": 100}
    assert values(_sampled_calls([400] * 10, body=200))[1] == {"Enter": 200, "Leave": 200}
    table, ns = values(_sampled_calls([400] * 7), cold=cold)
    assert ns == {} and table["measured"]["f/Layer"]["used"] is None
    assert round(table["by_kind"]["Enter"] * 1e9) == 250
    assert table["cold"]["regions"] == {"f": "function"}


@st.composite
def _call_trees(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[tuple]]:
    """A random sequence of nested calls of regions 0-3, some of them sampled
    (their layer records inside their own), at increasing times; returns the
    records and, per sampled call, its (pre, post, region) in the order its
    LayerLeave comes."""
    records: list[tuple[int, int, int]] = []
    sampled: list[tuple] = []
    t = 0
    stack: list[tuple[int, bool, int]] = []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.integers(1, 500))
        if stack and draw(st.booleans()):
            region, layer, pre = stack.pop()
            if layer:
                records.append((t, LL, region))
                post = draw(st.integers(1, 500))
                t += post
                sampled.append((pre, post, region))
            records.append((t, L, region))
            continue
        region = draw(st.integers(0, 3))
        records.append((t, E, region))
        layer = draw(st.booleans())
        pre = 0
        if layer:
            pre = draw(st.integers(1, 500))
            t += pre
            records.append((t, LE, region))
        stack.append((region, layer, pre))
    while stack:
        region, layer, pre = stack.pop()
        t += 7
        if layer:
            records.append((t, LL, region))
            sampled.append((pre, 3, region))
            t += 3
        records.append((t, L, region))
    return records, sampled


@settings(max_examples=200, deadline=None)
@given(_call_trees())
def test_split_layers_recovers_every_sampled_call(tree) -> None:
    """Whatever the nesting: the layer records all go and nothing else does;
    every sampled call comes back with its own pre and post; each row points at
    its call's outer Enter and at the record right before its outer Leave; and
    the records carry, in all, the layers' time on top of the table's values
    wherever no gap caps them."""
    records, sampled = tree
    buf = _with_layers(records)
    data, rows = insitu.split_layers(buf.data)
    kept = [r for r in records if r[1] not in (LE, LL)]
    pairs = np.asarray(data, dtype=np.int64).reshape(-1, 2)
    assert pairs[:, 0].tolist() == [r[0] for r in kept]
    assert sorted(map(tuple, rows[:, 2:].tolist())) == sorted(sampled)
    codes = pairs[:, 1]
    for enter, post, _, _, region in rows.tolist():
        assert codes[enter] == E | region << tb.KIND_BITS
        # the outer Leave follows the post record, and closes the outer Enter
        depth = 0
        for j in range(enter, post + 2):
            kind = codes[j] & tb.KIND_MASK
            depth += 1 if kind == E else -1
            assert depth > 0 or j == post + 1
        assert codes[post + 1] == L | region << tb.KIND_BITS
    table = {"by_kind": {"Enter": 1e-9, "Leave": 1e-9}, "by_region": {}}
    got = insitu.record_overheads(data, (), 0.0, ["a", "b", "c", "d"], None, rows, table)
    gap = np.append(np.diff(pairs[:, 0]), np.iinfo(np.int64).max)
    assert (got <= gap).all()
    hit = got >= 0
    if (got[hit] < gap[hit]).all():  # no cap bound
        assert got[hit].sum() == hit.sum() + rows[:, 2].sum() + rows[:, 3].sum()
