"""Regression fingerprints of the engine's output (issue #7).

The engine was restructured for speed (vectorised dependency set-up, flat arrays
instead of per-dependency closures); the approximated times and statistics must
stay bit-identical. The fingerprints below were produced by the engine *before*
that restructuring, on small simulated programs covering every rule (P2P both
bounds and fitted, synchronous sends, Sendrecv, nonblocking P2P and collectives,
scans, 1-to-n, n-to-1, buffer flushes, start offsets): a SHA-256 over every
location's written timestamps and size column (BufferFlush stop times) and the
statistics.

Deliberate changes since: the statistics gained the ``m2_message_late`` counter, and
the fitted bound's R2f learned to keep observed transfers of m.2 receives whose
message arrived late and of the last arrival at an n-to-1 root (issue #9). All
fingerprints were regenerated then, after checking that the lower- and upper-bound
times and statistics without the new counter still matched the old fingerprints.
Issue 16: at an n-to-1 root only the last arrival's message can be R2's m.1 (the
others' intervals hold the wait for it), and the fit also observes collectives'
transfers: the fingerprints of collectives and mixed (the programs with Gather and
Reduce) changed, every other one stayed; gather, issend and nonblocking_rooted were
added at the end. Then mprobe: the matched probe became its message's receive
record (R2 without a receive copy; MPI_Mrecv local): only its three fingerprints
changed. Issue 19, R10 deposits (a lock grant after the previous epoch's
operations arrived at the target): rma_lock_counter under the lower bound changed
(36 records later by at most 6 ticks, the target's copy of the accumulates; with
the rule disabled the old fingerprint 85fb7215e830afde is reproduced), every other
one stayed. Issue 19, the simulator's RMA self path (rank 0's operations on its own
window take no network, as MPICH's): the engine did not change, its input did, so
rma_lock_counter's two fingerprints changed (68e6cd33bfd888ca and bdff2dcf39bd0f29
before), every other one stayed. Issue 41, the fit by the records' order and its
lower envelope: ten fitted fingerprints changed (imbalanced, mixed, stencil,
nonblocking_rooted, mprobe, rma_fence, rma_pscw, probe; their fitted model moved),
taken again; every lower and upper one stayed (the statistics' new
``m2_fitted_overridden`` is left out of the hash). The grid of 1/64 tick for the
platform's fractions of a tick (compensate.engine.span.on_grid: a streamed run then
sums them exactly as the whole run does): 28 fingerprints changed, every written
time by at most one tick (two in sendrecv_ring, whose m.1/m.2 count moved where a
message's arrival and its receiver's readiness tie), taken again.
"""

import hashlib
import json

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import try_fit
from compensate.matching import match
from compensate.simulate.programs import PROGRAMS

from ..conftest import simulated

#: The programs of issue #7; those added later come after the extra configurations,
#: in the order they were added (LATER), so that the numbering (part of each key) of
#: the older ones stays.
FIRST = ["collectives", "imbalanced", "mixed", "montecarlo", "nonblocking", "pingpong",
         "pipeline", "ring", "sendrecv_ring", "stencil"]
LATER = ["gather", "issend", "nonblocking_rooted", "mprobe", "partitioned", "partitioned_poll",
         "rma_fence", "rma_lock_counter", "rma_pscw", "flush_in_calls", "probe"]
CONFIGS = [(name, {"ranks": 5, "seed": 1}, {}) for name in FIRST] + [
    ("ring", {"ranks": 4, "seed": 2, "eager_limit": 512}, {"eager_limit": 512}),
    ("pingpong", {"ranks": 2, "seed": 2, "eager_limit": 100}, {"eager_limit": 100}),
    ("mixed", {"ranks": 6, "seed": 3, "start_offsets": [0, 1e-5, 3e-5, 0, 2e-6, 7e-6]}, {}),
    ("imbalanced", {"ranks": 3, "seed": 4, "overhead": 2.5e-7, "flush_every": 40}, {}),
] + [(name, {"ranks": 5, "seed": 1}, {})
      for name in LATER + sorted(set(PROGRAMS) - set(FIRST) - set(LATER))]
