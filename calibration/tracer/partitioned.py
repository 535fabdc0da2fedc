"""The mpi4py tracer's MPI-4 partitioned point-to-point calls (issue #20).

``comm.Psend_init`` / ``comm.Precv_init`` of a traced communicator
(:class:`calibration.tracer.mpi.TracedIntracomm`) return a
:class:`TracedPrequest`; its calls are recorded as the seed's events, inside the
Enter/Leave of the MPI call, as :mod:`compensate.model` names them:

* ``Psend_init`` / ``Precv_init``: MpiPsendInit / MpiPrecvInit (peer, comm, tag,
  bytes of the whole buffer, partitions, request id) after the call;
* ``Start``: MpiPsendRequest / MpiPrecvRequest before the call;
* ``Pready(i)``: MpiPready before the call (the seed: at the begin of MPI_Pready);
  ``Pready_range(lo, hi)`` and ``Pready_list(parts)``: one MpiPready per partition;
* ``Parrived(j)``: after the call, MpiParrived if it returned true, else
  MpiPtested;
* ``Wait`` / ``Test`` (true): MpiPsendComplete / MpiPrecvComplete after the call;
  a Test that returns false records nothing (the seed's Ptested is per partition).

**A call that raises** keeps its Enter/Leave (it took time) but not the records
written before the call (:func:`calibration.tracer.requests.unwrite`, as
:mod:`calibration.tracer.mpi` does, on an ``Exception``): a Start that MPI
refused (the request active already, freed) leaves no MpiPsendRequest /
MpiPrecvRequest (compensate would count a round that never began), a Pready
(Pready_range, Pready_list) of a partition that does not exist or of a request
not started no MpiPready (compensate refuses a Pready outside a round, or marks a
partition ready that was not). The other calls write their records after the
call, so nothing when it raises.

Regions: MPI_Psend_init, MPI_Precv_init, MPI_Start, MPI_Pready, MPI_Parrived
(POINT2POINT), the completion calls' MPI_Wait / MPI_Test. The archive writes the
records as :mod:`compensate.formats.partitioned` does
(:func:`calibration.tracer.archive.partitioned_event`).
"""

from __future__ import annotations

from time import monotonic_ns
from typing import Any

from mpi4py import MPI

from calibration.tracer import buffer as tb
from calibration.tracer import requests as rq
from calibration.tracer import sizes as sz

_Comm = MPI.Comm
_Prequest = MPI.Prequest
REGION_NAMES = ("MPI_Psend_init", "MPI_Precv_init", "MPI_Start", "MPI_Pready",
                "MPI_Parrived")


def register(recorder: tb.Recorder) -> dict[str, int]:
    """The region ids of the partitioned calls (registered after the other MPI
    regions, so that their ids stay)."""
    return {name: recorder.region_id((name, name, "", 0, "mpi", "POINT2POINT"))
            for name in REGION_NAMES}


def init(comm: Any, recorder: tb.Recorder, regions: dict[str, int], cid: int, send: bool,
         buf: Any, partitions: int, peer: int, tag: int) -> TracedPrequest:
    """Psend_init / Precv_init on ``comm`` (its local id ``cid``), traced."""
    name = "MPI_Psend_init" if send else "MPI_Precv_init"
    rec = recorder.current()
    rec.enter(regions[name])
    try:
        fn = _Comm.Psend_init if send else _Comm.Precv_init
        req = TracedPrequest(fn(comm, buf, partitions, peer, tag))
        rid = recorder.new_request()
        req._info = (recorder, regions, rid, send)
        rec.partitioned(tb.P_SEND_INIT if send else tb.P_RECV_INIT,
                        (peer, cid, tag, sz.nbytes(buf), partitions, rid))
        return req
    finally:
        rec.leave(regions[name])


