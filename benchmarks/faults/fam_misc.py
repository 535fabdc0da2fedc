"""Families 5-8: resource limits, concurrent writers, fuzzed platform files and
options, a failing stdout. (Family 9, MPI, is in fam_mpi.)"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

from . import damage
from .fam_fs import fsize_limit, one
from .oracles import Outcome, judge, otf2_events, same_archive, snapshot
from .runner import Ctx, finish, run, start


def rlimit(kind: int, soft: int):
    """A preexec_fn setting the soft limit ``kind`` (the hard one stays)."""
    def apply() -> None:
        hard = resource.getrlimit(kind)[1]
        resource.setrlimit(kind, (soft, hard if soft <= hard or hard < 0 else soft))
    return apply


def limits(ctx: Ctx) -> Iterator[Outcome]:
    """fd limits below the archive's location count, memory and file-size limits."""
    modes = (("streamed", (), {}), ("in-memory", ("--in-memory",), {}),
             ("native=0", (), {"COMPENSATE_NATIVE": "0"}))
    d = ctx.work / "limits"
    many = damage.build_many_locations(ctx, 100)
    for i, (mode, flags, env) in enumerate(modes[: ctx.budget(3, 1)]):
        yield tag(one(ctx, f"100 locations, fd soft limit 64 [{mode}]", many,
                      d / f"fd{i}" / "traces.otf2", flags, env, expect="valid",
                      preexec=rlimit(resource.RLIMIT_NOFILE, 64)))
    if not ctx.quick:
        big = damage.build_many_locations(ctx, 1100)
        yield tag(one(ctx, "1100 locations, fd soft limit 1024", big,
                      d / "fd1024" / "traces.otf2", expect="valid",
                      preexec=rlimit(resource.RLIMIT_NOFILE, 1024)))
    large = damage.build_large(ctx)
    for mb, flags in ((600, ()), (400, ("--in-memory",)))[: ctx.budget(2, 1)]:
        yield tag(one(ctx, f"2e5 records, address space {mb} MiB {' '.join(flags)}",
                      large, d / f"as{mb}{len(flags)}" / "traces.otf2", flags,
                      preexec=rlimit(resource.RLIMIT_AS, mb << 20)))
    yield tag(one(ctx, "2e5 records, file-size limit 1 MB", large,
                  d / "fsize" / "traces.otf2", preexec=fsize_limit(1 << 20)))


def tag(o: Outcome, family: str = "limits") -> Outcome:
    o.family = family
    return o


def concurrency(ctx: Ctx) -> Iterator[Outcome]:
    """2-6 writers started together to one OUT, each with its own overhead (so their
    outputs differ), with and without --force. The final OUT must be one writer's
    reference output (computed alone) and that writer must have exited 0; without
    --force at most one writer may exit 0."""
    src = damage.MONTECARLO
    refs = {}
    for k in range(1, 7):
        refs[k] = ctx.work / "conc-ref" / str(k) / "traces.otf2"
        run(ctx.compensate(src, refs[k], "--overhead", f"{k}00ns", "--quiet"), ctx.env(),
            ctx.timeout)
    shapes = [(w, force) for w in (2, 4, 6) for force in (False, True)]
    for r in range(ctx.budget(6, 2)):
        writers, force = shapes[r % len(shapes)]
        out = ctx.work / f"conc-{r}" / "out" / "traces.otf2"
        out.parent.parent.mkdir(parents=True)
        o = Outcome("concurrency", f"{writers} writers {'--force' if force else ''}")
        rcs = race(ctx, o, src, out, writers, force)
        o.case += f" -> exits {rcs}"
        check_race(o, out, refs, rcs, force)
        yield o


def race(ctx: Ctx, o: Outcome, src: Path, out: Path, writers: int, force: bool) -> list:
    """Start the writers together and wait for all; their exit statuses."""
    snap = snapshot([src.parent], out)
    extra = ("--force",) if force else ()
    argvs = [ctx.compensate(src, out, "--overhead", f"{k}00ns", "--quiet", *extra)
             for k in range(1, writers + 1)]
    t0 = time.monotonic()
    procs = [start(a, ctx.env()) for a in argvs]
    done = [finish(p, a, ctx.timeout, t0) for p, a in zip(procs, argvs, strict=True)]
    for proc in done:
        judge(o, snap, proc, compare=False, names=[out.parent], out_check=False)
    return [p.rc for p in done]


