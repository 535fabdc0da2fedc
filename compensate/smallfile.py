"""Reading a small file that is not a trace (a platform file): a regular file only,
and only up to a size limit.

A path the user gives may name a FIFO, a device (``/dev/zero``, a terminal) or a
socket: reading one would wait for a writer that never comes or read without end.
The file is opened without blocking (``O_NONBLOCK``: opening a FIFO does not wait
for its writer), checked on the open descriptor to be a regular file (no race
between the check and the read), and read up to :data:`LIMIT` bytes: a platform
file is a few kilobytes, so more is not one.
"""

from __future__ import annotations

import os
import stat

#: The most a small file may hold (16 MiB): a platform file with a thousand-entry
#: copy table and every calibration detail is well under 1 MiB.
LIMIT = 16 << 20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class NotRegular(Exception):
    """The path is not a regular file; ``kind``: what it is (``a FIFO (named pipe)``,
    ``a directory``, ...)."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"is {kind}, not a regular file")
        self.kind = kind


class TooLarge(Exception):
    """The file holds more than the limit (the message says how much)."""


def kind_of(mode: int) -> str | None:
    """What a ``st_mode`` names if it is not a regular file (None if it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_small(path: str | os.PathLike, limit: int = LIMIT) -> bytes:
    """The whole content of the regular file ``path``, at most ``limit`` bytes.

    :class:`NotRegular` for anything else (never blocks on a FIFO or reads a device
    without end), :class:`TooLarge` above ``limit``, OSError for what the system
    refuses (not found, permission denied)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise NotRegular(kind)
        if st.st_size > limit:
            raise TooLarge(f"holds {st.st_size:,} bytes, more than {limit:,}")
        parts, size = [], 0
        while size <= limit:  # a file that grows while read stops at the limit too
            block = os.read(fd, min(1 << 20, limit + 1 - size))
            if not block:
                break
            parts.append(block)
            size += len(block)
        if size > limit:
            raise TooLarge(f"holds more than {limit:,} bytes")
        return b"".join(parts)
    finally:
        os.close(fd)


def special_in_archive(anchor: str | os.PathLike) -> tuple[str, str] | None:
    """The first file of the OTF2 archive of ``anchor`` (``X.otf2``: ``X.def``,
    ``X.marker`` and the files in ``X/``) that exists but is not a regular file, as
    (path, what it is); None if there is none. The OTF2 library would open such a
    file and wait on a FIFO, or read a device without end; one directory listing
    finds it (d_type, no stat per file but for symlinks)."""
    base = os.fspath(anchor)
    stem = base[: -len(".otf2")] if base.lower().endswith(".otf2") else base
    candidates = [stem + ".def", stem + ".marker"]
    try:
        with os.scandir(stem) as entries:
            for entry in entries:
                if entry.is_file() or entry.is_dir():  # a sub-directory is OTF2's own
                    continue
                candidates.append(entry.path)
    except OSError:
        pass  # no folder: the reader says what is missing
    for path in candidates:
        try:
            kind = kind_of(os.stat(path).st_mode)
        except OSError:
            continue  # missing or a dangling link: the reader's message
        if kind is not None:
            return path, kind
    return None
