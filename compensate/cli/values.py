"""Numeric option values of the commands, checked by the parser: a value outside
its range is a usage error (exit 2) in one line naming the option and the range
(``argument --segment-records: invalid value '0': a whole number from 1 to ...``),
never a run that silently does something else with it (a segment of 0 records, a
negative eager limit that makes every send synchronous, ``--top -5`` dropping the
last five regions)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from compensate.platform import MAX_SECONDS, PlatformError, parse_duration

#: The largest whole-number option value: what an int64 holds (sizes and counts
#: reach numpy arrays and C code as int64).
INT64_MAX = 2 ** 63 - 1


def whole(least: int, most: int = INT64_MAX, what: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number (decimal digits) in ``[least, most]``."""
    top = "2^63-1" if most == INT64_MAX else f"{most:,}"
    allowed = f"a whole number {'of ' + what + ' ' if what else ''}from {least:,} to {top}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            value = None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {allowed}")
        return value
    return parse


def real(least: float, most: float, what: str = "", open_low: bool = False) \
        -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[least, most]`` (``(least, most]``
    with ``open_low``)."""
    low = ">" if open_low else ">="
    allowed = f"a number {'of ' + what + ' ' if what else ''}{low} {least:g} and <= {most:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value > least if open_low else value >= least) \
            and value <= most
        if not ok:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {allowed}")
        return value
    return parse


def duration(keywords: tuple[str, ...] = ()) -> Callable[[str], str]:
    """An argparse ``type`` for ``--overhead``: one of ``keywords`` as given, or a
    duration (``250ns``, ``1.5us``, ``2e-6``) from 0 to an hour (the platform file's
    bound, docs/platform-file.md), returned as given (the platform parses it)."""
    words = f" or one of {', '.join(keywords)}" if keywords else ""

    def parse(text: str) -> str:
        if text in keywords:
            return text
        try:
            seconds = parse_duration(text)
        except (PlatformError, ArithmeticError, ValueError):
            seconds = math.nan
        if not 0 <= seconds <= MAX_SECONDS:
            raise argparse.ArgumentTypeError(
                f"invalid value {text!r}: a duration from 0 to {MAX_SECONDS:g} s (an hour), "
                f"e.g. 250ns, 1.5us, 2e-6{words}")
        return text
    return parse
