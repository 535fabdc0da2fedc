"""Behaviour unchanged by the package layout (issue #14): what the ``compensate``
command, ``compensate report`` and ``compensate export`` write, on every
hand-computed case, every simulated program and the bundled real Score-P archives,
hashes to the fingerprints taken before the modules moved
(``tests/data/fingerprints.json``, made by ``python -m tests.fingerprint_gen``;
see that module for what each fingerprint covers). A deliberate change of output
regenerates the file and says so in its commit."""

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from .fingerprint_gen import FINGERPRINTS, REAL, compute


@pytest.fixture(scope="module")
def computed():
    """The real archives in one fresh process, the cases and the simulated programs
    in another, at once (about 6 s each; the machine has two cores and the rest of
    the suite runs on one)."""
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        real, rest = pool.map(compute, [("real",), ("cases", "sims")])
    return {**real, **rest}


def test_every_input_kind_is_fingerprinted():
    expected = json.loads(FINGERPRINTS.read_text())
    prefixes = {k.split(":", 1)[0] for k in expected}
    assert {"case", "sim", "real", "analysis"} <= prefixes
    assert len(REAL) == 5
    assert sum(k.startswith("real:") for k in expected) == 5 * 6


@pytest.mark.slow
def test_outputs_match_fingerprints(computed):
    expected = json.loads(FINGERPRINTS.read_text())
    assert set(computed) == set(expected)
    changed = sorted(k for k in expected if computed[k] != expected[k])
    assert not changed, f"{len(changed)} outputs changed: {changed[:10]}"
