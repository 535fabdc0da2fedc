"""The OTF2 C path (compensate/formats/otf2/native.py, issue #18) against the
``otf2`` package path it replaces: the same columns from the same archive, and
the same archive written, byte for byte, on the real Score-P archives and on
simulated ones; routing to the ``otf2`` package when the C path must not be used."""

import contextlib
import inspect
import io
import json
import os
from pathlib import Path

import numpy as np
import otf2
import otf2.events as E
import pytest
from otf2.enums import GroupType, Paradigm, ParameterType, Type

from compensate import nativebuild
from compensate.cli import main
from compensate.formats import partitioned, read_trace, write_trace
from compensate.formats.fields import field_of, fields_of
from compensate.formats.otf2 import (
    Otf2Chunks,
    Otf2EventWriter,
    native,
    nativerecords,
    read_otf2_chunks,
)
from compensate.formats.rma import RMA_FIELDS
from compensate.model import COLUMNS, KIND_CODE, PARTITIONED_KINDS, TraceError
from compensate.simulate import simulate

from ...conftest import CASES, TRACES
from ...matching.test_legacy import _write_archive as write_legacy

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
    for name in ("mixed", "nonblocking", "mprobe", "collectives", "partitioned",
                 "partitioned_poll", "rma_fence", "rma_pscw"):
        sim = simulate(name, ranks=4, iterations=3, overhead=1e-6)
        anchor = tmp / name / "traces.otf2"
        write_trace(sim.measured, anchor)
        out.append(anchor)
    insitu = tmp / "insitu.trace"  # an in-situ overhead table: an OTF2 LocationProperty
    table = json.dumps(json.dumps({"format": 1, "by_kind": {"Enter": 1e-7, "Leave": 2e-7}}))
    insitu.write_text("compensate-trace 1\ntimer_resolution 1000000000\n"
                      f"location 0 group=0 insitu={table}\nlocation 1 group=1\n"
                      'region 0 "f"\nevents\n' + "".join(
                          f"{t + loc} {loc} {k} region=0\n" for t, k in
                          ((0, "Enter"), (1000, "Leave"), (2000, "Enter"), (3000, "Leave"))
                          for loc in (0, 1)))
    write_trace(read_trace(insitu), tmp / "insitu" / "traces.otf2")
    out.append(tmp / "insitu" / "traces.otf2")
    # legacy OpenMP records (OmpFork, OmpAcquireLock, OmpTaskCreate ...), as
    # tests/matching/test_legacy.py writes them
    out.append(Path(write_legacy(read_trace(CASES / "r8_legacy.trace"), tmp / "legacy")))
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
    carry the fields the engine reads (field_of, fields_of) exactly as the otf2
    objects give them, already normalised: the values are what field_of returns
    (string references and arrays left out), an RMA record's are its normalised
    fields under their text names and nothing else."""
    seen = set()
    for path, (_, fast, slow) in both.items():
        for a, b in zip(fast, slow, strict=True):
            for loc, ev in a.items():
                for k, p, q in zip(ev.kind.tolist(), ev.payload, b[loc].payload, strict=True):
                    if p is native.NATIVE:
                        if q is None:  # rebuilt from the columns by the otf2 package path
                            assert k in PARTITIONED_KINDS
                            seen.add("partitioned")
                        else:  # a column kind, or one without fields (RmaCollectiveBegin)
                            assert type(q).__name__ in native.COLUMN_KINDS or \
                                not native._field_spec(type(q).__name__)
                        continue
                    assert type(p) is native.NativeFields
                    name = type(q).__name__
                    seen.add(name)
                    if name in RMA_FIELDS:  # the normalised fields, as dict(p) is
                        assert fields_of(name, p) == fields_of(name, q) == dict(p), \
                            (path, name)
                        continue
                    names = set(inspect.signature(type(q).__init__).parameters) - {
                        "self", "time", "attributes"}
                    assert set(p) <= names
                    for name in names:
                        if isinstance(getattr(q, name), (str, list, tuple)):  # left out
                            assert name not in p
                            continue
                        assert p.get(name) == field_of(q, name), (path, type(q), name)
                        assert field_of(p, name) == field_of(q, name), (path, type(q), name)
    assert {"ThreadFork", "ThreadTeamBegin", "ThreadTaskCreate", "ParameterInt", "OmpFork",
            "OmpAcquireLock", "OmpTaskCreate", "OmpTaskSwitch", "OmpTaskComplete",
            "ParameterString", "RmaPut", "RmaCollectiveEnd", "RmaGroupSync",
            "partitioned"} <= seen


@pytest.mark.parametrize("bound", ["lower", "fitted"])
def test_the_same_archive_byte_for_byte(archives, tmp_path, monkeypatch, bound):
    """`compensate` writes the same archive through the C path as through the otf2
    package (fitted: reads the input twice), with the times compensated. (The real
    archives' OTF2 outputs are also compared with the otf2 package's, recorded, by
    tests/test_fingerprints.py.)"""
    copied = []
    copy = native.NativeCopier.copy_columns
    monkeypatch.setattr(native.NativeCopier, "copy_columns",
                        lambda self, ref, *a: copied.append(ref) or copy(self, ref, *a))
    for k, path in enumerate(archives if bound == "lower" else archives[-2:]):
        outs = []
        for switch in ("1", "0"):
            monkeypatch.setenv(native.ENV_SWITCH, switch)
            out = tmp_path / f"{k}-{switch}" / "traces.otf2"
            overhead = [] if path.parent.name == "insitu" else ["--overhead", "200ns"]
            with contextlib.redirect_stderr(io.StringIO()):
                assert main([str(path), str(out), *overhead, "--bound", bound,
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
    differs from the input's is a one-line error naming it (when the archive is
    closed: the copy is made then, location after location)."""
    defs, _, chunks = _chunks(archives[-1], None, payload=False)
    loc, ev = next(iter(chunks[0].items()))
    ev.kind[3] = KIND_CODE["Leave"]  # the input has a ParameterString there
    writer = Otf2EventWriter(str(tmp_path / "o" / "traces.otf2"), defs)
    try:
        with pytest.raises(TraceError, match=r"record 3: record kind Leave does not match "
                                             r"the input's record \(ParameterString\)"):
            writer.write(loc, ev)
            writer.close()
    finally:
        writer.abandon()


