"""The limit of open files (``RLIMIT_NOFILE``) and archives of many locations.

The OTF2 library keeps one event file open per location it reads (its global
event reader merges every location's records by time) and the writer one per
location it writes, so an archive of 2,048 locations cannot be read under the
common soft limit of 1,024 open files, although the hard limit (often 2^20, or
tens of thousands) allows it. So:

* :func:`raise_open_files_limit`, at the start of a command: the soft limit is
  raised to the hard limit (an unprivileged process may), as many tools that open
  a file per process or thread do;
* :func:`ensure_open_files`, before an archive is opened: if the limit (raised
  to the hard limit if need be) is still below what reading its locations needs,
  a one-line TraceError names the number of locations, the limit and how to raise
  it, instead of an OTF2 failure half-way.
"""

from __future__ import annotations

import contextlib

from compensate.model import TraceError

try:  # (not on every platform)
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = ["RESERVE", "ensure_open_files", "open_files_limit", "raise_open_files_limit"]

#: files beyond one per location: the anchor file, the global definitions, the
#: interpreter's own, a text output, the C compiler's cache
RESERVE = 64

_CAP = 1 << 20  # what the soft limit is raised to when the hard limit is unlimited


def open_files_limit() -> tuple[int | None, int | None]:
    """The (soft, hard) limit of open files of this process; None: unlimited or
    unknown."""
    if resource is None:
        return None, None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None, None
    inf = resource.RLIM_INFINITY
    return (None if soft == inf else int(soft)), (None if hard == inf else int(hard))


def raise_open_files_limit(want: int | None = None) -> int | None:
    """Raise the soft limit of open files to ``want`` (None: as far as the hard
    limit allows); never lowers it. Returns the soft limit then in force (None:
    unlimited or unknown). A refusal by the system leaves the limit as it was."""
    soft, hard = open_files_limit()
    if resource is None or soft is None:
        return soft
    target = hard if hard is not None else _CAP
    if want is not None:
        target = min(target, max(want, soft))
    if target > soft:
        for value in (target, 65536) if hard is None else (target,):
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_NOFILE,
                                   (value, resource.RLIM_INFINITY if hard is None else hard))
                break
    return open_files_limit()[0]


def ensure_open_files(path: str, locations: int) -> None:
    """Make sure reading ``locations`` locations of the archive ``path`` (one open
    event file each, :data:`RESERVE` more) fits the limit of open files: the soft
    limit is raised as far as needed and allowed; TraceError if even the hard
    limit is too small, naming both and how to raise them."""
    need = locations + RESERVE
    soft = raise_open_files_limit(need)
    if soft is None or soft >= need:
        return
    _, hard = open_files_limit()
    raise TraceError(
        f"reading its {locations:,} locations needs {need:,} open files, more than the "
        f"limit of open files of this process ({soft:,}, hard limit "
        f"{'unlimited' if hard is None else f'{hard:,}'}): raise it, e.g. with "
        f"ulimit -n {need} before the command (beyond the hard limit: "
        "/etc/security/limits.conf, or the batch system's settings)", source=path)
