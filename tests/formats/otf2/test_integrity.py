"""An OTF2 input checked against itself (compensate/formats/otf2/integrity.py and the
C reader's return codes, gen_native.py): damaged archives (a truncated local
definition file, undefined references, lost records, swapped event files) are
refused in one line naming file, location and record, by both reading paths alike,
and nothing is written."""

import shutil
import subprocess
from pathlib import Path

import otf2
import otf2.events as E
import pytest
from otf2.enums import GroupType, LocationType, Paradigm

from compensate.cli import main
from compensate.formats.otf2 import integrity, native

from ...conftest import TRACES

JACOBI = TRACES / "jacobi-mpi-openmp-cuda"


@pytest.fixture(params=["1", "0"], ids=["native", "python"])
def path(request, monkeypatch):
    """Both reading paths: the C path (when it can be built) and the otf2 package."""
    if request.param == "1" and not native.available():
        pytest.skip("the OTF2 C path cannot be built")
    monkeypatch.setenv("COMPENSATE_NATIVE", request.param)
    return request.param


class _Ref:
    """A definition reference the archive does not define (the otf2 writer writes
    ``_ref``)."""

    def __init__(self, ref: int) -> None:
        self._ref = ref


def write_archive(anchor_dir: Path, n_iter: int = 3, extra=None, stream: bool = False,
                  stream_mpi: bool = False) -> None:
    """Two ranks exchanging ``n_iter`` messages; ``extra(loc_index, ew, defs)`` adds
    records to a rank's thread; ``stream``: a CUDA stream location of rank 0 with as
    many records as rank 0's thread (an MPI message on it if ``stream_mpi``)."""
    with otf2.writer.open(str(anchor_dir), timer_resolution=1_000_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        groups = [d.location_group(f"rank {r}", system_tree_parent=node) for r in range(2)]
        locs = [d.location("thread 0", group=g) for g in groups]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=tuple(locs))
        world = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                        members=tuple(locs))
        comm = d.comm("MPI_COMM_WORLD", group=world, parent=None)
        main_r, send, recv, kern = (d.region(n) for n in ("main", "MPI_Send", "MPI_Recv",
                                                          "kernel"))
        counts = []
        for r, loc in enumerate(locs):
            ew = w.event_writer_from_location(loc)
            t = 1000
            records = [E.Enter(t, main_r)]
            for _ in range(n_iter):
                region = send if r == 0 else recv
                records += [E.Enter(t + 10, region),
                            E.MpiSend(t + 20, 1, comm, 0, 8) if r == 0
                            else E.MpiRecv(t + 30, 0, comm, 0, 8),
                            E.Leave(t + 40, region)]
                t += 100
            if extra is not None:
                records += extra(r, t)
            records.append(E.Leave(t + 50, main_r))
            for rec in records:
                ew(rec)
            counts.append(len(records))
        if stream:
            sloc = d.location("CUDA[0:7]", type=LocationType.ACCELERATOR_STREAM,
                              group=groups[0])
            ew = w.event_writer_from_location(sloc)
            t = 2000
            records = []
            while len(records) < counts[0]:
                if stream_mpi and len(records) == 2:
                    records.append(E.MpiSend(t, 1, comm, 0, 8))
                else:
                    records.append((E.Enter if len(records) % 2 == 0 else E.Leave)(t, kern))
                t += 10
            if len(records) % 2:
                records[-1] = E.Leave(t, kern)
            for rec in records:
                ew(rec)


