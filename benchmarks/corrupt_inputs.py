"""Damaged inputs against the command's error messages: copies of OTF2 archives
and ``.trace`` files damaged the ways a disk or a copy damages them (cut at an
offset, bytes flipped, a range zeroed, a file deleted or emptied, and for
``.trace`` bytes that are not UTF-8), each run through ``compensate IN OUT
--overhead 100ns`` (OTF2: also with ``--in-memory`` and with
``COMPENSATE_NATIVE=0``), and every run's stderr classified by the rule of
docs/messages.md (one line, exit 3, the file named, an event file's damage
naming location and record, no Python exception name):

* ``location+record``: exit 3, one line naming a location and a record
* ``location``: exit 3, one line naming a location (a local definition file)
* ``file``: exit 3, one line naming the damaged input, no location
* ``exception name``: a Python exception's name in the line (``KeyError``,
  ``struct.error``, ``_otf2.Error``, an exit-1 internal error)
* ``traceback``, ``several lines``, ``other status``
* ``exit 0``: accepted (a flipped byte may leave a valid trace: not by itself wrong)

Seeds are fixed, so two runs damage the same bytes. Each run is a fork of this
process after the imports (the same code as the command, a fresh state per run,
about 10x faster than a new interpreter); ``--subprocess`` runs ``python -m
compensate`` instead.

    PYTHONPATH=$PWD python benchmarks/corrupt_inputs.py [--seeds N] [--subprocess] [-v]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHIVES = [ROOT / "examples" / "montecarlo" / "traces.otf2",
            ROOT / "tests" / "data" / "traces" / "ping-pong-otf2" / "traces.otf2",
            ROOT / "tests" / "data" / "traces" / "jacobi-openmp-tasks-offload" / "traces.otf2"]
TEXT_CASES = sorted((ROOT / "tests" / "cases").glob("*.trace"))[:12]
MODES = {"streamed": ([], {}), "in-memory": (["--in-memory"], {}),
         "python": ([], {"COMPENSATE_NATIVE": "0"})}

#: a Python exception's name: CamelCase ending in Error/Exception, ``struct.error``,
#: the OTF2 bindings' ``_otf2``, an internal error's line
EXCEPTION = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|\b\w+\.error\b|_otf2|internal error")
WHERE = re.compile(r"location \d+, record \d+")
LOCATION = re.compile(r": location \d+: ")


# --- damage -----------------------------------------------------------------

def truncate(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    cut = rng.randrange(len(data)) if data else 0
    path.write_bytes(data[:cut])
    return f"cut at {cut} of {len(data)}"


def flip(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return "empty"
    spots = sorted(rng.randrange(len(data)) for _ in range(rng.choice((1, 1, 4))))
    for i in spots:
        data[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return f"bits flipped at {spots}"


def zero(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return "empty"
    start = rng.randrange(len(data))
    stop = min(len(data), start + rng.choice((8, 64, 512)))
    data[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(data))
    return f"zeroed {start}:{stop}"


def delete(path: Path, _rng: random.Random) -> str:
    path.unlink()
    return "deleted"


def empty(path: Path, _rng: random.Random) -> str:
    path.write_bytes(b"")
    return "emptied"


def not_utf8(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    i = rng.randrange(len(data)) if data else 0
    data[i:i] = b"\xff\xfe\x80"
    path.write_bytes(bytes(data))
    return f"bytes ff fe 80 inserted at {i}"


DAMAGE: dict[str, Callable[[Path, random.Random], str]] = {
    "truncate": truncate, "flip": flip, "zero": zero, "delete": delete, "empty": empty}


def archive_files(anchor: Path) -> list[str]:
    """The files of an archive to damage (relative to its folder): the anchor, the
    global definitions, and the first two locations' local definitions and events."""
    folder = anchor.parent
    locs = sorted((folder / "traces").glob("*.evt"), key=lambda p: int(p.stem))[:2]
    files = [anchor.name, "traces.def"]
    for evt in locs:
        files += [f"traces/{evt.stem}.def", f"traces/{evt.name}"]
    return [f for f in files if (folder / f).exists()]


def otf2_cases(seeds: int) -> Iterator[tuple[str, Path, str, str, int]]:
    """(label, anchor, file, damage, seed) of every damaged OTF2 input."""
    for anchor in ARCHIVES:
        for file in archive_files(anchor):
            for kind in DAMAGE:
                for seed in range(seeds if kind in ("truncate", "flip", "zero") else 1):
                    yield anchor.parent.name, anchor, file, kind, seed


# --- one run -----------------------------------------------------------------

