"""Fitted transfer model (docs/design.md R2f): the network the trace itself reveals.

A message whose calls overlapped (case m.1 of rule R2) and whose receiver was
already waiting when it arrived shows its whole transfer in the measured trace
(one whose receiver came later shows more). Under the measurement model
(docs/design.md §2)

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

:func:`fit_network` collects these observations and fits their lower envelope
(:mod:`compensate.engine.netmodel`), used for the messages whose transfer was not
observed (case m.2), clamped into each message's [lower, upper] interval. Which
messages count is decided by the measured records' order alone, never by the
overhead given; a receiver that was itself late only adds to an observation. A
fit is used only if plausible (:func:`implausible`, :func:`clamp_check`).

Threshold: fewer than :data:`MIN_OBSERVATIONS` observations give no fit
(``None``); the caller falls back to the lower bound and says so. With a single
message size, latency and bandwidth cannot be told apart: the fit is then the
envelope value of that size as a constant (``per_byte = 0``, model ``"constant"``).

One fit for all location pairs: the engine's hook takes the message size only.

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
from compensate.engine.netmodel import (  # noqa: F401 - fit's public names too
    BANDWIDTH_RANGE,
    CLAMPED_MAJORITY,
    ENVELOPE_QUANTILE,
    LATENCY_RANGE,
    PIECEWISE_GAIN,
    SIZE_CLASS_EDGES,
    SIZE_CLASS_NAMES,
    NetworkFit,
    _mad,
    fit_envelope,
    fit_line,
    implausible,
    size_classes,
)
from compensate.engine.overheads import before_stamp, event_times, file_ticks, record_overheads
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
    """The per family and kind minimum of several :func:`observe_links` results (the segments of
    a streamed trace, the ranks of a distributed run), whatever their order (lists: all, sorted)."""
    out: dict[str, dict[str, float]] = {family: {} for family in LINK_FAMILIES}
    for part in parts:
        for family, kinds in part.items():
            mine = out.setdefault(family, {})
            for kind, ticks in kinds.items():
                mine[kind] = (sorted([*mine.get(kind, []), *ticks]) if isinstance(ticks, list)
                              else min(mine.get(kind, math.inf), ticks))
    return out


def observe_links(trace: Trace, matching: Matching, platform: Platform,
                  receivers: Collection[int] | None = None,
                  t0: int | None = None) -> dict[str, dict[str, float]]:
    """The least latency ``trace`` observed per kind of zero-byte link (thread and device links,
    R8/R9; RMA synchronisations, R10), where the waiter was there first, ticks: ``{family:
    {kind: ticks}}``, the fitted latency of ``--bound fitted`` (docs/compensation.md). A kind
    never observed is missing (0). ``devices.LEARNED``: the device links' observed gaps (lists).

    One definition for every path: the engine takes it from the whole trace in memory, and a
    streamed run's fit pass takes the least over its segments (:func:`least_links`), so that no
    segment times its links by a minimum of its own. ``receivers``: only links waited for on
    these locations (a distributed run's rank: :func:`observe_transfers`). ``t0``: the origin of
    the engine's times (default: the trace's earliest timestamp; a segment passes the whole
    trace's), so that who waited for whom is decided on the same numbers."""
    from compensate.engine.graph import Graph  # the engine's own times
    from compensate.engine.kinds import devices, rma, threads
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
    devices.add_gaps(out, graph, syncs["devices"], receivers)
    if links:
        rma.link_latencies(graph, matching.rma, out["rma"], receivers)
    return out


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
        pre = before_stamp(platform, defs, loc, ev)  # event times: engine.overheads
        t = event_times((ev.time - origin).astype(np.float64), pre)
        # a flush's own overhead counts from its end (its duration: its stop time)
        a = (np.where(ev.kind == BUFFER_FLUSH, ev.size, ev.time) - origin).astype(np.float64)
        a += record_overheads(platform, defs, loc, ev, flushes=False) - pre
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
        trace, matching.rma, file_ticks(platform, trace),
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

def fit_observations(obs: Observations) -> NetworkFit | None:
    """Fit the network model to ``obs`` (:func:`~compensate.engine.netmodel.fit_envelope`);
    None below :data:`MIN_OBSERVATIONS`."""
    if len(obs) < MIN_OBSERVATIONS:
        return None
    return fit_envelope(obs.sizes, obs.seconds, obs.pairs)



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

def _rejected(fit: NetworkFit, observations: int, reason: str,
              links: dict | None, classes: dict | None,
              network: tuple[float, float] | None) -> FitOutcome:
    """The outcome where the trace's fit ``fit`` is not used for ``reason``: the
    platform network model ``network`` stands in (over the same observed sizes),
    else nothing (the lower bound, and the reason says why)."""
    stand_in = None
    if network is not None:
        stand_in = NetworkFit(network[0], network[1], observations, 0.0, fit.size_min,
                              fit.size_max, fit.distinct_sizes, "platform")
    why = None if stand_in else f"fitted model rejected: {reason}"
    return FitOutcome(stand_in, observations, why, links, reason, classes, fit)


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
    return _rejected(outcome.fit, outcome.observations, reason, outcome.links,
                     outcome.size_classes, network)


def try_fit(trace: Trace, matching: Matching, platform: Platform) -> FitOutcome:
    """Observe the transfers of ``trace`` and fit them; say why if that is not possible."""
    obs = observe_transfers(trace, matching, platform)
    return outcome_of(obs, platform.network)


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


def outcome_of(obs: Observations,
               network: tuple[float, float] | None = None) -> FitOutcome:
    """Fit observed transfers; say why if that is not possible (too few). With a
    platform network model ``network`` the fit is combined with it
    (:func:`with_platform`) and there is always one."""
    fit = fit_observations(obs)
    classes = size_classes(obs.sizes)
    if network is not None:
        fit = with_platform(obs, fit, network)
    rejected = implausible(fit) if fit is not None else None
    if rejected is not None:
        return _rejected(fit, len(obs), rejected, obs.links, classes, network)
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
