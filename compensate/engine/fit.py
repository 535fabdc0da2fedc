"""Fitted transfer model (docs/design.md R2f): the network the trace itself reveals.

A message whose send and receive calls overlapped (case m.1 of rule R2) and whose
receiver was already waiting when it arrived shows its whole transfer in the
measured trace. Under the measurement model (docs/design.md §2)

    recv_m = send_m + O(MpiSend) + C(s)·s + network(s) + C(s)·s,

so ``network(s) = recv_m - send_m - O(MpiSend) - 2·C(s)·s`` exactly. The same holds
for the implied messages of collectives, blocking or nonblocking (the request
taking the place of the begin, the completion that of the end):

* 1-to-n (R4): the root's begin to a member's end; a member that waited shows the
  root's transfer.
* n-to-1 (R5): a member's begin to the root's end; a root that waited shows the
  transfer of the member whose message arrived last, and only that one. The
  trace does not say which that was: it is the member whose data left last
  (begin + overhead + copy) if no other member sent more bytes (the network time
  grows with the size); otherwise the instance gives no observation.

:func:`fit_network` collects these observations and fits ``network(s) = latency +
s · per_byte`` to their lower envelope (:func:`fit_observations`: piecewise at a
protocol switch, clock offsets between processes cancelled where messages went both
ways); the engine then uses it for the messages whose transfer was not observed
(case m.2), clamped into each message's [lower, upper] interval
(``EngineOptions(bound="fitted")``).

Which messages count is decided by the measured records' order alone, never by the
overhead given (issue #41: the old rule, "the receiver was still waiting after the
overhead", kept fewer transfers the larger the overhead): the calls overlapped, the
receive came after the send, a synchronous send's receive was there first. A
receiver that was itself late only adds to an observation, never takes from it,
so the fit is a lower envelope, not a least-squares line through everything.

A fit is used only if it is plausible (:func:`implausible`, :func:`clamp_check`);
else the platform network model or the lower bound stands in and the summary says
why (``fit.rejected``).

Threshold: fewer than :data:`MIN_OBSERVATIONS` observations give no fit
(``None``); the caller falls back to the lower bound and says so. With a single
message size, latency and bandwidth cannot be told apart: the fit is then the
envelope value of that size as a constant (``per_byte = 0``, model ``"constant"``).

One fit for all location pairs: the engine's hook takes the message size only,
so a separate intra-/inter-node fit could not be applied per message.

**With a platform network model** (the platform file's optional ``network``
entry, ``latency_P + s · per_byte_P``, measured by a ping-pong:
:mod:`calibration.network`), :func:`outcome_of` combines the two, taking from
the platform only what the trace cannot tell (docs/compensation.md, "R2f with a
platform network model"):

* the trace observed >= :data:`MIN_OBSERVATIONS` transfers of >= 2 sizes: the
  trace's own fit, as without a platform model (it measures this run);
* of one size ``s0`` only: the trace fixes the network time at ``s0`` (its
  median ``m``), the platform the slope: ``latency = m - s0 · per_byte_P``,
  ``per_byte = per_byte_P`` (model ``"platform slope"``; where that latency would
  be below the least plausible one, 10 ns, ``latency 10 ns, per_byte = (m - 10 ns) /
  s0``): exact at the observed size,
  the platform's bandwidth elsewhere, where the constant fit would time every
  size like ``s0``;
* fewer than :data:`MIN_OBSERVATIONS`: the platform model itself (``"platform"``)
  instead of falling back to the lower bound.

Without a ``network`` entry nothing changes. Every value is still clamped into
the message's [lower, upper] interval by the engine.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from compensate.engine.lateness import (  # noqa: F401 - fit's public names too
    RECEIVER_LATE_TICKS,
    WAIT_MARGIN,
    exchange_arrival,
    message_was_late,
    receiver_was_late,
)
from compensate.engine.overheads import record_overheads
from compensate.matching import Matching, MessageTable
from compensate.matching.collectives import N_TO_ONE, ONE_TO_N, call_enter, call_leave
from compensate.matching.partitioned import fit_candidates
from compensate.matching.rma import observed_transfers
from compensate.model import BUFFER_FLUSH, KIND_CODE, SEND, Trace
from compensate.platform import Platform

#: Fewer observed transfers than this give no fit (fallback to the lower bound).
#: Ten points are enough for a two-parameter robust fit to outvote a few outliers
#: (a rendezvous transfer, rounding, a mis-calibrated overhead); with fewer, one
#: such point could set the network time of every unobserved message, and the
#: lower bound (the paper's default) is the safer choice.
MIN_OBSERVATIONS = 10


_EAGER_SENDS = (SEND, KIND_CODE["MpiIsend"])  # records followed by the buffer copy


@dataclass(frozen=True)
class Observations:
    """Observed network times (seconds, without the two copies) and message sizes."""

    sizes: np.ndarray  # bytes, int64
    seconds: np.ndarray  # float64
    p2p: int = 0  # how many came from point-to-point messages
    collective: int = 0  # ... and from collectives' implied messages (1-to-n, n-to-1)
    rma: int = 0  # ... and from RMA transfers to a target's epoch end (R10)
    #: the least observed latency of the zero-byte links per family and kind, ticks
    #: (:func:`observe_links`); None: not observed
    links: dict[str, dict[str, float]] | None = None
    #: per observation its sender's and its receiver's process (location group),
    #: ``sender << 32 | receiver`` (-1: not known, e.g. RMA); None: none known.
    #: Clocks aligned only approximately between processes add the same offset to
    #: one direction of a pair as they take from the other (:func:`_envelope`)
    pairs: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.sizes.size)

    @staticmethod
    def concat(parts: list[Observations]) -> Observations:
        """The observations of ``parts`` together (segments of one pass, or the
        ranks' shares of a distributed run)."""
        if not parts:
            return Observations(np.zeros(0, np.int64), np.zeros(0), links=least_links([]))
        links = None if any(p.links is None for p in parts) else \
            least_links([p.links for p in parts if p.links is not None])
        pairs = np.concatenate([p.pairs if p.pairs is not None else
                                np.full(len(p), -1, np.int64) for p in parts])
        return Observations(np.concatenate([p.sizes for p in parts]).astype(np.int64),
                            np.concatenate([p.seconds for p in parts]).astype(np.float64),
                            sum(p.p2p for p in parts), sum(p.collective for p in parts),
                            sum(p.rma for p in parts), links, pairs.astype(np.int64))


#: the families of zero-byte links whose latency ``--bound fitted`` fits
#: (:func:`observe_links`)
LINK_FAMILIES = ("threads", "devices", "rma")


def least_links(parts: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """The per family and kind minimum of several :func:`observe_links` results (the
    segments of a streamed trace, the ranks of a distributed run): the least over
    all of them, whatever their order."""
    out: dict[str, dict[str, float]] = {family: {} for family in LINK_FAMILIES}
    for part in parts:
        for family, kinds in part.items():
            mine = out.setdefault(family, {})
            for kind, ticks in kinds.items():
                mine[kind] = min(mine.get(kind, math.inf), ticks)
    return out


def observe_links(trace: Trace, matching: Matching, platform: Platform,
                  receivers: Collection[int] | None = None,
                  t0: int | None = None) -> dict[str, dict[str, float]]:
    """The least latency ``trace`` observed per kind of zero-byte link (thread and
    device links, R8/R9; RMA synchronisations, R10), where the waiter was there first,
    ticks: ``{family: {kind: ticks}}``, the fitted latency of ``--bound fitted``
    (docs/compensation.md). A kind that was never observed is missing (0).

    One definition for every path: the engine takes it from the whole trace in
    memory, and a streamed run's fit pass takes the least over its segments
    (:func:`least_links`), so that no segment times its links by a minimum of its
    own. ``receivers``: only links waited for on these locations (a distributed
    run's rank: :func:`observe_transfers`). ``t0``: the origin of the engine's times
    (default: the trace's earliest timestamp; a segment passes the whole trace's),
    so that who waited for whom is decided on the same numbers."""
    from compensate.engine.graph import Graph  # the engine's own times
    from compensate.engine.kinds import rma, threads
    from compensate.engine.run import Stats

    out: dict[str, dict[str, float]] = {family: {} for family in LINK_FAMILIES}
    syncs = {"threads": matching.threads.syncs if matching.threads is not None else [],
             "devices": matching.devices.syncs if matching.devices is not None else []}
    links = matching.rma.links if matching.rma is not None else []
    if not (syncs["threads"] or syncs["devices"] or links):
        return out
    graph = Graph(trace, platform, "lower", "uniform", None, matching, Stats(), t0)
    for family, found in syncs.items():
        threads.link_latencies(graph, found, out[family], receivers)
    if links:
        rma.link_latencies(graph, matching.rma, out["rma"], receivers)
    return out


@dataclass(frozen=True)
class NetworkFit:
    """``network(s) = latency + s · per_byte`` seconds, fitted to observed transfers."""

    latency: float  # seconds, >= 0
    per_byte: float  # seconds per byte, >= 0
    observations: int
    residual_spread: float  # median absolute deviation of the residuals, seconds
    size_min: int  # smallest observed message, bytes
    size_max: int  # largest observed message, bytes
    distinct_sizes: int
    #: "linear" | "constant" (a single message size: latency only) | "piecewise"
    #: (a protocol switch: above ``threshold`` bytes ``latency2 + s · per_byte2``) |
    #: "platform slope" | "platform" (the platform network model: module docstring)
    model: str
    threshold: int | None = None  # bytes: the last size of the first piece
    latency2: float = 0.0
    per_byte2: float = 0.0

    @property
    def bandwidth(self) -> float:
        """Bytes per second (``inf`` when the fit has no per-byte cost)."""
        return 1.0 / self.per_byte if self.per_byte > 0 else math.inf

    def pieces(self) -> list[tuple[float, float]]:
        """``(latency, per_byte)`` of each piece (one, or two for "piecewise")."""
        if self.threshold is None:
            return [(self.latency, self.per_byte)]
        return [(self.latency, self.per_byte), (self.latency2, self.per_byte2)]

    def __call__(self, nbytes: int) -> float:
        """Network time in seconds of an ``nbytes`` message (the engine's hook)."""
        if self.threshold is not None and nbytes > self.threshold:
            return self.latency2 + float(nbytes) * self.per_byte2
        return self.latency + float(nbytes) * self.per_byte

    def to_dict(self) -> dict:
        """JSON-ready description; ``bandwidth_Bps`` is null when not measurable."""
        bw = self.bandwidth
        extra = {} if self.threshold is None else {"above": {
            "threshold_bytes": self.threshold, "latency_s": self.latency2,
            "bandwidth_Bps": 1.0 / self.per_byte2 if self.per_byte2 > 0 else None,
            "per_byte_s": self.per_byte2}}
        return extra | {
            "model": self.model,
            "latency_s": self.latency,
            "bandwidth_Bps": bw if math.isfinite(bw) else None,
            "per_byte_s": self.per_byte,
            "observations": self.observations,
            "residual_spread_s": self.residual_spread,
            "sizes_bytes": [self.size_min, self.size_max],
            "distinct_sizes": self.distinct_sizes,
        }


# -- observations -------------------------------------------------------------------

def _candidates(trace: Trace, matching: Matching) -> np.ndarray:
    """Every message that may reveal its transfer, one row each: (send_loc,
    send_idx, send_exit_idx, recv_loc, recv_enter_idx, recv_idx, size, is_p2p,
    sync_post_idx, group). ``is_p2p``: 0 collective, 1 point-to-point, 2
    point-to-point taken by a matched probe (the receive record copies nothing in),
    3 the send part of an MPI_Sendrecv (its overlap test: :func:`exchange_arrival`).

    Point-to-point messages between two locations; MPI-4 partition messages
    (:func:`compensate.matching.partitioned.fit_candidates`); per non-root member of a 1-to-n
    collective the message from the root's begin (request) to the member's end
    (completion); per non-root member of an n-to-1 collective the message from its
    begin (request) to the root's end (completion), ``group`` numbering the instance
    (-1 elsewhere: :func:`_last_of_groups` keeps one per instance). For a
    nonblocking collective the send call ends at the Leave after the request and the
    receive call is the MPI_Wait/Test around the completion. ``sync_post_idx`` is
    the record that posted the receive of a synchronous send (-1 for eager ones):
    such a transfer starts only once the receive is posted, so it shows the network
    only if the receive was posted first.
    """
    p2p = _p2p_candidates(matching.table)
    rows: list[tuple] = []
    group = 0
    for inst in matching.instances:
        if inst.cls not in (ONE_TO_N, N_TO_ONE) or inst.root < 0:
            continue
        b, e = inst.begin_idx, inst.end_idx
        if getattr(inst, "nonblocking", False):
            kinds = [trace.events[loc].kind for loc in inst.locs]
            send_exit = [call_leave(k, x) for k, x in zip(kinds, b, strict=True)]
            recv_enter = [call_enter(k, x) for k, x in zip(kinds, e, strict=True)]
        else:
            send_exit, recv_enter = e, b
        r = inst.locs.index(inst.root)
        for i, loc in enumerate(inst.locs):
            if loc == inst.root:
                continue
            if inst.cls == ONE_TO_N:
                rows.append((inst.root, b[r], send_exit[r], loc, recv_enter[i], e[i],
                             inst.size_recv[i], 0, -1, -1))
            else:
                rows.append((loc, b[i], send_exit[i], inst.root, recv_enter[r], e[r],
                             inst.size_sent[i], 0, -1, group))
        group += inst.cls == N_TO_ONE
    partitioned = getattr(matching, "partitioned", None)
    if partitioned is not None and partitioned.messages:  # MPI-4 partitions (R11)
        rows += fit_candidates(trace, partitioned, group)
    return np.concatenate([p2p, np.array(rows, dtype=np.int64).reshape(-1, 10)])


def _p2p_candidates(t: MessageTable) -> np.ndarray:
    """The point-to-point rows of :func:`_candidates` (messages between two
    locations, in table order), built from the message table's columns."""
    keep = np.flatnonzero(t.send_li != t.recv_li)
    ids = np.asarray(t.loc_ids, dtype=np.int64)
    out = np.empty((keep.size, 10), dtype=np.int64)
    if not keep.size:
        return out
    out[:, 0] = ids[t.send_li[keep]]
    out[:, 1] = t.send_idx[keep]
    out[:, 2] = t.send_exit_idx[keep]
    out[:, 3] = ids[t.recv_li[keep]]
    out[:, 4] = t.recv_enter_idx[keep]
    out[:, 5] = t.recv_idx[keep]
    out[:, 6] = t.size[keep]
    out[:, 7] = np.where(t.no_recv_copy[keep], 2, np.where(t.exchange[keep], 3, 1))
    out[:, 8] = np.where(t.synchronous[keep], t.recv_post_idx[keep], -1)
    out[:, 9] = -1
    return out


def _offsets_of(offsets: dict[int, int], locs: np.ndarray) -> np.ndarray:
    """``offsets[loc]`` of every element of ``locs`` (all keys of ``offsets``)."""
    if not offsets or not locs.size:
        return np.zeros(locs.size, dtype=np.int64)
    keys = np.fromiter(offsets, dtype=np.int64, count=len(offsets))
    values = np.fromiter(offsets.values(), dtype=np.int64, count=len(offsets))
    order = np.argsort(keys)
    return values[order][np.searchsorted(keys[order], locs)]


def _last_of_groups(group: np.ndarray, departure: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Rows to keep: all with ``group`` -1; of each n-to-1 instance the member whose
    data left last, if no other member of it sent more bytes (else none)."""
    keep = group < 0
    for g in np.unique(group[group >= 0]).tolist():
        rows = np.flatnonzero(group == g)
        last = rows[int(np.argmax(departure[rows]))]
        if size[last] >= size[rows].max():
            keep[last] = True
    return keep


@dataclass(frozen=True)
class _Columns:
    """All locations' records in flat arrays (ticks), indexed by offset + record index.

    ``after``: the record's time plus its overhead (after a BufferFlush: its stop
    time plus the overhead). ``free``: when the program could go on, which after an
    eager send record is also after the copy of its buffer (docs/design.md §2): the
    receive of an MPI_Sendrecv is posted only then.
    """

    offsets: dict[int, int]
    time: np.ndarray
    after: np.ndarray
    free: np.ndarray


def _flat_columns(trace: Trace, platform: Platform) -> _Columns:
    """Concatenate every location's times, with overheads and copies applied, in
    float ticks from the trace's earliest timestamp (only differences are read; an
    absolute timestamp near 2^62 would lose the low ten bits in a float64)."""
    defs = trace.definitions
    res = float(defs.timer_resolution)
    origin = min((int(ev.time[0]) for ev in trace.events.values() if len(ev)), default=0)
    offsets, times, after, free = {}, [], [], []
    n = 0
    for loc, ev in trace.events.items():
        offsets[loc] = n
        n += len(ev)
        t = (ev.time - origin).astype(np.float64)
        # a flush's own overhead counts from its end (its duration: its stop time)
        a = (np.where(ev.kind == BUFFER_FLUSH, ev.size, ev.time) - origin).astype(np.float64)
        a += record_overheads(platform, defs, loc, ev, flushes=False)
        sends = np.flatnonzero(np.isin(ev.kind, _EAGER_SENDS))
        f = a.copy()
        if sends.size:
            f[sends] += np.asarray(platform.copy_time(ev.size[sends]), dtype=np.float64) * res
        times.append(t)
        after.append(a)
        free.append(f)
    if not times:
        return _Columns(offsets, np.zeros(0), np.zeros(0), np.zeros(0))
    return _Columns(offsets, np.concatenate(times), np.concatenate(after),
                    np.concatenate(free))


def observe_transfers(trace: Trace, matching: Matching, platform: Platform,
                      receivers: Collection[int] | None = None,
                      t0: int | None = None) -> Observations:
    """The network times the measured trace reveals (see the module docstring).

    ``receivers``: only the transfers received (waited for) on these locations
    (default: every location). A distributed run's rank observes those whose
    receive it owns (:mod:`compensate.parallel.fit`): each transfer is observed
    once, by one rank, from the records its view holds.

    A message counts if its calls overlapped (``enter.recv_m <= exit.send_m``, case
    m.1) and it arrived after the receiver was ready: ``recv_m - C(s)·s`` is later
    than the record before the receive plus that record's overhead (for a plain
    MPI_Recv the Enter; later than Enter + O(Enter) + the overheads of any records
    in between; after an MpiSend also its copy), by more than a margin
    (:data:`WAIT_MARGIN`). A synchronous send counts only if its receive was posted
    before the send began.

    Also the least latency of each kind of zero-byte link (:func:`observe_links`,
    ``t0`` its origin of times): ``links``.
    """
    cand = _candidates(trace, matching)
    cand = cand[(cand[:, 4] >= 0) & (cand[:, 5] > 0)]  # the receive needs a record before it
    if receivers is not None:  # (an n-to-1 instance's rows all have its root's receive)
        cand = cand[np.isin(cand[:, 3], np.fromiter(receivers, np.int64))]
    if cand.shape[0] == 0:
        cand = np.zeros((0, 10), dtype=np.int64)
    col = _flat_columns(trace, platform)
    tm, after = col.time, col.after
    res = float(trace.definitions.timer_resolution)
    s_loc, s_idx, s_exit, r_loc, r_enter, r_idx, size, is_p2p, post, group = cand.T
    base_s, base_r = _offsets_of(col.offsets, s_loc), _offsets_of(col.offsets, r_loc)
    send, send_exit = base_s + s_idx, base_s + s_exit
    recv, enter = base_r + r_idx, base_r + r_enter
    copy = np.asarray(platform.copy_time(size), dtype=np.float64) * res
    cs = np.where(is_p2p == 2, 0.0, copy)  # a matched probe copies nothing in
    exit_m = tm[send_exit]
    ex = is_p2p == 3  # an MPI_Sendrecv's send part (graph.exchange_arrival)
    if ex.any():
        arrive = exchange_arrival(platform, res, size, tm[send] + copy)
        if arrive is not None:
            exit_m = np.where(ex, arrive, exit_m)
    # by the measured records' order alone, never the overhead given (issue #41):
    # the calls overlapped (the receiver was in its call before the send's ended),
    # the receive completed after the send began; a collective member's call began
    # before the sending party's call ended (a root entering its gather after the
    # members' calls ended still waits for their data: their calls say nothing
    # more); a synchronous send's receive call began no later than the send record
    # (else the handshake, not the network, set its end). What a receiver's own
    # lateness adds to an observation is left to the lower-envelope fit (every
    # observation is at least the network time)
    sync = post >= 0
    overlapped = tm[enter] <= exit_m
    causal = tm[recv] > tm[send]
    waited = ~sync | (tm[enter] <= tm[send])
    posted_first = ~sync | (tm[base_r + np.where(sync, post, 0)] <= tm[send])
    last = _last_of_groups(group, tm[send] + copy, size)
    keep = overlapped & causal & waited & posted_first & last
    net = tm[recv] - after[send] - (copy + cs)  # after[send] = send_m + O(MpiSend)
    r_size, r_net = observed_transfers(  # RMA transfers (R10)
        trace, matching.rma, platform.overhead_table() * res,
        lambda s: float(platform.copy_time(s)) * res, receivers)
    locs = trace.definitions.locations
    group_of = {loc: (locs[loc].group if loc in locs else loc) for loc in trace.events}
    procs = np.array([[group_of.get(a, a), group_of.get(b, b)] for a, b in
                      zip(s_loc[keep].tolist(), r_loc[keep].tolist(), strict=True)],
                     dtype=np.int64).reshape(-1, 2)
    pairs = np.r_[(procs[:, 0] << 32) | procs[:, 1], np.full(len(r_size), -1, np.int64)]
    return Observations(np.r_[size[keep].astype(np.int64), np.array(r_size, np.int64)],
                        np.r_[net[keep] / res, np.array(r_net) / res],
                        p2p=int(np.count_nonzero(keep & (is_p2p >= 1))),
                        collective=int(np.count_nonzero(keep & (is_p2p == 0))),
                        rma=len(r_size),
                        links=observe_links(trace, matching, platform, receivers, t0),
                        pairs=pairs.astype(np.int64))


# -- fitting ------------------------------------------------------------------------

def _mad(x: np.ndarray) -> float:
    """Median absolute deviation (unscaled)."""
    return float(np.median(np.abs(x - np.median(x)))) if x.size else 0.0


def _robust_start(u: np.ndarray, y: np.ndarray, groups: int = 300) -> np.ndarray:
    """Theil–Sen line through group medians: one group per message size, or, with
    more sizes than ``groups``, that many equal-count groups of neighbouring sizes.
    A start that outliers cannot drag, and cheap for millions of observations."""
    order = np.argsort(u, kind="stable")
    us, ys = u[order], y[order]
    if np.unique(us).size <= groups:
        cuts = np.flatnonzero(np.diff(us)) + 1
    else:
        cuts = np.linspace(0, us.size, groups + 1).round().astype(np.int64)[1:-1]
    gx = np.array([np.median(g) for g in np.split(us, cuts)])
    gy = np.array([np.median(g) for g in np.split(ys, cuts)])
    from scipy.stats import theilslopes  # ~0.3 s to import: only runs that fit pay it
    slope, icpt, _, _ = theilslopes(gy, gx)
    return np.array([max(float(icpt), 0.0), max(float(slope), 0.0)])


def fit_line(sizes: np.ndarray, seconds: np.ndarray, tick: float = 1e-9) -> tuple[float, float]:
    """Robust ``seconds ≈ latency + sizes · per_byte`` with both parameters >= 0.

    Soft-L1 least squares (scipy), on rescaled variables so that microseconds and
    megabytes are both of order one, started from a Theil–Sen line through
    per-size medians. The loss's scale is the residuals' spread (1.4826 · MAD, at
    least one timer tick), re-estimated once, so that points further off than the
    typical residual lose their pull.
    """
    x = sizes.astype(np.float64)
    xs = max(float(x.max()), 1.0)
    ys = max(float(np.median(np.abs(seconds))), tick)
    u, y = x / xs, seconds / ys
    p = _robust_start(u, y)
    from scipy.optimize import least_squares  # imported where used (start-up time)
    for _ in range(2):
        scale = max(1.4826 * _mad(y - (p[0] + p[1] * u)), tick / ys)
        p = least_squares(lambda q: q[0] + q[1] * u - y, p, loss="soft_l1", f_scale=scale,
                          bounds=([0.0, 0.0], [np.inf, np.inf])).x
    return float(p[0]) * ys, float(p[1]) * ys / xs


#: The envelope's quantile: per size group the observation below which this
#: share lies. Every observation is at least the network time (a receiver that
#: came late only adds to it, a flush or a preemption too), so the lower part of
#: each group is the network; a low quantile rather than the minimum, so that a
#: few too-early points (timer rounding, clocks aligned only approximately) do
#: not set it.
ENVELOPE_QUANTILE = 0.2
#: A second line (a protocol switch: eager to rendezvous) is taken only if it
#: leaves less than this share of the single line's error on the envelope.
PIECEWISE_GAIN = 0.25
#: ... and only where one line misses the envelope by more than this share of its
#: values (timer rounding alone must not split an exact line)
PIECEWISE_MISFIT = 0.02


def _envelope(sizes: np.ndarray, seconds: np.ndarray, pairs: np.ndarray | None = None,
              groups: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The lower envelope: per message size (or, with more sizes than ``groups``,
    per group of neighbouring sizes) its median size and the
    :data:`ENVELOPE_QUANTILE` quantile of its times (:func:`_group_floor`).
    ``sizes`` sorted, ``pairs`` in the same order (None: not known)."""
    if np.unique(sizes).size <= groups:
        cuts = np.flatnonzero(np.diff(sizes)) + 1
    else:
        cuts = np.linspace(0, sizes.size, groups + 1).round().astype(np.int64)[1:-1]
    gx = np.array([np.median(g) for g in np.split(sizes.astype(np.float64), cuts)])
    if pairs is None:
        pairs = np.full(sizes.size, -1, np.int64)
    gy = np.array([_group_floor(y, p) for y, p in
                   zip(np.split(seconds, cuts), np.split(pairs, cuts), strict=True)])
    return gx, gy


