"""``mpiexec -n P compensate IN OUT ...``: the command's distributed run.

:func:`launched` tells from the environment alone whether an MPI launcher started
this process with more than one rank (mpi4py is imported only then, or with
``--mpi``: importing it costs start-up time). :func:`run_parallel` runs the
pipeline of :mod:`compensate.parallel.driver` on ``COMM_WORLD``: every rank reads
its own locations (:func:`read_own`) and writes them into the one output
(:mod:`compensate.formats.parts`: rank 0 calls ``begin`` before the work, every
rank ``write_part``, rank 0 ``commit``); rank 0 verifies, writes the summary and
decides, as the ``--in-memory`` run does, whether the output is written.

Errors: every rank exits with the same status (the command's documented codes;
SIGINT/SIGTERM, which mpiexec forwards to every rank, are only recorded while the
ranks talk and stop them all at the next phase boundary); only rank 0 prints, the
first failing rank's one line; nothing is written after a failure (rank 0's output
is atomic and discarded). Ranks other than 0 print nothing (:func:`silent_rank`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import compensate.interrupt as interrupt

if TYPE_CHECKING:
    from compensate.model import Trace
    from compensate.pipeline.options import Job

#: (size, rank) variables of the launchers: MPICH/Hydra and Intel MPI (PMI),
#: Open MPI, MVAPICH2, Slurm's srun
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS")
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID")


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None


def launcher_rank() -> int | None:
    """This process's rank as its MPI launcher set it in the environment (None: no
    launcher set one), known before MPI is initialised: a command that fails that
    early prints its line on rank 0 only (once per job)."""
    return _env_int(_RANK_VARS)


def available() -> bool:
    """Whether mpi4py can be imported (without importing it)."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


def launched() -> bool:
    """Whether an MPI launcher started this process as one of several ranks (and
    mpi4py is there to join them)."""
    size = _env_int(_SIZE_VARS)
    return size is not None and size > 1 and available()


def silent_rank(argv: list[str]) -> bool:
    """Whether this process is a rank other than 0 of a distributed run (then it
    prints nothing: rank 0 reports for all)."""
    if not (launched() or "--mpi" in argv):
        return False
    rank = _env_int(_RANK_VARS)
    return rank is not None and rank > 0


#: set once this rank has taken part in the distributed run to its end
_completed = False


def abort_if_stranded(status: int) -> int:
    """At the end of a distributed rank: after SIGINT/SIGTERM that stopped this rank
    before it took part in the whole run (e.g. during its imports, while the other
    ranks already wait in the first collective step), abort the MPI job so that no
    rank waits forever; otherwise return ``status``."""
    if _completed or status not in (interrupt.exit_status(s) for s in interrupt.SIGNALS):
        return status
    from mpi4py import MPI
    MPI.COMM_WORLD.Abort(status)
    return status


def end_stalled(transport, exc: Exception) -> None:
    """End the MPI job after ``exc`` (:class:`~compensate.parallel.transport.RankStalled`):
    the lowest rank that answered prints the one line (rank 0, unless it is silent:
    then on this rank's own stderr descriptor) and aborts the job with status 3;
    the other waiting ranks leave it that rank's abort (or abort themselves after
    a grace period), so that the line is printed before the job is killed."""
    import time

    from mpi4py import MPI

    from compensate.parallel.driver import describe

    status, line = describe(exc)
    silent = set(getattr(exc, "ranks", ()))
    reporter = min(r for r in range(transport.size) if r not in silent)
    if transport.rank == reporter:
        os.write(2, (line + "\n").encode())
        # (mpiexec forwards a rank's stderr through its proxy; an abort at once can
        # end the job before the line is forwarded: seen once in a loaded CI run)
        time.sleep(STALL_FORWARD)
    else:
        time.sleep(STALL_GRACE)
    MPI.COMM_WORLD.Abort(status)


#: seconds a waiting rank that does not report a stall leaves the reporter to print
#: and abort the job
STALL_GRACE = 10.0
#: seconds the reporter of a stall waits between its line and the abort
STALL_FORWARD = 0.5


