"""What a finished run did wrong, computed from the files.

Each failure class is decided here from what is on disk and what the run printed:

* ``exit0-wrong``: exit 0 although the output does not say what the input says
  (``otf2-print`` is the reference reader of OTF2; for ``.trace`` the independent
  line parser :func:`text_records`, not the project's reader);
* ``modified-input``: a byte or an entry of the input tree changed;
* ``partial-output``: a non-zero exit with something new at OUT, an unreadable
  output, a mix of two runs, or staging entries left beside OUT;
* ``hang``: the run outlived its timeout.

Notes (counted, not failures): ``traceback``, ``no-filename``, ``bad-status``,
``refused-valid`` (a valid input or legal output refused) and ``accepted-invalid``
(an invalid option or platform value accepted with exit 0).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

FAILURES = ("exit0-wrong", "modified-input", "partial-output", "hang")
NOTES = ("traceback", "no-filename", "bad-status", "refused-valid", "accepted-invalid")
STATUSES = {0, 1, 2, 3, 4, 5, 130, 143}
LOCK_NAMES = re.compile(r"^\.[^/]*\.lock$")  # a documented lock file beside OUT
EXC_NAME = re.compile(r"\b(Traceback|[A-Z][A-Za-z]*(Error|Exception)|KeyboardInterrupt|"
                      r"StopIteration|SystemExit)\b")
OUR_ERRORS = ("TraceError", "PlatformError", "OutputError", "Refusal")


@dataclass
class Outcome:
    """One run's verdict: failure classes and notes, each with what was seen."""

    family: str
    case: str
    failures: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None
    seconds: float = 0.0

    def fail(self, cls: str, detail: str) -> None:
        assert cls in FAILURES, cls
        self.failures.setdefault(cls, detail)

    def note(self, cls: str, detail: str) -> None:
        assert cls in NOTES, cls
        self.notes.setdefault(cls, detail)


# -- the input tree and the output's neighbourhood ------------------------------------