def _q(y: np.ndarray) -> float:
    return float(np.quantile(y, ENVELOPE_QUANTILE, method="lower"))


def _group_floor(y: np.ndarray, pairs: np.ndarray) -> float:
    """One size group's envelope value. Where processes exchanged messages both
    ways, a clock offset between them adds to one direction what it takes from the
    other: per such pair the mean of the two directions' quantiles, and the same
    quantile over the pairs (a pair whose receivers were late in both directions
    is above the network too; a process's messages to itself count as such a
    pair); else the quantile of all."""
    known = pairs >= 0
    if not known.any():
        return _q(y)
    keys, inverse = np.unique(pairs[known], return_inverse=True)
    if keys.size > 20000:  # (too many pairs to be worth it: the plain quantile)
        return _q(y)
    yk = y[known]
    floor = {int(k): _q(yk[inverse == i]) for i, k in enumerate(keys.tolist())}
    both = []
    for k, v in floor.items():
        a, b = k >> 32, k & 0xFFFFFFFF
        back = floor.get((b << 32) | a)
        if back is not None and a <= b:
            both.append((v + back) / 2)
    return _q(np.array(both)) if both else _q(y)


def _line(gx: np.ndarray, gy: np.ndarray) -> tuple[float, float]:
    """Theil–Sen line through envelope points (both parameters >= 0): the median of
    the pairwise slopes, then the median intercept; one point: a constant."""
    if gx.size < 2:
        return max(float(gy[0]), 0.0), 0.0
    i, j = np.triu_indices(gx.size, 1)
    apart = gx[j] > gx[i]
    i, j = i[apart], j[apart]
    if not i.size:
        return max(float(np.median(gy)), 0.0), 0.0
    slope = max(float(np.median((gy[j] - gy[i]) / (gx[j] - gx[i]))), 0.0)
    latency = float(np.median(gy - slope * gx))
    if latency < 0:  # through the origin's side: the least slope that keeps it >= 0
        latency = 0.0
    return latency, slope


