"""Totals of a run made of parts (segments, ranks): each result dataclass summed
over its own fields, so that a field added to :class:`compensate.engine.Stats` or
:class:`compensate.verify.Verification` is summed without anyone remembering to.

A field says how its parts combine in its ``metadata["combine"]`` (a function of
the two values, or None: not combined) or its ``metadata["total"]``: ``"sum"``,
``"max"``, ``"keyed"`` (per-key sums of a dict, nested dicts too), ``"first10"``
(a list of examples, the first ten kept), ``"derived"`` (recomputed by the
dataclass's ``derive()`` after the sum) or ``"none"`` (a part's own state, not
combined). Without it, numbers sum, dicts sum per key and lists keep their first
ten; any other field has no default and raises, so that a new kind of field must
say how it combines.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

#: the examples a total keeps (the summary shows ten)
EXAMPLES = 10


def add(total: Any, part: Any) -> None:
    """Add the result ``part`` into ``total`` (two instances of one dataclass)."""
    for f in fields(total):
        if "combine" in f.metadata:  # a function of (total's, part's) value, or None
            how = f.metadata["combine"]
            if how is not None:
                setattr(total, f.name, how(getattr(total, f.name), getattr(part, f.name)))
            continue
        rule = f.metadata.get("total") or _default(f.name, getattr(total, f.name))
        if rule in ("none", "derived"):
            continue
        mine, theirs = getattr(total, f.name), getattr(part, f.name)
        if rule == "sum":
            setattr(total, f.name, mine + theirs)
        elif rule == "max":
            setattr(total, f.name, max(mine, theirs))
        elif rule == "keyed":
            add_counts(mine, theirs)
        elif rule == "first10":
            mine += theirs[:max(0, EXAMPLES - len(mine))]
        else:
            raise ValueError(f"{type(total).__name__}.{f.name}: unknown total rule {rule!r}")
    derive = getattr(total, "derive", None)
    if derive is not None:
        derive()


def add_counts(total: dict, part: dict) -> None:
    """Add the counts of ``part`` into ``total`` key by key (nested dicts too)."""
    for key, value in part.items():
        if isinstance(value, dict):
            add_counts(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value


def span(span: tuple[int, int] | None, lo: int, hi: int) -> tuple[int, int]:
    """``span`` widened to take in ``lo`` .. ``hi``."""
    return (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))


def _default(name: str, value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError(f"field {name!r} (a flag) needs metadata['total']")
    if isinstance(value, (int, float)):
        return "sum"
    if isinstance(value, dict):
        return "keyed"
    if isinstance(value, list):
        return "first10"
    raise TypeError(f"field {name!r} ({type(value).__name__}) needs metadata['total']")
