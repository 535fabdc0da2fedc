"""What "verified" covers: records carried as local only, by kind
(compensate.verify.coverage), in the summary and the one-line message."""

import json

import compensate as c
from compensate.cli import main
from compensate.model import KIND_CODE
from compensate.verify.coverage import DEPENDENT, LOCAL

from ..conftest import ROOT, read_bundled

TRACES = ROOT / "tests" / "data" / "traces"


def test_groups_do_not_overlap():
    assert not DEPENDENT & LOCAL


def test_thread_rma_and_device_records_are_listed():
    t = read_bundled(TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2")
    r = c.compensate(t, overhead="100ns")
    local = r.summary["verification"]["carried_local_only"]
    assert local["ThreadTaskCreate"] > 0 if "ThreadTaskCreate" in local else True
    assert "ThreadFork" not in local and "ThreadAcquireLock" not in local  # issue 17
    assert any(k.endswith("on ACCELERATOR_STREAM") for k in local)
    assert "Enter" not in local and "MpiSend" not in local  # local by nature / checked
    assert r.summary["verification"]["carried_local_only_records"] == sum(local.values())
    # each counted once: kinds on CPU threads plus everything on the CUDA streams
    # but their Leaves (checked against the host's synchronize calls, R9); this
    # archive's kernels have no callsite parameter, so their Enters are listed
    devices = [x for x, loc in t.definitions.locations.items() if loc.is_device]
    leaves = sum(int((t.events[x].kind == KIND_CODE["Leave"]).sum()) for x in devices)
    assert "Leave on ACCELERATOR_STREAM" not in local and "Enter on ACCELERATOR_STREAM" in local
    assert sum(v for k, v in local.items() if k.endswith("ACCELERATOR_STREAM")) == \
        sum(len(t.events[x]) for x in devices) - leaves


def test_launched_kernels_are_covered():
    """hip-two-gpu-metrics: every device record is a launched kernel's Enter, its
    callsite parameter or its Leave: nothing on the streams is local only (R9)."""
    t = read_bundled(TRACES / "hip-two-gpu-metrics" / "traces.otf2")
    local = c.compensate(t, overhead="3us").summary["verification"]["carried_local_only"]
    assert not any(k.endswith("ACCELERATOR_STREAM") for k in local), local


def test_pure_mpi_covers_everything(tmp_path, capsys):
    out, summary = tmp_path / "o" / "traces.otf2", tmp_path / "s.json"
    src = TRACES / "ping-pong-otf2" / "traces.otf2"
    assert main([str(src), str(out), "--overhead", "100ns", "--summary", str(summary)]) == 0
    assert "carried as local" not in capsys.readouterr().out
    v = json.loads(summary.read_text())["verification"]
    assert v["carried_local_only"] == {} and "point-to-point messages" in v["covers"]


def test_one_line_summary_says_what_was_not_checked(tmp_path, capsys):
    out = tmp_path / "o" / "traces.otf2"
    src = TRACES / "jacobi-openmp-tasks-offload" / "traces.otf2"
    assert main([str(src), str(out), "--overhead", "100ns"]) == 0
    line = capsys.readouterr().out
    assert "verified (" in line and "records carried as local only, not checked" in line


def test_matched_probes_are_covered_plain_probes_are_not():
    """A matched probe (message id) is its message's receive record and checked; a plain
    MPI_Probe (no message id) depends on nothing the engine models: counted."""
    from compensate.formats.text import read_text
    from compensate.verify.coverage import carried_local_only

    t = read_text(str(ROOT / "tests" / "cases" / "r5_mrecv.trace"))
    assert carried_local_only(t) == {}
    ev = t.events[1]
    ev.size_recv[1] = -1  # the probe without its message id: a plain MPI_Probe
    assert carried_local_only(t) == {"MpiProbe": 1}