def _piecewise(gx: np.ndarray, gy: np.ndarray) -> tuple[int, tuple, tuple] | None:
    """The best split of the envelope into two lines (each of >= 2 points), if it
    leaves less than :data:`PIECEWISE_GAIN` of one line's error: (index of the first
    point of the second piece, line below, line above)."""
    if gx.size < 4:
        return None

    def err(x, y, line):
        return float(np.abs(y - (line[0] + line[1] * x)).sum())

    one = err(gx, gy, _line(gx, gy))
    if one <= PIECEWISE_MISFIT * float(np.abs(gy).sum()):  # one line fits well enough
        return None
    best = None
    for k in range(2, gx.size - 1):
        lo, hi = _line(gx[:k], gy[:k]), _line(gx[k:], gy[k:])
        e = err(gx[:k], gy[:k], lo) + err(gx[k:], gy[k:], hi)
        if best is None or e < best[0]:
            best = (e, k, lo, hi)
    if best is None or not best[0] < PIECEWISE_GAIN * one:
        return None
    return best[1], best[2], best[3]


def _without_offsets(resid: np.ndarray, pairs: np.ndarray | None) -> np.ndarray:
    """``resid`` less the clock offset between processes that exchanged messages
    both ways: half the difference of the two directions' median residuals (an
    offset adds to one direction what it takes from the other)."""
    if pairs is None or not (pairs >= 0).any():
        return resid
    out = resid.copy()
    keys = np.unique(pairs[pairs >= 0]).tolist()
    if len(keys) > 20000:
        return resid
    med = {k: float(np.median(resid[pairs == k])) for k in keys}
    for k in keys:
        back = med.get(((k & 0xFFFFFFFF) << 32) | (k >> 32))
        if back is not None:
            out[pairs == k] -= (med[k] - back) / 2
    return out


