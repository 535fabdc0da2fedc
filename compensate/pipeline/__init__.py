"""The pipeline, stated once: read -> match -> (fit) -> compensate -> verify ->
write, for every way of running (docs/design.md §5).

* :mod:`~compensate.pipeline.options`: what the user asked (:class:`RunOptions`)
  and the engine options that follow;
* :mod:`~compensate.pipeline.segment`: one segment through match -> compensate ->
  verify, on the whole of it or on one rank's share (the step every way takes);
* :mod:`~compensate.pipeline.cuts` and :mod:`~compensate.pipeline.context`: where a
  trace may be cut, and what a segment carries from the ones before;
* :mod:`~compensate.pipeline.run`: the ways of running (in memory, streamed, the
  fit pass, the clock pass of processes whose clocks disagree), each ending in a
  :class:`Run`;
* :mod:`~compensate.pipeline.totals`: results of parts summed over their fields;
* :mod:`~compensate.pipeline.outcome`: the summary and the refusal policy.

The distributed runs (:mod:`compensate.parallel`) take the same segment step on
each rank's share.
"""

from compensate.pipeline.options import RunOptions
from compensate.pipeline.outcome import Outcome, decide, summarize
from compensate.pipeline.run import Run, aligned_chunks, clock_pass, fit_pass, in_memory, streamed

__all__ = ["Outcome", "Run", "RunOptions", "aligned_chunks", "clock_pass", "decide",
           "fit_pass", "in_memory", "streamed", "summarize"]
