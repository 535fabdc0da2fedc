"""The OTF2 C path (compensate/formats/otf2/native.py, issue #18) against the
``otf2`` package path it replaces: the same columns from the same archive, and
the same archive written, byte for byte, on the real Score-P archives and on
simulated ones; routing to the ``otf2`` package when the C path must not be used."""

import contextlib
import inspect
import io
from pathlib import Path

import numpy as np
import otf2
import otf2.events as E
import pytest
from otf2.enums import GroupType, Paradigm, ParameterType, Type

from compensate.cli import main
from compensate.formats import write_trace
from compensate.formats.otf2 import Otf2Chunks, Otf2EventWriter, native, read_otf2_chunks
from compensate.matching.threads import field_of
from compensate.model import COLUMNS, KIND_CODE, TraceError
from compensate.simulate import simulate

from ...conftest import TRACES

# the real archives but the largest (72k records: covered by tests/test_fingerprints.py,
# whose real-archive OTF2 outputs now come from the C path)
REAL = [p for p in sorted(TRACES.glob("*/traces.otf2")) if p.parent.name != "hip-two-gpu-metrics"]

pytestmark = pytest.mark.skipif(not native.available(), reason="the OTF2 C path cannot be built")


@pytest.fixture
def python_path(monkeypatch):
    """Force the ``otf2`` package path (COMPENSATE_NATIVE=0)."""
    monkeypatch.setenv(native.ENV_SWITCH, "0")


def build_native_archive(anchor_dir: Path) -> None:
    """Two locations with every argument shape the C path passes through: an
    attribute list, Metric's type and value arrays, ProgramBegin's argument
    array, signed parameters, a BufferFlush stop time, MPI messages."""
    with otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = []
        for r in range(2):
            grp = d.location_group(f"rank {r}", system_tree_parent=node)
            locs.append(d.location("thread 0", group=grp))
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=tuple(locs))
        world = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                        members=tuple(locs))
        comm = d.comm("MPI_COMM_WORLD", group=world, parent=None)
        f, send = d.region("main"), d.region("MPI_Send")
        par = d.parameter("iterations", parameter_type=ParameterType.INT64)
        spar = d.parameter("mode", parameter_type=ParameterType.STRING)
        attr = d.attribute("answer", "", Type.UINT64)
        sattr = d.attribute("label", "", Type.STRING)
        member = d.metric_member("cycles", "", otf2.MetricType.PAPI,
                                 otf2.MetricMode.ACCUMULATED_START, Type.UINT64,
                                 otf2.Base.DECIMAL, 0, "")
        metric = d.metric_class([member, member])
        for r, loc in enumerate(locs):
            ew = w.event_writer_from_location(loc)
            records = [
                E.ProgramBegin(0, "a.out", ["-n", "3"]),
                E.Enter(0, f, attributes={attr: 42, sattr: "x"}),
                E.ParameterInt(0, par, -7),
                E.ParameterString(0, spar, "fast"),
                E.Metric(0, metric, [123, 2**40]),
                E.Enter(0, send),
                (E.MpiSend(0, 1, comm, 5, 64) if r == 0 else E.MpiRecv(0, 0, comm, 5, 64)),
                E.Leave(0, send, attributes={attr: 7}),
                E.BufferFlush(0, 0),
                E.MeasurementOnOff(0, otf2.MeasurementMode.OFF),
                E.MeasurementOnOff(0, otf2.MeasurementMode.ON),
                E.Leave(0, f),
                E.ProgramEnd(0, -2**63),
            ]
            for i, ev in enumerate(records):
                ev.time = 1000 + 1000 * i + 10 * r
                if isinstance(ev, E.BufferFlush):
                    ev.stop_time = ev.time + 500
                ew(ev)


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> list[Path]:
    """The real archives, simulated programs written as OTF2, and the archive above."""
    tmp = tmp_path_factory.mktemp("native")
    out = list(REAL)
    for name in ("mixed", "nonblocking", "mprobe", "collectives"):
        sim = simulate(name, ranks=4, iterations=3, overhead=1e-6)
        anchor = tmp / name / "traces.otf2"
        write_trace(sim.measured, anchor)
        out.append(anchor)
    build_native_archive(tmp / "built")
    out.append(tmp / "built" / "traces.otf2")
    return out


def _ids(paths):
    return [p.parent.name for p in paths]


def _files(anchor: Path) -> dict[str, bytes]:
    """An archive's definition and event files (the anchor file holds the creation
    time and a random trace id, so it differs from run to run)."""
    root = anchor.parent
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.suffix in (".def", ".evt")}


def _chunks(path: Path, n: int | None, payload: bool):
    defs, chunks = read_otf2_chunks(str(path), n, payload=payload)
    with contextlib.closing(chunks):
        return defs, type(chunks), list(chunks)


@pytest.fixture(scope="module")
def both(archives):
    """Every archive read by both paths in chunks of 37 records: (C path kind of
    chunks, its chunks, the otf2 package's chunks)."""
    out = {}
    for path in archives:
        _, kind, fast = _chunks(path, 37, payload=False)
        _, slow_kind, slow = _chunks(path, 37, payload=True)
        assert slow_kind is Otf2Chunks
        out[path] = (kind, fast, slow)
    return out