def _lower_spread(resid: np.ndarray) -> float:
    """The residual spread of a lower-envelope fit: the median absolute residual of
    the lower half of the observations (the upper half holds what came on top of
    the network: late receivers, waits), 0 for none."""
    if not resid.size:
        return 0.0
    low = resid[resid <= np.median(resid)]
    return float(np.median(np.abs(low)))


def fit_observations(obs: Observations, tick: float = 1e-9) -> NetworkFit | None:
    """Fit the network model to ``obs``; None below :data:`MIN_OBSERVATIONS`.

    A lower-envelope fit (:func:`_envelope`): a line through the low quantile of
    each size group (Theil–Sen), two lines where the envelope breaks (an eager /
    rendezvous switch: :func:`_piecewise`); one size: that quantile as a constant.
    In a fixed order: the same fit however the observations were collected."""
    n = len(obs)
    if n < MIN_OBSERVATIONS:
        return None
    order = np.lexsort((obs.seconds, obs.sizes))
    sizes, seconds = obs.sizes[order], obs.seconds[order]
    gx, gy = _envelope(sizes, seconds, obs.pairs[order] if obs.pairs is not None else None)
    distinct = int(np.unique(sizes).size)
    common = (n, 0.0, int(sizes[0]), int(sizes[-1]), distinct)
    if distinct < 2:
        fit = NetworkFit(max(float(gy[0]), 0.0), 0.0, *common, "constant")
    elif (split := _piecewise(gx, gy)) is not None:
        k, lo, hi = split
        threshold = int(sizes[np.searchsorted(sizes, gx[k], side="left") - 1])
        fit = NetworkFit(lo[0], lo[1], *common, "piecewise", threshold, hi[0], hi[1])
    else:
        latency, per_byte = _line(gx, gy)
        fit = NetworkFit(latency, per_byte, *common, "linear")
    resid = seconds - np.array([fit(int(s)) for s in np.unique(sizes)])[
        np.searchsorted(np.unique(sizes), sizes)]
    resid = _without_offsets(resid, obs.pairs[order] if obs.pairs is not None else None)
    return dataclasses.replace(fit, residual_spread=_lower_spread(resid))


