"""The accelerator invariants of R7 (R9), checked over the links of
:mod:`compensate.matching.devices`, and what they read of other locations."""

from __future__ import annotations

from collections.abc import Iterator

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.result import Verification, note
from compensate.verify.threads import early_links, link_reads


def verify_devices(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count in ``v.devices`` the device activities that start before their host
    launch (the kernel's Enter not strictly after the host's callsite parameter
    record) and the host synchronize calls that return before the device activity
    that ended while they were in progress (their Leave not strictly after the
    device Leave)."""
    for n, m, sync, s_loc, s in early_links(trace, matching.devices.syncs, v):
        v.devices += 1
        loc, i = sync.recv
        what = "kernel started before its launch" if sync.kind == "launch" else \
            "synchronize returned before the device activity ended"
        note(v, f"location {loc}, record {i}: {what} (location {s_loc}, record {s})",
             (n, m))


def device_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` that :func:`verify_devices` reads of other
    locations: the sends (launch, device Leave) of the links whose waiting record is
    in ``own``."""
    yield from link_reads(matching.devices.syncs, own)
