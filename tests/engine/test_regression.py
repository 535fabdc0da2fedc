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
"""

import hashlib
import json

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.engine.fit import try_fit
from compensate.matching import match
from compensate.simulate import simulate
from compensate.simulate.programs import PROGRAMS

CONFIGS = [(name, {"ranks": 5, "seed": 1}, {}) for name in sorted(PROGRAMS)] + [
    ("ring", {"ranks": 4, "seed": 2, "eager_limit": 512}, {"eager_limit": 512}),
    ("pingpong", {"ranks": 2, "seed": 2, "eager_limit": 100}, {"eager_limit": 100}),
    ("mixed", {"ranks": 6, "seed": 3, "start_offsets": [0, 1e-5, 3e-5, 0, 2e-6, 7e-6]}, {}),
    ("imbalanced", {"ranks": 3, "seed": 4, "overhead": 2.5e-7, "flush_every": 40}, {}),
]
VARIANTS = [("lower", "uniform"), ("upper", "per-process"), ("fitted", "uniform")]

EXPECTED = {
    '0-collectives:lower:uniform': '89905fa6a56fa745',
    '0-collectives:upper:per-process': 'a790d8c18bee0783',
    '0-collectives:fitted:uniform': 'bf97b4b7fb7af454',
    '1-imbalanced:lower:uniform': '87edb1d91f9eb16f',
    '1-imbalanced:upper:per-process': '1fbc8b4ef50af1aa',
    '1-imbalanced:fitted:uniform': '93a21e752865482a',
    '2-mixed:lower:uniform': '963fd1122fe60e6d',
    '2-mixed:upper:per-process': 'e29d6f7ac0ef7d1c',
    '2-mixed:fitted:uniform': '9da5d570061e35fc',
    '3-montecarlo:lower:uniform': 'bc52cf655bed806e',
    '3-montecarlo:upper:per-process': 'd5a35412abf960aa',
    '3-montecarlo:fitted:uniform': '4be3ceb8a4a4f892',
    '4-nonblocking:lower:uniform': 'f4756a3fcb46fcbb',
    '4-nonblocking:upper:per-process': '36541ff8da7bfacb',
    '5-pingpong:lower:uniform': '6f99277375ccd13e',
    '5-pingpong:upper:per-process': '6f99277375ccd13e',
    '5-pingpong:fitted:uniform': '6f99277375ccd13e',
    '6-pipeline:lower:uniform': '8c12e049ddf71187',
    '6-pipeline:upper:per-process': '780e3d82f13f7349',
    '6-pipeline:fitted:uniform': '9ed634cb46c1fb0f',
    '7-ring:lower:uniform': '8555b7e48bf328f7',
    '7-ring:upper:per-process': '8555b7e48bf328f7',
    '7-ring:fitted:uniform': '8555b7e48bf328f7',
    '8-sendrecv_ring:lower:uniform': 'e623b6430b3529f7',
    '8-sendrecv_ring:upper:per-process': '8ba203a2e81cbad0',
    '8-sendrecv_ring:fitted:uniform': '7295c2dbf884cc17',
    '9-stencil:lower:uniform': '2cf276df2a2b6dec',
    '9-stencil:upper:per-process': '0f133eee166b2ab3',
    '9-stencil:fitted:uniform': '9f81f33caed7da49',
    '10-ring:lower:uniform': '537c517b4ab2cb6e',
    '10-ring:upper:per-process': '537c517b4ab2cb6e',
    '10-ring:fitted:uniform': '537c517b4ab2cb6e',
    '11-pingpong:lower:uniform': 'f6526d7ddc1b1ab1',
    '11-pingpong:upper:per-process': 'f6526d7ddc1b1ab1',
    '11-pingpong:fitted:uniform': 'f6526d7ddc1b1ab1',
    '12-mixed:lower:uniform': '67b708f4f1781979',
    '12-mixed:upper:per-process': 'e583617395be2a95',
    '12-mixed:fitted:uniform': '051f4b140d16cbb4',
    '13-imbalanced:lower:uniform': '46ab26e3818a6f22',
    '13-imbalanced:upper:per-process': '20f69e1b8b63cdd0',
    '13-imbalanced:fitted:uniform': '7154fa3a56263549',
}


def fingerprint(trace, stats) -> str:
    h = hashlib.sha256()
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        h.update(np.ascontiguousarray(ev.time, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(ev.size, dtype=np.int64).tobytes())
    # the breakdown of overcompensation (issue 15) came later: fingerprinted are the
    # stats these fingerprints were recorded with (its total is among them)
    d = {k: v for k, v in stats.to_dict().items()
         if k not in ("overcompensated_by_kind", "overcompensated_max_s")}
    h.update(json.dumps(d, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name,kw,match_kw", CONFIGS,
                         ids=[f"{i}-{c[0]}" for i, c in enumerate(CONFIGS)])
def test_engine_output_unchanged(name, kw, match_kw):
    sim = simulate(name, **kw)
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