@dataclass(frozen=True)
class FitOutcome:
    """A fit, or why there is none (``fit`` None: use the lower bound); and the
    fitted latency of the zero-byte links (:func:`observe_links`, whole trace; None
    if not observed), for ``EngineOptions.link_latency`` (with or without a fit).

    ``rejected``: why the trace's own fit was not used although there was one
    (:func:`implausible`, :func:`clamp_check`); ``fit`` is then the platform network
    model or None. ``size_classes``: the observations per size class
    (:func:`size_classes`), so that a user can judge what the fit rests on."""

    fit: NetworkFit | None
    observations: int
    reason: str | None = None
    links: dict[str, dict[str, float]] | None = field(default=None, compare=False)
    rejected: str | None = None
    size_classes: dict[str, int] | None = field(default=None, compare=False)
    #: the rejected fit itself (reported in the summary, never used)
    rejected_fit: NetworkFit | None = field(default=None, compare=False)


# -- plausibility -------------------------------------------------------------------

#: A network's latency lies in this range, seconds: no interconnect or memory copy
#: answers in less than 10 ns, and a transfer that needs a millisecond before its
#: first byte arrives is a run's waiting, not its network.
LATENCY_RANGE = (10e-9, 1e-3)
#: ... and its bandwidth in this range, bytes per second (10 MB/s to 1 TB/s).
BANDWIDTH_RANGE = (10e6, 1e12)
#: A fit overridden by [lower, upper] on more than this share of its uses is no
#: model of the network the run had (``m2_fitted_overridden``: the modelled
#: transfer below the least one or above the measured interval; a receiver that
#: came after the modelled arrival agrees with the model and does not count).
CLAMPED_MAJORITY = 0.5


