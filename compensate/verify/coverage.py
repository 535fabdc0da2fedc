"""What verification covers, and what it does not: records carried as local only.

"verified" means that every dependency the engine models holds in the output
(:mod:`compensate.verify.checks`). A record of a kind no dependency rule looks
at is compensated by R1 alone and only checked for its place on its own
timeline, however much it may depend on another location in the program (an
OpenMP fork and the team it starts, an RMA put and its window, a kernel on a
GPU stream and its launch). The summary lists those records by kind, so that
"verified" says what it covers (docs/design.md R7).

Three groups of record kinds:

* :data:`DEPENDENT`: kinds a dependency rule times and an invariant checks
  (messages, requests, collectives, thread fork/join, locks and create/join on
  CPU threads; the Enter/Leave of an OpenMP barrier are checked as a barrier, but
  listed as LOCAL with every Enter/Leave); a Metric sample on a METRIC location is
  mapped through its process's time function and checked against it too;
* :data:`LOCAL`: kinds that are local by nature (call structure, tracer
  records, program begin/end, parameters, CPU-side metrics, calling context):
  R1 is their whole rule;
* :data:`DEVICE_DEPENDENT`: on an accelerator stream, the kinds the accelerator
  rule times and checks (Enter after its launch, Leave before the host's
  synchronize, the callsite parameter; R9, :mod:`compensate.matching.devices`);
* everything else, and every other record on an accelerator stream (memory
  copies recorded as RMA, ...): carried as local only, and counted.
"""

from __future__ import annotations

import numpy as np

from compensate.formats.fields import fields_of
from compensate.formats.rma import mpi_windows
from compensate.model import KIND_CODE, KIND_NAMES, METRIC, NONE, PROBE, Trace

#: Record kinds whose dependencies the engine models and the verifier checks (a new
#: dependency kind adds its records here with its family in :mod:`compensate.families`).
DEPENDENT = frozenset(KIND_CODE[k] for k in (
    "MpiSend", "MpiRecv", "MpiIsend", "MpiIsendComplete", "MpiIrecvRequest", "MpiIrecv",
    "MpiRequestTest", "MpiRequestCancelled", "MpiCollectiveBegin", "MpiCollectiveEnd",
    "NonBlockingCollectiveRequest", "NonBlockingCollectiveComplete",
    # matched-probe receives: the probe (an MpiProbe with a message id, counted by
    # :func:`carried_local_only` apart from plain MPI_Probe/Iprobe records, which stay
    # local only) is the message's receive record; MpiMrecv, MpiImrecvRequest and
    # MpiImrecv are checked as the receive's posting and local successors
    "MpiProbe", "MpiMrecv", "MpiImrecvRequest", "MpiImrecv",
    # thread synchronisation (compensate.matching.threads, verify.threads)
    "ThreadFork", "ThreadJoin", "ThreadTeamBegin", "ThreadTeamEnd", "ThreadAcquireLock",
    "ThreadReleaseLock", "ThreadCreate", "ThreadBegin", "ThreadEnd", "ThreadWait",
    # MPI-4 partitioned (compensate.matching.partitioned, verify.partitioned); an
    # unsuccessful MpiPtested is local by nature
    "MpiPsendInit", "MpiPrecvInit", "MpiPsendRequest", "MpiPrecvRequest", "MpiPready",
    "MpiParrived", "MpiPtested", "MpiPsendComplete", "MpiPrecvComplete",
    # OpenMP tasks (compensate.matching.tasks, compensate.verify.tasks)
    "ThreadTaskCreate", "ThreadTaskSwitch", "ThreadTaskComplete",
    # the legacy OpenMP records of older Score-P (compensate.matching.legacy)
    "OmpFork", "OmpJoin", "OmpAcquireLock", "OmpReleaseLock", "OmpTaskCreate",
    "OmpTaskSwitch", "OmpTaskComplete",
    # MPI one-sided (compensate.matching.rma, verify.rma): fences and window
    # collectives, PSCW group syncs, passive-target locks, transfers to a target
    # epoch (a put inside a lock epoch is ordered by the next holder's lock link)
    "RmaCollectiveBegin", "RmaCollectiveEnd", "RmaGroupSync", "RmaRequestLock",
    "RmaAcquireLock", "RmaReleaseLock", "RmaPut", "RmaAtomic"))