VARIANTS = [("lower", "uniform"), ("upper", "per-process"), ("fitted", "uniform")]

EXPECTED = {
    '0-collectives:lower:uniform': '2c6ef025689d30b7',
    '0-collectives:upper:per-process': '4dbdf7528d78c069',
    '0-collectives:fitted:uniform': 'b359988974ed0d18',
    '1-imbalanced:lower:uniform': '87909b69abd89222',
    '1-imbalanced:upper:per-process': '1fbc8b4ef50af1aa',
    '1-imbalanced:fitted:uniform': 'c5ae83c2d1ba6ce6',
    '2-mixed:lower:uniform': 'fc327e6a097ef54e',
    '2-mixed:upper:per-process': '5d89f298467dc604',
    '2-mixed:fitted:uniform': '010d52dcb32d45fc',
    '3-montecarlo:lower:uniform': 'bc52cf655bed806e',
    '3-montecarlo:upper:per-process': 'd5a35412abf960aa',
    '3-montecarlo:fitted:uniform': '4be3ceb8a4a4f892',
    '4-nonblocking:lower:uniform': '4524f145a155af6b',
    '4-nonblocking:upper:per-process': '3d1333b57bff748d',
    '5-pingpong:lower:uniform': '6f99277375ccd13e',
    '5-pingpong:upper:per-process': '6f99277375ccd13e',
    '5-pingpong:fitted:uniform': '6f99277375ccd13e',
    '6-pipeline:lower:uniform': '9062d6cfdceccc6f',
    '6-pipeline:upper:per-process': '780e3d82f13f7349',
    '6-pipeline:fitted:uniform': '77f49a6739180f8d',
    '7-ring:lower:uniform': '8555b7e48bf328f7',
    '7-ring:upper:per-process': '8555b7e48bf328f7',
    '7-ring:fitted:uniform': '8555b7e48bf328f7',
    '8-sendrecv_ring:lower:uniform': '4fc7671fdcc74c73',
    '8-sendrecv_ring:upper:per-process': '9b00a856f86b0a50',
    '8-sendrecv_ring:fitted:uniform': 'f6ec5396859dbcd0',
    '9-stencil:lower:uniform': '793d916e55f147f5',
    '9-stencil:upper:per-process': '0f133eee166b2ab3',
    '9-stencil:fitted:uniform': '88b51d8b75a3b30e',
    '10-ring:lower:uniform': '537c517b4ab2cb6e',
    '10-ring:upper:per-process': '537c517b4ab2cb6e',
    '10-ring:fitted:uniform': '537c517b4ab2cb6e',
    '11-pingpong:lower:uniform': 'f6526d7ddc1b1ab1',
    '11-pingpong:upper:per-process': 'f6526d7ddc1b1ab1',
    '11-pingpong:fitted:uniform': 'f6526d7ddc1b1ab1',
    '12-mixed:lower:uniform': 'c0d8440a9d9c196e',
    '12-mixed:upper:per-process': '3c5ec88f9eb46cb0',
    '12-mixed:fitted:uniform': '1e33b0c6d6699125',
    '13-imbalanced:lower:uniform': 'fdc7a322cc2c144d',
    '13-imbalanced:upper:per-process': 'e2b449152fda9cb6',
    '13-imbalanced:fitted:uniform': '639e643e97854563',
    '14-gather:lower:uniform': 'e4035676625e7b7b',
    '14-gather:upper:per-process': '47a5b668476ff6b4',
    '14-gather:fitted:uniform': '37cf4181459c97cb',
    '15-issend:lower:uniform': 'a01e54b636db4443',
    '15-issend:upper:per-process': '42acf7263d2d2f9a',
    '16-nonblocking_rooted:lower:uniform': 'a4ede72fb19b1838',
    '16-nonblocking_rooted:upper:per-process': 'b5b3a5d7a65acf65',
    '16-nonblocking_rooted:fitted:uniform': 'faffcdac1101f184',
    '17-mprobe:lower:uniform': '04fc3d073c24f5f6',
    '17-mprobe:upper:per-process': '57d6507b21a7bbbc',
    '17-mprobe:fitted:uniform': 'ad121ab607d464cc',
    '18-partitioned:lower:uniform': 'b0fc48c8554bde72',
    '18-partitioned:upper:per-process': '7ed0b7940e18de8f',
    '18-partitioned:fitted:uniform': 'e41cb6c2c9d89ec7',
    '19-partitioned_poll:lower:uniform': 'e9af99468595b139',
    '19-partitioned_poll:upper:per-process': '1eecdc4df0f5b121',
    '20-rma_fence:lower:uniform': 'eedd3f7e12b365e9',
    '20-rma_fence:upper:per-process': 'a118a15c631b9460',
    '20-rma_fence:fitted:uniform': 'e35f4aadf2f41e2a',
    '21-rma_lock_counter:lower:uniform': 'd624249eae8ddc5d',
    '21-rma_lock_counter:upper:per-process': 'b680622a963e5999',
    '22-rma_pscw:lower:uniform': 'e767c866c2014024',
    '22-rma_pscw:upper:per-process': '7edb535748a29371',
    '22-rma_pscw:fitted:uniform': '23d5c15e99cfb7c3',
    '23-flush_in_calls:lower:uniform': '2077d77f71eb6b8f',
    '23-flush_in_calls:upper:per-process': '572b944d55b3878c',
    '23-flush_in_calls:fitted:uniform': '03961f75bf8e0c5a',
    '24-probe:lower:uniform': '19eb8cce3906b364',
    '24-probe:upper:per-process': '17300c29251c8926',
    '24-probe:fitted:uniform': 'd6f582cb9047a018',
}