def implausible(fit: NetworkFit) -> str | None:
    """Why ``fit`` is no model of a physical network, or None if it may be one:
    its latency outside :data:`LATENCY_RANGE`, its bandwidth (a linear fit's)
    outside :data:`BANDWIDTH_RANGE`, or the residuals' spread larger than the
    latency (the model explains less than the noise around it). The platform's own
    model (``"platform"``) is a measurement and is not judged."""
    if fit.model == "platform":
        return None
    lo, hi = LATENCY_RANGE
    blo, bhi = BANDWIDTH_RANGE
    for i, (latency, per_byte) in enumerate(fit.pieces()):
        if not lo <= latency <= hi:
            return (f"fitted latency {latency:.3g} s outside the physical range "
                    f"{lo:g}-{hi:g} s")
        if fit.model in ("linear", "piecewise"):
            bandwidth = 1.0 / per_byte if per_byte > 0 else math.inf
            # faster than 1 TB/s is judged only where the sizes could show it: the
            # largest observed message at 1 TB/s takes a tenth of the latency or
            # more (the per-byte cost of 64-byte messages is below any timer)
            top = fit.size_max if i or fit.threshold is None else fit.threshold
            shows = top / bhi >= 0.1 * latency
            if bandwidth < blo or (shows and bandwidth > bhi):
                return (f"fitted bandwidth {bandwidth:.3g} B/s outside the physical range "
                        f"{blo:g}-{bhi:g} B/s")
    if fit.residual_spread > fit.latency:
        return (f"residual spread {fit.residual_spread:.3g} s larger than the fitted "
                f"latency {fit.latency:.3g} s")
    return None