def run_parallel(job: Job, make_outputs: Callable, finish: Callable) -> int:
    """The distributed run of the command's ``job``. ``make_outputs()`` creates rank
    0's outputs before the work (their ``parts_tmp``: the temporary output of
    :func:`compensate.formats.parts.begin`); ``finish(outputs, run, seconds, extra,
    write)`` (rank 0 only) takes the :class:`~compensate.pipeline.Run`, its phase
    seconds and the summary's distributed keys, calls ``write(before_commit)`` if
    the output is to be written, and returns the exit status."""
    from compensate.parallel.transport import MpiTransport

    transport = MpiTransport(job.rank_timeout)
    global _completed
    with interrupt.deferred():  # a signal is only recorded: the ranks stop together
        status = _run(transport, job, make_outputs, finish)
        _completed = True
    # (a signal this rank received raises as the region ends: compensate.interrupt.run
    # reports it, with the status the ranks agreed on)
    return status


def room_for_readers(path: str, rank: int, mine: list[int]) -> None:
    """:func:`compensate.pipeline.memory.refuse_read_buffers` for a rank's locations."""
    from compensate.pipeline.memory import refuse_read_buffers
    refuse_read_buffers(path, len(mine), f"rank {rank}: ",
                        "; more ranks (on more machines) read fewer locations each")


def room_for_share(path: str, rank: int, mine: list[int], counts: dict) -> None:
    """Refuse (:class:`~compensate.pipeline.memory.OutOfMemory`, exit 3, one line)
    a rank's whole share that cannot fit in the memory its machine has available
    (:func:`compensate.pipeline.memory.room_for`), before it is read, instead of
    the kernel killing the rank without a word: the reader's buffers
    (:func:`room_for_readers`), then the records the input declares (OTF2; a text
    trace declares none). Ranks on one machine share its memory: each checks its own."""
    from compensate.pipeline import memory as m

    room_for_readers(path, rank, mine)
    records = sum(counts.get(loc) or 0 for loc in mine)
    available = m.available_memory()
    if not m.room_for(records, available):
        raise m.OutOfMemory(
            f"{path}: rank {rank}: reading its whole share needs about "
            f"{m.gib(records * m.HELD_RECORD_BYTES)} for its ~{records:,} records, more "
            f"than the {m.gib(available)} available; nothing written")


def read_own(path: str, transport, seconds: dict[str, float] | None = None,
             trimmed: bool = False, payload: bool = True,
             ) -> tuple[Trace, dict[int, int], list[int], dict | None]:
    """Every rank reads the definitions and only its own locations' records
    (docs/parallel.md, "What each rank reads"); the other locations' columns come
    from their owners (:func:`compensate.parallel.ghosts.complete_trace`; with
    ``trimmed``, :func:`~compensate.parallel.ghosts.complete_trimmed`: of the other
    ranks' locations only what this rank reads). Returns the completed trace,
    ``{location: rank}``, this rank's locations and the trimmed ghosts' index map
    (None without ``trimmed``). The records are read in bounded blocks
    (:func:`compensate.formats.read_blocks`); ``payload=False`` (an
    OTF2 output, which copies the records from the input) reads an OTF2 input by
    the C path. Collective; a failure on any rank raises on every rank. ``seconds`` (if given)
    receives this rank's wall seconds of ``definitions``, ``read`` and ``ghosts``."""
    import time

    from compensate.formats import location_record_counts, read_blocks, read_chunks
    from compensate.parallel.driver import agreed
    from compensate.parallel.ghosts import complete_trace, complete_trimmed
    from compensate.parallel.ownership import owners
    from compensate.parallel.reading import agreed_rank_threads

    def definitions():  # no record read (a text trace: only its header)
        defs, chunks = read_chunks(path, payload=False, locations=[])
        getattr(chunks, "close", lambda: None)()
        return defs, location_record_counts(path)

    laps = [time.perf_counter()]

    def lap(name: str) -> None:
        laps.append(time.perf_counter())
        if seconds is not None:
            seconds[name] = laps[-1] - laps[-2]

    defs, counts = agreed(transport, definitions)
    owner = owners(defs, list(defs.locations), transport.size, counts)
    mine = [loc for loc in defs.locations if owner[loc] == transport.rank]
    defs = agreed_rank_threads(transport, path, defs, mine)
    lap("definitions")
    agreed(transport, room_for_share, path, transport.rank, mine, counts)
    own = agreed(transport, lambda: read_blocks(path, mine, payload=payload))
    lap("read")
    index = None
    if trimmed:
        trace, index = agreed(transport, lambda: complete_trimmed(
            own.definitions, own.events, transport, owner, own.source))
    else:
        trace = agreed(transport, lambda: complete_trace(own.definitions, own.events,
                                                         transport, own.source))
    lap("ghosts")
    return trace, owner, mine, index