def check_race(o: Outcome, out: Path, refs: dict, rcs: list, force: bool) -> None:
    """The final OUT is one writer's whole output, and that writer said so."""
    winners = [k for k, rc in enumerate(rcs, 1) if rc == 0]
    if not out.parent.exists():
        if winners:
            o.fail("exit0-wrong", f"writer(s) {winners} exit 0 but no OUT")
        return
    match = [k for k in refs if k <= len(rcs) and not same_archive(out, refs[k])]
    if not match:
        diffs = {k: same_archive(out, refs[k])[:60] for k in range(1, len(rcs) + 1)}
        o.fail("partial-output", f"OUT is no single writer's output: {diffs}")
    elif match[0] not in winners:
        o.fail("partial-output", f"OUT is writer {match[0]}'s, which exited {rcs[match[0]-1]}")
    if not force and len(winners) > 1:
        o.fail("exit0-wrong", f"without --force writers {winners} all exit 0: "
                              "all but one output silently replaced")


PLATFORMS = [
    ("1e300 overhead", {"event_overhead": 1e300, "copy_time": []}, "any"),
    ("negative overhead", {"event_overhead": -1e-6, "copy_time": []}, "invalid"),
    ("NaN as text", '{"event_overhead": NaN, "copy_time": []}', "invalid"),
    ("Infinity as text", '{"event_overhead": Infinity, "copy_time": []}', "invalid"),
    ("string overhead", {"event_overhead": "1us", "copy_time": []}, "invalid"),
    ("list overhead", {"event_overhead": [1e-6], "copy_time": []}, "invalid"),
    ("1e300 copy cost", {"event_overhead": 1e-7,
                         "copy_time": [{"bytes": 8, "seconds": 1e300}]}, "any"),
    ("negative bytes", {"event_overhead": 1e-7,
                        "copy_time": [{"bytes": -8, "seconds": 1e-8}]}, "invalid"),
    ("copy_time not a list", {"event_overhead": 1e-7, "copy_time": 5}, "invalid"),
    ("100000-deep JSON", "[" * 100000 + "]" * 100000, "invalid"),
    ("empty file", "", "invalid"),
    ("non-UTF-8", b'{"event_overhead": 1e-7, "\xff": 1}', "invalid"),
    ("top-level list", [1, 2, 3], "invalid"),
]
OPTIONS = [
    ("--segment-records 0", ("--segment-records", "0"), "invalid"),
    ("--segment-records -5", ("--segment-records", "-5"), "invalid"),
    ("--segment-records 1", ("--segment-records", "1"), "valid"),
    ("--eager-limit -1", ("--eager-limit", "-1"), "invalid"),
    ("--eager-limit 0", ("--eager-limit", "0"), "valid"),
    ("--overhead -1ns", ("--overhead", "-1ns"), "invalid"),
    ("--overhead nan", ("--overhead", "nan"), "invalid"),
    ("--overhead 1e300", ("--overhead", "1e300"), "any"),
    ("--max-overcompensated -1", ("--max-overcompensated", "-1"), "invalid"),
    ("--max-overcompensated 101%", ("--max-overcompensated", "101%"), "invalid"),
]


def random_platform(rng) -> object:
    """A random platform document: numbers of every size and sign, wrong types."""
    value = lambda: rng.choice((rng.uniform(-1, 1), 10.0 ** rng.randint(-30, 300),  # noqa: E731
                                rng.randint(-5, 5), "x", None, [], {}, True))
    doc = {"event_overhead": value(),
           "copy_time": [{"bytes": value(), "seconds": value()}
                         for _ in range(rng.randint(0, 3))]}
    if rng.random() < 0.5:
        doc["event_overhead_by_kind"] = {rng.choice(("Enter", "MpiSend", "X")): value()}
    if rng.random() < 0.3:
        doc["network"] = {"latency": value(), "per_byte": value()}
    return doc


