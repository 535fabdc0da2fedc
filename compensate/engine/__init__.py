"""The compensation engine (docs/design.md §3, §5): measured timestamps in,
approximated timestamps out.

:mod:`~compensate.engine.graph` lays the trace out as anchors (the dependent records)
and R1 running sums (:mod:`~compensate.engine.runsums`); each dependency kind is one
row of the handler table in :mod:`compensate.engine.kinds` that builds its rules
(:mod:`~compensate.engine.rules`); :mod:`~compensate.engine.run` evaluates the
anchors in dependency order; :mod:`~compensate.engine.fit` fits the network model of
``--bound fitted``. The engine evaluates; running it over a trace (whole, in
segments, on ranks) is the pipeline's (:mod:`compensate.pipeline`).
"""

from compensate.engine.run import (
    BOUNDS,
    COLLECTIVE_EXITS,
    EngineOptions,
    Result,
    Stats,
    approximate,
    compensate,
    rounded_times,
    to_ticks,
)

__all__ = ["BOUNDS", "COLLECTIVE_EXITS", "EngineOptions", "Result", "Stats", "approximate",
           "compensate", "rounded_times", "to_ticks"]