def gather_info(transport, info: dict) -> dict | None:
    """The summary's ``parallel`` (docs/parallel.md): every rank's ``info``
    (:attr:`compensate.parallel.driver.RankOutput.info`, with its read seconds, CPU
    seconds and peak resident set so far) gathered on rank 0, by field, one list
    entry per rank; None on the other ranks. One ``allgather`` of a few numbers."""
    import resource
    import sys
    import time

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB (bytes on macOS)
    traffic = transport.traffic  # (the whole run: every segment's replay)
    info = dict(info, cpu_seconds=time.process_time(),
                peak_mib=peak / (1 << 20 if sys.platform == "darwin" else 1 << 10),
                waits=traffic.waits, wait_seconds=traffic.wait_seconds,
                messages=traffic.messages, wire_messages=traffic.wire_messages,
                collectives=traffic.calls,
                collective_seconds=traffic.seconds)
    every = transport.allgather(info)
    if transport.rank != 0:
        return None
    out: dict = {"ranks": transport.size}
    for name in ("records", "ghost_records", "anchors", "values_sent", "values_received",
                 "waits", "wait_seconds", "messages", "wire_messages", "collectives",
                 "collective_seconds",
                 "cpu_seconds", "peak_mib"):
        out[name] = [d.get(name) for d in every]
    for group in ("replay", "seconds"):
        names = list(dict.fromkeys(k for d in every for k in d.get(group, {})))
        out[group] = {k: [d.get(group, {}).get(k) for d in every] for k in names}
    return out


#: The streamed run's one read (compensate/parallel/cutting.py, segments.py,
#: reading.OneRead): a rank reads its own locations in chunks of at most this
#: share of the one-process chunk (2^17 of 2^18 records), and of at most its
#: share of a segment (:func:`compensate.parallel.cutting.chunk_records`). The
#: agreement's and the cutter's work per chunk is Python per location; the smaller
#: the reads, the less a rank holds beyond the cut (the share trades a few MiB per
#: rank against the reading's time, docs/parallel.md; coarser reads also let a
#: rank that reads one process at a time cut fewer segments than one process
#: would). Any chunking gives the same output.
CHUNK_SHARE = 2
#: Without ``--segment-records``, the ranks of a run of more than one rank cut
#: segments of this many quarters of the one-process segment
#: (:data:`~compensate.pipeline.cuts.SEGMENT_RECORDS`), counting every rank's
#: records. A rank's view of a segment holds, beside its own share, the ghost
#: records its rules read; the smaller segment makes up for them, so that what a
#: rank holds at two ranks is well under what one process holds (docs/parallel.md,
#: "Streaming within a rank"). Any segmenting gives the same output; more segments
#: cost a rank their fixed work each.
RANK_SEGMENT = 3


def streams(job: Job) -> bool:
    """Whether the distributed run streams within a rank (docs/parallel.md): as the
    one-process command, unless ``--in-memory`` (``--bound fitted`` too: its fit
    is reduced across the ranks)."""
    return not job.in_memory


@dataclass
class _Plan:
    """What every streamed pass of a rank shares: the definitions, which rank owns
    which location, this rank's own locations and share of the records, the
    segment size and the chunk size it reads with; what the latest cut agreement's
    look-ahead found (``unclosed``, :meth:`agreeing`: the segments' ``ahead``) and
    per location the ticks its records are moved by (``shift``: aligned clocks)."""

    transport: Any
    job: Job
    defs: Any
    owner: dict[int, int]
    mine: list[int]
    share: float
    target: int
    size: int
    unclosed: Any = None
    shift: dict | None = None

    def fallback(self, f: Callable, *args: Any) -> Any:
        """``f(*args)`` as a phase (:func:`compensate.parallel.segments.fallback_step`)."""
        from compensate.parallel.segments import fallback_step
        return fallback_step(self.transport, f, *args)

    def read(self, payload: bool = False):
        """This rank's own locations' chunks: (definitions, chunks)."""
        from compensate.formats import read_chunks
        return self.fallback(lambda: read_chunks(self.job.input, self.size, payload=payload,
                                                 locations=self.mine))

    def agreeing(self, read, agreed: list) -> Iterator[tuple[int | None, int]]:
        """The cuts the ranks agree from the chunks of ``read`` (a
        :class:`~compensate.parallel.reading.OneRead`) as they are read, each also
        put in ``agreed``."""
        from compensate.parallel.cutting import CutAgreement
        from compensate.parallel.segments import RankStream

        t = self.transport
        agreement = CutAgreement(self.defs, read.first(), t, self.mine, self.share,
                                 self.target, self.fallback, RankStream.gather_of(t),
                                 lambda: self.read()[1], self.shift)  # (a fresh read)
        for cut in agreement:
            self.unclosed = agreement.unclosed
            agreed.append(cut)
            yield cut


