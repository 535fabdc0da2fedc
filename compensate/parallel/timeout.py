"""The distributed run's ``--rank-timeout``: its default and its parsing, apart from
:mod:`compensate.parallel.transport` so that the command line does not import numpy
for it."""

from __future__ import annotations

import argparse
import math

#: seconds a rank waits for the others with no progress before it ends the job
#: (docs/parallel.md): far above any phase's imbalance between ranks (a streamed
#: segment takes seconds; reading a rank's share of 10^8 records in memory, some
#: minutes)
DEFAULT_RANK_TIMEOUT = 900.0


def rank_timeout(text: str) -> float:
    """``--rank-timeout SECONDS``: a finite number >= 0 (0: wait forever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: seconds, e.g. 600") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: seconds >= 0 (0: wait forever)")
    return value
