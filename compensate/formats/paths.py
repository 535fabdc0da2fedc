"""Trace file names and safe output: the format by suffix, and an output that is
never half-written and never the input.

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

from compensate.model import TraceError

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


def input_format(path: str | Path) -> str:
    """:func:`trace_format` of an input that must exist (TraceError otherwise)."""
    fmt = trace_format(path)
    if not os.path.isfile(path):
        raise TraceError("no such file", source=str(path))
    return fmt


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


class AtomicOutput:
    """A temporary output beside the target: an archive directory for OTF2, a file
    for text. :meth:`commit` moves it into place (replacing ``target``, as
    returned by :func:`output_target`), :meth:`discard` removes it; ``path`` is
    where to write (the anchor file inside the temporary directory, or the
    temporary file)."""

    def __init__(self, out_path: str | Path, target: Path | None = None) -> None:
        out = Path(out_path).absolute()
        self.format = trace_format(out)
        if target is None:
            target = _archive_dir(out) if self.format == "otf2" else out
        self.out, self.target = out, target
        target.parent.mkdir(parents=True, exist_ok=True)
        self._dir: Path | None = None
        self._file: str | None = None
        if self.format == "otf2":
            self._dir = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
            self.path = str(self._dir / out.name)
        else:
            fd, self._file = tempfile.mkstemp(prefix=f".{out.name}.tmp-", dir=out.parent)
            os.close(fd)
            self.path = self._file

    def commit(self) -> None:
        if self._dir is not None:
            _replace_dir(self._dir, self.target)
            self._dir = None
        elif self._file is not None:
            os.replace(self._file, self.out)
            self._file = None

    def discard(self) -> None:
        """Remove the temporary output (idempotent; nothing after :meth:`commit`)."""
        tmp_dir, self._dir = self._dir, None
        tmp_file, self._file = self._file, None
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)
        if tmp_file is not None and os.path.exists(tmp_file):
            os.unlink(tmp_file)


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