class TracedPrequest(MPI.Prequest):
    """A partitioned request from a traced Psend_init / Precv_init; ``_info`` =
    (recorder, region ids, request id, is send)."""

    _info: tuple | None = None

    def _call(self, region: str, before: tuple | None, fn: Any, *args: Any) -> Any:
        """Enter, the record ``before`` = (kind, fields) (None: none), the call,
        Leave; the record is taken back if the call raises an ``Exception``
        (module docstring)."""
        recorder, regions, rid, send = self._info
        rec = recorder.current()
        rec.enter(regions[region] if region in regions else region)
        tr = 0
        try:
            if before is not None:
                tr = monotonic_ns()
                rec.add_record(tr, *before)  # as rec.partitioned, keeping the time
            return fn(self, *args)
        except Exception:
            if before is not None:  # MPI refused the call: no round, no partition
                rq.unwrite(rec, tr, *before)
            raise
        finally:
            rec.leave(regions[region] if region in regions else region)

    def Start(self) -> None:
        _, _, rid, send = self._info
        kind = tb.P_SEND_REQUEST if send else tb.P_RECV_REQUEST
        return self._call("MPI_Start", (kind, (rid,)), _Prequest.Start)

    def Pready(self, partition: int) -> None:
        return self._call("MPI_Pready", (tb.P_READY, (self._info[2], int(partition))),
                          _Prequest.Pready, partition)

    def _pready_many(self, parts: list[int], fn: Any, *args: Any) -> None:
        """Pready_range / Pready_list: one MpiPready per partition in ``parts``
        before the call; all taken back if it raises an ``Exception`` (MPI does
        not say which partitions it marked ready; MPICH checks them all first)."""
        recorder, regions, rid, _ = self._info
        rec = recorder.current()
        rec.enter(regions["MPI_Pready"])
        written: list[tuple[int, tuple]] = []
        try:
            for p in parts:
                tr, fields = monotonic_ns(), (rid, int(p))
                rec.add_record(tr, tb.P_READY, fields)
                written.append((tr, fields))
            return fn(self, *args)
        except Exception:
            for tr, fields in reversed(written):  # the call failed (rq.unwrite)
                rq.unwrite(rec, tr, tb.P_READY, fields)
            raise
        finally:
            rec.leave(regions["MPI_Pready"])

    def Pready_range(self, partition_low: int, partition_high: int) -> None:
        return self._pready_many(list(range(partition_low, partition_high + 1)),
                                 _Prequest.Pready_range, partition_low, partition_high)

    def Pready_list(self, partitions: Any) -> None:
        return self._pready_many(list(partitions), _Prequest.Pready_list, partitions)

    def Parrived(self, partition: int) -> bool:
        recorder, regions, rid, _ = self._info
        rec = recorder.current()
        rec.enter(regions["MPI_Parrived"])
        try:
            flag = _Prequest.Parrived(self, partition)
            rec.partitioned(tb.P_ARRIVED if flag else tb.P_TESTED, (rid, int(partition)))
            return flag
        finally:
            rec.leave(regions["MPI_Parrived"])

    def _complete(self, region_id: int, fn: Any, *args: Any) -> Any:
        recorder, _, rid, send = self._info
        rec = recorder.current()
        rec.enter(region_id)
        try:
            result = fn(self, *args)
            done = result[0] if isinstance(result, tuple) else result
            if done is not False:  # Wait returns None
                rec.partitioned(tb.P_SEND_COMPLETE if send else tb.P_RECV_COMPLETE, (rid,))
            return result
        finally:
            rec.leave(region_id)

    def Wait(self, status: Any = None) -> Any:
        return self._complete(self._mpi_region("MPI_Wait"), _Prequest.Wait, status)

    def Test(self, status: Any = None) -> bool:
        return self._complete(self._mpi_region("MPI_Test"), _Prequest.Test, status)

    def _mpi_region(self, name: str) -> int:
        recorder = self._info[0]
        return recorder.region_id((name, name, "", 0, "mpi", "POINT2POINT"))
