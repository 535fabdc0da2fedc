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


def _archive_bytes(anchor) -> int:
    return sum(p.stat().st_size for p in anchor.parent.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def computed():
    """Two fresh processes at once (the machine has two cores and the rest of the
    suite runs on one): the largest real archive in one, the other archives, the
    cases and the simulated programs in the other. The largest (the hip archive's
    73k records, most of them metrics read through the Python callbacks) costs
    about as much as all the rest together: ~6 s each on a quiet machine, where
    the real archives in one process against the cases and programs in the other
    took ~9 s and ~4 s."""
    names = [a.parent.name for a in sorted(REAL, key=_archive_bytes)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        big, rest = pool.map(compute, [("real",), ("cases", "sims", "real")],
                             [names[-1:], names[:-1]])
    return {**big, **rest}


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
