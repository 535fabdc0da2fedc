"""What the user asked a run to do, in one typed object (not the command line's
namespace), and the engine options that follow from it: stated once for every way
of running."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compensate.engine import BOUNDS, COLLECTIVE_EXITS, EngineOptions

if TYPE_CHECKING:
    from compensate.engine.fit import FitOutcome
    from compensate.platform import Platform


#: The largest count an option may be: sizes and counts reach numpy and C as int64.
INT64_MAX = 2 ** 63 - 1


@dataclass(frozen=True)
class RunOptions:
    """``bound``: lower, upper, fitted or none; ``collective_exit``: uniform or
    per-process; ``eager_limit``: MPI_Send messages larger than this many bytes are
    synchronous; ``strict``: refuse Enter/Leave that do not nest; ``segment_records``:
    records pending before a streamed run looks for a cut (None: the default)."""

    bound: str = "lower"
    collective_exit: str = "uniform"
    eager_limit: int | None = None
    strict: bool = False
    segment_records: int | None = None

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {', '.join(BOUNDS)}; got {self.bound!r}")
        if self.collective_exit not in COLLECTIVE_EXITS:
            raise ValueError(f"collective_exit must be one of {', '.join(COLLECTIVE_EXITS)}; "
                             f"got {self.collective_exit!r}")
        if self.eager_limit is not None and not 0 <= _count(self.eager_limit) <= INT64_MAX:
            raise ValueError(f"eager_limit must be a number of bytes from 0 to 2^63-1 or "
                             f"None; got {self.eager_limit!r}")
        if self.segment_records is not None \
                and not 1 <= _count(self.segment_records) <= INT64_MAX:
            raise ValueError(f"segment_records must be a number of records from 1 to 2^63-1 "
                             f"or None; got {self.segment_records!r}")

    @property
    def fits(self) -> bool:
        """Whether the run fits the network first (R2f): one more pass."""
        return self.bound == "fitted"

    def used_bound(self, outcome: FitOutcome | None) -> str:
        """The bound the engine applies: the lower bound stands in for ``fitted``
        where too few transfers were observed to fit."""
        if self.fits and (outcome is None or outcome.fit is None):
            return "lower"
        return self.bound

    def engine_options(self, outcome: FitOutcome | None = None) -> EngineOptions:
        """The engine's options given the fit's ``outcome`` (``bound="fitted"``): the
        fitted model, or, where there is none, the lower bound with the links still
        timed by the least latency the trace observed."""
        if not self.fits:
            return EngineOptions(bound=self.bound, collective_exit=self.collective_exit)
        fit = outcome.fit if outcome is not None else None
        return EngineOptions(bound=self.used_bound(outcome),
                             collective_exit=self.collective_exit, network_time=fit,
                             fit_links=fit is None,
                             link_latency=outcome.links if outcome is not None else None)


@dataclass(frozen=True)
class Job:
    """One run of the command as its parts see it: the input and output paths,
    the options, the platform (None: no overhead to remove), and whether the
    whole trace is held in memory instead of streamed."""

    input: str
    output: str
    options: RunOptions
    platform: Platform | None = None
    in_memory: bool = False
    #: the distributed run's ``--rank-timeout`` (seconds; None or 0: wait forever)
    rank_timeout: float | None = None
    #: ``--overhead estimate`` left to the distributed run (:class:`EstimateLater`)
    estimate: EstimateLater | None = None


@dataclass
class EstimateLater:
    """``--overhead estimate`` of a distributed run, made on the ranks:
    ``whole()``, the one-process estimate (platform, summary object) for a run that
    does not stream; ``finish(bounds, transfer)``, the platform and summary object
    from what the ranks' streamed pass found
    (:func:`compensate.overhead.estimate_from`, on ``--platform``'s platform). The
    run puts what it found in ``platform`` and ``info``."""

    whole: Callable[[], tuple[Platform, dict]]
    finish: Callable[[dict, float | None], tuple[Platform, dict]]
    platform: Platform | None = None
    info: dict | None = None


def _count(value: object) -> int:
    """``value`` as a whole number (an int or numpy integer, not a bool); -1 if it
    is none."""
    if isinstance(value, bool):
        return -1
    try:
        return operator.index(value)
    except TypeError:
        return -1