@pytest.mark.parametrize("cc", ["false", "/nonexistent/cc"])
def test_a_fresh_machine_without_a_compiler_falls_back_and_says_so_once(
        archives, monkeypatch, tmp_path, capfd, cc):
    """No working C compiler and an empty cache: `compensate` says once on stderr
    that the C path is not available and writes the same archive through the
    otf2 package."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("COMPENSATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", cc)
    path = archives[-1]
    for k in range(2):
        assert main([str(path), str(tmp_path / f"o{k}" / "traces.otf2"), "--overhead", "200ns",
                     "--quiet"]) == 0
    err = capfd.readouterr().err
    assert err.count("OTF2 C path is not available") == 1 and err.count("\n") == 1, err
    assert not native.available() and not list((tmp_path / "cache").glob("*.so"))
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    assert main([str(path), str(tmp_path / "py" / "traces.otf2"), "--overhead", "200ns",
                 "--quiet"]) == 0
    assert _files(tmp_path / "o0" / "traces.otf2") == _files(tmp_path / "py" / "traces.otf2")


def test_an_unwritable_cache_builds_into_a_private_temporary_directory(monkeypatch, tmp_path):
    """Only this user's own directory in the temporary directory is built into."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    (shared / f"compensate-{os.getuid()}").symlink_to(tmp_path)
    assert not nativebuild._usable_dir(shared / f"compensate-{os.getuid()}", True)
    assert nativebuild._usable_dir(shared / "mine", True)
    assert (shared / "mine").stat().st_mode & 0o777 == 0o700


def test_the_library_read_counts_every_record(both):
    """benchmarks/throughput.py's `lib read`: the C callbacks alone."""
    for path, (_, fast, _) in both.items():
        locations = read_otf2_chunks(str(path), 1)[0].otf2.location_order
        n = sum(len(ev) for chunk in fast for ev in chunk.values())
        assert native.library_read(str(path), locations) == n


def _pready_archive(anchor_dir: Path, description: str | None, extra: bool) -> Path:
    """One location with one partitioned MPI_Pready record (formats/partitioned.py):
    its attribute with another ``description`` than compensate writes (None: the
    same), an ``extra`` attribute or not."""
    with otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000) as w:
        d = w.definitions
        grp = d.location_group("rank 0", system_tree_parent=d.system_tree_node("node"))
        loc = d.location("thread 0", group=grp)
        f = d.region("MPI_Pready")
        par = d.parameter("compensate:MpiPready", parameter_type=ParameterType.UINT64)
        name, canonical = partitioned.attribute_of(KIND_CODE["MpiPready"], "size_recv")
        description = canonical if description is None else description
        attrs = {d.attribute(name, description, Type.UINT64): 3}
        if extra:
            attrs[d.attribute("other", "", Type.UINT64)] = 1
        ew = w.event_writer_from_location(loc)
        for t, ev in enumerate([E.Enter(0, f), E.ParameterUnsignedInt(0, par, 9,
                                                                      attributes=attrs),
                                E.Leave(0, f)]):
            ev.time = 10 * t
            ew(ev)
    return anchor_dir / "traces.otf2"


