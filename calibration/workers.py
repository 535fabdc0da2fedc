"""Run a measurement in a fresh interpreter and bring its result back.

Why: some costs are fixed per process and differ between processes -- where the
interpreter's data, the libraries' and the buffers' pages land. The OTF2 writer's
per-record cost varies by ~1.4 % from process to process and by ~0.3 % within one;
a cache-resident copy between one fixed pair of buffers took 2.7x longer in 7 of
16 processes (the copy-cost probe now varies the buffer addresses within a
process too). Within one process such an effect is constant, so a median over many
samples is precise but can sit far from the next run's. Measuring in several
fresh processes and pooling their samples averages over those layouts, the
reported spread then shows the layout effect, and with enough processes the
process medians give a confidence interval that holds from run to run
(:func:`calibration.stats.summarize_rounds`).

Children run one after another (never concurrently: they would compete for the
cores and the memory bandwidth they measure), started with the "spawn" method
(a new interpreter, not a fork sharing the parent's memory layout).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
from collections.abc import Callable
from typing import Any

Progress = Callable[[float, str], None]


class WorkerError(Exception):
    """A child process failed or died (one-line message)."""


def _child(fn: Callable[..., Any], args: tuple, out: Any) -> None:
    """Child side: run ``fn(*args, progress=...)``, send ("result", value) or ("error", text).

    Ctrl-C is left to the parent, which stops the child (no second traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def progress(fraction: float, message: str) -> None:
        out.put(("progress", fraction, message))

    try:
        out.put(("result", fn(*args, progress=progress)))
    except MemoryError:
        out.put(("error", "out of memory"))
    except BaseException as exc:  # noqa: BLE001 - report everything to the parent
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def run_in_fresh_process(fn: Callable[..., Any], args: tuple,
                         progress: Progress | None = None) -> Any:
    """``fn(*args, progress=...)`` in a spawned child; its progress calls are relayed."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, out), daemon=True)
    proc.start()
    try:
        while True:
            try:
                msg = out.get(timeout=0.5)
            except queue.Empty:
                if not proc.is_alive():
                    hint = ": killed, out of memory?" if proc.exitcode == -9 else ""
                    raise WorkerError(f"measurement process died (exit code "
                                      f"{proc.exitcode}{hint})") from None
                continue
            if msg[0] == "progress":
                if progress:
                    progress(msg[1], msg[2])
            elif msg[0] == "result":
                return msg[1]
            else:
                raise WorkerError(f"measurement process failed: {msg[1]}")
    finally:
        if proc.is_alive():
            proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
            proc.join()
        out.close()