#: Statistics added after these fingerprints were taken (issue 15's overcompensation
#: finding): derived from the same per-record amounts, left out of the hash so that
#: every timestamp and the older statistics are still compared bit for bit.
#: ``flush_ticks``/``flush_resolution``: the exact form of ``flush_seconds_removed``
#: (28 Nov), which is still hashed; computed from the summed ticks since, its last
#: bit changed on 12-mixed only (0.0006000000000000001 -> 0.0006 s, every time the
#: same), whose three fingerprints were taken again. ``region_records``: the records
#: charged a platform's per-region cost (none here: an empty dict).
#: ``overhead_removed``: the overhead R1 took out, summed.
LATER_STATS = {"overcompensated_by_kind", "overcompensated_max_s", "flush_ticks",
               "flush_resolution", "region_records", "overhead_removed"}


def fingerprint(trace, stats) -> str:
    h = hashlib.sha256()
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        h.update(np.ascontiguousarray(ev.time, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(ev.size, dtype=np.int64).tobytes())
    d = {k: v for k, v in stats.to_dict().items() if k not in LATER_STATS}
    if "p2p_cases" in d:  # (a fitted run's count of uses overridden, issue #41)
        d["p2p_cases"] = {k: v for k, v in d["p2p_cases"].items()
                          if k != "m2_fitted_overridden"}
    h.update(json.dumps(d, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name,kw,match_kw", CONFIGS,
                         ids=[f"{i}-{c[0]}" for i, c in enumerate(CONFIGS)])
def test_engine_output_unchanged(name, kw, match_kw):
    sim = simulated(name, **kw)
    trace = sim.measured
    m = match(trace, **match_kw)
    checked = 0
    for bound, cx in VARIANTS:
        net = None
        if bound == "fitted":
            outcome = try_fit(trace, m, sim.platform)
            if outcome.fit is None:
                continue
            net = outcome.fit
        r = compensate(trace, sim.platform,
                       EngineOptions(bound=bound, collective_exit=cx, network_time=net), m)
        key = f"{CONFIGS.index((name, kw, match_kw))}-{name}:{bound}:{cx}"
        assert fingerprint(r.trace, r.stats) == EXPECTED[key], key
        checked += 1
    assert checked >= 2
