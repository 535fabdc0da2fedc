"""Format dispatch and safe output: pick the reader/writer by suffix, never leave a
half-written output and never touch the input.

* ``*.otf2``: an OTF2 anchor file. ``out/traces.otf2`` is the archive ``traces`` in
  directory ``out/``; the whole directory is written under a temporary name beside
  it and renamed into place when complete.
* ``*.trace``: the text format (docs/trace-format.md), written to a temporary file
  and renamed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .model import Trace, TraceError

FORMATS = {".otf2": "otf2", ".trace": "text"}


class OutputError(Exception):
    """The output path cannot be used (exists, equals the input, ...)."""


def trace_format(path: str | Path) -> str:
    """'otf2' or 'text' from the file suffix; ValueError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: unknown trace format (use an OTF2 anchor file '*.otf2' "
                         f"or a text trace '*.trace')")
    return FORMATS[suffix]


def read_trace(path: str | Path) -> Trace:
    """Read an OTF2 archive or a text trace (TraceError on bad input)."""
    path = str(path)
    fmt = trace_format(path)
    if not os.path.isfile(path):
        raise TraceError("no such file", source=path)
    if fmt == "otf2":
        from .otf2io import read_otf2
        return read_otf2(path)
    from .textio import read_text
    return read_text(path)


def _archive_dir(path: Path) -> Path:
    return path.parent


def output_target(in_path: str | Path, out_path: str | Path, force: bool) -> Path:
    """Check that ``out_path`` may be written; return the path that will be replaced
    (the archive directory for OTF2, the file for text)."""
    src = Path(in_path).resolve()
    out = Path(out_path).absolute()
    if trace_format(out_path) == "otf2":
        target = _archive_dir(out)
        if target.resolve() == Path.cwd().resolve() or out.parent == Path(out.anchor):
            raise OutputError(f"{out_path}: an OTF2 output needs its own archive directory, "
                              f"e.g. out/{out.name}")
        if src == out.resolve() or src.parent == target.resolve() or \
                target.resolve() in src.parents:
            raise OutputError(f"{out_path}: output would overwrite the input {in_path}")
        if target.exists() and any(target.iterdir()):
            if not force:
                raise OutputError(f"{out_path}: {target} exists (use --force to replace it)")
            expected = {out.name, out.stem + ".def", out.stem}
            extra = sorted(p.name for p in target.iterdir() if p.name not in expected)
            if extra:
                raise OutputError(
                    f"{out_path}: {target} holds more than an OTF2 archive "
                    f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); "
                    f"refusing to replace it")
        return target
    if src == out.resolve():
        raise OutputError(f"{out_path}: output would overwrite the input {in_path}")
    if out.exists() and not force:
        raise OutputError(f"{out_path}: exists (use --force to replace it)")
    if out.exists() and out.is_dir():
        raise OutputError(f"{out_path}: is a directory")
    return out


def write_trace(trace: Trace, out_path: str | Path, target: Path | None = None) -> None:
    """Write ``trace`` to ``out_path`` atomically (temporary name, then rename)."""
    out = Path(out_path).absolute()
    fmt = trace_format(out)
    if target is None:
        target = _archive_dir(out) if fmt == "otf2" else out
    target.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "otf2":
        from .otf2io import write_otf2
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            write_otf2(trace, str(tmp / out.name))
            _replace_dir(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return
    from .textio import write_text
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.tmp-", dir=out.parent)
    os.close(fd)
    try:
        write_text(trace, tmp_name)
        os.replace(tmp_name, out)
    except BaseException:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
        raise


def _replace_dir(new: Path, target: Path) -> None:
    """Move directory ``new`` to ``target``, replacing an existing one only after the
    new one is complete."""
    if target.exists():
        if not any(target.iterdir()):
            target.rmdir()
        else:
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / "archive")
            os.rename(new, target)
            shutil.rmtree(old, ignore_errors=True)
            return
    os.rename(new, target)
