"""Ground truth: run model MPI programs (:mod:`~compensate.simulate.programs`) without
and with tracer overhead under the measurement model of docs/design.md §2
(:mod:`~compensate.simulate.simulator`), and score an approximation against the
truth (:mod:`~compensate.simulate.validation`)."""

from compensate.simulate.simulator import (
    Network,
    SimResult,
    SimulationError,
    default_platform,
    run_program,
    simulate,
)

__all__ = ["Network", "SimResult", "SimulationError", "default_platform", "run_program",
           "simulate"]
