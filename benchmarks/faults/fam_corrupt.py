"""Families 1 and 2: damaged OTF2 archives and damaged ``.trace`` files."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from . import damage
from .oracles import Outcome, declared_events, judge, otf2_events, snapshot, text_records
from .runner import Ctx, run

OTF2_MODES = (("streamed", (), {}), ("in-memory", ("--in-memory",), {}),
              ("native=0", (), {"COMPENSATE_NATIVE": "0"}))
TEXT_MODES = (("streamed", ()), ("in-memory", ("--in-memory",)))


def tidy(ctx: Ctx, o: Outcome, path) -> Outcome:
    """Remove a case's directory unless it failed (kept for a look) or --keep."""
    if not o.failures and not ctx.verbose:
        shutil.rmtree(path, ignore_errors=True)
    return o


def corrupt_otf2(ctx: Ctx) -> Iterator[Outcome]:
    """Copies of the bundled archives, each damaged once: by default each kind of
    damage on each input once (files and offsets at random), the reading mode
    changing every len(kinds) runs; first one undamaged control run per input (a
    check of the oracles)."""
    rng = ctx.rng("corrupt-otf2")
    inputs = damage.OTF2_INPUTS
    kinds = damage.ARCHIVE_DAMAGE
    n = ctx.budget(len(kinds) * len(inputs), 3)
    for i in range(-len(inputs), n):
        src = inputs[i % len(inputs)]
        mode, flags, env = OTF2_MODES[max(i, 0) // len(kinds) % len(OTF2_MODES)]
        d = ctx.work / f"corrupt-otf2-{i + len(inputs)}"
        anchor = damage.copy_archive(src, d / "in")
        what = "control" if i < 0 else damage.damage_archive(rng, anchor, kinds[i % len(kinds)])
        ref, declared = otf2_events(anchor), declared_events(anchor)
        out = d / "out" / "traces.otf2"
        snap = snapshot([anchor.parent], out)
        proc = run(ctx.compensate(anchor, out, "--overhead", "100ns", "--quiet", *flags),
                   ctx.env(**env), ctx.timeout)
        o = Outcome("corrupt-otf2", f"{src.parent.name} [{mode}] {what}")
        yield tidy(ctx, judge(o, snap, proc, ref=ref, names=[d], declared=declared), d)


def corrupt_text(ctx: Ctx) -> Iterator[Outcome]:
    """tests/cases/*.trace damaged once each (bytes, non-UTF-8, huge numbers), streamed
    and in memory, written as .trace; the first two runs are undamaged controls."""
    rng = ctx.rng("corrupt-text")
    cases = sorted(damage.CASES.glob("*.trace"))
    n = ctx.budget(21, 3)
    for i in range(n + 2):
        src = rng.choice(cases)
        mode, flags = TEXT_MODES[i % len(TEXT_MODES)]
        d = ctx.work / f"corrupt-text-{i}"
        d.mkdir(parents=True)
        inp = d / src.name
        shutil.copy2(src, inp)
        what = "control" if i < 2 else rng.choice(damage.TEXT_OPS)(rng, inp)
        ref = text_records(inp)
        out = d / "out.trace"
        snap = snapshot([inp], out)
        proc = run(ctx.compensate(inp, out, "--overhead", "100ns", "--quiet", *flags),
                   ctx.env(), ctx.timeout)
        o = Outcome("corrupt-text", f"{src.name} [{mode}] {what}")
        yield tidy(ctx, judge(o, snap, proc, ref=ref, names=[d]), d)
