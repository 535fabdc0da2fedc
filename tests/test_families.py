"""The registry of dependency families (compensate/families.py): every family has
every part (its own, shared with a named family that has it, or absent with a
reason), and the hand-kept tables it cannot build agree with it: the matchers, the
engine's handler table, the verifier's counters, the stream cutter's kinds."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

import compensate.engine.kinds as kinds
from compensate import families
from compensate.families import (
    BY_NAME,
    CHECKS,
    FAMILIES,
    MEASURED_CHECKS,
    PARTS,
    Absent,
    Cut,
    Family,
    Rows,
    Shared,
    cut_kinds,
)
from compensate.matching.match import MATCHERS
from compensate.model import KIND_CODE
from compensate.verify.result import COUNTERS

ROOT = Path(__file__).resolve().parent.parent
#: the tables of the engine's handler table that the families' rows name
ENGINE_TABLES = ("MESSAGE_KINDS", "COLLECTIVE_KINDS", "SYNC_KINDS")


def holder(family: Family, part: str) -> Family:
    """The family that holds ``part`` for ``family``: itself, or the one its
    :class:`Shared` part names (an :class:`Absent` part is its own)."""
    value = getattr(family, part)
    return BY_NAME[value.family] if isinstance(value, Shared) else family


def _row_builders(rows: Rows) -> list:
    """The builder functions of ``rows``' rows of the engine's table."""
    table = getattr(kinds, rows.table)
    out = []
    for key in table if rows.keys is None else rows.keys:
        row = table[key]
        out.append(row.build if hasattr(row, "build") else row[-1] if isinstance(row, tuple)
                   else row)
    return out


def _own_part_problems(family: Family, part: str, value: object) -> list[str]:
    """What is wrong with ``family``'s own ``part``."""
    where = f"{family.name}.{part}"
    if part == "matcher" and value not in MATCHERS:
        return [f"{where}: not a step of compensate.matching.match.MATCHERS"]
    if part in ("check", "reads") and not callable(value):
        return [f"{where}: not a function"]
    if part == "counter" and value not in COUNTERS:
        return [f"{where}: Verification has no counter {value!r}"]
    if part == "rules":
        if not isinstance(value, Rows) or value.table not in ENGINE_TABLES:
            return [f"{where}: not rows of a table of compensate.engine.kinds"]
        table = getattr(kinds, value.table)
        missing = [k for k in value.keys or () if k not in table]
        if missing:
            return [f"{where}: no rows {missing} in {value.table}"]
        names = {m.__name__ for m in value.modules}
        if not all(isinstance(m, ModuleType) for m in value.modules) or any(
                b.__module__ not in names for b in _row_builders(value)):
            return [f"{where}: a row's builder is not in the family's modules"]
    if part == "cut":
        if not isinstance(value, Cut):
            return [f"{where}: not a Cut"]
        unknown = [k for k in value.opens + value.closes if k not in KIND_CODE]
        if unknown or not (value.opens or value.beyond):
            return [f"{where}: unknown kinds {unknown} or nothing said"]
    return []


def problems(family: Family) -> list[str]:
    """Every part ``family`` lacks or names wrongly."""
    out = []
    for part in PARTS:
        value = getattr(family, part, None)
        where = f"{family.name}.{part}"
        if value is None:
            out.append(f"{where}: missing (own, Shared or Absent)")
        elif isinstance(value, Absent):
            if part == "counter":
                out.append(f"{where}: every family counts its violations somewhere")
            if not value.why:
                out.append(f"{where}: absent without a reason")
        elif isinstance(value, Shared):
            other = BY_NAME.get(value.family)
            if other is None or other is family or not value.why:
                out.append(f"{where}: shared with no other family, or without a reason")
            elif isinstance(getattr(other, part), Shared | Absent):
                out.append(f"{where}: shared with {other.name}, which does not have it")
        else:
            out += _own_part_problems(family, part, value)
    return out


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_family_has_every_part(family):
    assert problems(family) == []
    assert family.what and family.name == family.name.lower()


