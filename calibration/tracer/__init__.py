"""The mpi4py tracer behind ``python -m calibration.record``: per-rank record buffers
(:mod:`~calibration.tracer.buffer`), function and MPI call interception
(:mod:`~calibration.tracer.functions`, :mod:`~calibration.tracer.mpi` with
:mod:`~calibration.tracer.calls` and :mod:`~calibration.tracer.requests`, message sizes
in :mod:`~calibration.tracer.sizes`), clock offsets (:mod:`~calibration.tracer.clock`),
the OTF2 archive (:mod:`~calibration.tracer.archive`) and the tracer's own overhead
(:mod:`~calibration.tracer.overhead`)."""
