"""Totals of a run made of parts (segments, ranks): each result dataclass summed
over its own fields, so that a field added to :class:`compensate.engine.Stats` or
:class:`compensate.verify.Verification` is summed without anyone remembering to.

A field says how its parts combine in its ``metadata["combine"]``: a function of
the total's and the part's value, or None for a field that is a part's own state
(or derived afterwards by the dataclass's ``derive()``), the convention of
:mod:`compensate.verify.result`. Without it, numbers sum and dicts sum per key;
any other field has no default and raises, so that a new kind of field must say
how it combines.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def add(total: Any, part: Any) -> None:
    """Add the result ``part`` into ``total`` (two instances of one dataclass)."""
    for f in fields(total):
        mine, theirs = getattr(total, f.name), getattr(part, f.name)
        how = f.metadata["combine"] if "combine" in f.metadata else _default(f.name, mine)
        if how is not None:
            setattr(total, f.name, how(mine, theirs))
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


def _summed(total: Any, part: Any) -> Any:
    return total + part


def _keyed(total: dict, part: dict) -> dict:
    add_counts(total, part)
    return total


def _default(name: str, value: Any) -> Any:
    if isinstance(value, bool):
        raise TypeError(f"field {name!r} (a flag) needs metadata['combine']")
    if isinstance(value, (int, float)):
        return _summed
    if isinstance(value, dict):
        return _keyed
    raise TypeError(f"field {name!r} ({type(value).__name__}) needs metadata['combine']")
