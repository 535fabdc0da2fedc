"""Byte counts of mpi4py calls, for the tracer's MPI records.

Upper-case calls describe their buffers (``buf``, ``[buf, type]``,
``[buf, count, type]``, ...): :func:`nbytes`. Lower-case calls send pickled
objects, sized by pickling once more (:func:`calibration.tracer.buffer.pickled_size`).
A collective's (bytes sent, bytes received) follow the conventions of the
simulator (``compensate.simulate._collective_sizes``): a 1-to-n root sends
``(n-1)·s`` and receives 0, an n-to-1 root receives ``(n-1)·s``, an n-to-n member
sends and receives its own share (Allgather: receives all ``n`` shares). Each
function below takes ``(comm, args, result)`` of the wrapped call.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from mpi4py import MPI

from calibration.tracer.buffer import pickled_size

_Comm = MPI.Comm
_IN_PLACE = MPI.IN_PLACE


def type_size(dtype: Any) -> int | None:
    """Bytes of one item of a buffer spec's datatype: an ``MPI.Datatype`` or a
    typecode string as mpi4py accepts it (``'i'``, ``'d'``, ``'f'``, ``'b'``, ...:
    ``MPI.Datatype.fromcode``); None for anything else, or a typecode mpi4py does
    not know (the call then raises: a size must not, the record is taken back)."""
    if isinstance(dtype, MPI.Datatype):
        return dtype.Get_size()
    if isinstance(dtype, str):
        try:
            return MPI.Datatype.fromcode(dtype).Get_size()
        except (KeyError, ValueError):
            return None
    return None


def _is_type(x: Any) -> bool:
    """Whether a spec's last element names the datatype (mpi4py's own test: a
    Datatype or a typecode string)."""
    return isinstance(x, (MPI.Datatype, str))


def _buffer(buf: Any) -> tuple[int, int]:
    """(bytes, item size) of a buffer object; (0, 1) if it exposes no buffer."""
    try:
        view = memoryview(buf)
    except TypeError:
        return 0, 1
    return view.nbytes, max(view.itemsize, 1)


def nbytes(spec: Any) -> int:
    """Bytes described by an mpi4py buffer argument (``buf``, ``[buf, type]``,
    ``[buf, count]``, ``[buf, count, type]``, ``[buf, (count, displ), type]``,
    ``[buf, counts, displs, type]``, ``[buf, (counts, displs), type]``, lists or
    tuples), ``type`` an ``MPI.Datatype`` or a typecode string (:func:`type_size`);
    0 if unknown. A count is in items of the type (of the buffer's own item size
    where no type is given: mpi4py infers the type from the buffer's format);
    without a count the buffer holds as many whole items as fit."""
    if spec is None or spec is _IN_PLACE:
        return 0
    if not isinstance(spec, (list, tuple)) or not spec:
        return _buffer(spec)[0]
    whole, item = _buffer(spec[0])
    rest = list(spec[1:])
    if rest and _is_type(rest[-1]):
        size = type_size(rest.pop())
        if size is None:
            return whole
        item = size
    if not rest:
        return whole // item * item if item else whole
    count = rest[0]
    if isinstance(count, Integral):
        return int(count) * item
    if isinstance(count, (list, tuple)) and count:
        if all(isinstance(c, Integral) for c in count):
            if len(rest) == 1 and len(count) == 2:
                return int(count[0]) * item  # (count, displ)
            return sum(int(c) for c in count) * item  # counts (displs follow, or not)
        if len(count) == 2 and hasattr(count[0], "__len__"):
            return sum(int(c) for c in count[0]) * item  # (counts, displs)
    if hasattr(count, "__len__") and len(count):  # counts as an array
        return sum(int(c) for c in count) * item
    return whole


def none(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return 0, 0


def _one_to_n(comm: Any, root: int, s: int) -> tuple[int, int]:
    if _Comm.Get_rank(comm) == root:
        return (_Comm.Get_size(comm) - 1) * s, 0
    return 0, s


def _n_to_one(comm: Any, root: int, s: int) -> tuple[int, int]:
    if _Comm.Get_rank(comm) == root:
        return 0, (_Comm.Get_size(comm) - 1) * s
    return s, 0


def bcast(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return _one_to_n(comm, args[1], pickled_size(result))


def Bcast(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return _one_to_n(comm, args[1], nbytes(args[0]))


def scatter(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return _one_to_n(comm, args[1], pickled_size(result))


def Scatter(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    if args[1] is _IN_PLACE:  # the root keeps its share: one share = send / size
        return _one_to_n(comm, args[2], nbytes(args[0]) // _Comm.Get_size(comm))
    return _one_to_n(comm, args[2], nbytes(args[1]))


def gather(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return _n_to_one(comm, args[1], pickled_size(args[0]))


def Gather(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    if args[0] is _IN_PLACE:  # the root's share is in place: one share = recv / size
        return _n_to_one(comm, args[2], nbytes(args[1]) // _Comm.Get_size(comm))
    return _n_to_one(comm, args[2], nbytes(args[0]))


def reduce(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return _n_to_one(comm, args[2], pickled_size(args[0]))


def Reduce(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    send = args[0] if args[0] is not _IN_PLACE else args[1]
    return _n_to_one(comm, args[3], nbytes(send))


def allreduce(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    s = pickled_size(args[0])
    return s, s


def Allreduce(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    s = nbytes(args[0] if args[0] is not _IN_PLACE else args[1])
    return s, s


def allgather(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return pickled_size(args[0]), sum(pickled_size(x) for x in result)


def Allgather(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    recv = nbytes(args[1])
    send = recv // max(_Comm.Get_size(comm), 1) if args[0] is _IN_PLACE else nbytes(args[0])
    return send, recv


def alltoall(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    return (sum(pickled_size(x) for x in args[0]),
            sum(pickled_size(x) for x in result))


def Alltoall(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    recv = nbytes(args[1])
    return (recv if args[0] is _IN_PLACE else nbytes(args[0])), recv


# -- the v-variants, scans and reductions-scatters (calibration.tracer.calls) -----------
# Same conventions: a root sends (Scatterv) or receives (Gatherv) the other members'
# shares, its own stays; n-to-n members send and receive their own buffers.

def vcounts(spec: Any, n: int) -> list[int]:
    """Bytes per member of a v-buffer (``[buf, counts, displs, type]``,
    ``[buf, (counts, displs), type]``, ``[buf, counts]``, ...); an even split of
    :func:`nbytes` where the counts are not given."""
    if isinstance(spec, (list, tuple)) and len(spec) >= 2:
        counts = spec[1]
        if isinstance(counts, tuple) and len(counts) == 2 and hasattr(counts[0], "__len__"):
            counts = counts[0]  # (counts, displs)
        if hasattr(counts, "__len__") and len(counts) == n:
            size = type_size(spec[-1])
            item = _buffer(spec[0])[1] if size is None else size
            return [int(c) * item for c in counts]
    total = nbytes(spec)
    return [total // max(n, 1)] * n


def _others(counts: list[int], rank: int) -> int:
    return sum(counts) - (counts[rank] if 0 <= rank < len(counts) else 0)


def Gatherv(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    sendbuf, recvbuf, root = args
    if _Comm.Get_rank(comm) == root:
        return 0, _others(vcounts(recvbuf, _Comm.Get_size(comm)), root)
    return nbytes(sendbuf), 0


def Scatterv(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    sendbuf, recvbuf, root = args
    if _Comm.Get_rank(comm) == root:
        return _others(vcounts(sendbuf, _Comm.Get_size(comm)), root), 0
    return 0, nbytes(recvbuf)


def Allgatherv(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    sendbuf, recvbuf = args
    if sendbuf is _IN_PLACE:
        counts = vcounts(recvbuf, _Comm.Get_size(comm))
        return counts[_Comm.Get_rank(comm)], sum(counts)
    return nbytes(sendbuf), nbytes(recvbuf)


def Alltoallv(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    recv = nbytes(args[1])
    return (recv if args[0] is _IN_PLACE else nbytes(args[0])), recv


def wbytes(spec: Any) -> int:
    """Bytes of an Alltoallw buffer ``[buf, counts, displs, types]`` (one datatype
    per member); :func:`nbytes` for other forms."""
    if isinstance(spec, (list, tuple)) and len(spec) == 4 and hasattr(spec[3], "__len__"):
        return sum(int(c) * (type_size(t) or 0)
                   for c, t in zip(spec[1], spec[3], strict=False))
    return nbytes(spec)


def Alltoallw(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    recv = wbytes(args[1])
    return (recv if args[0] is _IN_PLACE else wbytes(args[0])), recv


def Reduce_scatter(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    """(sendbuf, recvbuf, recvcounts, op): sends its whole vector, receives its
    block (recvcounts[rank] items; in place: the buffer holds the vector)."""
    sendbuf, recvbuf, counts = args[0], args[1], args[2]
    if sendbuf is not _IN_PLACE:
        return nbytes(sendbuf), nbytes(recvbuf)
    whole = nbytes(recvbuf)
    if counts is not None and len(counts):
        total = sum(int(c) for c in counts)
        return whole, whole * int(counts[_Comm.Get_rank(comm)]) // max(total, 1)
    return whole, whole // max(_Comm.Get_size(comm), 1)


def Reduce_scatter_block(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    sendbuf, recvbuf = args[0], args[1]
    if sendbuf is not _IN_PLACE:
        return nbytes(sendbuf), nbytes(recvbuf)
    whole = nbytes(recvbuf)
    return whole, whole // max(_Comm.Get_size(comm), 1)


def scan(comm: Any, args: tuple, result: Any) -> tuple[int, int]:
    s = pickled_size(args[0])
    return s, s


Scan = Allreduce  # (sendbuf, recvbuf, op): its own buffer both ways