def run(anchor: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    status = main([str(anchor), str(out), "--overhead", "10ns", *extra])
    err = capsys.readouterr().err.strip()
    return status, err


def otf2_print_ok(anchor: Path) -> bool:
    return subprocess.run(["otf2-print", str(anchor)], capture_output=True).returncode == 0


# --- 1. the C reader checks every OTF2 return code ---------------------------------

@pytest.mark.usefixtures("path")
def test_a_truncated_local_definition_file_is_refused_naming_it(tmp_path, capsys):
    """A truncated ``traces/0.def`` (which otf2-print refuses): its mapping tables
    would be lost, and records point at wrong thread teams and windows. Refused in
    one line naming the file and the location (the C path) or the OTF2 reason."""
    src = tmp_path / "in"
    shutil.copytree(JACOBI, src)
    damaged = src / "traces" / "0.def"
    damaged.write_bytes(damaged.read_bytes()[:6000])
    assert not otf2_print_ok(src / "traces.otf2")
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(src / "traces.otf2", out, capsys)
    assert status == 3
    assert len(err.splitlines()) == 1
    assert "location 0: its local definition file traces/0.def is cut short" in err
    assert "Error:" not in err and "Traceback" not in err  # no exception name
    assert not out.parent.exists()


def test_the_c_path_names_the_damaged_local_definition_file(tmp_path, capsys, monkeypatch):
    if not native.available():
        pytest.skip("the OTF2 C path cannot be built")
    monkeypatch.setenv("COMPENSATE_NATIVE", "1")
    src = tmp_path / "in"
    shutil.copytree(JACOBI, src)
    damaged = src / "traces" / "4294967296.def"
    data = bytearray(damaged.read_bytes())
    data[100:6000] = bytes(5900)  # (its end-of-file record kept: the library reads it)
    damaged.write_bytes(bytes(data))
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(src / "traces.otf2", out, capsys)
    assert status == 3
    # (what the library says of the zeroed bytes depends on its buffers' earlier use)
    assert err.startswith(f"compensate: error: {src / 'traces.otf2'}: location 4294967296: "
                          "its local definition file traces/4294967296.def cannot be read: ")
    assert "(the OTF2 library: " in err and len(err.splitlines()) == 1


# --- 2. undefined references ---------------------------------------------------------

@pytest.mark.usefixtures("path")
def test_an_undefined_region_is_refused_at_its_record(tmp_path, capsys):
    """An Enter naming region 17, which the definitions lack: refused at that
    record by both paths with the same message (was copied through as INVALID)."""
    write_archive(tmp_path / "in", extra=lambda r, t: [E.Enter(t + 1, _Ref(17)),
                                                       E.Leave(t + 2, _Ref(17))]
                  if r == 1 else [])
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(tmp_path / "in" / "traces.otf2", out, capsys)
    assert status == 3
    assert err == (f"compensate: error: {tmp_path / 'in' / 'traces.otf2'}: location 1, "
                   "record 10: undefined region 17")
    assert not out.parent.exists()


@pytest.mark.usefixtures("path")
def test_an_undefined_rma_window_outside_the_columns_is_refused(tmp_path, capsys):
    """A reference the columns do not hold (an RmaWinCreate's window, kept in the
    C reader's arguments, in the payload object on the otf2 path)."""
    write_archive(tmp_path / "in", extra=lambda r, t: [E.RmaWinCreate(t + 1, _Ref(9))]
                  if r == 0 else [])
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(tmp_path / "in" / "traces.otf2", out, capsys)
    assert status == 3
    assert err.endswith("traces.otf2: location 0, record 10: undefined RMA window 9")
    assert not out.parent.exists()


@pytest.mark.usefixtures("path")
def test_an_undefined_thread_team_is_accepted_and_written_back(tmp_path, capsys):
    """A thread team the definitions lack (EZTrace's openmp module leaves some
    nested teams undefined; ``otf2-print`` reads them as ``INVALID``): its members
    come from the records, so it is accepted and written back as read."""
    write_archive(tmp_path / "in", extra=lambda r, t: [E.ThreadTeamBegin(t + 1, _Ref(9)),
                                                       E.ThreadTeamEnd(t + 2, _Ref(9))]
                  if r == 0 else [])
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(tmp_path / "in" / "traces.otf2", out, capsys)
    assert status == 0 and "error" not in err
    shown = subprocess.run(["otf2-print", str(out)], capture_output=True, text=True)
    assert shown.returncode == 0
    assert shown.stdout.count("Thread Team: INVALID <9>") == 2


def test_the_undefined_value_is_refused_only_where_otf2_requires_a_definition():
    """OTF2's undefined value (all ones) is legal for an optional reference; Enter
    and Leave need a defined region."""
    assert (integrity.KIND_CODE["Enter"], "region") in integrity.REQUIRED
    checks = integrity.InputChecks(None, "x")
    import numpy as np
    values = np.array([integrity.UNDEFINED, 3], np.uint64)
    assert checks.undefined("CommRef", values, required=False).tolist() == [1]
    assert checks.undefined("RegionRef", values, required=True).tolist() == [0, 1]


# --- 3. lost records -------------------------------------------------------------

def _swap_in(tmp_path: Path, donor_iter: int, target_iter: int) -> Path:
    """An archive of ``target_iter`` iterations whose rank 1 event file comes from one
    of ``donor_iter`` iterations (its definition declares the target's count)."""
    write_archive(tmp_path / "target", n_iter=target_iter)
    write_archive(tmp_path / "donor", n_iter=donor_iter)
    shutil.copy(tmp_path / "donor" / "traces" / "1.evt", tmp_path / "target" / "traces")
    shutil.copy(tmp_path / "donor" / "traces" / "0.evt", tmp_path / "target" / "traces")
    return tmp_path / "target" / "traces.otf2"


@pytest.mark.usefixtures("path")
def test_an_event_file_with_fewer_records_than_declared_is_refused(tmp_path, capsys):
    anchor = _swap_in(tmp_path, donor_iter=2, target_iter=3)
    assert otf2_print_ok(anchor)  # (otf2-print does not compare the counts)
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(anchor, out, capsys)
    assert status == 3
    assert err == (f"compensate: error: {anchor}: location 0: its event file holds 8 "
                   "records but its definition declares 11: records lost")
    assert not out.parent.exists()


@pytest.mark.usefixtures("path")
def test_more_records_than_declared_is_a_miscount_and_accepted(tmp_path, capsys):
    """EZTrace 2.0 declares 2 records for every location: more is accepted."""
    anchor = _swap_in(tmp_path, donor_iter=4, target_iter=3)
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(anchor, out, capsys, "--quiet")
    assert status == 0, err
    assert out.exists()


# --- 4. an event file that belongs to another location ---------------------------

@pytest.mark.usefixtures("path")
def test_an_accelerator_stream_holding_mpi_records_is_refused(tmp_path, capsys):
    """Rank 0's thread and its CUDA stream hold as many records (the count rule
    cannot see a swap of their event files): the stream then holds MPI records."""
    write_archive(tmp_path / "in", stream=True)
    evt = tmp_path / "in" / "traces"
    stream = max(evt.glob("*.evt"), key=lambda p: int(p.stem))
    tmp = evt / "x"
    (evt / "0.evt").rename(tmp)
    stream.rename(evt / "0.evt")
    tmp.rename(stream)
    out = tmp_path / "out" / "traces.otf2"
    status, err = run(tmp_path / "in" / "traces.otf2", out, capsys)
    assert status == 3
    assert err == (f"compensate: error: {tmp_path / 'in' / 'traces.otf2'}: location "
                   f"{stream.stem}, record 2: MpiSend record on a location of type "
                   "ACCELERATOR_STREAM, which cannot hold one: is its event file another "
                   "location's?")
    assert not out.parent.exists()


def test_the_location_type_rule_spares_what_real_archives_hold():
    assert not integrity.forbidden_kinds("CPU_THREAD").any()
    stream = integrity.forbidden_kinds("ACCELERATOR_STREAM")
    code = integrity.KIND_CODE
    assert stream[code["MpiSend"]] and stream[code["ThreadFork"]]
    assert not stream[code["Enter"]] and not stream[code["RmaPut"]]
    metric = integrity.forbidden_kinds("METRIC")
    assert not metric[code["Metric"]] and metric[code["Enter"]]
