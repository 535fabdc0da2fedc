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
* ``synchronize``: a device ``Leave`` -> the ``Leave`` of every host call of the
  same process whose region name contains "synchronize" (any case:
  hipDeviceSynchronize, cudaStreamSynchronize, hipEventSynchronize, ...) and
  that was in progress when the device's Leave happened, measured strictly:
  ``enter_m <= leave_dev_m < leave_sync_m`` (the call started before the
  activity ended and returned after it: it waited for it, or at least it cannot
  have returned before the activity it may have waited for; a synchronize call
  of another stream in progress at that moment is constrained too, which is
  conservative).

Dependencies need a host and a device location of one process; records whose
partner is missing (a device Enter with a parameter no host record has) are
counted in :attr:`DeviceDeps.unmatched` and left local.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from compensate.matching.threads import ThreadSync, field_of
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
    # process -> [(enter time, leave time, loc, leave index)] of synchronize calls
    calls: dict[int, list] = defaultdict(list)
    for loc in hosts:
        ev = trace.events[loc]
        sel = np.flatnonzero(((ev.kind == ENTER) | (ev.kind == LEAVE))
                             & np.isin(ev.region, list(regions))).tolist()
        open_: dict[int, list[int]] = defaultdict(list)
        for i in sel:
            r = int(ev.region[i])
            if ev.kind[i] == ENTER:
                open_[r].append(int(ev.time[i]))
            elif open_[r]:
                calls[proc(loc)].append((open_[r].pop(), int(ev.time[i]), loc, i))
    for loc in devices:
        ev = trace.events[loc]
        mine = calls.get(proc(loc), [])
        if not mine:
            continue
        enter = np.array([c[0] for c in mine], dtype=np.int64)
        leave = np.array([c[1] for c in mine], dtype=np.int64)
        by_call: dict[int, list] = defaultdict(list)
        for i in np.flatnonzero(ev.kind == LEAVE).tolist():
            t = int(ev.time[i])
            for c in np.flatnonzero((enter <= t) & (t < leave)).tolist():
                by_call[c].append((loc, i))
        for c, sends in by_call.items():
            _, _, h_loc, h_i = mine[c]
            # only the device's last Leave within the call matters per location
            last = {}
            for s_loc, s in sends:
                last[s_loc] = max(last.get(s_loc, -1), s)
            deps.syncs.append(ThreadSync("synchronize", (h_loc, h_i),
                                         [(s_loc, s) for s_loc, s in last.items()]))


__all__ = ["DEP_KINDS", "DeviceDeps", "is_synchronize", "match_devices"]
