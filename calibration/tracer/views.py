"""Stand-ins for mpi4py's ``MPI.Comm`` and ``MPI.Intracomm`` while tracing.

mpi4py's classes are immutable, so their class methods that make communicators
(``Intracomm.Create_from_group``, how ``MPI.Session`` programs make them;
``Comm.f2py``, ``Comm.fromhandle``) cannot be wrapped in place. The program's
``MPI.Comm`` and ``MPI.Intracomm`` become subclasses (:func:`stand_ins`) whose
class methods return traced communicators and which otherwise behave as mpi4py's:
``isinstance``/``issubclass`` answer against mpi4py's class, calling them makes
mpi4py's object, a program's subclass of them is an ordinary class. Only
``type(x) is MPI.Intracomm`` differs (it did for traced communicators already).
Installed by :func:`calibration.tracer.mpi.install`.
"""

from __future__ import annotations

import importlib
from typing import Any

from mpi4py import MPI


class _View(type):
    """Metaclass of the stand-ins :func:`stand_ins` makes: ``isinstance`` and
    ``issubclass`` against them are against mpi4py's class (``_real``); a program's
    subclass of them (no ``_real`` of its own) is an ordinary class."""

    def __instancecheck__(cls, obj: Any) -> bool:
        real = cls.__dict__.get("_real")
        return isinstance(obj, real) if real is not None else type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub: Any) -> bool:
        real = cls.__dict__.get("_real")
        return issubclass(sub, real) if real is not None else \
            type.__subclasscheck__(cls, sub)


def _view_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``MPI.Comm(comm)``, ``MPI.Intracomm(comm)``: mpi4py's object, as untraced;
    a program's subclass gets an object of its own class."""
    real = cls.__dict__.get("_real")
    if real is not None:
        return real(*args, **kwargs)
    base = next(k for k in cls.__mro__ if k.__module__ == MPI.__name__ and
                not isinstance(k, _View))  # mpi4py's class under the stand-in
    return base.__new__(cls, *args, **kwargs)


def _view(real: type, methods: dict[str, Any]) -> type:
    """The stand-in for mpi4py's class ``real``: named as it (``repr``, pickling
    the class by reference find the stand-in, which is ``MPI``'s attribute)."""
    return _View(real.__name__, (real,), {
        "_real": real, "__new__": _view_new, "__module__": real.__module__,
        "__qualname__": real.__qualname__, "__doc__": real.__doc__, **methods})


def stand_ins(comm: type, intracomm: type, common: dict[str, Any],
              intracomm_only: dict[str, Any]) -> tuple[type, type]:
    """The program's ``MPI.Comm`` and ``MPI.Intracomm`` (:class:`_View`): mpi4py's
    classes ``comm`` and ``intracomm``, but with the class methods ``common`` (both)
    and ``intracomm_only``, which return traced communicators
    (:mod:`calibration.tracer.mpi`: ``f2py``, ``fromhandle``,
    ``Intracomm.Create_from_group``)."""
    return _view(comm, common), _view(intracomm, {**common, **intracomm_only})


class _MPIModule:
    """Pickles as the module ``mpi4py.MPI`` (a module object cannot be pickled)."""

    def __reduce__(self) -> tuple:
        return (importlib.import_module, ("mpi4py.MPI",))


def by_name(real: type) -> Any:
    """A ``__reduce__`` for the traced communicator classes. mpi4py reduces an
    object of a subclass to (the subclass, mpi4py's object) and a predefined
    communicator (COMM_WORLD, COMM_SELF, COMM_NULL) to its name, which pickle looks
    up in ``mpi4py.MPI`` and finds the traced object there, not mpi4py's: pickling
    ``MPI.COMM_WORLD`` failed. A traced predefined communicator pickles as
    ``mpi4py.MPI``'s attribute of that name instead (the traced object while
    tracing, mpi4py's in an untraced process); other ones as before."""

    def __reduce__(self: Any) -> Any:
        reduced = real.__reduce__(self)
        args = reduced[1] if isinstance(reduced, tuple) and len(reduced) > 1 else ()
        inner = args[1] if len(args) == 2 and type(args[1]) is real else None
        name = real.__reduce__(inner) if inner is not None else reduced
        return (getattr, (_MPIModule(), name)) if isinstance(name, str) else reduced

    return __reduce__

