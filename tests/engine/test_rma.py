"""R10, MPI one-sided communication (compensate/engine/kinds/rma.py): properties on
random RMA programs run by the ground-truth simulator (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import fit_network
from compensate.matching import match
from compensate.simulate import programs as P
from compensate.simulate.simulator import Network, default_platform, run_program
from compensate.verify import verify

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def rma_programs(draw):
    """2-3 ranks; phases of fences with puts, of post/start/complete/wait between
    random origin/target pairs, and of lock epochs (exclusive or shared, random grant
    order) on a random target; random work in between."""
    n = draw(st.integers(2, 3))
    ops = [[P.win_create(), P.win_fence()] for _ in range(n)]
    tickets = [0] * n
    size = st.sampled_from([64, 4096, 65536])
    for _ in range(draw(st.integers(1, 4))):
        for r in range(n):
            ops[r].append(P.compute(draw(st.integers(0, 40)) * 1e-6))
        phase = draw(st.sampled_from(["fence", "pscw", "lock"]))
        if phase == "fence":
            for r in range(n):
                for t in draw(st.lists(st.integers(0, n - 1), max_size=2)):
                    ops[r].append(P.rma_put(t, draw(size)))
                ops[r].append(P.win_fence())
        elif phase == "pscw":
            origin = draw(st.integers(0, n - 1))
            target = (origin + draw(st.integers(1, n - 1))) % n
            ops[target] += [P.win_post([origin])]
            ops[origin] += [P.win_start([target]), P.rma_put(target, draw(size)),
                            P.win_complete()]
            ops[target] += [P.compute(draw(st.integers(0, 20)) * 1e-6), P.win_wait([origin])]
        else:
            target = draw(st.integers(0, n - 1))
            for r in draw(st.permutations(range(n))):
                ops[r] += [P.win_lock(target, draw(st.booleans()), tickets[target]),
                           P.rma_fetch_add(target) if draw(st.booleans())
                           else P.rma_accumulate(target, draw(size)), P.win_unlock(target)]
                tickets[target] += 1
    for r in range(n):
        ops[r] += [P.win_fence(), P.win_free()]
    return P.Program("rma_random", ops, {})


@given(rma_programs(), st.sampled_from([0.0, 2e-7, 1e-6]))
@SETTINGS
def test_rma_programs_keep_happened_before(program, overhead):
    """Every bound keeps the RMA invariants (0 violations) and every record."""
    sim = run_program(program, default_platform(overhead), network=Network(latency=1e-6),
                      quantize=True)
    m = match(sim.measured)
    for bound in ("lower", "upper", "fitted"):
        net = fit_network(sim.measured, m, sim.platform) if bound == "fitted" else None
        used = bound if bound != "fitted" or net else "lower"
        r = compensate(sim.measured, sim.platform, EngineOptions(bound=used, network_time=net),
                       m)
        v = verify(r.trace, m)
        assert v.ok, (bound, v.examples)
        for loc, ev in sim.measured.events.items():
            assert len(r.trace.events[loc]) == len(ev)


@given(rma_programs())
@SETTINGS
def test_no_overhead_upper_is_identity(program):
    """Without tracer overhead the upper bound keeps every measured time: each RMA
    rule then gives what the measurement shows (fences with their own measured exits,
    eq. 13: a put to oneself may hold one member's exit back)."""
    sim = run_program(program, default_platform(0.0), quantize=True)
    m = match(sim.measured)
    r = compensate(sim.measured, sim.platform,
                   EngineOptions(bound="upper", collective_exit="per-process"), m)
    for loc, ev in sim.measured.events.items():
        assert r.trace.events[loc].time.tolist() == ev.time.tolist(), loc


@given(rma_programs(), st.sampled_from([2e-7, 1e-6]))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_lock_deposits_hold_in_the_truth_and_only_move_records_later(program, overhead):
    """The deposit rule ("Passive target", docs/compensation.md): in the simulator's
    truth every lock grant comes at least the rule's time after each operation of
    the previous conflicting epochs (its copies, its way to the target, the grant's
    way back: a lower bound of the truth, with the true network); and the rule never
    moves a record earlier than the other rules place it, under lower and fitted with
    the true network as the platform model. Likewise "Release after completion" (the
    platform's rma.release, the simulator's protocol: its unlock releases only once
    the fetched results are back): a fetch's round trip and the release's way before
    the next grant, and before the unlock's return also the acknowledgement's way,
    hold in the truth; and its outputs are never earlier than the eager ones."""
    import dataclasses

    import pytest

    from compensate.engine.kinds import rma

    net = Network(latency=1e-6)
    sim = run_program(program, default_platform(overhead), network=net, quantize=True)
    m = match(sim.measured)
    true = dataclasses.replace(sim.platform, network=(net.latency, 1.0 / net.bandwidth))
    res = sim.truth.definitions.timer_resolution
    copy = sim.platform.copy_time

    def gap(loc, i, o_loc, o_i):
        return int(sim.truth.events[loc].time[i]) - int(sim.truth.events[o_loc].time[o_i])

    for link in m.rma.links:
        loc, i = link.recv
        for o_loc, o_i, sent, back in link.deposits:
            there, grant = o_loc != link.target, loc != link.target
            n = 2 if there else 1  # on its own window one local copy each way
            least = n * copy(sent) + (net.time(sent) if there else 0.0) + (
                net.time(0) if grant else 0.0)
            assert gap(loc, i, o_loc, o_i) >= least * res - 2, (link, least)
            if back > 0:  # release after completion
                least += n * copy(back) + (net.time(back) + net.time(0) if there else 0.0)
                assert gap(loc, i, o_loc, o_i) >= least * res - 2, (link, least)
        if link.kind == "completion" and link.back[0] > 0 and link.target >= 0:
            (o_loc, o_i), sent, back = link.sends[0], link.sizes[0], link.back[0]
            remote = o_loc != link.target
            n = 2 if remote else 1
            least = n * copy(sent) + n * copy(back) + (
                net.time(sent) + net.time(back) + 2 * net.time(0) if remote else 0.0)
            assert gap(loc, i, o_loc, o_i) >= least * res - 2, (link, least)
    fit = fit_network(sim.measured, m, true)
    after = dataclasses.replace(sim.platform, rma_release="after_completion")
    for opts in (EngineOptions("lower"), EngineOptions("fitted", network_time=fit)):
        with_rule = compensate(sim.measured, sim.platform, opts, m).trace
        completed = compensate(sim.measured, after, opts, m).trace
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rma, "_deposits", lambda *a: None)
            without = compensate(sim.measured, sim.platform, opts, m).trace
        assert verify(with_rule, m).ok and verify(completed, m).ok
        for loc, ev in without.events.items():
            assert (with_rule.events[loc].time >= ev.time).all(), (opts.bound, loc)
            assert (completed.events[loc].time >= with_rule.events[loc].time).all(), \
                (opts.bound, loc)


def test_least_time_on_own_window_is_one_copy_each_way():
    """Hand case of the deposit rule's least time (docs/compensation.md "Deposits"):
    a 1000-byte operation with 8 bytes back, copies of 500 and 4 ticks: 2·500 + 2·4
    between two processes, 500 + 4 on the origin's own window (a local copy / atomic,
    as MPICH's; docs/accuracy.md, issue 19)."""
    from compensate.engine.kinds.rma import _least

    class G:
        @staticmethod
        def copy(size):
            return {1000: 500.0, 8: 4.0}[size]

    assert _least(G, 1000, 8) == 1008.0
    assert _least(G, 1000, 8, local=True) == 504.0
    assert _least(G, 1000, 0, local=True) == 500.0