def tree_hash(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (or ``root`` itself, a file) with its content hash:
    a changed byte, a new or a removed file all show."""
    root = Path(root)
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                digest = hashlib.sha256(Path(p).read_bytes()).hexdigest()
            except OSError as e:
                digest = f"unreadable {e.strerror}"
            out[os.path.relpath(p, root)] = digest
    return out


def hash_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """A short description of how two tree hashes differ ('' if they do not)."""
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    parts = [f"{what} {', '.join(names[:3])}" for what, names in
             (("changed", changed), ("added", added), ("removed", removed)) if names]
    return "; ".join(parts)


def out_root(out: Path) -> Path:
    """What OUT names on disk: an OTF2 archive's directory, or the text file."""
    return out.parent if out.suffix == ".otf2" else out


def neighbours(out: Path) -> set[str]:
    """Entries beside OUT's root (staging entries would appear here)."""
    parent = out_root(out).parent
    try:
        return set(os.listdir(parent))
    except OSError:
        return set()


@dataclass
class Snapshot:
    """The state before a run: the input tree's hash and what was beside OUT."""

    inputs: dict[Path, dict[str, str]]
    out: Path
    out_existed: bool
    beside: set[str]
    out_before: dict[str, str] | None = None


def snapshot(inputs: list[Path], out: Path) -> Snapshot:
    """Record the input trees and OUT's neighbourhood before a run."""
    root = out_root(out)
    existed = os.path.lexists(root)
    return Snapshot({p: tree_hash(p) for p in inputs}, out, existed, neighbours(out),
                    tree_hash(root) if existed else None)


# -- reference readers ----------------------------------------------------------------

def otf2_events(anchor: Path, timeout: float = 60) -> dict[str, list[str]] | None:
    """Per location, the records ``otf2-print`` shows, without their timestamps (and
    the BufferFlush stop time, which compensation changes); None if it refuses."""
    try:
        r = subprocess.run(["otf2-print", str(anchor)], capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 or "==ERROR==" in text or b"error" in r.stderr.lower():
        return None
    return parse_events(text)


def declared_events(anchor: Path, timeout: float = 60) -> dict[str, int] | None:
    """Per location, the record count its definition declares (``# Events``); None
    if ``otf2-print -G`` refuses the definitions."""
    try:
        r = subprocess.run(["otf2-print", "-G", str(anchor)], capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        return None
    found = re.findall(r"^LOCATION +(\d+) .*?# Events: (\d+)",
                       r.stdout.decode("utf-8", "replace"), re.M)
    return {loc: int(n) for loc, n in found}


def parse_events(text: str) -> dict[str, list[str]] | None:
    """Split ``otf2-print`` output into per-location records (kind + attributes)."""
    events: dict[str, list[str]] = defaultdict(list)
    last = None
    body = text.split("=== Events ", 1)
    if len(body) < 2:
        return None
    for line in body[1].splitlines()[3:]:
        if line.startswith("==="):
            break
        parts = line.split(None, 3)
        if not parts:
            continue
        if parts[0] == "ADDITIONAL" and last is not None:
            last.append(line.strip())
            continue
        if len(parts) < 3 or not parts[1].isdigit():
            return None
        attrs = re.sub(r"Stop Time: \d+", "Stop Time: -", parts[3] if len(parts) > 3 else "")
        events[parts[1]].append(f"{parts[0]} {attrs}")
        last = events[parts[1]]
    return dict(events)


TOKEN = re.compile(r'[^\s"]*"(?:[^"\\]|\\.)*"|[^\s"]+|"')
TIME_FIELDS = {"stop"}
# fields with a default (docs/trace-format.md, "Records"): the writer spells them out
DEFAULTS = {"MpiCollectiveEnd": {"root": "-", "sent": "0", "received": "0"},
            "NonBlockingCollectiveComplete": {"root": "-", "sent": "0", "received": "0"}}


def text_records(path: Path) -> dict[str, list[str]] | None:
    """An independent line parser of ``.trace`` records (docs/trace-format.md): per
    location, each record's kind and fields (quotes removed, time fields dropped), in
    file order; None if a record line has no time, location and kind."""
    try:
        data = Path(path).read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return None
    records: dict[str, list[str]] = defaultdict(list)
    in_events = False
    for line in data.splitlines():
        toks = []
        for m in TOKEN.finditer(line):
            t = m.group(0)
            if t.startswith("#"):
                break
            toks.append(t)
        if not toks:
            continue
        if not in_events:
            in_events = toks == ["events"]
            continue
        if len(toks) < 3:
            return None
        records[toks[1]].append(record(toks[2], toks[3:]))
    return dict(records) if in_events else None


def record(kind: str, toks: list[str]) -> str:
    """One record as compared: kind, then its fields sorted, quotes removed, time
    fields dropped, defaults filled in."""
    fields = dict(DEFAULTS.get(kind, {}))
    bare = []
    for t in toks:
        key, eq, value = t.partition("=")
        if not eq:
            bare.append(t.strip('"'))
        elif key not in TIME_FIELDS:
            fields[key] = value[1:-1] if value[:1] == '"' and len(value) > 1 else value
    return " ".join([kind, *bare, *sorted(f"{k}={v}" for k, v in fields.items())])


def compare_records(ref: dict[str, list[str]], got: dict[str, list[str]]) -> str:
    """'' if both hold the same records per location, else the first difference."""
    for loc in sorted(ref.keys() | got.keys()):
        a, b = ref.get(loc, []), got.get(loc, [])
        if len(a) != len(b):
            return f"location {loc}: {len(a)} records in the input, {len(b)} in OUT"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return f"location {loc}, record {i}: input {x[:60]!r}, OUT {y[:60]!r}"
    return ""


def output_records(out: Path) -> dict[str, list[str]] | None:
    """OUT's records through the reference reader of its format."""
    if out.suffix == ".otf2":
        return otf2_events(out) if out.exists() else None
    return text_records(out) if out.exists() else None


# -- the verdict of one run -----------------------------------------------------------

def check_messages(o: Outcome, proc, names: list[str]) -> None:
    """Notes about what the run printed and the status it ended with; ``names`` are
    the paths (or their parts) of which a failure message must name one (not a usage
    error, status 2: an option value names no file)."""
    err = proc.err
    m = EXC_NAME.search(err)
    if m:
        o.note("traceback", f"{m.group(0)} in stderr: {last_line(err)[:200]}")
    if proc.rc is not None and proc.rc not in STATUSES:
        o.note("bad-status", f"exit status {proc.rc}: {last_line(err)[:200]}")
    if proc.rc in (1, 3, 4, 5) and not any(n and n in err for n in names):
        o.note("no-filename", f"status {proc.rc}: {last_line(err)[:200]}")


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (the one-line message)."""
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1] if lines else "(no message)"


def judge(o: Outcome, snap: Snapshot, proc, *, ref=None, names=(), expect: str = "any",
          compare: bool = True, counts_only: bool = False,
          staging: bool = True, out_check: bool = True,
          declared: dict[str, int] | None = None) -> Outcome:
    """Apply every oracle to a finished run. ``ref`` is the input's records through the
    reference reader (None: it refuses the input); ``compare=False`` skips the record
    comparison (the caller checks OUT itself); ``counts_only`` compares only the
    records per location (input and output of different formats); ``staging=False``
    does not look beside OUT (a SIGKILLed run cannot clean up); ``out_check=False``
    leaves what a failed run left at OUT to the caller; ``declared`` are the input's
    declared record counts per location (an output with fewer lost records)."""
    o.seconds += proc.seconds
    out = snap.out
    if proc.hung:
        o.fail("hang", f"no end within {proc.seconds:.0f} s")
    for root, before in snap.inputs.items():
        diff = hash_diff(before, tree_hash(root)) if os.path.lexists(root) else "removed"
        if diff:
            o.fail("modified-input", f"{root.name}: {diff} (exit {proc.rc})")
    left = {n for n in neighbours(out) - snap.beside - {out_root(out).name}
            if not LOCK_NAMES.match(n)}
    if left and staging:
        o.fail("partial-output", f"left beside OUT: {', '.join(sorted(left))[:120]}")
    exists = os.path.lexists(out_root(out))
    if out_check and proc.rc not in (0, None) and exists and not snap.out_existed:
        o.fail("partial-output", f"exit {proc.rc} with {out_root(out).name} at OUT: "
                                 f"{last_line(proc.err)[:80]}")
    if out_check and proc.rc not in (0, None) and snap.out_before is not None and exists:
        diff = hash_diff(snap.out_before, tree_hash(out_root(out)))
        if diff:
            o.fail("partial-output", f"exit {proc.rc} but the existing OUT changed: {diff}")
    if proc.rc == 0 and compare:
        check_output(o, out, ref, counts_only, declared)
    check_messages(o, proc, [str(n) for n in names])
    if expect == "valid" and proc.rc not in (0, None):
        o.note("refused-valid", last_line(proc.err)[:200])
    if expect == "invalid" and proc.rc == 0:
        o.note("accepted-invalid", "exit 0")
    return o


#: the fields whose undefined reference compensate accepts and writes back as read
#: (compensate/formats/otf2/integrity.py: UNCHECKED, UNCHECKED_FIELDS): a thread
#: team or contingent (its members come from the records), an I/O handle (not modelled)
ACCEPTED_INVALID = re.compile(r"(Thread Team|Thread Contingent|Handle): INVALID")


def check_output(o: Outcome, out: Path, ref, counts_only: bool = False,
                 declared: dict[str, int] | None = None) -> None:
    """Exit 0: OUT must be readable by the reference reader and hold the input's records
    (and at least as many per location as the input declares)."""
    got = output_records(out)
    short = {loc: (len(got.get(loc, [])), n) for loc, n in (declared or {}).items()
             if got is not None and len(got.get(loc, [])) < n}
    if short:
        loc, (has, n) = sorted(short.items())[0]
        o.fail("exit0-wrong", f"exit 0 but location {loc}: {has} records in OUT, the "
                              f"input declares {n} ({len(short)} location(s) short)")
    undefined = [r for recs in (ref or {}).values() for r in recs
                 if ": INVALID" in r and not ACCEPTED_INVALID.search(r)]
    if undefined:
        o.fail("exit0-wrong", f"exit 0 but the input refers to undefined definitions "
                              f"({len(undefined)} records, e.g. {undefined[0][:50]!r})")
    if got is None:
        o.fail("exit0-wrong", f"exit 0 but the reference reader cannot read {out.name}")
    elif ref is None:
        o.fail("exit0-wrong", "exit 0 but the reference reader refuses the input")
    else:
        if counts_only:
            ref = {k: [""] * len(v) for k, v in ref.items()}
            got = {k: [""] * len(v) for k, v in got.items()}
        diff = compare_records(ref, got)
        if diff:
            o.fail("exit0-wrong", f"exit 0 but {diff}")


def same_archive(out: Path, ref: Path) -> str:
    """'' if the OTF2 archive at ``out`` is ``ref``'s byte for byte (every file; the
    anchor file up to its random trace identifier), else how they differ."""
    a, b = tree_hash(out.parent), tree_hash(ref.parent)
    a.pop(out.name, None)
    b.pop(ref.name, None)
    diff = hash_diff(b, a)
    if diff:
        return diff
    anchors = []
    for p in (out, ref):
        r = subprocess.run(["otf2-print", "-A", str(p)], capture_output=True, text=True)
        if r.returncode != 0:
            return f"otf2-print -A refuses {p.name}"
        anchors.append([x for x in r.stdout.splitlines() if "Trace identifier" not in x])
    return "" if anchors[0] == anchors[1] else "anchor files differ"
