"""Family 3: hostile filesystems (read-only, full, a file-size limit, OUT an alias of
IN through a bind mount or a symlink, OUT inside IN's archive, a 255-byte name)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from . import damage
from .oracles import Outcome, judge, otf2_events, snapshot, text_records
from .runner import Ctx, run


def mount(*args: str) -> str:
    """Run ``mount ARGS``; '' if it worked, else the reason it was refused."""
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    return "" if r.returncode == 0 else (r.stderr.strip() or f"mount exit {r.returncode}")


def unmount_all(work: Path) -> None:
    """Unmount every mount under ``work`` (deepest first), ours from this campaign."""
    try:
        points = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for p in sorted((p for p in points if p.startswith(str(work))), reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def fsize_limit(limit: int):
    """A preexec_fn that caps the size of any file the run writes (RLIMIT_FSIZE)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def text_input(ctx: Ctx) -> Path:
    """The montecarlo example as a .trace file (~5,000 records; built once)."""
    path = ctx.cache / "montecarlo.trace"
    if not path.exists():
        tmp = ctx.cache / "montecarlo.tmp.trace"
        subprocess.run([sys.executable, "-m", "compensate", str(damage.MONTECARLO),
                        str(tmp), "--bound", "none", "--overhead", "0", "--quiet",
                        "--force"], env=ctx.env(), cwd=ctx.tree, check=True, capture_output=True)
        tmp.rename(path)
    return path


def one(ctx: Ctx, case: str, inp: Path, out: Path, flags=(), env=None, expect="any",
        preexec=None, inputs=None) -> Outcome:
    """Run ``compensate INP OUT FLAGS`` once and judge it."""
    ref = otf2_events(inp) if inp.suffix == ".otf2" else text_records(inp)
    snap = snapshot(inputs or [inp.parent if inp.suffix == ".otf2" else inp], out)
    proc = run(ctx.compensate(inp, out, "--overhead", "100ns", "--quiet", *flags),
               ctx.env(**(env or {})), ctx.timeout, preexec=preexec)
    o = Outcome("filesystem", case)
    return judge(o, snap, proc, ref=ref, names=[inp.parent, out.parent], expect=expect,
                 counts_only=inp.suffix != out.suffix)


MODES = (("streamed", (), {}), ("in-memory", ("--in-memory",), {}),
         ("native=0", (), {"COMPENSATE_NATIVE": "0"}))


def restricted(ctx: Ctx, d: Path) -> Iterator[Outcome]:
    """Read-only and full filesystems (tmpfs mounts), and a file-size limit."""
    ro, full = d / "ro", d / "full"
    ro.mkdir(parents=True)
    full.mkdir()
    why = mount("-t", "tmpfs", "-o", "ro,size=1m", "none", str(ro)) or \
        mount("-t", "tmpfs", "-o", "size=48k", "none", str(full))
    text = text_input(ctx)
    if why:
        yield Outcome("filesystem", "read-only / full", skipped=f"mount refused: {why}")
    else:
        yield one(ctx, "read-only dir, otf2", damage.MONTECARLO, ro / "o" / "traces.otf2")
        yield one(ctx, "read-only dir, text", text, ro / "o.trace")
        for i, (mode, flags, env) in enumerate(MODES):
            out = full / f"o{i}" / "traces.otf2"
            yield one(ctx, f"full fs [{mode}]", damage.MONTECARLO, out, flags, env)
        yield one(ctx, "full fs, text", text, full / "o.trace")
    for i, (mode, flags, env) in enumerate(MODES):
        out = d / f"fsize{i}" / "traces.otf2"
        yield one(ctx, f"file-size limit 20 kB [{mode}]", damage.MONTECARLO, out, flags,
                  env, preexec=fsize_limit(20000))
    yield one(ctx, "file-size limit 20 kB, .trace -> otf2", text, d / "fs3" / "traces.otf2",
              preexec=fsize_limit(20000))
    yield one(ctx, "file-size limit 20 kB, .trace -> .trace", text, d / "fs4.trace",
              preexec=fsize_limit(20000))


def aliases(ctx: Ctx, d: Path) -> Iterator[Outcome]:
    """OUT the same files as IN under another name (a symlink, a bind mount), with
    and without --force, and OUT inside IN's archive folder. The archive and the text
    file lie in folders of their own (a folder holding more than an archive is
    refused for another reason)."""
    anchor = damage.copy_archive(damage.MONTECARLO, d / "a")
    (d / "t").mkdir()
    text = d / "t" / "m.trace"
    text.write_bytes(text_input(ctx).read_bytes())
    for src in ("a", "t"):
        (d / f"link-{src}").symlink_to(d / src)
        (d / f"bind-{src}").mkdir()
        why = mount("--bind", str(d / src), str(d / f"bind-{src}"))
    if why:
        yield Outcome("filesystem", "bind mount", skipped=f"mount refused: {why}")
    for how in ("link", "bind")[: 1 if why else 2]:
        name = {"link": "symlink", "bind": "bind mount"}[how]
        for force in ((), ("--force",)):
            tag = f"OUT = IN through a {name} {' '.join(force)}".strip()
            yield one(ctx, tag + ", otf2", anchor, d / f"{how}-a" / "traces.otf2", force,
                      inputs=[d / "a"])
            yield one(ctx, tag + ", text", text, d / f"{how}-t" / "m.trace", force,
                      inputs=[d / "t"])
    yield one(ctx, "OUT inside IN's archive folder", anchor,
              d / "a" / "sub" / "traces.otf2", inputs=[d / "a"])
    yield one(ctx, "OUT a .trace inside IN's traces/ folder", anchor,
              d / "a" / "traces" / "o.trace", inputs=[d / "a"])


def long_names(ctx: Ctx, d: Path) -> Iterator[Outcome]:
    """Legal 255-byte output names (a file, an archive directory)."""
    d.mkdir(parents=True)
    text = text_input(ctx)
    name = "n" * (255 - len(".trace")) + ".trace"
    yield one(ctx, "255-byte output file name", text, d / name, expect="valid")
    yield one(ctx, "255-byte archive directory name", damage.MONTECARLO,
              d / ("n" * 255) / "traces.otf2", expect="valid")


def filesystem(ctx: Ctx) -> Iterator[Outcome]:
    """Every case of the family (a fixed list: --runs does not change it)."""
    if os.geteuid() != 0:
        yield Outcome("filesystem", "mounts", skipped="not root: no tmpfs or bind mounts")
    yield from restricted(ctx, ctx.work / "fs-restricted")
    yield from aliases(ctx, ctx.work / "fs-alias")
    yield from long_names(ctx, ctx.work / "fs-long")
