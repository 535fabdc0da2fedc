"""Accelerators: the records a device stream waits for on its host and the host
waits for on the device (docs/compensation.md, "Accelerators"; issue #17).

Score-P's HIP and CUDA adapters (seen in ``tests/data/traces/hip-two-gpu-metrics``)
record a kernel on an ACCELERATOR_STREAM location as ``Enter(kernel)`` followed by
a ``ParameterUnsignedInt`` ("callsite id") with the value the host recorded in a
``ParameterUnsignedInt`` of the same parameter inside its launch call. Two kinds of
dependency, each a :class:`~compensate.matching.threads.ThreadSync` (a zero-byte
message, timed like R8):

* ``launch``: the host's parameter record -> the kernel's ``Enter``. A device
  ``Enter`` whose next record on its location is a ``ParameterUnsignedInt`` is a
  launched activity; its key is (process, parameter, value). Per key, the host
  records (on the CPU threads of the same process, :meth:`Definitions.process_of`
  follows the accelerator context to the process that created it) and the device
  records are paired first to first in measured time order (a call site launched
  in a loop repeats its id; a launch precedes its kernel). The parameter's name is
  not needed (the text format carries only its reference): the pairing by value
  between a device parameter and a host parameter is the link.
* ``synchronize``: a host call whose region name contains "synchronize" (any
  case: hipDeviceSynchronize, cudaStreamSynchronize, hipEventSynchronize, ...)
  returns after the device activity that ended before it returned: per stream of
  the same process, the last device ``Leave`` with ``after_m <= leave_dev_m <
  leave_sync_m`` -> the call's ``Leave``, where ``after_m`` is the Leave of the
  same thread's previous synchronize call (-inf for its first; what ended earlier
  is ordered through that call). This holds whether the call waited for the
  activity (it ended during the call) or not: a call that in the measured run
  found the work already done (the host was slowed down by the tracer) may well
  have waited for it in the uninstrumented run, and without the link its
  compensated Leave could come before the activity's end (ground truth, the
  ``gpu`` program of :mod:`compensate.simulate.hybrid`). The trace does not say
  which stream or event a stream or event synchronize waited for, so every stream
  of the process is constrained, which is conservative: it can delay a call past
  another stream's activity, never let it return before its own.

Dependencies need a host and a device location of one process; records whose
partner is missing (a device Enter with a parameter no host record has) are
counted in :attr:`DeviceDeps.unmatched` and left local.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from compensate.formats.fields import field_of
from compensate.matching.threads import ThreadSync
from compensate.model import ENTER, KIND_CODE, LEAVE, Trace

PARAM = KIND_CODE["ParameterUnsignedInt"]

#: dependency kinds, in the order of :meth:`DeviceDeps.counts`
DEP_KINDS = ("launch", "synchronize")


@dataclass
class DeviceDeps:
    """Every host/device dependency of a trace, and how many launched device
    activities had no host record."""

    syncs: list[ThreadSync] = field(default_factory=list)
    unmatched: int = 0

    def counts(self) -> dict:
        out = {k: 0 for k in DEP_KINDS}
        for s in self.syncs:
            out[s.kind] += 1
        out["unmatched"] = self.unmatched
        return out


def is_synchronize(name: str) -> bool:
    """A host call that waits for device activity (module docstring)."""
    return "synchronize" in name.lower()


def _param_key(trace: Trace, loc: int, i: int) -> tuple | None:
    payload = trace.events[loc].payload[i]
    p, v = field_of(payload, "parameter"), field_of(payload, "value")
    if p is None or v is None:
        return None
    return (p, v)


def match_devices(trace: Trace) -> DeviceDeps:
    """The host/device dependencies of ``trace`` (module docstring)."""
    deps = DeviceDeps()
    defs = trace.definitions
    devices = [loc for loc in trace.events
               if loc in defs.locations and defs.locations[loc].is_device]
    if not devices:
        return deps
    procs = {defs.process_of(loc) for loc in devices}
    hosts = [loc for loc in trace.events if loc in defs.locations
             and defs.locations[loc].is_cpu and defs.process_of(loc) in procs]
    _launches(trace, devices, hosts, deps)
    _synchronizes(trace, devices, hosts, deps)
    return deps


def _launches(trace: Trace, devices: list[int], hosts: list[int], deps: DeviceDeps) -> None:
    proc = trace.definitions.process_of
    # key -> [(time, loc, index)] of host parameter records / device Enters
    sent: dict[tuple, list] = defaultdict(list)
    got: dict[tuple, list] = defaultdict(list)
    for loc in hosts:
        ev = trace.events[loc]
        for i in np.flatnonzero(ev.kind == PARAM).tolist():
            key = _param_key(trace, loc, i)
            if key is not None:
                sent[(proc(loc),) + key].append((int(ev.time[i]), loc, i))
    for loc in devices:
        ev = trace.events[loc]
        k = ev.kind
        enters = np.flatnonzero((k[:-1] == ENTER) & (k[1:] == PARAM)).tolist()
        for i in enters:
            key = _param_key(trace, loc, i + 1)
            if key is not None:
                got[(proc(loc),) + key].append((int(ev.time[i]), loc, i))
    for key, recvs in got.items():
        sends = sorted(sent.get(key, []))
        recvs.sort()
        for j, (_, loc, i) in enumerate(recvs):
            if j < len(sends):
                deps.syncs.append(ThreadSync("launch", (loc, i), [sends[j][1:]]))
            else:
                deps.unmatched += 1


def _synchronizes(trace: Trace, devices: list[int], hosts: list[int],
                  deps: DeviceDeps) -> None:
    defs = trace.definitions
    regions = {r for r, name in defs.regions.items() if is_synchronize(name)}
    if not regions:
        return
    proc = defs.process_of
    # per stream, the measured times of its Leaves (in order)
    leaves = {}
    for loc in devices:
        ev = trace.events[loc]
        idx = np.flatnonzero(ev.kind == LEAVE)
        leaves[loc] = (idx, ev.time[idx])
    streams: dict[int, list[int]] = defaultdict(list)
    for loc in devices:
        streams[proc(loc)].append(loc)
    for loc in hosts:
        mine = streams.get(proc(loc))
        if not mine:
            continue
        ev = trace.events[loc]
        sel = np.flatnonzero(((ev.kind == ENTER) | (ev.kind == LEAVE))
                             & np.isin(ev.region, list(regions))).tolist()
        depth: dict[int, int] = defaultdict(int)
        after = -1  # the measured Leave of this thread's previous synchronize call
        for i in sel:
            r = int(ev.region[i])
            if ev.kind[i] == ENTER:
                depth[r] += 1
                continue
            if depth[r] == 0:
                continue
            depth[r] -= 1
            t = int(ev.time[i])
            sends = []
            for s_loc in mine:
                idx, times = leaves[s_loc]
                j = int(np.searchsorted(times, t, side="left")) - 1  # last Leave < t
                if j >= 0 and times[j] >= after:
                    sends.append((s_loc, int(idx[j])))
            after = t
            if sends:
                deps.syncs.append(ThreadSync("synchronize", (loc, i), sends))


__all__ = ["DEP_KINDS", "DeviceDeps", "is_synchronize", "match_devices"]