def test_a_family_lacking_a_part_is_found():
    thread = BY_NAME["thread"]
    assert problems(replace(thread, matcher=None)) == [
        "thread.matcher: missing (own, Shared or Absent)"]
    assert problems(replace(thread, counter="locks")) == [
        "thread.counter: Verification has no counter 'locks'"]
    assert problems(replace(thread, cut=Cut(opens=("ThreadFrok",)))) != []
    assert problems(replace(thread, rules=Rows("SYNC_KINDS", ("thread",), ()))) != []
    assert problems(replace(thread, reads=Shared("lock", "x"))) != []  # lock has none
    assert problems(replace(thread, check=Absent(""))) != []


def test_the_families():
    assert [f.name for f in FAMILIES] == [
        "order", "message", "probe", "collective", "thread", "lock", "device", "task",
        "partitioned", "rma", "metric"]
    assert len(BY_NAME) == len(FAMILIES)


def test_every_counter_belongs_to_exactly_one_family():
    named = [f.counter for f in FAMILIES if isinstance(f.counter, str)]
    assert sorted(named) == sorted(COUNTERS)


def test_every_check_comes_from_a_family():
    own = [f.check for f in FAMILIES if not isinstance(f.check, Shared | Absent)]
    assert len(set(own)) == len(own)
    assert sorted(map(id, CHECKS + MEASURED_CHECKS)) == sorted(map(id, own))
    assert MEASURED_CHECKS == (BY_NAME["metric"].check,)


@pytest.mark.parametrize("family", [f for f in FAMILIES
                                    if not isinstance(f.check, Shared | Absent)],
                         ids=lambda f: f.name)
def test_a_check_adds_to_its_familys_counter(family):
    """The module of a family's invariant adds to the counter the registry says (its
    own, or the one it shares) and to no other."""
    source = inspect.getsource(inspect.getmodule(family.check))
    added = set(re.findall(r"\bv\.(\w+) \+=", source))
    assert added == {holder(family, "counter").counter}


def test_matchers_are_the_registrys():
    """compensate.matching.match keeps MATCHERS (the registry imports its steps):
    the same steps, in the families' order."""
    assert MATCHERS == families.MATCHERS


@pytest.mark.parametrize("table", ENGINE_TABLES)
def test_every_engine_row_belongs_to_one_family(table):
    claims: dict = {}
    for f in FAMILIES:
        if isinstance(f.rules, Rows) and f.rules.table == table:
            for key in getattr(kinds, table) if f.rules.keys is None else f.rules.keys:
                claims.setdefault(key, []).append(f.name)
    assert set(claims) == set(getattr(kinds, table))
    assert all(len(names) == 1 for names in claims.values()), claims


def test_cut_kinds():
    opens, closes = cut_kinds()
    assert {KIND_CODE["MpiSend"], KIND_CODE["MpiCollectiveBegin"],
            KIND_CODE["MpiPsendInit"]} <= set(opens)
    assert closes.count(KIND_CODE["MpiMrecv"]) == 2  # the probe's span and the message's
    opens, closes = cut_kinds(in_flight=False)
    assert KIND_CODE["MpiSend"] not in opens and closes.count(KIND_CODE["MpiMrecv"]) == 1


def test_cut_kinds_are_the_cutters():
    """The cutter's open/close tables are the families' besides messages, probes and
    MPI collectives (which the cutter's busy function, Cutter.feed, counts itself)."""
    from compensate.pipeline import cuts as stream
    apart = {"message", "probe", "collective"}
    cuts = [f.cut for f in FAMILIES if isinstance(f.cut, Cut) and f.name not in apart]
    assert {KIND_CODE[k] for c in cuts for k in c.opens} == \
        set(stream._OPENS.nonzero()[0].tolist())
    assert {KIND_CODE[k] for c in cuts for k in c.closes} == \
        set(stream._CLOSES.nonzero()[0].tolist())


@pytest.mark.parametrize("first", ["compensate.families", "compensate.verify",
                                   "compensate.matching", "compensate.engine.kinds",
                                   "compensate.parallel.verification"])
def test_imports_in_any_order(first):
    """The registry imports matching, the engine's handler table and the invariants;
    none of them imports it with itself (verify() does when it runs), so a fresh
    interpreter can import any of them first."""
    code = f"import {first}; import compensate.families; import compensate.verify"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
