"""Start one command under the harness: its own session, killed as a group on timeout."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@dataclass
class Ctx:
    """What every family gets: the tree under test, the seed, the budget, a work dir."""

    tree: Path
    seed: int
    runs: int | None
    timeout: float
    quick: bool
    work: Path
    cache: Path
    verbose: bool = False

    def rng(self, family: str) -> random.Random:
        """A generator of its own per family, so a family's cases do not depend on
        which other families ran."""
        return random.Random(f"{self.seed}:{family}")

    def budget(self, default: int, quick: int) -> int:
        """Runs for a family: --runs if given, else the family's quick or default count."""
        if self.runs is not None:
            return self.runs
        return quick if self.quick else default

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a run: PYTHONPATH is the tree under test."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.tree)
        env.pop("COMPENSATE_TEST_INTERRUPT", None)
        env.update(extra)
        return env

    def compensate(self, *args: str) -> list[str]:
        """The command line ``python -m compensate ARGS``."""
        return [sys.executable, "-m", "compensate", *map(str, args)]


@dataclass
class Proc:
    """A finished (or killed) run."""

    argv: list[str]
    rc: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    hung: bool = False
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def kill_group(p: subprocess.Popen) -> None:
    """SIGKILL the run's whole process group (it is its own session), then reap it."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def start(argv: list[str], env: dict[str, str], *, cwd: Path | None = None,
          stdout=subprocess.PIPE, preexec=None) -> subprocess.Popen:
    """Start ``argv`` in a new session (so that a timeout can kill its group), by
    default in the tree under test (the first PYTHONPATH entry): ``python -m`` looks
    in the working directory before PYTHONPATH, so another directory holding a
    ``compensate`` package would be tested instead."""
    if cwd is None:
        cwd = Path(env.get("PYTHONPATH", ".").split(os.pathsep)[0])
    return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=preexec)


def finish(p: subprocess.Popen, argv: list[str], timeout: float, t0: float) -> Proc:
    """Wait for a started run; on timeout kill its group and mark it hung."""
    try:
        out, err = p.communicate(timeout=max(0.1, timeout - (time.monotonic() - t0)))
        hung = False
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        hung = True
    return Proc(argv, None if hung else p.returncode, out or b"", err or b"", hung,
                time.monotonic() - t0)


def run(argv: list[str], env: dict[str, str], timeout: float, **kw) -> Proc:
    """Run ``argv`` to its end or to ``timeout`` seconds."""
    t0 = time.monotonic()
    return finish(start(argv, env, **kw), argv, timeout, t0)
