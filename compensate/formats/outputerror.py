"""The refusal of an output: its class and the one line an OS error becomes.

A leaf module (it imports only :mod:`compensate.errors`), so that the writers of
every format can raise it without importing :mod:`compensate.formats.paths`,
whose format registry imports them in turn.
"""

from __future__ import annotations

from pathlib import Path

from compensate.errors import Refusal


class OutputError(Refusal):
    """The output path cannot be used (exists, equals the input, ...): ``FILE:
    REASON``, a :class:`~compensate.errors.Refusal` whose ``file`` is the output
    path (or none, the reason being the whole message)."""


def output_error(path: str | Path, action: str, exc: OSError) -> OutputError:
    """One line naming the output, the path that failed and why (the strerror)."""
    where = f" {exc.filename}" if exc.filename and str(exc.filename) != str(path) else ""
    return OutputError(f"cannot {action}{where}: {exc.strerror or exc}", file=str(path))
