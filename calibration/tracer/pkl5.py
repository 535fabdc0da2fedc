"""``mpi4py.util.pkl5`` through the tracer.

pkl5 (mpi4py's pickle protocol 5 communicator, for large pickled messages) does
its communication with unbound base-class calls, ``MPI.Comm.Send(comm, ...)``,
``MPI.Comm.Mprobe(comm, ...)``, which no traced communicator object sees: a
pkl5 program's messages were missing from the trace (found by probing: 24 MiB
sent, "0 messages"). mpi4py's classes cannot be patched, and replacing
``MPI.Comm`` for everybody would make ``isinstance`` false for the objects of
untraced code. So only pkl5's own name ``MPI`` is pointed at a view of the mpi4py
module whose ``Comm`` calls the traced methods
(:class:`calibration.tracer.mpi.TracedIntracomm`) on a traced object of the
communicator it is given; everything else is mpi4py's. ``MPI.Request`` and
``MPI.Message``, which pkl5 also calls unbound, are the tracer's already. That traced
object is another Python object of the communicator pkl5 wraps: it gets that
communicator's id (:func:`calibration.tracer.mpi._register`), so its messages
match those of the communicator itself.
"""

from __future__ import annotations

import types
from typing import Any

#: The communicator methods pkl5 calls unbound (mpi4py 4.x), taken traced.
UNBOUND = ("Send", "Bsend", "Isend", "Ibsend", "Issend", "Recv", "Probe", "Mprobe",
           "Improbe", "Bcast")


def view(mpi: Any, traced: type) -> types.ModuleType:
    """A stand-in for the ``mpi4py.MPI`` module: ``Comm`` with ``traced``'s methods
    of :data:`UNBOUND` (and ``__new__``, which makes pkl5's own communicator
    objects, mpi4py's), every other name mpi4py's."""
    base = mpi.Comm

    class _CommMeta(type):
        def __getattr__(cls, name: str) -> Any:
            return getattr(base, name)

    class Comm(metaclass=_CommMeta):
        """``MPI.Comm`` as pkl5 calls it (unbound)."""

    # pkl5 makes its communicator objects with MPI.Comm.__new__(cls, comm): mpi4py's
    Comm.__new__ = staticmethod(lambda cls, *args, **kw: base.__new__(cls, *args, **kw))
    for name in UNBOUND:
        setattr(Comm, name, staticmethod(_through(traced, name)) if hasattr(traced, name)
                else getattr(base, name))
    module = types.ModuleType(mpi.__name__, mpi.__doc__)
    module.__dict__["__getattr__"] = lambda name: getattr(mpi, name)
    module.Comm = Comm
    return module


def _through(traced: type, name: str) -> Any:
    """``MPI.Comm.name(comm, ...)`` for pkl5: the traced method, called on a traced
    object of ``comm``'s communicator (made once per pkl5 communicator: the traced
    methods use their object's helpers and its ``_cid``)."""
    def call(comm: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(comm, traced):
            return getattr(comm, name)(*args, **kwargs)
        mine = getattr(comm, "_cr_traced", None)
        if mine is None:
            mine = traced(comm)
            try:
                comm._cr_traced = mine
            except AttributeError:  # (an mpi4py object: no attributes of its own)
                pass
        return getattr(mine, name)(*args, **kwargs)

    call.__name__ = name
    return call


def install(mpi: Any, traced: type) -> None:
    """Point ``mpi4py.util.pkl5``'s ``MPI`` at :func:`view` (if pkl5 exists)."""
    try:
        from mpi4py.util import pkl5  # noqa: PLC0415
    except ImportError:
        return
    pkl5.MPI = view(mpi, traced)
