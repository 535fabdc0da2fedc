"""What the commands share on their command line: the parser that turns every bad
argument into a usage error (exit 2, one line, then the usage line), the usage
line generated from the parser (so that it lists every option the parser knows),
the subcommands of ``compensate`` and the nearest one to a mistyped word, and a
stdout that a closed pipe silences instead of failing the command.

A closed stdout (``compensate report T | head -2``: ``head`` exits after two
lines) is not an error: the command prints nothing more, finishes its work (the
files it writes are still written) and exits with the status it would have had,
without a line on stderr (docs/messages.md, "A closed pipe").
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

#: ``compensate``'s subcommands: name -> (their arguments, what they do), for
#: ``compensate --help`` and docs/cli.md. ``compensate IN OUT`` without a
#: subcommand is the main job.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "report": ("TRACE [TRACE2] [options]",
               "profile and wait states of a trace, or of two traces of one run compared"),
    "export": ("TRACE OUT.json [options]", "a trace as Chrome/Perfetto trace-event JSON"),
    "simulate": ("PROGRAM OUTDIR [options]",
                 "a model MPI program's truth/measured pair (= compensate-simulate)"),
    "calibrate": ("{run,overhead,check} [options]",
                  "measure the platform constants (= the calibrate command)"),
}
#: The usage of ``compensate`` (``--help``, a mistyped subcommand): the main job
#: and the subcommands.
OVERVIEW = "\n".join(
    ["compensate IN OUT [options]"]
    + [f"       compensate {name} {args}" for name, (args, _) in SUBCOMMANDS.items()])


class Usage(Exception):
    """A usage error (exit 2); ``synopsis``: also print the usage line."""

    def __init__(self, message: str, synopsis: bool = True) -> None:
        super().__init__(message)
        self.synopsis = synopsis


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`Usage` (the command prints one
    line and the usage line, exit 2) instead of printing argparse's multi-line
    usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise Usage(message)


def _option(action: argparse.Action) -> str:
    """One option of the usage line: ``[--force]``, ``[--bound lower|upper]``,
    ``[--platform FILE.json]``."""
    name = max(action.option_strings, key=len)
    if action.nargs == 0:
        return f"[{name}]"
    return f"[{name} {_metavar(action)}]"


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "|".join(map(str, action.choices))
    return action.dest.upper()


def synopsis(parser: argparse.ArgumentParser) -> str:
    """The one-line usage of ``parser``: ``usage: PROG POSITIONALS [OPTIONS]``,
    every option the parser knows except ``--help``, in the order they were added."""
    words = [parser.prog]
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            options.append(_option(action))
        elif action.nargs == "?":
            words.append(f"[{_metavar(action)}]")
        elif action.nargs in (argparse.REMAINDER, "*"):
            words.append(f"[{_metavar(action)} ...]")
        else:
            words.append(_metavar(action))
    return "usage: " + " ".join(words + options)


def nearest_subcommand(word: str) -> str | None:
    """The subcommand ``word`` is probably a typo of (``rport`` -> ``report``), or
    None. Only a plain word can be one: not an option, not a path that exists, no
    directory part and no file suffix (``x.trace`` is an input, not a typo)."""
    if not word or word.startswith("-") or word in SUBCOMMANDS or os.path.exists(word):
        return None
    if os.sep in word or "." in word:
        return None
    close = difflib.get_close_matches(word.lower(), list(SUBCOMMANDS), n=1, cutoff=0.6)
    return close[0] if close else None


class _QuietStdout:
    """``sys.stdout`` for the time of a command: what it cannot write because the
    reader of its pipe has gone (BrokenPipeError) goes to the null device instead,
    and so does everything after (:func:`quiet_closed_pipe`)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.closed_pipe = False

    def _gone(self) -> None:
        """Point the stream's descriptor at the null device; what is still buffered
        is flushed there."""
        self.closed_pipe = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, self.stream.fileno())
            os.close(fd)
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._gone()

    def __getattr__(self, name: str):  # fileno, isatty, encoding, buffer, ...
        return getattr(self.stream, name)


@contextlib.contextmanager
def quiet_closed_pipe() -> Iterator[None]:
    """Run a command with a stdout whose closed pipe ends its printing quietly
    (module docstring); ``sys.stdout`` is restored afterwards."""
    saved = sys.stdout
    if saved is None or isinstance(saved, _QuietStdout):
        yield
        return
    sys.stdout = _QuietStdout(saved)
    try:
        yield
    finally:
        if sys.stdout is not None and isinstance(sys.stdout, _QuietStdout):
            sys.stdout.flush()
        sys.stdout = saved


def exit_status(stop: SystemExit) -> int:
    """The status of a SystemExit (argparse's, after ``--help`` or ``--version``), for
    a command that returns its status: ``None`` is 0, a message 1 (as the
    interpreter does)."""
    code = stop.code
    return code if isinstance(code, int) else 0 if code is None else 1


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints: ``compensate 0.1.0``, ``compensate-simulate
    (compensate 0.1.0)``."""
    from compensate import __version__

    return f"compensate {__version__}" if prog.startswith("compensate ") or \
        prog == "compensate" else f"{prog} (compensate {__version__})"