def test_the_same_columns_in_the_same_chunks(both):
    """Columns, chunk boundaries and location order as the otf2 package path's."""
    for path, (kind, fast, slow) in both.items():
        assert kind is native.NativeChunks, path
        assert len(fast) == len(slow), path
        for a, b in zip(fast, slow, strict=True):
            assert list(a) == list(b), path
            for loc in a:
                for name, dtype in COLUMNS:
                    col = getattr(a[loc], name)
                    assert col.dtype == dtype and np.array_equal(col, getattr(b[loc], name)), \
                        (path, loc, name)


def test_field_payloads_read_as_the_otf2_objects(both):
    """Records of kinds beyond the columns (threads, locks, tasks, parameters, RMA)
    carry the fields the engine reads (field_of) exactly as the otf2 objects do;
    string references and arrays are left out."""
    seen = set()
    for path, (_, fast, slow) in both.items():
        for a, b in zip(fast, slow, strict=True):
            for loc, ev in a.items():
                for p, q in zip(ev.payload, b[loc].payload, strict=True):
                    if p is native.NATIVE:
                        assert type(q).__name__ in native.COLUMN_KINDS
                        continue
                    assert type(p) is native.NativeFields
                    seen.add(type(q).__name__)
                    names = set(inspect.signature(type(q).__init__).parameters) - {
                        "self", "time", "attributes"}
                    assert set(p) <= names
                    for name in names:
                        if isinstance(getattr(q, name), (str, list, tuple)):  # left out
                            assert name not in p
                            continue
                        assert field_of(p, name) == field_of(q, name), (path, type(q), name)
    assert {"ThreadFork", "ThreadTeamBegin", "ThreadTaskCreate", "ParameterInt",
            "ParameterString", "RmaPut"} <= seen


@pytest.mark.parametrize("bound", ["lower", "fitted"])
def test_the_same_archive_byte_for_byte(archives, tmp_path, monkeypatch, bound):
    """`compensate` writes the same archive through the C path as through the otf2
    package (fitted: reads the input twice), with the times compensated. (The real
    archives' OTF2 outputs are also compared with the otf2 package's, recorded, by
    tests/test_fingerprints.py.)"""
    copied = []
    copy = native.NativeCopier.copy
    monkeypatch.setattr(native.NativeCopier, "copy",
                        lambda self, ref, *a: copied.append(ref) or copy(self, ref, *a))
    chosen = [p for p in archives if p.parent.name != "jacobi-openmp-tasks-offload"]
    for k, path in enumerate(chosen if bound == "lower" else archives[-2:]):
        outs = []
        for switch in ("1", "0"):
            monkeypatch.setenv(native.ENV_SWITCH, switch)
            out = tmp_path / f"{k}-{switch}" / "traces.otf2"
            with contextlib.redirect_stderr(io.StringIO()):
                assert main([str(path), str(out), "--overhead", "200ns", "--bound", bound,
                             "--quiet"]) == 0, path
            outs.append(_files(out))
            assert bool(copied) == (switch == "1"), path  # the C path wrote it, or not
            copied.clear()
        assert outs[0] == outs[1], path
        assert len(outs[0]) >= 2


def test_payloads_are_kept_when_a_text_output_needs_them(archives):
    defs, kind, _ = _chunks(archives[-1], None, payload=True)
    assert kind is Otf2Chunks and defs.otf2.native_source is None


def test_the_switch_forces_the_otf2_package(archives, python_path):
    assert not native.available()
    _, kind, _ = _chunks(archives[-1], None, payload=False)
    assert kind is Otf2Chunks


def test_a_record_of_another_kind_is_refused_naming_it(archives, tmp_path):
    """The writer copies the input's records by position: a record whose kind
    differs from the input's is a one-line error naming it."""
    defs, _, chunks = _chunks(archives[-1], None, payload=False)
    loc, ev = next(iter(chunks[0].items()))
    ev.kind[3] = KIND_CODE["Leave"]  # the input has a ParameterString there
    writer = Otf2EventWriter(str(tmp_path / "o" / "traces.otf2"), defs)
    try:
        with pytest.raises(TraceError, match=r"record 3: record kind Leave does not match "
                                             r"the input's record \(ParameterString\)"):
            writer.write(loc, ev)
    finally:
        writer.abandon()


def test_a_build_failure_falls_back_and_says_so_once(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("COMPENSATE_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    monkeypatch.setattr(native.tempfile, "gettempdir", lambda: str(tmp_path / "t"))
    assert native.library() is None and native.library() is None
    err = capsys.readouterr().err
    assert err.count("OTF2 C path is not available") == 1 and "\n" == err[-1]
    assert err.count("\n") == 1


def test_the_library_read_counts_every_record(both):
    """benchmarks/throughput.py's `lib read`: the C callbacks alone."""
    for path, (_, fast, _) in both.items():
        locations = read_otf2_chunks(str(path), 1)[0].otf2.location_order
        n = sum(len(ev) for chunk in fast for ev in chunk.values())
        assert native.library_read(str(path), locations) == n
