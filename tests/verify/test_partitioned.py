"""The partitioned invariants (:mod:`compensate.verify.partitioned`) catch an
output that breaks them, independently of the engine."""

import numpy as np
import pytest

from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import KIND_CODE
from compensate.verify import verify

from ..conftest import CASES


@pytest.fixture(scope="module")
def case():
    t = read_text(CASES / "r11_partitioned.trace")
    return t, match(t)


def _moved(t, loc, kind, new_time):
    ev = t.events[loc]
    i = int(np.flatnonzero(ev.kind == KIND_CODE[kind])[0])
    times = {k: e.time.copy() for k, e in t.events.items()}
    times[loc][i] = new_time
    return t.with_times(times), i


def test_measured_case_holds(case):
    t, m = case
    v = verify(t, m)
    assert v.ok and v.partitioned == 0
    assert "MpiPready" not in v.carried_local_only  # covered by a dependency check


@pytest.mark.parametrize("loc,kind,when,what", [
    (1, "MpiParrived", 1100, "Parrived of partition 0 not after the Pready"),  # = Pready 0
    (1, "MpiPrecvComplete", 5100,
     "partitioned receive completed before the Pready of send partition 2"),
    (0, "MpiPsendComplete", 5099,
     "partitioned send completed before the Pready of its partition 2"),
])
def test_each_invariant_fails_when_broken(case, loc, kind, when, what):
    t, m = case
    bad, i = _moved(t, loc, kind, when)
    v = verify(bad, m)
    assert v.partitioned >= 1 and not v.ok
    assert any(f"location {loc}, record {i}: {what}" in x for x in v.examples)