def run_forked(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """(exit status, stderr) of ``compensate ARGV`` in a fork of this process."""
    err = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: the command, its stderr (also the C library's) to ``err``
        status = 1
        try:
            os.environ.update(env)
            os.dup2(err.fileno(), 2)
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            from compensate.cli import main
            status = main(argv)
            sys.stderr.flush()
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            import traceback
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(status)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return -9, "hang"
        time.sleep(0.01)
    err.seek(0)
    code = os.waitstatus_to_exitcode(status)
    return code, err.read().decode("utf-8", "replace")


def run_subprocess(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """(exit status, stderr) of ``python -m compensate ARGV``."""
    try:
        done = subprocess.run([sys.executable, "-m", "compensate", *argv],
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return -9, "hang"
    return done.returncode, done.stderr


def classify(status: int, err: str, damaged: str) -> str:
    """The class of one run's outcome (module docstring)."""
    lines = [x for x in err.splitlines() if x.strip()
             and not x.startswith(("compensate: warning:", "compensate: note:"))]
    if status == -9:
        return "hang"
    if "Traceback" in err:
        return "traceback"
    if status == 0:
        return "exit 0"
    if any(EXCEPTION.search(x) for x in lines):
        return "exception name"
    if len(lines) != 1:
        return "several lines"
    if status != 3:
        return "other status"
    if WHERE.search(lines[0]):
        return "location+record"
    if LOCATION.search(lines[0]):
        return "location"
    if damaged in lines[0]:
        return "file"
    return "file not named"


# --- the campaign ------------------------------------------------------------

GOOD = ("location+record", "location", "file", "exit 0")


def campaign(seeds: int, runner: Callable, verbose: bool, text: bool = True,
             show: tuple[str, ...] = ()) -> dict[str, collections.Counter]:
    """Every damaged input through every mode; counts of each class per family."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="corrupt-") as tmp:
        work = Path(tmp)
        for label, anchor, file, kind, seed in otf2_cases(seeds):
            case = work / "in"
            shutil.copytree(anchor.parent, case)
            rng = random.Random(f"{label}/{file}/{kind}/{seed}")
            what = DAMAGE[kind](case / file, rng)
            family = f"otf2 {_file_class(file)} {kind}"
            for mode, (extra, env) in MODES.items():
                out = work / "out" / "traces.otf2"
                status, err = runner([str(case / anchor.name), str(out), "--overhead", "100ns",
                                      "--quiet", *extra], env, 60)
                shutil.rmtree(work / "out", ignore_errors=True)
                # (a message naming the archive's anchor names its file too)
                cls = classify(status, err, str(case))
                counts[family][cls] += 1
                counts["all otf2"][cls] += 1
                if verbose and (cls not in GOOD or cls in show):
                    print(f"{label} {file} {kind}#{seed} ({what}) {mode}: {cls}: "
                          f"{status} {err.strip()[-300:]!r}", flush=True)
            shutil.rmtree(case)
        if text:
            _text_campaign(work, seeds, runner, verbose, counts, show)
    return counts


def _text_campaign(work: Path, seeds: int, runner: Callable, verbose: bool,
                   counts: dict[str, collections.Counter], show: tuple[str, ...]) -> None:
    kinds = {"truncate": truncate, "flip": flip, "zero": zero, "not-utf8": not_utf8}
    for src in TEXT_CASES:
        for kind, damage in kinds.items():
            for seed in range(seeds):
                case = work / src.name
                shutil.copy(src, case)
                what = damage(case, random.Random(f"{src.name}/{kind}/{seed}"))
                out = work / "out.trace"
                status, err = runner([str(case), str(out), "--overhead", "100ns", "--quiet"],
                                     {}, 60)
                out.unlink(missing_ok=True)
                cls = classify(status, err, str(case))
                counts[f"text {kind}"][cls] += 1
                counts["all text"][cls] += 1
                if verbose and (cls not in GOOD or cls in show):
                    print(f"{src.name} {kind}#{seed} ({what}): {cls}: {status} "
                          f"{err.strip()[-300:]!r}", flush=True)
                case.unlink()


def _file_class(file: str) -> str:
    if file.endswith(".otf2"):
        return "anchor"
    if file == "traces.def":
        return "global-defs"
    return "local-defs" if file.endswith(".def") else "events"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per random damage (3)")
    ap.add_argument("--subprocess", action="store_true", help="run python -m compensate")
    ap.add_argument("--no-text", action="store_true", help="OTF2 inputs only")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every bad outcome")
    ap.add_argument("--show", action="append", default=[], choices=GOOD,
                    help="with -v, print the runs of this class too (repeatable)")
    ap.add_argument("--only", help="only the archives and .trace files whose name has this")
    args = ap.parse_args()
    runner = run_subprocess if args.subprocess else run_forked
    if not args.subprocess:  # (imported once, before the forks)
        import compensate.cli.compensate  # noqa: F401
        import compensate.formats.otf2.native  # noqa: F401
        import compensate.formats.otf2.read  # noqa: F401
        import compensate.formats.otf2.write  # noqa: F401
        import compensate.formats.text.read  # noqa: F401
    t0 = time.perf_counter()
    if args.only:
        ARCHIVES[:] = [a for a in ARCHIVES if args.only in str(a)]
        TEXT_CASES[:] = [t for t in TEXT_CASES if args.only in str(t)]
    counts = campaign(args.seeds, runner, args.verbose, not args.no_text, tuple(args.show))
    classes = sorted({c for cnt in counts.values() for c in cnt})
    print(f"{'family':32s} " + " ".join(f"{c:>16s}" for c in classes))
    for family in sorted(counts):
        print(f"{family:32s} " + " ".join(f"{counts[family][c]:16d}" for c in classes))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
