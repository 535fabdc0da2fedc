"""Family 4: SIGKILL, SIGINT and SIGTERM at random times during a run on a larger
archive and right after the output appears, each followed by a second run to the
same OUT (which must clean what the first left)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from . import damage
from .oracles import Outcome, judge, same_archive, snapshot
from .runner import Ctx, Proc, finish, run, start

SIGNALS = (signal.SIGKILL, signal.SIGINT, signal.SIGTERM)


def reference(ctx: Ctx, anchor: Path) -> tuple[Path, float]:
    """The undisturbed output of the large input, and how long it took (seconds)."""
    out = ctx.work / "kills-ref" / "traces.otf2"
    t0 = time.monotonic()
    proc = run(args(ctx, anchor, out), ctx.env(), ctx.timeout)
    if proc.rc != 0:
        raise RuntimeError(f"the reference run failed: {proc.err.strip()[-200:]}")
    return out, time.monotonic() - t0


def args(ctx: Ctx, anchor: Path, out: Path, *flags: str) -> list[str]:
    return ctx.compensate(anchor, out, "--overhead", "100ns", "--quiet", *flags)


def signalled(ctx: Ctx, argv: list[str], sig: int, delay: float, after_out: Path | None
              ) -> Proc:
    """Start a run, send ``sig`` after ``delay`` s (counted from when ``after_out``
    appears, if given), and wait for its end."""
    t0 = time.monotonic()
    p = start(argv, ctx.env())
    if after_out is not None:
        while p.poll() is None and not after_out.exists() \
                and time.monotonic() - t0 < ctx.timeout:
            time.sleep(0.001)
    time.sleep(delay)
    try:
        os.kill(p.pid, sig)
    except ProcessLookupError:
        pass
    proc = finish(p, argv, ctx.timeout, t0)
    proc.extra["sent"] = time.monotonic() - t0
    return proc


def verdict(o: Outcome, proc: Proc, sig: int, out: Path, ref: Path) -> None:
    """What a signalled run must leave: nothing at OUT after 130/143 (or death by the
    signal), a complete output after exit 0, nothing or a complete one after SIGKILL."""
    there = out.parent.exists()
    diff = same_archive(out, ref) if there else ""
    if proc.rc == 0 and (not there or diff):
        o.fail("exit0-wrong", f"exit 0 but OUT {'absent' if not there else diff}")
    elif sig == signal.SIGKILL and there and diff:
        o.fail("partial-output", f"after SIGKILL OUT is incomplete: {diff}")
    elif sig != signal.SIGKILL and proc.rc not in (0, None) and there:
        o.fail("partial-output", f"exit {proc.rc} with "
               f"{'a complete' if not diff else 'an incomplete'} output at OUT")


def second_run(ctx: Ctx, o: Outcome, anchor: Path, out: Path, ref: Path) -> None:
    """Run again to the same OUT: it must succeed, be complete and leave nothing else."""
    force = ("--force",) if out.parent.exists() else ()
    snap = snapshot([anchor.parent], out)
    snap.beside = set()  # whatever the killed run left must be gone now
    proc = run(args(ctx, anchor, out, *force), ctx.env(), ctx.timeout)
    judge(o, snap, proc, compare=False, names=[out.parent], expect="valid")
    if proc.rc == 0 and same_archive(out, ref):
        o.fail("exit0-wrong", f"second run: exit 0 but {same_archive(out, ref)}")


def kills(ctx: Ctx) -> Iterator[Outcome]:
    """Signals at uniform random times over a run's length, then right after OUT
    appears (0-90 ms later); each followed by a second run."""
    rng = ctx.rng("kills")
    anchor = damage.build_large(ctx)
    ref, seconds = reference(ctx, anchor)
    n = ctx.budget(6, 3)
    after = ctx.budget(3, 2)
    for i in range(n + after):
        sig = SIGNALS[i % len(SIGNALS)]
        d = ctx.work / f"kills-{i}"
        d.mkdir()
        out = d / "out" / "traces.otf2"
        late = i >= n
        delay = rng.choice((0.0, 0.01, 0.05, 0.09)) if late else rng.uniform(0, seconds)
        snap = snapshot([anchor.parent], out)
        proc = signalled(ctx, args(ctx, anchor, out), sig, delay, out if late else None)
        when = f"{delay * 1000:.0f} ms after OUT appeared" if late else f"at {delay:.2f} s"
        o = Outcome("kills", f"{signal.Signals(sig).name} {when} -> exit {proc.rc}")
        judge(o, snap, proc, compare=False, names=[out.parent],
              staging=sig != signal.SIGKILL, out_check=False)
        if sig == signal.SIGKILL and proc.rc == -signal.SIGKILL:
            o.notes.pop("bad-status", None)
        verdict(o, proc, sig, out, ref)
        second_run(ctx, o, anchor, out, ref)
        yield o
