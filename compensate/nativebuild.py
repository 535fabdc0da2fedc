"""Building the C halves of compensate on first use (issue #18).

Three C files are compiled this way: the OTF2 C path's
(:mod:`compensate.formats.otf2.native`, ``native.c``), the engine's anchor
loop (:mod:`compensate.engine.native`, ``loop.c``) and the ``.trace`` reader's
record lines (:mod:`compensate.formats.text.fastread`, ``fastread.c``). Each is compiled with the
system C compiler (``$CC``, default ``cc``; nothing else is assumed on a fresh
machine) into a per-user cache, ``$COMPENSATE_CACHE``, else
``$XDG_CACHE_HOME/compensate``, else ``~/.cache/compensate``; if that cannot be
written, into ``<tmp>/compensate-<uid>``, used only if it is this user's own
directory and writable by nobody else. The file name carries the digest of the
source and of the compiler flags, and the machine, so a changed source is rebuilt
and never mixed up. Processes compiling at the same time each write a temporary
file in the cache and rename it onto the name: the rename is atomic, so every
reader loads a whole library.

The flags keep IEEE double arithmetic as written (:data:`FLAGS`: no
``-ffast-math``, no contraction of ``a * b + c`` into one fused multiply-add), so
the engine's C loop computes the same doubles as its Python twin.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

SubprocessError = subprocess.SubprocessError

__all__ = ["ENV_SWITCH", "FLAGS", "SubprocessError", "compiled", "load_once"]

#: ``COMPENSATE_NATIVE=0`` (or no/off/false): every C part off, the Python paths run
ENV_SWITCH = "COMPENSATE_NATIVE"

#: Compiler flags of every build (part of the library's name): optimised, position
#: independent, floating-point operations exactly as written.
FLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC")


def _cache_dir() -> Path:
    base = os.environ.get("COMPENSATE_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "compensate"


def _build(source: bytes, target: Path) -> None:
    """Compile ``source`` into the shared library ``target``: into a temporary file
    of the same directory, renamed onto ``target`` (atomic: processes building at
    the same time each rename a whole library, a reader never sees half of one)."""
    cc = shlex.split(os.environ.get("CC", "") or "cc")
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        run = subprocess.run([*cc, *FLAGS, "-o", tmp, "-x", "c", "-",
                              "-ldl"], input=source, capture_output=True, timeout=300)
        if run.returncode:
            err = run.stderr.decode(errors="replace").strip().splitlines()
            raise OSError(f"{cc[0]} failed: {err[0] if err else run.returncode}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _usable_dir(path: Path, private: bool) -> bool:
    """Whether ``path`` is (made) a directory this user can build into; a
    ``private`` one (in the shared temporary directory) must be this user's own,
    a real directory, writable by nobody else."""
    try:
        path.mkdir(mode=0o700, parents=not private, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    if private and (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid()
                    or st.st_mode & 0o022):
        return False
    return os.access(path, os.W_OK | os.X_OK)


def compiled(source: bytes, stem: str) -> Path:
    """The shared library built from the C ``source`` (built on first use; module
    docstring). OSError or SubprocessError if it cannot be built."""
    digest = hashlib.sha256(source + " ".join(FLAGS).encode()).hexdigest()[:16]
    name = f"{stem}-{digest}-{platform.machine()}.so"
    target = _cache_dir() / name
    if not target.exists():
        if not _usable_dir(target.parent, private=False):  # e.g. no writable home
            target = Path(tempfile.gettempdir()) / f"compensate-{os.getuid()}" / name
            if not target.exists() and not _usable_dir(target.parent, private=True):
                raise OSError(f"no cache directory to build into ({target.parent})")
        if not target.exists():
            _build(source, target)
    return target


def load_once(state: dict[str, Any], key: str, load: Callable[[], Any], what: str,
              instead: str) -> Any:
    """``state[key]``, set by ``load()`` on first use; None if :data:`ENV_SWITCH`
    turns the C parts off, or if ``load`` fails: then once, on stderr,
    ``compensate: <what> is not available (<why>); <instead>``. Each C part keeps
    its own ``state``, so one failing says so once and the others still load."""
    if os.environ.get(ENV_SWITCH, "1").strip() in ("0", "no", "off", "false"):
        return None
    if key not in state:
        try:
            state[key] = load()
        except (OSError, SubprocessError, AttributeError, ValueError) as exc:
            state[key] = None
            print(f"compensate: {what} is not available ({exc}); {instead}", file=sys.stderr)
    return state[key]
