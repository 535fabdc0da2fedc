"""The RMA invariants of R7 (R10; issue #19), independent of how the engine timed
them: no member leaves a fence (that synchronised in the measurement) before the
last member entered it; an MPI_Win_start or MPI_Win_complete does not return
before the matching MPI_Win_post; an MPI_Win_wait does not return before the
matching MPI_Win_complete was called; no lock is granted (nor its epoch ended)
before the previous conflicting release, nor before the operations of the previous
conflicting epochs were issued (they reach the target before the release, which
comes before the grant); a put's data is at the target before the target's epoch
ends. Each waiting record strictly after what it waits for
(:mod:`compensate.matching.rma` says which records those are)."""

from __future__ import annotations

from collections.abc import Iterator

from compensate.matching import Matching
from compensate.model import Trace
from compensate.verify.result import Verification, note

#: what a violated link means, by link kind
_WHAT = {
    "post": "returned before the matching MPI_Win_post (Late Post)",
    "complete": "MPI_Win_wait returned before the matching MPI_Win_complete was called",
    "lock": "lock granted before the previous conflicting release",
    "transfer": "the target's epoch ended before the transfer arrived",
    "completion": "MPI_Win_unlock returned before its operation",
    "deposit": "lock granted before an operation of the previous conflicting epoch was issued",
}


def verify_rma(trace: Trace, matching: Matching, v: Verification) -> None:
    """Count RMA violations in ``v.rma`` (examples in ``v.examples``)."""
    deps = matching.rma
    for n, inst in enumerate(deps.collectives):
        if not inst.synchronising or not any(map(v.owns, inst.locs)):
            continue
        ev = [trace.events[loc].time for loc in inst.locs]
        last = max(int(t[b]) for t, b in zip(ev, inst.begin_idx, strict=True))
        for m, (loc, t, b, e) in enumerate(
                zip(inst.locs, ev, inst.begin_idx, inst.end_idx, strict=True)):
            if v.owns(loc) and (t[e] < last or (e != b and t[e] <= t[b])):
                v.rma += 1
                note(v, f"location {loc}, record {e}: left a fence (window {inst.comm}) "
                        f"before the last member entered it", (0, n, m))
    for n, link in enumerate(deps.links):
        loc, i = link.recv
        if not v.owns(loc):  # a waiting record on another rank's location
            continue
        t = trace.events[loc].time[i]
        for m, (s_loc, s, _, _) in enumerate(link.deposits):  # happened before via the release
            if s_loc != loc and t <= trace.events[s_loc].time[s]:
                v.rma += 1
                note(v, f"location {loc}, record {i}: {_WHAT['deposit']} (location "
                        f"{s_loc}, record {s})", (1, n, 0, m))
        for m, ((s_loc, s), ref) in enumerate(zip(link.sends, link.ref, strict=True)):
            if ref or (s_loc == loc and s < i):
                continue  # a reference, or ordered by the location itself
            if t <= trace.events[s_loc].time[s]:
                v.rma += 1
                note(v, f"location {loc}, record {i}: {_WHAT[link.kind]} (location "
                        f"{s_loc}, record {s})", (1, n, 1, m))


def rma_reads(matching: Matching, own: set[int]) -> Iterator[tuple[int, list[int]]]:
    """``(location, record indices)`` that :func:`verify_rma` reads of other
    locations: every member's begin of a synchronising fence with a member in
    ``own``; of the links whose waiting record is in ``own``, the deposits of a lock
    grant and the sends that are not references."""
    for inst in matching.rma.collectives:
        if inst.synchronising and any(loc in own for loc in inst.locs):
            for loc, b in zip(inst.locs, inst.begin_idx, strict=True):
                yield loc, [b]
    for link in matching.rma.links:
        if link.recv[0] in own:
            for s_loc, s, _, _ in link.deposits:
                yield s_loc, [s]
            for (s_loc, s), ref in zip(link.sends, link.ref, strict=True):
                if not ref:
                    yield s_loc, [s]
