"""Regression fingerprints of the engine's output (issue #7).

The engine was restructured for speed (vectorised dependency set-up, flat arrays
instead of per-dependency closures); the approximated times and statistics must
stay bit-identical. The fingerprints below were produced by the engine *before*
that restructuring, on small simulated programs covering every rule (P2P both
bounds and fitted, synchronous sends, Sendrecv, nonblocking P2P and collectives,
scans, 1-to-n, n-to-1, buffer flushes, start offsets): a SHA-256 over every
location's written timestamps and size column (BufferFlush stop times) and the
statistics.
"""

import hashlib
import json

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.fit import try_fit
from compensate.matching import match
from compensate.programs import PROGRAMS
from compensate.simulate import simulate

CONFIGS = [(name, {"ranks": 5, "seed": 1}, {}) for name in sorted(PROGRAMS)] + [
    ("ring", {"ranks": 4, "seed": 2, "eager_limit": 512}, {"eager_limit": 512}),
    ("pingpong", {"ranks": 2, "seed": 2, "eager_limit": 100}, {"eager_limit": 100}),
    ("mixed", {"ranks": 6, "seed": 3, "start_offsets": [0, 1e-5, 3e-5, 0, 2e-6, 7e-6]}, {}),
    ("imbalanced", {"ranks": 3, "seed": 4, "overhead": 2.5e-7, "flush_every": 40}, {}),
]
VARIANTS = [("lower", "uniform"), ("upper", "per-process"), ("fitted", "uniform")]

EXPECTED = {
    '0-collectives:lower:uniform': 'e4c8a12b5e01e7e8',
    '0-collectives:upper:per-process': '0e7cdaebccfa9795',
    '0-collectives:fitted:uniform': '6537476085b2ddbc',
    '1-imbalanced:lower:uniform': 'f25b28bbe93ddbbf',
    '1-imbalanced:upper:per-process': 'cf45a80655255e5e',
    '1-imbalanced:fitted:uniform': '070293bdc9d6f654',
    '2-mixed:lower:uniform': 'd13b110af0ddc991',
    '2-mixed:upper:per-process': '48fa4a58443db448',
    '2-mixed:fitted:uniform': 'def47a1747dd6790',
    '3-montecarlo:lower:uniform': '7c787e9d90125f89',
    '3-montecarlo:upper:per-process': 'c2aa9f25e8ddd861',
    '3-montecarlo:fitted:uniform': '5896e14f36ac9541',
    '4-nonblocking:lower:uniform': 'af0b0ec5d2eb877c',
    '4-nonblocking:upper:per-process': 'f540f9dca7e02ce7',
    '5-pingpong:lower:uniform': '536e6d976232052e',
    '5-pingpong:upper:per-process': '536e6d976232052e',
    '5-pingpong:fitted:uniform': '536e6d976232052e',
    '6-pipeline:lower:uniform': '2e3678352f19745c',
    '6-pipeline:upper:per-process': 'eed74217a5699000',
    '6-pipeline:fitted:uniform': '92f241963aa3db75',
    '7-ring:lower:uniform': 'a1b5b73bfdf0db9f',
    '7-ring:upper:per-process': 'a1b5b73bfdf0db9f',
    '7-ring:fitted:uniform': 'a1b5b73bfdf0db9f',
    '8-sendrecv_ring:lower:uniform': 'b082cc9c72a6e42c',
    '8-sendrecv_ring:upper:per-process': '06c65ad0628747ee',
    '8-sendrecv_ring:fitted:uniform': '45ec6fec92a3db0f',
    '9-stencil:lower:uniform': '199e5b6eaa1ccaa0',
    '9-stencil:upper:per-process': 'ddc7ecf5cd9cd7e6',
    '9-stencil:fitted:uniform': 'a882132eb5bc1c13',
    '10-ring:lower:uniform': '0d5f9d2f9cc46901',
    '10-ring:upper:per-process': '0d5f9d2f9cc46901',
    '10-ring:fitted:uniform': '0d5f9d2f9cc46901',
    '11-pingpong:lower:uniform': 'e361fddf9e69cf05',
    '11-pingpong:upper:per-process': 'e361fddf9e69cf05',
    '11-pingpong:fitted:uniform': 'e361fddf9e69cf05',
    '12-mixed:lower:uniform': 'f0f90039edb86dce',
    '12-mixed:upper:per-process': 'c29c76ad2efa1ad1',
    '12-mixed:fitted:uniform': '321053c19090d5e0',
    '13-imbalanced:lower:uniform': '238edc0cac90d2c3',
    '13-imbalanced:upper:per-process': '7c92da88a77777dd',
    '13-imbalanced:fitted:uniform': '8730e1c8bea2ac79',
}


def fingerprint(trace, stats) -> str:
    h = hashlib.sha256()
    for loc in sorted(trace.events):
        ev = trace.events[loc]
        h.update(np.ascontiguousarray(ev.time, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(ev.size, dtype=np.int64).tobytes())
    h.update(json.dumps(stats.to_dict(), sort_keys=True, default=str).encode())
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