def platform(ctx: Ctx) -> Iterator[Outcome]:
    """Fuzzed platform files (fixed and random; a FIFO and /dev/zero as the path)
    and fuzzed option values, on the montecarlo example."""
    rng = ctx.rng("platform")
    d = ctx.work / "platform"
    d.mkdir()
    ref = otf2_events(damage.MONTECARLO)
    cases = list(PLATFORMS) + [(f"random {i}", random_platform(rng), "any")
                               for i in range(ctx.budget(6, 2))]
    if ctx.quick:
        cases = cases[:2] + cases[-2:]
    for i, (what, doc, expect) in enumerate(cases):
        path = d / f"p{i}.json"
        data = doc if isinstance(doc, str | bytes) else json.dumps(doc)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        yield fuzz_run(ctx, f"platform {what}", ("--platform", path), ref, expect, d / f"o{i}")
    fifo = d / "fifo.json"
    os.mkfifo(fifo)
    for what, path in (("a FIFO", fifo), ("/dev/zero", Path("/dev/zero"))):
        yield fuzz_run(ctx, f"platform path {what}", ("--platform", path), ref, "invalid",
                       d / f"o-{path.name}", timeout=min(ctx.timeout, 20))
    for i, (what, flags, expect) in enumerate(OPTIONS[: 3 if ctx.quick else None]):
        yield fuzz_run(ctx, what, flags, ref, expect, d / f"opt{i}")


def fuzz_run(ctx: Ctx, what: str, flags, ref, expect: str, d: Path,
             timeout: float | None = None) -> Outcome:
    """One run of the montecarlo example with ``flags`` (the platform or an option),
    under a 2 GiB address-space limit (a run that reads /dev/zero must not take the
    machine's memory) and a shorter timeout where a hang is likely."""
    out = d / "traces.otf2"
    d.parent.mkdir(exist_ok=True)
    over = () if "--overhead" in flags or "--platform" in flags else ("--overhead", "100ns")
    plat = ("--overhead", "platform") if "--platform" in flags else ()
    snap = snapshot([damage.MONTECARLO.parent], out)
    proc = run(ctx.compensate(damage.MONTECARLO, out, "--quiet", *over, *plat,
                              *map(str, flags)), ctx.env(), timeout or ctx.timeout,
               preexec=rlimit(resource.RLIMIT_AS, 2 << 30))
    names = [d.parent, damage.MONTECARLO.parent, *(f for f in flags if isinstance(f, Path))]
    return judge(Outcome("platform", what), snap, proc, ref=ref, names=names, expect=expect)


def stdout(ctx: Ctx) -> Iterator[Outcome]:
    """stdout to /dev/full and to a pipe whose reader is gone: if OUT is complete the
    run must not report failure without saying so."""
    ref = otf2_events(damage.MONTECARLO)
    for i, how in enumerate(("/dev/full", "closed pipe")[: ctx.budget(2, 2)]):
        for quiet in ((), ("--quiet",)):
            out = ctx.work / f"stdout-{i}{len(quiet)}" / "traces.otf2"
            out.parent.parent.mkdir(parents=True, exist_ok=True)
            snap = snapshot([damage.MONTECARLO.parent], out)
            argv = ctx.compensate(damage.MONTECARLO, out, "--overhead", "100ns", *quiet)
            proc = to_stdout(ctx, argv, how)
            o = Outcome("stdout", f"stdout to {how} {' '.join(quiet)} -> exit {proc.rc}")
            judge(o, snap, proc, ref=ref, names=[out.parent], out_check=False)
            if proc.rc not in (0, None) and out.parent.exists() and \
                    "complete" not in proc.err:
                o.fail("partial-output", f"exit {proc.rc} with the output at OUT, and the "
                                         f"message does not say it is complete")
            yield o


def to_stdout(ctx: Ctx, argv: list[str], how: str):
    """Run with stdout sent to /dev/full or to a pipe with no reader."""
    t0 = time.monotonic()
    if how == "/dev/full":
        with open("/dev/full", "wb") as full:
            return finish(start(argv, ctx.env(), stdout=full), argv, ctx.timeout, t0)
    r, w = os.pipe()
    os.close(r)
    try:
        return finish(start(argv, ctx.env(), stdout=w), argv, ctx.timeout, t0)
    finally:
        os.close(w)


def mpi(ctx: Ctx) -> Iterator[Outcome]:
    from .fam_mpi import mpi_family
    yield from mpi_family(ctx)

