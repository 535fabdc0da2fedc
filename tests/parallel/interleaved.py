"""Simulated programs whose processes interleave differently from the project's
stencil (:func:`compensate.simulate.programs.stencil`, every process the same
step in lock step): the agreed cut (compensate/parallel/cutting.py) is held to
the one-process cutter on them (tests/parallel/test_cutting_interleaved.py,
benchmarks/parallel_memory.py).

* ``skewed``: a halo exchange in which odd processes receive before they send,
  every process works at a rate of its own (up to 1.9 times the base step) and
  starts at an offset of its own, and an Allreduce every 25 iterations;
* ``wavefront``: a sweep from the first process to the last and back each
  iteration (a pipeline across the processes: its dependency chain grows with
  their number);
* ``bursts``: in each iteration one process (in turn) writes a burst of short
  traced calls while the others compute untraced, then a ring exchange: a
  process's records are dense in some stretches of time and absent in others;
  a Barrier after every process had its turn;
* ``halves``: in the first half of the iterations the first half of the
  processes write 8 short traced calls in the time the others write one, in the
  second half the other way round; a Barrier every 7 iterations: a rank's
  records are denser in time than another's for long stretches (as in HPC
  Challenge's trace, docs/eztrace.md), so that a rank reading past the others
  would hold records no cut near their horizons takes.
"""

from __future__ import annotations

import random

from compensate.simulate.programs import Program, allreduce, barrier, call, compute, recv, send
from compensate.simulate.simulator import SimResult, default_platform, run_program

#: records per process and iteration, about (to size a trace)
RECORDS_PER_STEP = {"skewed": 14, "wavefront": 12, "bursts": 16, "halves": 10}


def _jitter(rng: random.Random, mean: float) -> float:
    return mean * (1.0 + 0.2 * (2.0 * rng.random() - 1.0))


def skewed(ranks: int, iterations: int, seed: int = 0, step: float = 2e-5) -> Program:
    rng = random.Random(seed)
    ops: list[list] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            left, right = (r - 1) % ranks, (r + 1) % ranks
            rate = 1.0 + 0.9 * ((3 * r) % ranks) / ranks
            exchange = [send(right, 4096, 0), recv(left, 0), send(left, 4096, 1),
                        recv(right, 1)]
            if r % 2:
                exchange = [exchange[1], exchange[0], exchange[3], exchange[2]]
            ops[r] += [call("update", _jitter(rng, step * rate)), *exchange]
            if (it + 1) % 25 == 0:
                ops[r].append(allreduce(8))
    return Program("skewed", ops, dict(ranks=ranks, iterations=iterations, seed=seed))


def wavefront(ranks: int, iterations: int, seed: int = 0, step: float = 1e-5) -> Program:
    rng = random.Random(seed)
    ops: list[list] = [[] for _ in range(ranks)]
    for _ in range(iterations):
        for r in range(ranks):
            forward = ([recv(r - 1)] if r else []) + [call("sweep", _jitter(rng, step))] + \
                ([send(r + 1, 8192)] if r < ranks - 1 else [])
            back = ([recv(r + 1)] if r < ranks - 1 else []) + \
                [call("sweep", _jitter(rng, step))] + ([send(r - 1, 8192)] if r else [])
            ops[r] += forward + back
    return Program("wavefront", ops, dict(ranks=ranks, iterations=iterations, seed=seed))


def bursts(ranks: int, iterations: int, seed: int = 0, step: float = 2e-5) -> Program:
    rng = random.Random(seed)
    ops: list[list] = [[] for _ in range(ranks)]
    burst = 3 * ranks
    for it in range(iterations):
        for r in range(ranks):
            if it % ranks == r:
                ops[r] += [call("kernel", step / burst) for _ in range(burst)]
            else:
                ops[r].append(compute(_jitter(rng, step)))
            ops[r] += [send((r + 1) % ranks, 1024), recv((r - 1) % ranks)]
            if (it + 1) % ranks == 0:
                ops[r].append(barrier())
    return Program("bursts", ops, dict(ranks=ranks, iterations=iterations, seed=seed))


def halves(ranks: int, iterations: int, seed: int = 0, step: float = 2e-5,
           dense: int = 8) -> Program:
    rng = random.Random(seed)
    ops: list[list] = [[] for _ in range(ranks)]
    for it in range(iterations):
        for r in range(ranks):
            if (r < ranks // 2) == (it < iterations // 2):
                ops[r] += [call("kernel", _jitter(rng, step / dense)) for _ in range(dense)]
            else:
                ops[r].append(call("kernel", _jitter(rng, step)))
            if (it + 1) % 7 == 0:
                ops[r].append(barrier())
    return Program("halves", ops, dict(ranks=ranks, iterations=iterations, seed=seed))


PROGRAMS = {"skewed": skewed, "wavefront": wavefront, "bursts": bursts, "halves": halves}


def simulate_interleaved(name: str, ranks: int, iterations: int, seed: int = 0) -> SimResult:
    """Program ``name`` of :data:`PROGRAMS` simulated with 1 us of overhead a
    record; ``skewed`` starts each process at an offset of its own."""
    offsets = [((5 * r) % ranks) * 7e-6 for r in range(ranks)] if name == "skewed" else None
    return run_program(PROGRAMS[name](ranks, iterations, seed), default_platform(1e-6),
                       start_offsets=offsets)