def _plan(transport, job: Job) -> _Plan:
    """The definitions and each rank's share, agreed (the first phase of every
    streamed pass). Collective."""
    from compensate.formats import DEFAULT_CHUNK_RECORDS, location_record_counts, read_chunks
    from compensate.parallel.cutting import chunk_records, share_of
    from compensate.parallel.ownership import owners
    from compensate.parallel.reading import agreed_rank_threads
    from compensate.parallel.segments import fallback_step
    from compensate.pipeline.cuts import SEGMENT_RECORDS

    def definitions():
        defs, chunks = read_chunks(job.input, payload=False, locations=[])
        getattr(chunks, "close", lambda: None)()
        return defs, location_record_counts(job.input)

    defs, counts = fallback_step(transport, definitions)
    owner = owners(defs, list(defs.locations), transport.size, counts)
    mine = [loc for loc in defs.locations if owner[loc] == transport.rank]
    fallback_step(transport, room_for_readers, str(job.input), transport.rank, mine)
    defs = agreed_rank_threads(transport, str(job.input), defs, mine)
    share = share_of(mine, counts)
    target = job.options.segment_records or (SEGMENT_RECORDS if transport.size == 1
                                             else SEGMENT_RECORDS * RANK_SEGMENT // 4)
    size = chunk_records(target, share, DEFAULT_CHUNK_RECORDS // CHUNK_SHARE)
    return _Plan(transport, job, defs, owner, mine, share, target, size)


def _streamed(transport, job: Job, plan: _Plan, tmp, payload: bool,
              seconds: dict[str, float], alignment=None):
    """Every rank's streamed run (:mod:`compensate.parallel.segments`): every rank
    reads its own locations once, in chunks; the ranks agree on each cut from
    them as they are read (:class:`~compensate.parallel.cutting.CutAgreement`),
    and every rank compensates the segment before it from the same chunks
    (:class:`~compensate.parallel.reading.OneRead`) and writes its records into
    its part as it goes. Under ``--bound fitted`` a first pass agrees the cuts and
    observes the transfers each rank's receives show over the same read, the fit
    is reduced across the ranks (:func:`~compensate.parallel.segments.observe_rank`),
    and the segments read the input again over the cuts it agreed. Returns ``(Run
    on rank 0 else None, the open part writer, definitions, this rank's info, the
    fit's outcome or None)``. ``plan``: the definitions and shares (:func:`_plan`);
    ``alignment``: the processes' clock offsets (:func:`_clock_offsets`) added to
    the own records as they are read; raises
    :class:`~compensate.parallel.segments.StreamFallback` on every rank where the
    one-process command would not stream (nothing of this run is kept)."""
    import time

    from compensate.engine.fit import clamp_check
    from compensate.formats import parts
    from compensate.parallel.reading import OneRead
    from compensate.parallel.segments import observe_rank, stream_rank
    from compensate.pipeline.memory import heap_to_keep, libc_release, steady_malloc
    from compensate.pipeline.run import aligned_chunks, shift_of
    from compensate.platform import Platform

    steady_malloc(heap_to_keep(plan.target * plan.share))
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        seconds[name] = now - clock[0]
        clock[0] = now

    fallback, defs, owner, mine = plan.fallback, plan.defs, plan.owner, plan.mine
    plan.shift = shift_of(defs, alignment.offsets) if alignment is not None else None
    platform, options = job.platform or Platform(0.0), job.options
    # the segments' cuts, agreed by the ranks from their own locations as they are
    # read: the one read of a rank's own locations feeds the agreement and the
    # segments (OneRead); under --bound fitted the fit pass reads along with the
    # agreement and the segments read again, over the cuts it agreed
    agreed: list[tuple[int | None, int]] = []
    outcome = None
    cuts: list | None = None
    if options.fits:  # first pass: the fit reduced across ranks
        read = OneRead(aligned_chunks(defs, plan.read()[1], alignment))
        outcome = observe_rank(defs, read.second(), plan.agreeing(read, agreed), transport,
                               owner, platform, options, source=str(job.input),
                               alignment=alignment, ahead=plan)
        cuts, read = agreed, None
        libc_release(0)()  # (the pass's heap back before the segments')
        lap("fit")
    info: dict = {}

    def second_pass(outcome, cuts):  # the segments compensated and written into this part
        writer = None
        info.clear()
        try:
            # (these definitions carry the C path's input archive: the OTF2 part copies
            # the records from it)
            defs, chunks = plan.read(payload)
            chunks = aligned_chunks(defs, chunks, alignment)
            writer = fallback(lambda: parts.PartWriter(tmp, transport.rank, defs, mine))
            if cuts is None:
                read = OneRead(chunks)
                cuts, chunks = plan.agreeing(read, agreed), read.second()
            result = stream_rank(defs, chunks, cuts, transport, owner, platform, options,
                                 writer.write, outcome=outcome, advance=writer.advance,
                                 source=str(job.input), info=info, alignment=alignment,
                                 ahead=plan)
            chunks = cuts = read = None
            # the segments' heap back before the part is closed and the output
            # committed, which copy the records from the input (their buffers would
            # come on top)
            libc_release(0)()
            # a fit clamped on most of its uses: rank 0 decides from the reduced
            # counts (as the one-process command's _Refit), every rank streams again
            # (a fit is agreed over every cut: the fit pass read them all)
            rejected = transport.allgather(fallback(
                lambda: clamp_check(outcome, result.stats.p2p_cases, platform.network)
                if transport.rank == 0 else None))[0]
            if rejected is not None:
                writer.abort()
                return second_pass(rejected, agreed)
            lap("segments")
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        return result, writer, defs, info, outcome

    return second_pass(outcome, cuts)


def _clock_offsets(transport, job: Job, plan: _Plan):
    """The processes' clock offsets of a trace whose clocks disagree, as the
    one-process command finds them (:func:`compensate.pipeline.run.clock_pass`),
    from a streamed pass of every rank over its own locations
    (:func:`compensate.parallel.segments.align_rank`), moved first by the estimate
    rank 0 makes from the trace's first records. Collective; raises
    StreamFallback on every rank where that pass cannot stream."""
    from compensate.matching.clocks import ClockAlignment
    from compensate.parallel.reading import OneRead, guessed_offsets
    from compensate.parallel.segments import align_rank
    from compensate.pipeline.run import aligned_chunks
    from compensate.platform import Platform

    def estimate() -> dict[int, int]:  # (rank 0: one segment's first records, all)
        return guessed_offsets(job.input, plan.target)

    guess = transport.allgather(plan.fallback(estimate if transport.rank == 0
                                              else lambda: None))[0]
    read = OneRead(aligned_chunks(plan.defs, plan.read()[1], ClockAlignment(0, 0, guess)))
    return align_rank(plan.defs, read.second(), plan.agreeing(read, []), transport,
                      plan.owner, job.platform or Platform(0.0), job.options, guess=guess,
                      source=str(job.input), ahead=plan)


def _run(transport, job: Job, make_outputs: Callable, finish: Callable) -> int:
    import sys
    import time

    from compensate.formats import format_of, parts
    from compensate.parallel.driver import RankFailed, agreed, describe, run_rank
    from compensate.parallel.transport import RankStalled

    status, line = 0, None
    outputs = streamed = None
    made: list = []  # rank 0's outputs, as soon as they exist
    #: rank 0 still owes the others its decision (write, skip, or its failure)
    deciding = False
    try:
        t_start = time.monotonic()
        if transport.rank == 0:  # (kept before the agreement: a stall there discards it)
            outputs = agreed(transport, lambda: made.append(make_outputs()) or made[0])
        else:
            agreed(transport, lambda: None)
        # the temporary output every rank writes its part into (rank 0 made it)
        tmp = transport.allgather(outputs.parts_tmp if outputs is not None else None)[0]
        if job.estimate is not None:  # --overhead estimate, made on the ranks
            from compensate.parallel.estimate import made_on_ranks
            job = made_on_ranks(transport, job, (lambda: _plan(transport, job))
                                if streams(job) else None)
        read_seconds: dict[str, float] = {}
        # an OTF2 output copies the records from the input: no payload objects
        payload = format_of(job.output).needs_payload
        streamed = None
        if streams(job):
            from compensate.parallel.segments import StreamFallback
            try:
                started = time.perf_counter()
                plan = _plan(transport, job)
                planned = {"definitions": time.perf_counter() - started}
                read_seconds.update(planned)
                clocks = False
                try:
                    streamed = _streamed(transport, job, plan, tmp, payload, read_seconds)
                except StreamFallback as exc:
                    if not exc.clocks:
                        raise
                    clocks = True  # (outside the handler: its traceback holds the
                    # first attempt's records)
                if clocks:  # the processes' clocks disagree: aligned first, as one
                    read_seconds.clear()  # process does
                    read_seconds.update(planned)
                    streamed = _streamed(transport, job, plan, tmp, payload, read_seconds,
                                         _clock_offsets(transport, job, plan))
            except StreamFallback:
                read_seconds.clear()  # the whole-share path, as one process falls back
        if streamed is not None:
            run, writer, defs, stream_info, _ = streamed
            info = gather_info(transport, dict(stream_info, seconds=read_seconds))
            seconds = {"compensate_and_write": 0.0}

            def write_part() -> None:  # every rank: closes its part, then a barrier
                agreed(transport, writer.close)

            seconds["compensate_and_write"] = time.monotonic() - t_start
        else:
            trace, owner, mine, index = read_own(job.input, transport, read_seconds,
                                                 trimmed=True, payload=payload)
            t_read = time.monotonic()
            ranked = run_rank(trace, job.platform, job.options, transport, owner=owner,
                              index=index)
            ranked.info["seconds"] = dict(read_seconds, **ranked.info.get("seconds", {}))
            info = gather_info(transport, ranked.info)
            defs = trace.definitions

            def write_part() -> None:  # every rank: its own locations, then a barrier
                agreed(transport, parts.write_part, tmp, transport.rank, ranked.own, mine)

            run = ranked.run
            seconds = {"read": t_read - t_start, "compensate": time.monotonic() - t_read}

        if transport.rank == 0:
            deciding = True

            def write(before_commit: Callable[[], None]) -> None:
                nonlocal deciding
                deciding = False
                transport.allgather(("write",))
                write_part()
                # another run may have written OUT meanwhile: checked under the
                # output's lock, which rank 0 holds from make_outputs() to the end
                outputs.check()
                before_commit()
                parts.commit(tmp, defs)

            extra = {"ranks": transport.size, **({"parallel": info} if info else {})}
            status = finish(outputs, run, seconds, extra, write)
            if deciding:  # verification failed or --max-overcompensated: nothing written
                deciding = False
                transport.allgather(("skip",))
        else:
            decision = transport.allgather(None)[0]
            if decision[0] == "failed":
                raise RankFailed(0, decision[1], decision[2])
            if decision[0] == "write":
                write_part()
    except RankStalled as exc:  # no agreement with a rank that does not answer
        for made_outputs in made:
            made_outputs.discard()
        end_stalled(transport, exc)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - one line from rank 0,
        # the same status everywhere
        if os.environ.get("COMPENSATE_DEBUG") and transport.rank == 0:
            import traceback
            traceback.print_exc()
        status, line = describe(exc)
        if deciding:  # rank 0 failed before it decided: the others hear it
            transport.allgather(("failed", status, line))
    finally:
        if streamed is not None:
            streamed[1].abort()  # (nothing after close)
    try:  # (every rank has aborted its part before the staging directory goes)
        final = transport.allgather((status, line))
    finally:
        if outputs is not None:
            outputs.discard()  # nothing after a commit; everything after a failure
    first = next(((s, ln) for s, ln in final if s != 0), (0, None))
    # rank 0 prints the first failure's line (an interrupt it received itself is
    # reported by compensate.interrupt.run)
    if transport.rank == 0 and first[1] and interrupt.received() is None:
        print(first[1], file=sys.stderr)
    return first[0]