#: Upper ends of the size classes of :func:`size_classes`, bytes (the last: open).
SIZE_CLASS_EDGES = (1, 64, 4096, 256 * 1024)
SIZE_CLASS_NAMES = ("0 B", "1-63 B", "64 B-4 KiB", "4-256 KiB", ">=256 KiB")


def size_classes(sizes: np.ndarray) -> dict[str, int]:
    """How many observations fall in each size class (every class listed, empty
    ones with 0): where the fit's latency and its slope were measured."""
    counts = np.bincount(np.searchsorted(SIZE_CLASS_EDGES, np.asarray(sizes), side="right"),
                         minlength=len(SIZE_CLASS_NAMES))
    return dict(zip(SIZE_CLASS_NAMES, (int(c) for c in counts), strict=True))


def _fallback(obs: Observations, network: tuple[float, float] | None) -> NetworkFit | None:
    """What stands in for a rejected fit: the platform network model, else None
    (the lower bound)."""
    return with_platform(obs, None, network) if network is not None else None


def clamp_check(outcome: FitOutcome | None, p2p_cases: dict,
                network: tuple[float, float] | None = None) -> FitOutcome | None:
    """The outcome to run again with if the run that used ``outcome``'s fit
    overrode it by [lower, upper] on most of its uses (``m2_fitted_overridden``
    more than :data:`CLAMPED_MAJORITY` of ``m2_fitted``, at least
    :data:`MIN_OBSERVATIONS` uses), else None. The fit is then rejected and
    the platform network model ``network`` (else the lower bound) stands in. A
    platform model is never rejected: it is the fallback."""
    if outcome is None or outcome.fit is None or outcome.fit.model == "platform":
        return None
    used = int(p2p_cases.get("m2_fitted", 0))
    over = int(p2p_cases.get("m2_fitted_overridden", 0))
    if used < MIN_OBSERVATIONS or over <= CLAMPED_MAJORITY * used:
        return None
    reason = (f"outside [lower, upper] on {over:,} of its {used:,} uses "
              f"({100 * over / used:.3g} %)")
    fit = None
    if network is not None:
        fit = NetworkFit(network[0], network[1], outcome.observations, 0.0,
                         outcome.fit.size_min, outcome.fit.size_max,
                         outcome.fit.distinct_sizes, "platform")
    why = None if fit else f"fitted model rejected: {reason}"
    return FitOutcome(fit, outcome.observations, why, outcome.links, reason,
                      outcome.size_classes, outcome.fit)


def try_fit(trace: Trace, matching: Matching, platform: Platform) -> FitOutcome:
    """Observe the transfers of ``trace`` and fit them; say why if that is not possible."""
    obs = observe_transfers(trace, matching, platform)
    return outcome_of(obs, 1.0 / trace.definitions.timer_resolution, platform.network)


