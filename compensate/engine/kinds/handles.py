"""Handle collectives (Score-P >= 7's communicator and window management:
CREATE_HANDLE, ALLOCATE, CREATE_HANDLE_AND_ALLOCATE; DESTROY_HANDLE, DEALLOCATE,
DESTROY_HANDLE_AND_DEALLOCATE), timed as n-to-n operations (R3) where they
synchronise.

* ``create``: always. Creating a communicator is collective over its parent, and the
  members must agree on a context id (an allreduce in MPICH and Open MPI); a
  window's members exchange base addresses and sizes. Nobody leaves before the
  last member entered, as in a barrier.
* ``free``: only where the measured instance synchronised
  (:func:`compensate.matching.collectives.classify_instance`): MPI lets
  MPI_Comm_free return locally, and then there is no dependency to keep; the
  exits follow their own timelines (R1).

Both blocking and nonblocking forms (MPI_Comm_idup) use the n-to-n rules of
:mod:`~compensate.engine.kinds.nton` and :mod:`~compensate.engine.kinds.nonblocking`.
Matching: :mod:`compensate.matching.collectives` (classes ``create``, ``free``).
Verified by :func:`compensate.verify.checks.verify` like every collective (through
``needed_members``).
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.kinds.nonblocking import build_nton
from compensate.engine.kinds.nton import build as build_nton_blocking
from compensate.matching import Instance


def build(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """n-to-n rules (R3) for a synchronising instance; nothing for a local free
    (``Matching.counts()`` lists it as ``free (local)``)."""
    if inst.synchronising:
        build_nton_blocking(graph, inst, lis, dep_rules)


def build_nonblocking(graph: Graph, inst: Instance, lis: list[int], dep_rules: dict) -> None:
    """Nonblocking n-to-n rules (MPI_Comm_idup) for a synchronising instance."""
    if inst.synchronising:
        build_nton(graph, inst, lis, dep_rules)
