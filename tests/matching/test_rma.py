"""R10 matching (compensate/matching/rma.py): which RMA records wait for which."""

import pytest

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import TraceError

from ..conftest import CASES, TRACES

HEAD = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=1
location 2 group=2
region 1 "MPI_Win_lock"
region 2 "MPI_Win_unlock"
comm 0 "MPI_COMM_WORLD" 0,1,2
window 0 "win" comm=0
events
"""


def _epoch(loc, t, kind, remote=0):
    return (f"{t} {loc} Enter region=1\n{t + 1} {loc} RmaRequestLock win=0 remote={remote} "
            f"lock_id=0 lock_type={kind}\n{t + 2} {loc} Leave region=1\n"
            f"{t + 3} {loc} Enter region=2\n{t + 4} {loc} RmaReleaseLock win=0 "
            f"remote={remote} lock_id=0\n{t + 5} {loc} Leave region=2\n")


def _read(tmp_path, body):
    (tmp_path / "t.trace").write_text(HEAD + body)
    return read_text(str(tmp_path / "t.trace"))


def test_shared_locks_are_free_among_themselves(tmp_path):
    """Two shared epochs wait for the exclusive one before them, not for each other;
    the exclusive one after them waits for both releases (each unlock's Enter)."""
    t = _read(tmp_path, _epoch(0, 100, "EXCLUSIVE") + _epoch(1, 200, "SHARED")
              + _epoch(2, 201, "SHARED") + _epoch(0, 300, "EXCLUSIVE"))
    links = [(lk.recv, [s for s, r in zip(lk.sends, lk.ref, strict=True) if not r])
             for lk in match(t).rma.links if lk.kind == "lock"]
    assert links == [((1, 2), [(0, 3)]), ((2, 2), [(0, 3)]), ((0, 8), [(1, 3), (2, 3)])]


def test_lock_all_is_shared_on_every_target(tmp_path):
    t = _read(tmp_path, _epoch(0, 100, "EXCLUSIVE", 1) + _epoch(2, 200, "SHARED", "-"))
    links = [lk for lk in match(t).rma.links if lk.kind == "lock"]
    assert [(lk.recv, lk.sends[0]) for lk in links] == [((2, 2), (0, 3))]


def test_undefined_window_is_one_line_error(tmp_path):
    body = _epoch(0, 100, "EXCLUSIVE").replace("win=0", "win=5")
    with pytest.raises(TraceError) as err:
        match(_read(tmp_path, body))
    assert "window 5" in str(err.value) and "location 0, record 1" in str(err.value)


def test_pscw_links_by_call():
    m = match(read_text(str(CASES / "r10_pscw.trace")))
    assert sorted((lk.kind, lk.recv, lk.sends[0]) for lk in m.rma.links) == [
        ("complete", (1, 5), (0, 8)), ("post", (0, 2), (1, 1)), ("transfer", (1, 5), (0, 4))]


def test_device_windows_are_left_to_the_accelerator_rules():
    """Score-P's CUDA copies are RMA records on a window with a GPU stream: no link."""
    import compensate as c
    t = c.read(str(TRACES / "jacobi-mpi-openmp-cuda" / "traces.otf2"))
    deps = match(t).rma
    assert deps.links == [] and deps.collectives == []


def test_a_put_whose_closing_fence_is_not_in_the_trace_has_no_transfer(tmp_path):
    """A streamed segment (or a cut trace) may end before the target's fence that
    closes a put's epoch: the put then has no transfer link, and matching does not
    fail (it raised ValueError from a zip over the missing fence's begins)."""
    lines = (CASES / "r10_fence.trace").read_text().splitlines()
    cut = [ln for ln in lines if not (ln[:1].isdigit() and " 1 " in ln
                                      and int(ln.split()[0]) >= 1500)]
    (tmp_path / "t.trace").write_text("\n".join(cut) + "\n")
    deps = match(read_text(str(tmp_path / "t.trace"))).rma
    assert not [lk for lk in deps.links if lk.kind == "transfer"]
    assert deps.unmatched > 0  # the fences that do not pair up are counted, not linked
