"""Rules whose inputs are still record positions, turned into rules on anchors later.

:class:`compensate.engine.graph.Graph` creates the rules of collectives, synchronous sends
and generic receives before it knows the anchors (the segment starts depend on
every rule's record). These small holders keep (location position, record)
pairs and build the :mod:`compensate.engine.rules` objects once the anchors exist; the
``Shared*``/``PendingLatest`` holders build once and are shared by all member
rules of a collective instance.
"""

from __future__ import annotations

from compensate.engine.graph import Graph
from compensate.engine.rules import Latest, Need, RecvParams, Ref, Rule


class PendingRecv:
    """R2 inputs given by record positions; :meth:`build` turns them into
    :class:`~compensate.engine.rules.RecvParams` once anchors exist."""

    def __init__(self, *, send: tuple[int, int], enter: tuple[int, int] | None,
                 enter_const: float, cs: float, observed: float, overlapped: bool, extra: float,
                 has_prev: bool, size: int, recv: tuple[int, int], fitted: bool,
                 one_of_many: bool = False, lo: float | None = None) -> None:
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def build(self, graph: Graph) -> RecvParams:
        late = message_late = False
        # an n-to-1 root's wait shows only the last arrival: the other members' calls
        # may have overlapped the root's, but their transfers were not observed
        overlapped = self.overlapped and not self.one_of_many
        if self.fitted and self.recv[1] >= 0:
            late_party = graph.who_was_late(self.recv[0], self.recv[1], self.cs)
            if overlapped and late_party == "receiver":
                # the calls overlapped but the receiver, not the message, was late: the
                # interval holds the receiver's lateness, not the transfer (R2f uses the fit)
                overlapped, late = False, True
            elif not overlapped and late_party == "message" and not self.one_of_many:
                # the receive began after the send ended, yet the message arrived after
                # the receiver was ready: the transfer was observed after all (not for
                # one of an n-to-1 root's messages: its wait shows only the last one)
                overlapped = message_late = True
        return RecvParams(
            send=graph.ref(*self.send),
            enter=graph.ref(*self.enter) if self.enter is not None else None,
            enter_const=self.enter_const, cs=self.cs,
            lo=2.0 * self.cs if self.lo is None else self.lo, observed=self.observed,
            overlapped=overlapped, receiver_late=late, message_late=message_late, extra=self.extra,
            has_prev=self.has_prev, size=self.size)


class PendingLatest:
    """A :class:`~compensate.engine.rules.Latest` given by record positions (shared)."""

    def __init__(self, records: list[tuple[int, int]]) -> None:
        self.records = records
        self.built: Latest | None = None

    def build(self, graph: Graph) -> Latest:
        if self.built is None:
            self.built = Latest([graph.ref(li, i) for li, i in self.records])
        return self.built


class SharedNeeds:
    """One needs list (record positions) shared by every member rule of an instance."""

    def __init__(self, records: list[tuple[int, int]]) -> None:
        self.records = records
        self.built: list[Need] | None = None

    def build(self, graph: Graph) -> list[Need]:
        if self.built is None:
            self.built = [graph.need(li, i) for li, i in self.records]
        return self.built


class SharedRefs(SharedNeeds):
    """One list of references shared by every member rule of an instance."""

    def build(self, graph: Graph) -> list[Ref]:  # type: ignore[override]
        if self.built is None:
            self.built = [graph.ref(li, i) for li, i in self.records]
        return self.built


class Pending:
    """A rule whose record references are still (location position, record) pairs."""

    def __init__(self, cls: type[Rule], args: tuple,
                 needs: list[tuple[int, int]] | SharedNeeds) -> None:
        self.cls, self.args, self.needs = cls, args, needs

    def build(self, graph: Graph) -> Rule:
        args = [resolve(a, graph) for a in self.args]  # (a list: no generator per rule)
        needs = self.needs.build(graph) if isinstance(self.needs, SharedNeeds) else \
            [graph.need(li, i) for li, i in self.needs]
        return self.cls(*args, needs)


#: the holders :func:`resolve` builds
_HOLDERS = (PendingRecv, PendingLatest, SharedNeeds)


def resolve(arg: object, graph: Graph) -> object:
    if type(arg) is float:  # (the most common argument: a precomputed constant)
        return arg
    if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "ref":
        return graph.ref(arg[1], arg[2])
    if isinstance(arg, _HOLDERS):
        return arg.build(graph)
    if isinstance(arg, list):
        return [resolve(x, graph) for x in arg]
    return arg


def positions(pending: list[Pending], seen: set[int]) -> list[tuple[int, int]]:
    """Every (location position, record) that building ``pending`` will refer to
    (through :meth:`Graph.ref` or :meth:`Graph.need`): the same walk as
    :meth:`Pending.build` and :func:`resolve`, without building anything. Shared
    holders (``PendingLatest``, ``SharedNeeds``) are walked once: ``seen`` holds
    their ids across calls. The distributed run makes anchors of exactly these
    records of other ranks' locations (:meth:`Graph.set_rules`)."""
    out: list[tuple[int, int]] = []
    for p in pending:
        if not isinstance(p, Pending):
            raise TypeError(f"not a pending rule: {type(p).__name__}")
        for a in p.args:
            _walk(a, out, seen)
        if isinstance(p.needs, SharedNeeds):
            _walk(p.needs, out, seen)
        else:
            out.extend(p.needs)
    return out


def _walk(arg: object, out: list[tuple[int, int]], seen: set[int]) -> None:
    """:func:`resolve`'s walk, noting the positions instead of building."""
    if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "ref":
        out.append((arg[1], arg[2]))
    elif isinstance(arg, PendingRecv):
        out.append(arg.send)
        if arg.enter is not None:
            out.append(arg.enter)
    elif isinstance(arg, (PendingLatest, SharedNeeds)):
        if id(arg) not in seen:
            seen.add(id(arg))
            out.extend(arg.records)
    elif isinstance(arg, list):
        for x in arg:
            _walk(x, out, seen)