def with_platform(obs: Observations, fit: NetworkFit | None,
                  network: tuple[float, float]) -> NetworkFit:
    """The trace's fit combined with the platform network model ``(latency s,
    seconds per byte)`` (module docstring): the trace's own linear fit where it
    has one, the platform's slope through the one size it observed, else the
    platform model."""
    if fit is not None and fit.model in ("linear", "piecewise"):
        return fit
    p_lat, p_pb = network
    n = len(obs)
    if fit is None:
        lo = int(obs.sizes.min()) if n else 0
        hi = int(obs.sizes.max()) if n else 0
        distinct = int(np.unique(obs.sizes).size) if n else 0
        return NetworkFit(p_lat, p_pb, n, 0.0, lo, hi, distinct, "platform")
    s0, m = fit.size_min, fit.latency  # a constant fit: the median at its one size
    latency, per_byte = m - s0 * p_pb, p_pb
    if latency < LATENCY_RANGE[0]:  # (the least latency a network has: plausible)
        latency = min(LATENCY_RANGE[0], m)
        per_byte = (m - latency) / s0
    resid = obs.seconds - (latency + obs.sizes * per_byte)
    return NetworkFit(latency, per_byte, n, _mad(resid), fit.size_min, fit.size_max,
                      fit.distinct_sizes, "platform slope")


def outcome_of(obs: Observations, tick: float,
               network: tuple[float, float] | None = None) -> FitOutcome:
    """Fit observed transfers; say why if that is not possible (too few). With a
    platform network model ``network`` the fit is combined with it
    (:func:`with_platform`) and there is always one."""
    fit = fit_observations(obs, tick)
    classes = size_classes(obs.sizes)
    if network is not None:
        fit = with_platform(obs, fit, network)
    rejected = implausible(fit) if fit is not None else None
    if rejected is not None:
        stand_in = _fallback(obs, network)
        why = None if stand_in else f"fitted model rejected: {rejected}"
        return FitOutcome(stand_in, len(obs), why, obs.links, rejected, classes, fit)
    if fit is not None:
        return FitOutcome(fit, len(obs), links=obs.links, size_classes=classes)
    reason = (f"{len(obs)} observed transfers ({obs.p2p} point-to-point messages whose "
              f"calls overlapped and whose receiver waited, {obs.collective} collective "
              f"transfers whose receiver waited), fewer than {MIN_OBSERVATIONS}")
    return FitOutcome(None, len(obs), reason, obs.links, size_classes=classes)


def fit_network(trace: Trace, matching: Matching, platform: Platform) -> NetworkFit | None:
    """Fit ``latency + bytes · per_byte`` to the transfers ``trace`` observed.

    Returns None when fewer than :data:`MIN_OBSERVATIONS` transfers were observed;
    the caller then uses the lower bound (and should say so).
    """
    return try_fit(trace, matching, platform).fit


def summary_object(outcome: FitOutcome, p2p_cases: dict) -> dict:
    """The ``"fit"`` object of the run summary: the model, how many unobserved
    transfers used it (``used``) and how many of those were clamped into their
    [lower, upper] interval (``clamped``), and whether the run fell back to the
    lower bound."""
    obj = {"latency_s": None, "bandwidth_Bps": None, "observations": outcome.observations,
           "residual_spread_s": None}
    if outcome.fit is not None:
        obj.update(outcome.fit.to_dict())
    used = int(p2p_cases.get("m2_fitted", 0))
    clamped = int(p2p_cases.get("m2_fitted_clamped", 0))
    over = int(p2p_cases.get("m2_fitted_overridden", 0))
    judged = outcome.rejected_fit or outcome.fit  # the model the quality is of
    obj.update({
        "used": used,
        "clamped": clamped,
        "fallback": outcome.fit is None,
        "fallback_reason": None if outcome.fit else f"{outcome.reason}: used the lower bound",
        "bound_used": "fitted" if outcome.fit else "lower",
        "overridden": over,
        "rejected": outcome.rejected,
        "rejected_model": outcome.rejected_fit.to_dict() if outcome.rejected_fit else None,
        "quality": {
            "residual_spread_s": judged.residual_spread if judged else None,
            "clamped_share": clamped / used if used else None,
            "overridden_share": over / used if used else None,
            "observations_by_size": outcome.size_classes,
        },
    })
    return obj


def warning_line(obj: dict | None) -> str | None:
    """The one warning line of a run whose fitted model was rejected (the summary's
    ``fit`` object ``obj``), None otherwise."""
    if not obj or not obj.get("rejected"):
        return None
    instead = ("the platform network model" if obj.get("model") == "platform"
               else "the lower bound")
    return (f"compensate: warning: the network model fitted to the trace was not used: "
            f"{obj['rejected']}; used {instead} instead")


#: Bytes per second above which a fitted slope says no more than "the transfers
#: did not grow with the size" (1 TB/s: no interconnect or memory copy is faster;
#: a clamped or near-zero slope gave "1.68e+10 GB/s").
UNRESOLVED_BANDWIDTH = 1e12


def summary_phrase(obj: dict) -> str:
    """The bound part of the one-line summary for ``--bound fitted``."""
    if obj["fallback"]:
        return f"fitted bound not possible ({obj['fallback_reason']})"
    bw = obj["bandwidth_Bps"]
    bandwidth = (f"{bw / 1e9:.3g} GB/s" if bw and bw < UNRESOLVED_BANDWIDTH else
                 "no per-byte cost resolved" if bw else "bandwidth n/a: one message size")
    source = {"platform": "the platform network model; ",
              "platform slope": "the platform network model's bandwidth; "}.get(obj["model"], "")
    return (f"fitted bound (latency {obj['latency_s'] * 1e6:.3g} us, {bandwidth}, "
            f"from {source}{obj['observations']} observed transfers; used for {obj['used']} "
            f"unobserved, {obj['clamped']} of them clamped to [lower, upper])")
