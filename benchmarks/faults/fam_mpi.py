"""Family 9: ``mpiexec -n 2 python -m compensate`` undisturbed, with one rank killed
(SIGKILL) and with one rank stopped (SIGSTOP: a stalled job is a hang)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from . import damage
from .oracles import Outcome, judge, otf2_events, same_archive, snapshot
from .runner import Ctx, finish, run, start


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), ours: the job's ranks and proxies."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def ranks(pid: int) -> list[int]:
    """The job's rank processes: descendants running ``-m compensate``."""
    out = []
    for c in descendants(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"compensate" in cmd and b"-m" in cmd and b"mpiexec" not in cmd[0]:
            out.append(c)
    return out


def disturbed(ctx: Ctx, argv: list[str], sig: int | None, delay: float):
    """Start the job; after ``delay`` s send ``sig`` to its last rank; wait (timeout:
    kill the job's group and every process of it that left the group)."""
    t0 = time.monotonic()
    p = start(argv, ctx.env())
    seen: list[int] = []
    while sig is not None and p.poll() is None and time.monotonic() - t0 < delay:
        seen = descendants(p.pid) or seen
        time.sleep(0.02)
    rank_pids = ranks(p.pid)
    if sig is not None and rank_pids:
        os.kill(rank_pids[-1], sig)
    seen = list(set(seen) | set(descendants(p.pid)))
    timeout = ctx.timeout if sig != signal.SIGSTOP else min(ctx.timeout, 3 * RANK_TIMEOUT)
    proc = finish(p, argv, timeout, t0)
    for pid in seen:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.extra["signalled"] = bool(rank_pids)
    return proc


#: the job's deadline for a rank that does not answer (``--rank-timeout``): a stopped
#: rank must end the job within it, not hang it
RANK_TIMEOUT = 10


def mpi_family(ctx: Ctx) -> Iterator[Outcome]:
    """The undisturbed job, then one rank killed or stopped at random times."""
    exe = shutil.which("mpiexec")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        yield Outcome("mpi", "mpiexec", skipped="mpiexec or mpi4py not found")
        return
    rng = ctx.rng("mpi")
    src = damage.build_large(ctx)  # (long enough that the signal lands inside the run)
    ref_out = ctx.work / "mpi-ref" / "traces.otf2"
    run(ctx.compensate(src, ref_out, "--overhead", "100ns", "--quiet"), ctx.env(),
        ctx.timeout)
    ref = otf2_events(src)
    plan = [(None, 0.0)] + [(signal.SIGKILL if i % 3 != 2 else signal.SIGSTOP,
                             rng.uniform(0.5, 3.0)) for i in range(ctx.budget(3, 1))]
    for i, (sig, delay) in enumerate(plan):
        out = ctx.work / f"mpi-{i}" / "out" / "traces.otf2"
        out.parent.parent.mkdir(parents=True)
        argv = [exe, "-n", "2", *ctx.compensate(src, out, "--overhead", "100ns", "--quiet",
                                                "--rank-timeout", str(RANK_TIMEOUT))]
        snap = snapshot([src.parent], out)
        proc = disturbed(ctx, argv, sig, delay)
        what = "undisturbed" if sig is None else \
            f"{signal.Signals(sig).name} one rank at {delay:.2f} s"
        o = Outcome("mpi", f"{what} -> exit {proc.rc}")
        judge(o, snap, proc, ref=ref, names=[out.parent], expect="valid" if sig is None
              else "any", staging=sig is None, out_check=sig != signal.SIGKILL)
        if sig == signal.SIGKILL and out.parent.exists() and ref_out.exists() and \
                same_archive(out, ref_out):  # (killed after the commit: complete, or nothing)
            o.fail("partial-output", f"after SIGKILL OUT is incomplete: "
                                     f"{same_archive(out, ref_out)}")
        if proc.rc == 0 and ref_out.exists() and same_archive(out, ref_out):
            o.fail("exit0-wrong", f"differs from one process's output: "
                                  f"{same_archive(out, ref_out)}")
        yield o
