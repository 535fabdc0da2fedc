"""R8 OpenMP tasks (compensate/matching/tasks.py, timed as R8 links): a hypothesis
property on random task-parallel traces, checked against the pairs the generator
knows (not the matcher's), and the bundled archive with tasks."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import TRACES

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def task_traces(draw):
    """(text, pairs): ``n`` threads run parallel regions in which the master creates
    tasks that workers run, before or inside the implicit barrier; the master may
    wait for them in a taskwait. ``pairs``: (before, after) record positions
    ``(location, index)`` that the program's semantics order: create -> switch,
    complete -> taskwait Leave, complete -> every other member's barrier Leave."""
    n = draw(st.integers(2, 3))
    t = [1000] * n
    count = [0] * n
    lines, pairs = [], []
    gen = 0

    def rec(loc, time, text):
        lines.append((time, loc, len(lines), f"{time} {loc} {text}"))
        t[loc] = time
        count[loc] += 1
        return (loc, count[loc] - 1)

    def task(kind, g):
        return f"ThreadTask{kind} thread_team=0 creating_thread=0 generation_number={g}"

    for _ in range(draw(st.integers(1, 2))):
        rec(0, t[0] + draw(st.integers(1, 300)), "ThreadFork model=OPENMP")
        rec(0, t[0] + draw(st.integers(1, 50)), "ThreadTeamBegin thread_team=0")
        for w in range(1, n):
            rec(w, max(t[w], t[0]) + draw(st.integers(1, 400)), "ThreadTeamBegin thread_team=0")
        tasks, create_time = [], {}
        for _ in range(draw(st.integers(1, 3))):
            gen += 1
            made = rec(0, t[0] + draw(st.integers(1, 300)), task("Create", gen))
            create_time[gen] = t[0]
            tasks.append((gen, made, draw(st.integers(1, n - 1)), draw(st.booleans())))
        completes = []

        def run(g, made, w, created, completes=completes):
            switch = rec(w, max(t[w], created) + draw(st.integers(1, 300)), task("Switch", g))
            pairs.append((made, switch))
            completes.append(rec(w, t[w] + draw(st.integers(1, 500)), task("Complete", g)))

        for g, made, w, inside in tasks:
            if not inside:
                run(g, made, w, create_time[g])
        for w in range(1, n):
            rec(w, t[w] + draw(st.integers(1, 200)), "Enter region=3")
        for g, made, w, inside in tasks:
            if inside:
                run(g, made, w, create_time[g])
        if draw(st.booleans()):
            rec(0, t[0] + draw(st.integers(1, 100)), "Enter region=4")
            leave = rec(0, max(t[0], max(t[1:])) + draw(st.integers(1, 100)), "Leave region=4")
            pairs.extend((c, leave) for c in completes)
        rec(0, t[0] + draw(st.integers(1, 200)), "Enter region=3")
        last = max(t)
        for w in range(n):
            leave = rec(w, last + draw(st.integers(1, 200)), "Leave region=3")
            pairs.extend((c, leave) for c in completes if c[0] != w)
        for w in range(n):
            rec(w, t[w] + draw(st.integers(1, 300)), "ThreadTeamEnd thread_team=0")
        rec(0, max(t) + draw(st.integers(1, 100)), "ThreadJoin model=OPENMP")
    head = ["compensate-trace 1", "timer_resolution 1000000000"]
    head += [f"location {w} group=0" for w in range(n)]
    head += ['region 3 "!$omp implicit barrier" role=IMPLICIT_BARRIER paradigm=OPENMP',
             'region 4 "!$omp taskwait" role=TASK_WAIT paradigm=OPENMP',
             f'comm 0 "team" {",".join(str(w) for w in range(n))}', "events"]
    return "\n".join(head + [x[3] for x in sorted(lines)]) + "\n", pairs


@SETTINGS
@given(task_traces(), st.sampled_from(["lower", "upper"]), st.floats(0.0, 3e-7))
def test_tasks_keep_their_order(tmp_path_factory, case, bound, overhead):
    """After compensation no task starts before its create, and no taskwait or
    barrier Leave precedes the completes of the tasks it waited for (checked on the
    generator's pairs, and by the verifier)."""
    text, pairs = case
    path = tmp_path_factory.mktemp("tasks") / "t.trace"
    path.write_text(text)
    trace = read_text(str(path))
    m = match(trace)
    assert verify(trace, m).ok
    out = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m).trace
    time = {loc: ev.time for loc, ev in out.events.items()}
    bad = [(s, r) for s, r in pairs if time[r[0]][r[1]] <= time[s[0]][s[1]]]
    assert not bad, bad[:3]
    assert verify(out, m).ok


@pytest.mark.parametrize("overhead", [1e-7, 3e-6])
def test_real_archive_tasks(overhead):
    """jacobi-openmp-tasks-offload: every task matched (create -> switch on the other
    thread, completes -> the implicit barrier's Leave), and after compensation no task
    starts before its create or completes after a barrier Leave that waited for it."""
    from compensate.formats.otf2 import read_otf2
    trace = read_otf2(str(TRACES / "jacobi-openmp-tasks-offload" / "traces.otf2"))
    m = match(trace)
    kinds = m.threads.counts()
    assert kinds["task"] > 0 and kinds["taskwait"] > 0 and kinds["unmatched"] == 0
    links = [s for s in m.threads.syncs if s.kind in ("task", "taskwait")]
    for bound in ("lower", "upper"):
        out = compensate(trace, Platform(overhead), EngineOptions(bound=bound), m).trace
        time = {loc: ev.time for loc, ev in out.events.items()}
        bad = [s for s in links
               if any(time[s.recv[0]][s.recv[1]] <= time[loc][i] for loc, i in s.sends)]
        assert not bad, (bound, bad[:3])
        assert verify(out, m).ok


def test_verifier_sees_a_switch_before_its_create(tmp_path):
    """The independent invariant (compensate/verify/tasks.py) counts a task switched
    to before its create."""
    path = tmp_path / "t.trace"
    path.write_text("compensate-trace 1\ntimer_resolution 1000000000\n"
                    "location 0 group=0\nlocation 1 group=0\nevents\n"
                    "100 1 ThreadTaskSwitch thread_team=0 creating_thread=0 generation_number=1\n"
                    "200 0 ThreadTaskCreate thread_team=0 creating_thread=0 generation_number=1\n")
    trace = read_text(str(path))
    v = verify(trace, match(trace))
    assert v.threads == 1 and "task" in v.examples[0]
    assert np.array_equal(trace.events[1].time, [100])
