"""A harder simulated world (issue #41): ground truth that is not the fitted model's
own ``latency + bytes / bandwidth``.

Each :data:`WORLDS` entry is a network (:class:`~compensate.simulate.simulator.Network`:
latency jitter, an eager/rendezvous switch, a contended link) and per-rank clock
offsets. The offsets are what a tracer's clock synchronisation leaves between hosts
(Score-P and EZTrace align clocks by a linear offset per process, to within a
microsecond or so): every record of a rank, in the truth and in the measured trace
alike, is shifted by its rank's offset, so the compensator sees transfers that look
shorter or longer than they were, and the truth is judged on the same clocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compensate.model import BUFFER_FLUSH, Trace
from compensate.simulate.simulator import Network, SimResult, simulate


@dataclass(frozen=True)
class World:
    """A network and per-rank clock offsets (seconds, repeated over the ranks)."""

    network: Network = field(default_factory=Network)
    offsets: tuple[float, ...] = ()


WORLDS: dict[str, World] = {
    # mean 0.5 us of exponential delay on every message (half the latency)
    "jitter": World(Network(jitter=0.5e-6, seed=7)),
    # eager up to 4 KiB, above it a rendezvous handshake (+2 us) and 3 GB/s
    "protocol": World(Network(switch=4096, rendezvous=2e-6, bandwidth2=3e9)),
    # a fifth of the messages cross a link four times slower
    "contended": World(Network(contention=0.2, contended=4.0, seed=11)),
    # clocks off by up to +-0.4 us per rank, and some jitter on top
    "skewed": World(Network(jitter=0.2e-6, seed=5),
                    (0.0, 0.4e-6, -0.3e-6, 0.2e-6, -0.4e-6, 0.1e-6, 0.3e-6, -0.2e-6)),
}


def shift_clocks(trace: Trace, offsets: tuple[float, ...]) -> Trace:
    """``trace`` with every record of a location of process (location group) ``g``
    shifted by ``offsets[g % len(offsets)]`` seconds (rounded to ticks; a
    BufferFlush's stop time too)."""
    if not offsets:
        return trace
    res = trace.definitions.timer_resolution
    times, sizes = {}, {}
    for loc, ev in trace.events.items():
        group = trace.definitions.locations[loc].group
        d = round(offsets[group % len(offsets)] * res)
        times[loc] = ev.time + np.int64(d)
        flush = ev.kind == BUFFER_FLUSH
        if flush.any():
            sizes[loc] = np.where(flush, ev.size + np.int64(d), ev.size)
    return trace.with_times(times, sizes)


def simulate_in(world: str, program: str, **kw: Any) -> SimResult:
    """:func:`~compensate.simulate.simulator.simulate` ``program`` in the world
    named ``world`` (:data:`WORLDS`): its network, then its clock offsets on both
    traces."""
    w = WORLDS[world]
    sim = simulate(program, network=w.network, **kw)
    if not w.offsets:
        return sim
    return SimResult(shift_clocks(sim.truth, w.offsets), shift_clocks(sim.measured, w.offsets),
                     sim.platform, sim.network, sim.program, dict(sim.info, world=world))
