"""Damaged copies of inputs, and the larger inputs some families need (built once,
cached)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from .runner import REPO, Ctx

MONTECARLO = REPO / "examples" / "montecarlo" / "traces.otf2"
DATA = REPO / "tests" / "data" / "traces"
OTF2_INPUTS = (MONTECARLO, DATA / "ping-pong-otf2" / "traces.otf2",
               DATA / "jacobi-mpi-openmp-cuda" / "traces.otf2")
CASES = REPO / "tests" / "cases"


def copy_archive(anchor: Path, dest: Path) -> Path:
    """Copy an OTF2 archive (anchor, traces.def, traces/) into ``dest``; the new anchor."""
    dest.mkdir(parents=True)
    src = anchor.parent
    stem = anchor.stem
    for name in (anchor.name, stem + ".def"):
        shutil.copy2(src / name, dest / name)
    shutil.copytree(src / stem, dest / stem)
    return dest / anchor.name


def truncate(rng: random.Random, path: Path) -> str:
    size = path.stat().st_size
    at = rng.randrange(size) if size else 0
    os.truncate(path, at)
    return f"truncate {path.name} at {at}/{size}"


def flip(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return f"flip {path.name}: empty"
    n = rng.choice((1, 1, 2, 4, 16))
    for _ in range(n):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
    path.write_bytes(bytes(data))
    return f"flip {n} byte(s) of {path.name}"


def zero(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return f"zero {path.name}: empty"
    i = rng.randrange(len(data))
    n = min(len(data) - i, rng.choice((4, 64, 512, 4096)))
    data[i:i + n] = bytes(n)
    path.write_bytes(bytes(data))
    return f"zero {n} bytes of {path.name} at {i}"


def delete(rng: random.Random, path: Path) -> str:
    path.unlink()
    return f"delete {path.name}"


def empty(rng: random.Random, path: Path) -> str:
    path.write_bytes(b"")
    return f"empty {path.name}"


ARCHIVE_DAMAGE = ("truncate evt", "flip evt", "zero evt", "truncate local def",
                  "flip local def", "swap evt", "delete any", "empty any", "flip global def",
                  "truncate global def", "flip anchor")


def damage_archive(rng: random.Random, anchor: Path, kind: str | None = None) -> str:
    """One damage of ``kind`` (ARCHIVE_DAMAGE; random if None) to a copied archive:
    a byte operation on one of its files, two locations' event files swapped, a file
    deleted or emptied; the file and the offsets are drawn from ``rng``."""
    local = anchor.parent / anchor.stem
    evts, defs = sorted(local.glob("*.evt")), sorted(local.glob("*.def"))
    kind = kind or rng.choice(ARCHIVE_DAMAGE)
    what, _, where = kind.partition(" ")
    if what == "swap" and len(evts) >= 2:
        a, b = rng.sample(evts, 2)
        tmp = a.with_suffix(".swap")
        a.rename(tmp)
        b.rename(a)
        tmp.rename(b)
        return f"swap {a.name} and {b.name}"
    pool = {"evt": evts, "local def": defs, "global def": [anchor.with_suffix(".def")],
            "anchor": [anchor]}.get(where) or [anchor, anchor.with_suffix(".def"),
                                               *evts, *defs]
    op = {"truncate": truncate, "flip": flip, "zero": zero, "delete": delete,
          "empty": empty}.get(what, flip)
    return op(rng, rng.choice(pool))


def huge_number(rng: random.Random, path: Path) -> str:
    """Replace one number of a record line with a huge, negative or float one."""
    lines = path.read_bytes().split(b"\n")
    start = next((i for i, x in enumerate(lines) if x.strip() == b"events"), 0) + 1
    cands = [i for i in range(start, len(lines)) if lines[i].strip()
             and not lines[i].lstrip().startswith(b"#")]
    if not cands:
        return "no record line"
    i = rng.choice(cands)
    toks = lines[i].split()
    j = rng.randrange(len(toks))
    value = rng.choice((b"99999999999999999999999", b"18446744073709551616",
                        b"9223372036854775808", b"-1", b"1e400", b"0x10", b"nan"))
    tok = toks[j]
    toks[j] = tok.split(b"=")[0] + b"=" + value if b"=" in tok else value
    lines[i] = b" ".join(toks)
    path.write_bytes(b"\n".join(lines))
    return f"line {i + 1} token {j}: {value.decode()}"


def non_utf8(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    i = rng.randrange(len(data) + 1)
    data[i:i] = rng.choice((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00"))
    path.write_bytes(bytes(data))
    return f"non-UTF-8 bytes at {i}"


TEXT_OPS = (truncate, flip, flip, zero, empty, huge_number, huge_number, non_utf8)


def build_large(ctx: Ctx) -> Path:
    """A ~2*10^5-record OTF2 archive from compensate-simulate (built once, cached)."""
    anchor = ctx.cache / "large" / "measured" / "traces.otf2"
    if not anchor.exists():
        shutil.rmtree(ctx.cache / "large", ignore_errors=True)
        subprocess.run([sys.executable, "-m", "compensate.cli.simulate", "stencil",
                        "--ranks", "8", "--iterations", "2000", "--seed", "1",
                        str(ctx.cache / "large")], env=ctx.env(), cwd=ctx.tree, check=True,
                       capture_output=True)
    return anchor


def build_many_locations(ctx: Ctx, n: int) -> Path:
    """An OTF2 archive of ``n`` locations (one rank each, a few records), via the
    .trace format and the command itself (built once, cached)."""
    anchor = ctx.cache / f"locs{n}" / "traces.otf2"
    if anchor.exists():
        return anchor
    text = ctx.cache / f"locs{n}.trace"
    lines = ["compensate-trace 1", "timer_resolution 1000000000"]
    lines += [f"location {i} group={i}" for i in range(n)]
    lines += ['region 0 "work"', "events"]
    for i in range(n):
        lines += [f"{1000 + i} {i} Enter region=0", f"{5000 + i} {i} Leave region=0"]
    text.write_text("\n".join(lines) + "\n")
    shutil.rmtree(anchor.parent, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "compensate", str(text), str(anchor),
                    "--bound", "none", "--overhead", "0", "--quiet"], env=ctx.env(),
                   cwd=ctx.tree, check=True, capture_output=True)
    return anchor