#: Record kinds that depend on nothing outside their own location.
LOCAL = frozenset(KIND_CODE[k] for k in (
    "Enter", "Leave", "BufferFlush", "MeasurementOnOff", "ProgramBegin", "ProgramEnd",
    "Metric", "ParameterInt", "ParameterString", "ParameterUnsignedInt",
    "CallingContextEnter", "CallingContextLeave", "CallingContextSample",
    # an RMA window's creation and destruction markers and an operation's local
    # completion inside its synchronisation call (R10)
    "RmaWinCreate", "RmaWinDestroy", "RmaOpCompleteBlocking", "RmaOpCompleteNonBlocking"))

#: Record kinds on an accelerator stream that R9 looks at and ``verify_devices``
#: checks: every Leave (against the host's synchronize calls), the callsite
#: parameter, and an Enter only when that parameter follows it (a launched kernel;
#: other device Enters are still counted as carried local only).
DEVICE_DEPENDENT = frozenset(KIND_CODE[k] for k in (
    "Enter", "Leave", "ParameterUnsignedInt"))
_D_ENTER, _D_LEAVE, _D_PARAM = (KIND_CODE[k] for k in (
    "Enter", "Leave", "ParameterUnsignedInt"))

_COVERED = np.zeros(len(KIND_NAMES), dtype=bool)
_COVERED[list(DEPENDENT | LOCAL)] = True
_COVERED[PROBE] = False  # matched probes and the plain ones tied to a message are:
# carried_local_only counts the others


def carried_local_only(trace: Trace, skip: dict[int, int] | None = None,
                       probes: dict[int, np.ndarray] | None = None) -> dict[str, int]:
    """``{kind name: records}`` of ``trace`` that were carried as local only (module
    docstring); records on an accelerator stream count as ``"<kind> on
    ACCELERATOR_STREAM"``. ``skip``: leading records per location not to count (the
    context records of a stream segment); ``probes``: per location, the plain
    MpiProbe records that matching tied to the message they found (R2, checked)."""
    defs = trace.definitions.locations
    total = np.zeros(len(KIND_NAMES), dtype=np.int64)
    device = np.zeros(len(KIND_NAMES), dtype=np.int64)
    plain_probes = 0
    device_rma = np.zeros(len(KIND_NAMES), dtype=np.int64)
    for loc, ev in trace.events.items():
        p = skip.get(loc, 0) if skip else 0
        if len(ev) <= p:
            continue
        kind = ev.kind[p:]
        counts = np.bincount(kind.astype(np.int64), minlength=len(KIND_NAMES))
        where = defs.get(loc)
        if where is not None and where.is_device:
            launched = int(np.count_nonzero((kind[:-1] == _D_ENTER) & (kind[1:] == _D_PARAM)))
            counts[_D_ENTER] -= launched
            counts[_D_LEAVE] = counts[_D_PARAM] = 0
            device += counts
            continue
        if where is not None and where.is_metric:
            counts[METRIC] = 0  # mapped and checked (engine.metrics, verify.metrics)
        total += counts
        _device_window_records(trace, ev, p, counts, device_rma)
        # an MpiProbe with a message id (MPI_Mprobe/Improbe) is a message's receive
        # record; one without (MPI_Probe/Iprobe) is not a dependency
        plain = np.flatnonzero((kind == PROBE) & (ev.size_recv[p:] == NONE)) + p
        tied = probes.get(loc) if probes else None
        if tied is not None and tied.size:
            plain = plain[~np.isin(plain, tied)]
        plain_probes += int(plain.size)
    total[PROBE] = plain_probes
    out = {KIND_NAMES[k]: int(total[k]) for k in np.flatnonzero((total > 0) & ~_COVERED)}
    for k in np.flatnonzero(device_rma):  # RMA records of device windows (R10: not MPI)
        out[KIND_NAMES[k]] = out.get(KIND_NAMES[k], 0) + int(device_rma[k])
    out.update({f"{KIND_NAMES[k]} on ACCELERATOR_STREAM": int(device[k])
                for k in np.flatnonzero(device)})
    return out


_RMA_CHECKED = np.array(sorted(k for k in DEPENDENT if KIND_NAMES[k].startswith("Rma")))


def _device_window_records(trace: Trace, ev, p: int, counts: np.ndarray,
                           device_rma: np.ndarray) -> None:
    """Count in ``device_rma`` the RMA records of kinds R10 checks that belong to a
    window R10 leaves alone (a device window: :func:`compensate.formats.rma.mpi_windows`)."""
    if not counts[_RMA_CHECKED].any():
        return
    mpi = mpi_windows(trace.definitions)
    for i in np.flatnonzero(np.isin(ev.kind[p:], _RMA_CHECKED)).tolist():
        kind = KIND_NAMES[ev.kind[p + i]]
        win = fields_of(kind, ev.payload[p + i]).get("win")
        if win is not None and win not in mpi:
            device_rma[ev.kind[p + i]] += 1
