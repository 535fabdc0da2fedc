"""The handler table: one row per dependency kind, one module per kind.

Like Scalasca's replay, which registers one callback per kind of communication,
the engine does not know the kinds it times: it asks this table. A row maps what
matching found (:mod:`compensate.matching`) to the module that builds the rules of
the dependent records (:mod:`compensate.engine.rules`); the module's docstring
says which records depend on which and cites the rule of docs/design.md §3. A new
kind of communication or synchronisation (threads, accelerators, RMA, partitioned
messages) is a new matcher in :mod:`compensate.matching`, a new module here and a
new row below, plus its invariant in :mod:`compensate.verify` and its entry in the
registry of families, :mod:`compensate.families`, which names each family's rows
here (and imports this table, so the table cannot be built from it).

* :data:`MESSAGE_KINDS`: matched point-to-point messages (rows of
  :class:`~compensate.matching.MessageTable`), by protocol.
* :data:`COLLECTIVE_KINDS`: collective instances, by class (the operation table
  :data:`compensate.matching.COLLECTIVE_CLASSES`) and whether they are nonblocking.
* :data:`SYNC_KINDS`: other families of dependencies, one builder each over what
  its matcher found (thread synchronisation: :mod:`compensate.matching.threads`;
  accelerators: :mod:`compensate.matching.devices`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compensate.engine.graph import Graph
from compensate.engine.kinds import (
    devices,
    handles,
    nonblocking,
    nton,
    ntoone,
    oneton,
    p2p,
    partitioned,
    rma,
    scan,
    synchronous,
    threads,
)
from compensate.matching import Instance, Matching, MessageTable
from compensate.matching.collectives import (
    CREATE,
    EXSCAN,
    FREE,
    N_TO_N,
    N_TO_ONE,
    ONE_TO_N,
    SCAN,
)

#: (graph, instance, location positions of its members, rules) -> None
CollectiveBuilder = Callable[[Graph, Instance, list[int], dict], None]


@dataclass(frozen=True)
class MessageKind:
    """How one kind of message is timed: ``selects`` marks its rows of the message
    table, ``targets`` gives the records its rules apply to (to find records that
    several message rules apply to), ``build`` adds the rules."""

    selects: Callable[[MessageTable], np.ndarray]
    targets: Callable[[Graph, MessageTable, np.ndarray], np.ndarray]
    build: Callable[[Graph, MessageTable, np.ndarray, np.ndarray, dict], None]


MESSAGE_KINDS: dict[str, MessageKind] = {
    "eager": MessageKind(lambda t: ~t.synchronous, p2p.targets, p2p.build),
    "synchronous": MessageKind(lambda t: t.synchronous, synchronous.targets, synchronous.build),
}

#: (collective class, nonblocking) -> rule builder.
COLLECTIVE_KINDS: dict[tuple[str, bool], CollectiveBuilder] = {
    (N_TO_N, False): nton.build,
    (ONE_TO_N, False): oneton.build,
    (N_TO_ONE, False): ntoone.build,
    (SCAN, False): scan.build,
    (EXSCAN, False): scan.build,
    (CREATE, False): handles.build,
    (FREE, False): handles.build,
    (N_TO_N, True): nonblocking.build_nton,
    (ONE_TO_N, True): nonblocking.build_one_to_n,
    (N_TO_ONE, True): nonblocking.build_n_to_one,
    (SCAN, True): nonblocking.build_other,
    (EXSCAN, True): nonblocking.build_other,
    (CREATE, True): handles.build_nonblocking,
    (FREE, True): handles.build_nonblocking,
}

#: family -> (what matching found for it, rule builder); applied after the collectives.
SYNC_KINDS: dict[str, tuple[Callable[[Matching], object], Callable]] = {
    "threads": (lambda m: m.threads, threads.build_all),
    "devices": (lambda m: m.devices, devices.build_all),
    "partitioned": (lambda m: m.partitioned, partitioned.build_all),
    "rma": (lambda m: m.rma, rma.build_all),
}


def rules_of(graph: Graph, matching: Matching) -> dict[tuple[int, int], list]:
    """Every dependent record's pending rules, ``{(location position, record):
    [Pending, ...]}``, from the handler of its kind. Messages first; a collective's
    rules replace any message rule on the same record. With ghost locations (a rank
    of the distributed run) the message and collective handlers build and count
    only the rules of records the graph evaluates
    (:meth:`~compensate.engine.graph.Graph.evaluated`): each rank its share, not
    every rank every rule; :meth:`~compensate.engine.graph.Graph.own_rules` drops
    what the other families' handlers built for ghosts."""
    t = matching.table
    dep_rules: dict[tuple[int, int], list] = {}
    keep = t.send_li != t.recv_li  # a message to self is ordered by its own location
    rows = {name: np.flatnonzero(keep & kind.selects(t)) for name, kind in MESSAGE_KINDS.items()}
    # a record that two message rules apply to (e.g. two synchronous sends closed by
    # one Leave) takes the generic path, where the later value wins
    targets = [kind.targets(graph, t, rows[name]) for name, kind in MESSAGE_KINDS.items()]
    allt = np.concatenate(targets) if targets else np.zeros((0, 2), np.int64)
    g_all = graph.off[allt[:, 0]] + allt[:, 1] if len(allt) else np.zeros(0, np.int64)
    uniq, counts = np.unique(g_all, return_counts=True)
    shared = uniq[counts > 1]
    for name, kind in MESSAGE_KINDS.items():
        kind.build(graph, t, rows[name], shared, dep_rules)
    syncs = nton.sync_table(graph, matching.instances)
    for n, inst in enumerate(matching.instances):
        lis = [graph.pos_of[loc] for loc in inst.locs]
        if n in syncs:  # (blocking n-to-n, their sync times computed together)
            nton.build(graph, inst, lis, dep_rules, syncs[n])
        else:
            COLLECTIVE_KINDS[(inst.cls, inst.nonblocking)](graph, inst, lis, dep_rules)
        graph.stats.collective_instances += 1
    for found, build in SYNC_KINDS.values():
        build(graph, found(matching), dep_rules)
    return dep_rules
