"""Thread and device links across stream segments (docs/compensation.md, "Threads"
and "Accelerators"; :mod:`compensate.pipeline.cuts`).

The stream cutter never cuts a parallel region (fork to join), a Pthread's create
to begin or end to wait, or a host synchronize call. Two links may still cross a
cut, because nothing brackets them:

* a lock (a mutex outside a parallel region, legacy or Thread* records): the
  release of acquisition ``k`` before the cut, the acquisition ``k + 1`` after it;
* a kernel launch: the host's callsite parameter before the cut, the kernel's
  ``Enter`` on its stream after it;
* a host synchronize call after the cut that waits for device work which ended
  before it: the stream's latest activity (its ``Enter`` and ``Leave``, so that
  its nesting stays whole) is carried while some host thread of its process has
  not called a synchronize since it ended (the thread's latest synchronize
  ``Leave``, :attr:`LinkCarry.sync_after`, is what the whole trace's matcher
  compares with: :meth:`compensate.pipeline.context.Segmenter.match` drops the
  links the segment's matcher makes to carried Leaves a thread had already
  synchronized with).

Such a sender record is *carried*: put, with its pinned approximated and written
times, among the context records in front of its location's part of the next
segment (in record order), so that the next segment's matcher links it as the
whole trace's would and its rule reads the same times. A release is carried
while it is its lock's latest and no later acquisition was seen; a host parameter
while it has not been paired with a kernel (per key, first to first in time, as
:mod:`compensate.matching.devices` pairs), in a process that has accelerator
streams: every host parameter until the process's first kernel shows which
parameter its launches use, then only parameters seen on its streams (so the
parameters of other calls are not carried for ever).

A carried release also brings the locations it already happened before by fork,
join, barrier or Pthread create/join edges of its segments (:attr:`LinkCarry.reach`,
filled by the stream from :func:`compensate.matching.lock_order.release_reach`):
they seed the next segment's vector clocks, so that a lock handed from one parallel
region to the next across the cut is marked implied as in memory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from compensate.formats.fields import field_of
from compensate.matching.devices import is_synchronize
from compensate.model import ENTER, KIND_CODE, LEAVE, Definitions, Events

_ACQUIRE = (KIND_CODE["ThreadAcquireLock"], KIND_CODE["OmpAcquireLock"])
_RELEASE = (KIND_CODE["ThreadReleaseLock"], KIND_CODE["OmpReleaseLock"])
_PARAM = KIND_CODE["ParameterUnsignedInt"]

#: a context record: (columns row, payload, approximated float, written int, index)
Row = tuple[Any, Any, float, int, int]


class LinkCarry:
    """The sender records to carry into the next segment (module docstring)."""

    def __init__(self, defs: Definitions) -> None:
        self.defs = defs
        self.release: dict[tuple, tuple[int, int, int, Row]] = {}  # key -> (order, loc, ...)
        self.acquired: dict[tuple, int] = {}  # key -> highest acquisition order seen
        #: (location, record index) of a release -> the locations it happened before by
        #: other thread edges (compensate.matching.lock_order.release_reach)
        self.reach: dict[tuple[int, int], set[int]] = {}
        self.launch: dict[tuple, list[tuple[int, int, Row]]] = defaultdict(list)
        self.device_params: set[tuple] = set()  # (process, parameter) seen on a device
        self.seen: set[int] = set()  # processes whose accelerator streams ran a kernel
        #: processes with accelerator streams (the only ones whose host parameters
        #: can be launches)
        self.gpu_procs = {defs.process_of(loc) for loc, d in defs.locations.items()
                          if d.is_device}
        #: per accelerator stream, its latest activity's (Enter row, Leave row), and
        #: the Enter of an activity still running at the end of a segment
        self.device_pair: dict[int, tuple[Row, Row]] = {}
        self.device_open: dict[int, Row] = {}
        #: per accelerator stream, the measured time of its latest Leave (carried or
        #: not: compensate.pipeline.context.Segmenter refuses a segment that needs one
        #: that was not)
        self.device_leave: dict[int, int] = {}
        #: per host thread, the measured time of its latest synchronize Leave
        self.sync_after: dict[int, int] = {}
        self.sync_regions = np.array([r for r, name in defs.regions.items()
                                      if is_synchronize(name)], dtype=np.int64)
        self.hosts: dict[int, list[int]] = defaultdict(list)  # process -> CPU threads
        for loc, d in defs.locations.items():
            if d.is_cpu and defs.process_of(loc) in self.gpu_procs:
                self.hosts[defs.process_of(loc)].append(loc)

    def _lock_key(self, loc: int, payload: Any, kind: int) -> tuple | None:
        model = "OPENMP" if kind in (_ACQUIRE[1], _RELEASE[1]) else field_of(payload, "model")
        lock, order = field_of(payload, "lock_id"), field_of(payload, "acquisition_order")
        if model is None or lock is None or order is None:
            return None
        return (self.defs.process_of(loc), model, lock), int(order)

    def update(self, seg: dict[int, Events], row_of: Callable[[int, int], Row]) -> None:
        """Take a segment's records (``row_of(loc, j)``: the context row of its j-th
        record on ``loc``)."""
        defs = self.defs
        hosts: dict[tuple, list] = defaultdict(list)
        kernels: dict[tuple, int] = defaultdict(int)
        for loc, ev in seg.items():
            self._locks(loc, ev, row_of)
            info = defs.locations.get(loc)
            if info is not None and info.is_device:
                if self.sync_regions.size:
                    self._device_pair(loc, ev, row_of)
                self._kernels(loc, ev, kernels)
            elif info is not None and info.is_cpu and defs.process_of(loc) in self.gpu_procs:
                if self.sync_regions.size:
                    self._synchronized(loc, ev)
                self._host_parameters(loc, ev, row_of, hosts)
        self._pair_launches(hosts, kernels)

    def _locks(self, loc: int, ev: Events, row_of: Callable[[int, int], Row]) -> None:
        """Note each lock's highest acquisition and its latest release (the row to
        carry)."""
        k = ev.kind
        for j in np.flatnonzero(np.isin(k, _ACQUIRE + _RELEASE)).tolist():
            got = self._lock_key(loc, ev.payload[j], int(k[j]))
            if got is None:
                continue
            key, order = got
            if int(k[j]) in _ACQUIRE:
                self.acquired[key] = max(self.acquired.get(key, 0), order)
            elif order >= self.release.get(key, (-1,))[0]:
                row = row_of(loc, j)
                self.release[key] = (order, loc, row[4], row)

    def _synchronized(self, loc: int, ev: Events) -> None:
        """Note the measured time of a host thread's latest synchronize Leave."""
        sync = np.flatnonzero((ev.kind == LEAVE) & np.isin(ev.region, self.sync_regions))
        if sync.size:
            self.sync_after[loc] = int(ev.time[sync[-1]])

    def _kernels(self, loc: int, ev: Events, kernels: dict[tuple, int]) -> None:
        """Count the kernels of an accelerator stream per (process, parameter,
        value): the parameter right after a kernel's Enter is its launch's key."""
        k = ev.kind
        for j in np.flatnonzero((k[:-1] == ENTER) & (k[1:] == _PARAM)).tolist():
            p = ev.payload[j + 1]
            par, val = field_of(p, "parameter"), field_of(p, "value")
            if par is not None and val is not None:
                proc = self.defs.process_of(loc)
                self.device_params.add((proc, par))
                self.seen.add(proc)
                kernels[(proc, par, val)] += 1

    def _host_parameters(self, loc: int, ev: Events, row_of: Callable[[int, int], Row],
                         hosts: dict[tuple, list]) -> None:
        """The parameters of a host thread that may be kernel launches, per
        (process, parameter, value): (time, location, row)."""
        for j in np.flatnonzero(ev.kind == _PARAM).tolist():
            p = ev.payload[j]
            par, val = field_of(p, "parameter"), field_of(p, "value")
            if par is not None and val is not None:
                hosts[(self.defs.process_of(loc), par, val)].append(
                    (int(ev.time[j]), loc, row_of(loc, j)))

    def _pair_launches(self, hosts: dict[tuple, list], kernels: dict[tuple, int]) -> None:
        """Pair host parameters with kernels, first to first in time per key; keep
        the unpaired ones that can still be launches (module docstring)."""
        for key in set(hosts) | set(kernels) | set(self.launch):
            waiting = sorted(self.launch.get(key, []) + hosts.get(key, []),
                             key=lambda x: (x[0], x[2][4]))
            rest = waiting[kernels.get(key, 0):]
            if rest and (key[:2] in self.device_params or key[0] not in self.seen):
                self.launch[key] = rest
            else:
                self.launch.pop(key, None)

    def _device_pair(self, loc: int, ev: Events, row_of: Callable[[int, int], Row]) -> None:
        """Note the stream's latest activity of this segment: its last Leave and the
        Enter before it of the same region, which an activity still running at the
        end of the previous segment left in :attr:`device_open`; and the Enter of an
        activity still running at the end of this one."""
        leaves = np.flatnonzero(ev.kind == LEAVE)
        enters = np.flatnonzero(ev.kind == ENTER)
        if leaves.size:
            j = int(leaves[-1])
            self.device_leave[loc] = int(ev.time[j])
            mine = enters[(enters < j) & (ev.region[enters] == ev.region[j])]
            enter = row_of(loc, int(mine[-1])) if mine.size else self.device_open.get(loc)
            if enter is not None and int(enter[0][2]) == int(ev.region[j]):
                self.device_pair[loc] = (enter, row_of(loc, j))
            else:
                self.device_pair.pop(loc, None)
        last_leave = int(leaves[-1]) if leaves.size else -1
        if enters.size and int(enters[-1]) > last_leave:
            self.device_open[loc] = row_of(loc, int(enters[-1]))
        elif leaves.size:
            self.device_open.pop(loc, None)

    def carried(self) -> dict[int, list[Row]]:
        """Per location, the rows to put among its context records."""
        out: dict[int, list[Row]] = defaultdict(list)
        for loc, (enter, leave) in self.device_pair.items():
            t = int(leave[0][0])
            if any(self.sync_after.get(h, -1) <= t
                   for h in self.hosts.get(self.defs.process_of(loc), ())):
                out[loc] += [enter, leave]
        for key, (order, loc, _, row) in self.release.items():
            if self.acquired.get(key, 0) <= order:
                out[loc].append(row)
        for items in self.launch.values():
            for _, loc, row in items:
                out[loc].append(row)
        return dict(out)


__all__ = ["LinkCarry", "Row"]
