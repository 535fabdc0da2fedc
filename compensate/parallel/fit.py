"""The network fit of ``--bound fitted`` (docs/design.md R2f) reduced across ranks
(issue #21, docs/parallel.md "The fit reduced across ranks").

The engine needs the fitted network model before its first rule, and the model is
fitted to every transfer the measured trace observed. No rank reads the whole
trace for it: each rank observes the transfers whose receive it owns
(:func:`compensate.engine.fit.observe_transfers` with ``receivers`` its own
locations), from its view of the trace. Every transfer is observed exactly once,
because a receive is on one location and a location on one rank, and from the
records the one-process run reads: the receive, the record before it, the Enter of
its call and a synchronous receive's post (own records); the send record and the
Leave of its call (a trimmed ghost keeps a send's whole call for its receive's
owner: :mod:`compensate.parallel.trim`); an n-to-1 instance's members' begins (it
keeps every collective call); RMA and partitioned locations whole.

Rank 0 then gathers the observations (:func:`reduced_outcome`), fits their
concatenation and hands every rank the outcome. The result is the
one-process fit bit for bit, whatever the order of the pieces:
:func:`~compensate.engine.fit.fit_observations` sorts the observations by size and
time before it fits a line, and the medians (the constant model, the residual
spread), the extremes and the counts do not depend on their order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compensate.engine.fit import FitOutcome, Observations, outcome_of
from compensate.parallel.transport import Transport
from compensate.platform import Platform


def reduced_outcome(transport: Transport, obs: Observations, platform: Platform,
                    step: Callable[..., Any] = lambda f, *a: f(*a)) -> FitOutcome:
    """The fit's outcome of the whole trace from each rank's own ``obs``
    (collective; the same on every rank): what
    :func:`compensate.engine.fit.outcome_of` gives for every observation in one
    process. Rank 0 gathers the observations and fits, the others get the outcome
    (a few numbers), so only rank 0 holds them all, as the one-process run does.
    ``step(f, *args)`` runs the fit (e.g. :func:`compensate.parallel.driver.agreed`,
    so that a failure of rank 0's fit raises on every rank)."""
    items: list[Any] = [None] * transport.size
    items[0] = (obs.sizes, obs.seconds, obs.p2p, obs.collective, obs.rma, obs.links,
                obs.pairs)
    got = transport.alltoall(items)

    def fit() -> FitOutcome | None:
        if transport.rank != 0:
            return None
        every = Observations.concat([Observations(*part) for part in got])
        return outcome_of(every, platform.network)

    return transport.allgather(step(fit))[0]
