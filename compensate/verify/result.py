"""What verification finds (docs/design.md R7): :class:`Verification`, the counts of
happened-before violations by dependency family, examples and the records carried as
local only, and how two partial findings combine.

Every field says in its metadata how two partial results of the same trace (two
stream segments, two ranks' parts) combine (``"combine"``: a function
``(total value, part value) -> combined value``, or None for a field that is not
combined), and a counter also says so (``"counter": True``). :data:`COUNTERS`,
:attr:`Verification.violations`, :meth:`Verification.to_dict` and
:meth:`Verification.add` read those instead of listing the counters by hand: a
family's new counter is one field here (which its entry in
:mod:`compensate.families` names), and cannot be left out of a sum (a streamed
run's sum once left out ``rma``, so an RMA violation ended in "verified").

Kept apart from :mod:`compensate.verify.checks` (which runs the invariants) so that
the invariant modules, which :mod:`compensate.families` imports, can import it
without importing the module that imports the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

#: how many examples a verification keeps
EXAMPLES = 10


def _sum(total: int, part: int) -> int:
    """A counter: violations of two parts add up."""
    return total + part


def _first_examples(total: list[str], part: list[str]) -> list[str]:
    """Examples: the part's after the total's, up to :data:`EXAMPLES` in all."""
    return total + part[:max(0, EXAMPLES - len(total))]


def _by_check(total: Verification, part: Verification) -> tuple[list[str], list[tuple]]:
    """The first :data:`EXAMPLES` examples of ``total`` and a later segment's
    ``part``, with their keys, each check's before the next check's, as one
    verification of the whole trace lists them (it runs the checks one after the
    other); within a check, ``total``'s first. Without a key for every example
    (not made by :func:`note`), the part's after the total's."""
    if len(total.keys) != len(total.examples) or len(part.keys) != len(part.examples):
        return _first_examples(total.examples, part.examples), total.keys
    found = sorted(
        ((key[0] if key else -1, n, i), x, key)
        for n, v in enumerate((total, part))
        for i, (x, key) in enumerate(zip(v.examples, v.keys, strict=True)))[:EXAMPLES]
    return [x for _, x, _ in found], [key for _, _, key in found]


def _sum_per_key(total: dict[str, int], part: dict[str, int]) -> dict[str, int]:
    """Records carried as local only: summed kind by kind."""
    out = dict(total)
    for key, n in part.items():
        out[key] = out.get(key, 0) + n
    return out


def _counter(what: str) -> Any:
    """A counted field: violations of one dependency family (``what`` they are)."""
    return field(default=0, metadata={"counter": True, "combine": _sum, "doc": what})


@dataclass
class Verification:
    """The findings of :func:`compensate.verify.verify` on one trace (or its part
    checked by one segment or rank). The counters (:data:`COUNTERS`) each belong to
    one family of :mod:`compensate.families`; their order is the summary's."""

    order: int = _counter("records earlier than their predecessor on the same location")
    messages: int = _counter("receives not strictly after their send")
    collectives: int = _counter("collective exits before an enter they depend on")
    threads: int = _counter("thread records not strictly after a record they wait for")
    devices: int = _counter("kernels not after their launch, synchronizes not after "
                            "the kernel")
    rma: int = _counter("fences, post/start/complete/wait, locks, transfers "
                        "(compensate.verify.rma)")
    metrics: int = _counter("METRIC samples outside their reference records "
                            "(needs measured)")
    partitioned: int = _counter("MPI-4 partitioned: Parrived/completions before a Pready")
    #: combined with ``keys`` (:func:`_by_check`)
    examples: list[str] = field(default_factory=list, metadata={"combine": None})
    #: records no dependency rule looked at, by kind (:mod:`compensate.verify.coverage`)
    carried_local_only: dict[str, int] = field(default_factory=dict,
                                               metadata={"combine": _sum_per_key})
    #: the locations whose dependent ends this verification checks (None: all); the
    #: distributed run's ranks each check their own (compensate/parallel/verification.py)
    own: set[int] | None = field(default=None, compare=False, repr=False,
                                 metadata={"combine": None})
    #: each example's place in the one-process order ((check, ...) tuples), by which
    #: the ranks' examples are merged (compensate.parallel.verification.merge, from
    #: each rank's own), and a segment's after the earlier ones' (:meth:`add`, with
    #: the examples)
    keys: list[tuple] = field(default_factory=list, compare=False, repr=False,
                              metadata={"combine": None})
    #: the number of the check running (the first element of its examples' keys)
    _check: int = field(default=0, compare=False, repr=False, metadata={"combine": None})

    def owns(self, loc: int) -> bool:
        """Whether the record of location ``loc`` at a dependency's dependent end is
        this verification's to check."""
        return self.own is None or loc in self.own

    @property
    def violations(self) -> int:
        """Every family's violations."""
        return sum(getattr(self, name) for name in COUNTERS)

    @property
    def ok(self) -> bool:
        return self.violations == 0

    @property
    def local_only_records(self) -> int:
        return sum(self.carried_local_only.values())

    def add(self, part: Verification) -> None:
        """Combine ``part`` (the findings of another segment of the same trace) into
        this one, field by field as each field's metadata says: counters summed,
        records carried as local only summed by kind; the first :data:`EXAMPLES`
        examples kept, each check's before the next check's (:func:`_by_check`);
        ``own`` and the running check are left as they are."""
        self.examples, self.keys = _by_check(self, part)
        for f in fields(self):
            how = f.metadata["combine"]
            if how is not None:
                setattr(self, f.name, how(getattr(self, f.name), getattr(part, f.name)))

    def to_dict(self) -> dict:
        """The summary's ``verification`` object (its keys in this order)."""
        return {"ok": self.ok, "violations": self.violations,
                **{name: getattr(self, name) for name in COUNTERS},
                "examples": self.examples[:EXAMPLES],
                "covers": COVERS,
                "carried_local_only": dict(sorted(self.carried_local_only.items())),
                "carried_local_only_records": self.local_only_records}


#: the counters of :class:`Verification`, in field order (the summary's order)
COUNTERS: tuple[str, ...] = tuple(f.name for f in fields(Verification)
                                  if f.metadata.get("counter"))


def combine(total: Verification, part: Verification) -> Verification:
    """``total`` with ``part`` added (:meth:`Verification.add`), for reducing a
    sequence of segments' findings."""
    total.add(part)
    return total


#: What "verified" checks (``Verification.to_dict()["covers"]``).
COVERS = ["per-location order", "point-to-point messages", "synchronous sends",
          "collectives", "nonblocking collectives",
          "thread fork/join, OpenMP barriers, locks and create/join",
          "OpenMP tasks: create before switch and complete, completes before the "
          "barrier or taskwait that waited for them",
          "kernel launch and synchronize on accelerator streams",
          "METRIC samples against their process",
          "MPI-4 partitioned Pready -> Parrived and completions",
          "MPI one-sided: fences, post/start/complete/wait, passive-target locks, transfers"]


def note(v: Verification, msg: str, key: tuple = ()) -> None:
    """Keep ``msg`` among the first :data:`EXAMPLES` examples; ``key``: its place in
    the running check's one-process order (the check's number is prefixed)."""
    if len(v.examples) < EXAMPLES:
        v.examples.append(msg)
        v.keys.append((v._check, *key))
