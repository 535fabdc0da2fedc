"""Where an output may go: never onto the input, by device and inode, and the names
of the hidden entries it is staged under, within NAME_MAX.

:mod:`compensate.formats.paths` (the atomic, locked output) applies these rules;
they are apart from it because they only look at names and ``stat``: a second
name of a directory (a bind mount, another mount of the same file system, a
symlink, ``..``) has the device and inode of the first, and a staging name must
be recognisable as its output's for a later run to clean it up.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from compensate.formats.registry import format_of

#: The longest file name (bytes) a file system takes (POSIX NAME_MAX of Linux,
#: macOS, the BSDs): temporary and staging names are kept within it.
NAME_MAX = 255
#: What follows a staging prefix: the random part of
#: :func:`compensate.formats.paths.make_temp_dir` (``secrets.token_hex(4)``).
_RANDOM = 8


def staging_prefix(name: str, kind: str) -> str:
    """The name prefix of a hidden entry made for the output ``name`` (a file, an
    archive directory, or an archive's stem inside its directory): ``.NAME.tmp-``
    (written under it), ``.NAME.old-`` (the replaced output, removed after the
    commit), ``.NAME.lock`` (:class:`compensate.formats.paths.OutputLock`; ``kind``
    ``lock`` has no random part). A ``name`` too long to leave room within
    :data:`NAME_MAX` for the rest is shortened to its head, ``~`` and a hash of
    the whole name, so that a long legal output name can still be staged, and the
    entries of a killed run are still recognised as this output's
    (:func:`compensate.formats.paths.clean_stale`)."""
    tail = "" if kind == "lock" else "-"
    room = NAME_MAX - len(f"..{kind}{tail}") - (0 if kind == "lock" else _RANDOM)
    raw = os.fsencode(name)
    if len(raw) > room:
        digest = hashlib.sha256(raw).hexdigest()[:16]
        name = os.fsdecode(raw[:room - len(digest) - 1]) + "~" + digest
    return f".{name}.{kind}{tail}"


def staging_name(name: str) -> re.Pattern[str]:
    """The names :mod:`compensate.formats.paths` gives to the staging entries
    (``tmp`` and ``old``) of the output ``name``."""
    prefixes = "|".join(re.escape(staging_prefix(name, k)) for k in ("tmp", "old"))
    return re.compile(f"(?:{prefixes})[0-9a-f]{{{_RANDOM}}}")


def is_staging(entry: str, name: str) -> bool:
    """Whether ``entry`` (a file name) is a staging entry of the output ``name``
    (written, or being written, by a run of this command) or its lock file."""
    return entry == staging_prefix(name, "lock") or bool(staging_name(name).fullmatch(entry))


def identity(path: str | Path) -> tuple[int, int] | None:
    """(device, inode) of an existing path (symlinks followed), else None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def chain(path: str | Path) -> list[tuple[int, int]]:
    """The identities of ``path`` and of each of its existing ancestors: a second
    name of a directory (a bind mount, another mount of the same file system, a
    symlink) has the same device and inode as the first. (Resolved first: the
    ancestors of ``a/b/../c`` are ``a``'s, not ``a/b``.)"""
    p = Path(path).resolve()
    return [i for i in map(identity, (p, *p.parents)) if i is not None]


def input_parts(in_path: str | Path) -> tuple[set, set]:
    """The identities of the input's files (the anchor or text trace; an OTF2
    archive's global definitions ``traces.def``) and of its folders nothing may be
    written into (an archive's directory and its data directory ``traces/``)."""
    src = Path(in_path).absolute()
    files = {identity(src)}
    folders: set = set()
    try:
        archive = format_of(in_path).archive
    except ValueError:  # (not a trace: only the file itself)
        archive = False
    if archive:
        files.add(identity(src.with_suffix(".def")))
        folders = {identity(src.parent), identity(src.with_suffix(""))}
    return files - {None}, folders - {None}


def is_part_of_input(path: str | Path, in_path: str | Path) -> bool:
    """Would writing the file ``path`` replace the input trace or a part of it:
    the file itself, and for an OTF2 archive its global definitions
    (``traces.def``) and anything in its data directory (``traces/*.evt``,
    ``*.def``)? Compared by device and inode, so that no second name of the
    input (a symlink, a hard link, a bind mount, ``..``) escapes."""
    target = Path(path).resolve()
    src = Path(in_path).resolve()
    if target == src:
        return True
    files, _ = input_parts(in_path)
    if identity(path) in files:
        return True
    try:
        if not format_of(in_path).archive:
            return False
    except ValueError:
        return False
    data = src.with_suffix("")
    if target == data.with_suffix(".def") or data in target.parents:
        return True
    data_id = identity(Path(in_path).absolute().with_suffix(""))
    return data_id is not None and data_id in chain(Path(path).absolute().parent)


def overwrites_input(in_path: str | Path, out: Path, target: Path, archive: bool) -> bool:
    """Whether the output ``out`` (replacing ``target``) would replace the input or a
    part of it, by device and inode: an OTF2 output whose archive directory is,
    or lies inside, the input's archive directory, or holds the input; a text
    output that is the input or lies in its data directory."""
    files, folders = input_parts(in_path)
    if identity(out) in files:
        return True
    if archive:
        if folders & set(chain(target)):
            return True
        here = identity(target)
        return here is not None and here in chain(Path(in_path).absolute().parent)
    data = identity(Path(in_path).absolute().with_suffix("")) if folders else None
    return data is not None and data in chain(out.parent)