def test_partitioned_records_not_as_compensate_writes_them(tmp_path):
    """The C path copies a partitioned record's attribute list, the otf2 package
    path rebuilds it from the columns: an archive whose partitioned definitions
    differ from what compensate writes goes to the otf2 package path; a record
    whose attribute list differs is a one-line error saying how to read it."""
    fine = _pready_archive(tmp_path / "fine", None, False)
    defs, kind, chunks = _chunks(fine, None, payload=False)
    assert kind is native.NativeChunks and defs.otf2.native_source == str(fine)
    ev = chunks[0][0]
    assert ev.kind[1] == KIND_CODE["MpiPready"] and ev.request[1] == 9
    assert ev.size_recv[1] == 3
    other = _pready_archive(tmp_path / "other", "partition", False)
    assert "lacks an attribute" in nativerecords.unsuitable(
        read_otf2_chunks(str(other), 1)[0].otf2.registry)
    defs, kind, _ = _chunks(other, None, payload=False)
    assert kind is Otf2Chunks and defs.otf2.native_source is None
    extra = _pready_archive(tmp_path / "extra", None, True)
    with pytest.raises(TraceError, match=r"extra/traces\.otf2: location 0, record 1: "
                                         r"partitioned record .*COMPENSATE_NATIVE=0") as exc:
        _chunks(extra, None, payload=False)
    assert "\n" not in str(exc.value)


def test_the_in_situ_table_is_read_on_the_c_path(archives):
    defs, kind, _ = _chunks(next(p for p in archives if p.parent.name == "insitu"), None,
                            payload=False)
    assert kind is native.NativeChunks and defs.insitu[0]["by_kind"]["Leave"] == 2e-7


def test_the_copy_is_made_at_close_location_after_location(archives, tmp_path, monkeypatch):
    """While the chunks are handed over, pass 2 opens no OTF2 reader or writer (the
    spool keeps their columns, compensate/formats/otf2/spool.py); at close it copies
    one location at a time, its event writer and input reader closed before the
    next location's are opened, so the library holds one location's buffers. A
    chunk with payload objects for a location with spooled records is written
    after them (copied first). The archive is the one the otf2 package writes."""
    from compensate.formats.otf2 import write as otf2_write
    log = []
    copy, release = native.NativeCopier.copy_columns, native.NativeCopier.release
    close = otf2_write._EventWriter.close
    monkeypatch.setattr(native.NativeCopier, "copy_columns",
                        lambda self, ref, *a: log.append(("copy", ref)) or copy(self, ref, *a))
    monkeypatch.setattr(native.NativeCopier, "release",
                        lambda self, ref: log.append(("release", ref)) or release(self, ref))
    monkeypatch.setattr(otf2_write._EventWriter, "close", lambda self: (
        self._handle is not None and log.append(("close", self._location._ref))) or close(self))
    path = next(p for p in archives if p.parent.name == "mixed")
    defs, _, fast = _chunks(path, 37, payload=False)
    pdefs, _, slow = _chunks(path, 37, payload=True)
    outs = []
    for name, mixed in (("c", False), ("mixed", True), ("py", None)):
        out = tmp_path / name / "traces.otf2"
        writer = Otf2EventWriter(str(out), pdefs if mixed is None else defs)
        for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
            for loc in a:
                writer.write(loc, b[loc] if mixed is None or (mixed and 2 * i >= len(fast))
                             else a[loc])
        if mixed is False:
            assert log == [] and writer._copier._handle is None
        writer.close()
        outs.append(_files(out))
        if mixed is False:
            refs = list(dict.fromkeys(ref for _, ref in log))
            assert len(refs) == 4
            assert log == [e for ref in refs for e in
                           [("copy", ref)] * log.count(("copy", ref)) +
                           [("close", ref), ("release", ref)]]
    assert outs[0] == outs[1] == outs[2]


def test_a_full_disk_while_spooling_is_a_one_line_error(archives, tmp_path, monkeypatch):
    """The spool lives next to the output: no space for it is the output's
    one-line OutputError, not a traceback."""
    import errno

    from compensate.formats import OutputError
    from compensate.formats.otf2 import spool

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool.os, "pwrite", full)
    defs, _, chunks = _chunks(archives[-1], None, payload=False)
    loc, ev = next(iter(chunks[0].items()))
    out = tmp_path / "o" / "traces.otf2"
    writer = Otf2EventWriter(str(out), defs)
    try:
        with pytest.raises(OutputError, match=r"traces.otf2: cannot write OTF2 archive: "
                                              r"No space left on device") as info:
            writer.write(loc, ev)
        assert "\n" not in str(info.value)
    finally:
        writer.abandon()
