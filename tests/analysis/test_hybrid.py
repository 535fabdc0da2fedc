"""Thread and accelerator wait states (compensate/analysis/hybrid.py), hand-computed
on small traces, and their place in `compensate report` (text and JSON)."""

import json
from pathlib import Path

import pytest

from compensate.analysis import breakdown, compare
from compensate.analysis.hybrid import HYBRID_STATES, hybrid_waits
from compensate.cli.report import format_comparison, format_profile, report_dict
from compensate.formats.text import read_text

from ..conftest import CASES

HYBRID = """compensate-trace 1
timer_resolution 1000000000
location 0 group=0
location 1 group=0
location 2 group=1 name="GPU" type=ACCELERATOR_STREAM group_type=ACCELERATOR group_creator=0
region 1 "!$omp barrier" role=BARRIER paradigm=OPENMP
region 2 "kernel"
comm 0 "team" 0,1
events
1000 0 ThreadFork model=OPENMP
1100 0 ThreadTeamBegin thread_team=0
1200 1 ThreadTeamBegin thread_team=0
1300 0 ThreadTeamEnd thread_team=0
1400 1 ThreadTeamEnd thread_team=0
1500 0 ThreadJoin model=OPENMP
1500 2 Enter region=2
1800 2 Leave region=2
2000 0 ThreadFork model=OPENMP
2100 0 ThreadTeamBegin thread_team=0
2150 2 Enter region=2
2250 2 Leave region=2
2300 2 Enter region=2
2400 1 ThreadTeamBegin thread_team=0
2500 0 Enter region=1
2600 2 Leave region=2
2700 1 Enter region=1
2800 0 Leave region=1
2800 1 Leave region=1
2900 0 ThreadTeamEnd thread_team=0
2900 1 ThreadTeamEnd thread_team=0
3000 0 ThreadJoin model=OPENMP
"""


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "h.trace"
    path.write_text(HYBRID)
    return read_text(str(path))


def test_hand_computed_states(hybrid):
    """Worker (1) idle from its first TeamEnd (1400) to its next TeamBegin (2400):
    1000 ticks; at the barrier the master entered at 2500, the worker last at 2700:
    the master waited 200; the GPU ran 1500-1800, 2150-2250, 2300-2600: idle 350 +
    50 = 400 in two gaps."""
    h = hybrid_waits(hybrid)
    assert h.present
    assert h.by_location["thread_idle"] == {1: pytest.approx(1e-6)}
    assert h.by_location["omp_barrier_wait"] == {0: pytest.approx(2e-7)}
    assert h.by_location["gpu_idle"] == {2: pytest.approx(4e-7)}
    assert h.counts == {"omp_barrier_wait": 1, "pthread_barrier_wait": 0,
                        "lock_contention": 0, "thread_idle": 1, "gpu_idle": 2}


def test_lock_contention_hand_computed():
    """r8_lock: location 1 entered the critical region at 1000 and got the lock when
    location 0 released it at 1300: 300 ticks; location 0's third acquisition came
    after the release it needed (1600 < its Enter 1900): no contention."""
    h = hybrid_waits(read_text(str(CASES / "r8_lock.trace")))
    assert h.by_location["lock_contention"] == {1: pytest.approx(3e-7)}
    assert h.counts["lock_contention"] == 1


def test_report_text_and_json(hybrid):
    """One trace: a "threads and accelerators" table; two traces (here the same run
    with every time halved after 1000): the before/after rows; JSON under "hybrid"."""
    text = format_profile(breakdown(hybrid))
    assert "threads and accelerators" in text and "GPU idle" in text
    half = hybrid.with_times({loc: 1000 + (ev.time - 1000) // 2
                              for loc, ev in hybrid.events.items()})
    cmp = compare(hybrid, half)
    text = format_comparison(cmp)
    line = next(x for x in text.splitlines() if x.startswith("Idle threads"))
    assert line.split()[2:5] == ["1.000", "0.500", "0.500"]  # microseconds
    doc = json.loads(json.dumps(report_dict([(hybrid, cmp.measured), (half, cmp.approximated)],
                                            cmp)))
    assert set(doc["traces"][0]["hybrid"]) == set(HYBRID_STATES)
    assert doc["comparison"]["hybrid"]["gpu_idle"]["difference"] == pytest.approx(2e-7)


def test_mpi_only_trace_has_no_table():
    """A trace without threads or accelerator streams keeps its report as before."""
    trace = read_text(str(CASES / "r3_nton.trace"))
    assert "threads and accelerators" not in format_profile(breakdown(trace))


def test_pthread_barriers_are_not_openmp_barriers():
    """tests/data/eztrace/sync (EZTrace 2.0, 3 threads, 4 rounds each ending at a
    pthread barrier): the 8 waits of its 4 instances are Pthread barrier waits."""
    from compensate.formats import read_trace

    h = hybrid_waits(read_trace(str(Path(__file__).resolve().parents[1] / "data" / "eztrace"
                                    / "sync" / "eztrace_log.otf2")))
    assert h.counts["pthread_barrier_wait"] == 8 and h.counts["omp_barrier_wait"] == 0
