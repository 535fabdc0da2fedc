"""Trace file names and safe output: the format by suffix, and an output that is
never half-written and never the input.

* ``*.otf2``: an OTF2 anchor file. ``out/traces.otf2`` is the archive ``traces`` in
  directory ``out/``; the whole directory is written under a temporary name beside
  it and renamed into place when complete.
* ``*.trace``: the text format (docs/trace-format.md), written to a temporary file
  and renamed.

(The formats themselves, and what tells them apart here, are
:mod:`compensate.formats.registry`'s.) Outputs get the modes a plain
``open``/``mkdir`` would give (the umask applies), are never moved into place after
SIGINT/SIGTERM (:mod:`compensate.interrupt`), and an OS error creating or moving
them is an :class:`OutputError` that names the path and the reason.

The output is never the input, by device and inode rather than by name (a bind
mount, a symlink or a hard link is a second name of the same file:
:func:`output_target`), never inside the input's archive directory, and never a
directory holding the input. One output has one writer at a time
(:class:`OutputLock`), which checks again when it commits that it may replace
what is there. Temporary and staging names stay within :data:`NAME_MAX`
(:func:`staging_prefix`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO

import compensate.interrupt as interrupt
from compensate.errors import Refusal
from compensate.formats.outputerror import OutputError as OutputError  # (re-exported)
from compensate.formats.outputerror import output_error as output_error
from compensate.formats.placement import NAME_MAX as NAME_MAX  # (re-exported)
from compensate.formats.placement import (
    identity,
    is_staging,
    overwrites_input,
    staging_name,
    staging_prefix,
)
from compensate.formats.placement import is_part_of_input as is_part_of_input
from compensate.formats.registry import Format, format_of


def trace_format(path: str | Path) -> str:
    """'otf2' or 'text' from the file suffix; ValueError otherwise (the name of
    :func:`~compensate.formats.registry.format_of`)."""
    return format_of(path).name


def input_format(path: str | Path) -> str:
    """:func:`trace_format` of an input that must exist (TraceError otherwise)."""
    return format_of(path, must_exist=True).name


def output_target(in_path: str | Path, out_path: str | Path, force: bool) -> Path:
    """Check that ``out_path`` may be written; return the path that will be replaced
    (the archive directory for OTF2, the file for text)."""
    src = Path(in_path).resolve()
    out = Path(out_path).absolute()
    fmt = format_of(out_path)
    target = fmt.target(out)
    if fmt.archive and (target.resolve() == Path.cwd().resolve()
                        or out.parent == Path(out.anchor)):
        raise OutputError(f"an OTF2 output needs its own archive directory, "
                          f"e.g. out/{out.name}", file=str(out_path))
    overwrites = src == out.resolve() or overwrites_input(in_path, out, target, fmt.archive)
    if fmt.archive and not overwrites:
        overwrites = src.parent == target.resolve() or target.resolve() in src.parents
    if overwrites:
        raise OutputError(f"output would overwrite the input {in_path}", file=str(out_path))
    check_target(out, target, force)
    return target


def check_target(out_path: str | Path, target: Path, force: bool) -> None:
    """The rules for what is at the output now: without ``force`` nothing, with it a
    file (text) or a directory holding no more than one OTF2 archive; made when
    the run starts (:func:`output_target`) and again at the commit, under the
    output's lock (:class:`OutputLock`), since another run may have written it
    meanwhile."""
    out = Path(out_path).absolute()
    if format_of(out).archive:
        if target.exists() and not target.is_dir():
            raise OutputError(f"{target} is not a directory", file=str(out_path))
        # (the hidden staging entries of this output, a killed run's too, and the
        # lock file are not counted)
        held = [p.name for p in target.iterdir()
                if not is_staging(p.name, out.stem) and not is_staging(p.name, target.name)] \
            if target.is_dir() else []
        if held:
            if not force:
                raise OutputError(f"{target} exists (use --force to replace it)",
                                  file=str(out_path))
            expected = {out.name, out.stem + ".def", out.stem}
            extra = sorted(name for name in held if name not in expected)
            if extra:
                raise OutputError(
                    f"{target} holds more than an OTF2 archive "
                    f"({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}); "
                    f"refusing to replace it", file=str(out_path))
        return
    if os.path.lexists(out) and not force:
        raise OutputError("exists (use --force to replace it)", file=str(out_path))
    if out.is_dir():
        raise OutputError("is a directory", file=str(out_path))


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents (umask modes); return those
    created, deepest first, so that :func:`_remove_empty` can undo it."""
    missing = []
    d = directory
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
    return missing


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def _temp_name(directory: Path, prefix: str) -> Iterator[Path]:
    for _ in range(100):
        yield directory / f"{prefix}{secrets.token_hex(4)}"
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(directory / prefix))


def make_temp_dir(directory: Path, prefix: str) -> Path:
    """A new, empty directory in ``directory`` whose mode follows the umask (unlike
    ``tempfile.mkdtemp``'s 0700)."""
    for path in _temp_name(directory, prefix):
        try:
            path.mkdir(0o777)
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def make_temp_file(directory: Path, prefix: str) -> Path:
    """A new, empty file in ``directory`` whose mode follows the umask (unlike
    ``tempfile.mkstemp``'s 0600)."""
    for path in _temp_name(directory, prefix):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


class OutputLock:
    """The exclusive right to write one output, held from before the first byte is
    staged until the output is committed or discarded (:meth:`release`).

    An ``fcntl.flock`` on the lock file ``.NAME.lock`` beside the output's target
    (NAME: the archive directory of an OTF2 output, the file of a text one), in
    the target directory itself where its parent cannot be written (an existing
    directory, e.g. a mount point). A second run writing the same output, by any
    name of it, fails at once with an :class:`OutputError` ("another run is
    writing OUT"), so that two runs never mix their files. The kernel drops the
    lock when its process dies: a killed run leaves no stale lock, and whoever
    holds the lock next knows that the staging entries it finds of this output
    (``.NAME.tmp-*``, ``.NAME.old-*``) belong to no live writer and removes them
    (:func:`clean_stale`). :meth:`release` removes the lock file while still
    holding the lock (and whoever locks a file checks that it is still the one
    at that name), so nothing stays beside the output. On a file system without
    ``flock`` (``ENOLCK``, ``EOPNOTSUPP``) the run goes on unlocked.

    ``force`` (None: the caller checks nothing): :meth:`check` repeats
    :func:`check_target` under the lock, right before the commit.
    Missing directories up to the lock file's are created (umask modes) and,
    if empty, removed again by :meth:`release`."""

    def __init__(self, out_path: str | Path, target: Path, force: bool | None = None) -> None:
        self.out, self.target, self.force = Path(out_path).absolute(), target, force
        self._fd: int | None = None
        self.parents: list[Path] = []
        try:
            self.parents = _make_parents(target.parent)
            self.path, self._fd = _take_lock(target, str(out_path))
            clean_stale(self.out, target)
        except OSError as exc:
            self.release()
            raise output_error(out_path, "create the output", exc) from None
        except BaseException:
            self.release()
            raise

    def check(self) -> None:
        """:func:`check_target` again, under the lock (nothing if ``force`` is None)."""
        if self.force is not None:
            check_target(self.out, self.target, self.force)

    def release(self, keep_parents: bool = False) -> None:
        """Remove the lock file and give the lock up (idempotent); remove the
        directories made for it if empty, unless ``keep_parents``."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
        parents, self.parents = self.parents, []
        if not keep_parents:
            _remove_empty(parents)


#: flock errors of a file system that has no such locks: the run goes on unlocked
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def _open_lock_file(target: Path) -> tuple[Path, int]:
    """Open (create) the lock file of ``target``: beside it, or inside an existing
    target directory whose parent cannot be written."""
    name = staging_prefix(target.name, "lock")
    # (a symlink planted at that name is refused, not followed: ELOOP)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return target.parent / name, os.open(target.parent / name, flags, 0o666)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not target.is_dir():
            raise
    return target / name, os.open(target / name, flags, 0o666)


def _take_lock(target: Path, out_path: str) -> tuple[Path, int | None]:
    """Lock the lock file of ``target`` (created if missing): its path and open file
    descriptor (None where the file system has no locks)."""
    for _ in range(100):
        path, fd = _open_lock_file(target)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(f"another run is writing {out_path} (it holds {path}); "
                              f"try again when it has finished", file=out_path) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NO_LOCKS:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                return path, None
            raise
        # the previous holder removes the file before it unlocks: locked a removed
        # (or since replaced) file? then lock the one at that name now
        st = os.fstat(fd)
        if identity(path) == (st.st_dev, st.st_ino):
            return path, fd
        os.close(fd)
    raise OutputError(f"cannot lock {target}: its lock file keeps being replaced",
                      file=out_path)


def clean_stale(out: Path, target: Path) -> None:
    """Remove the staging entries of the output ``out`` (replacing ``target``) that
    a killed run left: ``.NAME.tmp-*``/``.NAME.old-*`` beside ``target`` and, in an
    archive directory, ``.STEM.tmp-*``/``.STEM.old-*`` inside it. Call only while
    holding the output's :class:`OutputLock`: no live run owns them then."""
    places = [(target.parent, target.name)]
    if target.is_dir():
        places.append((target, out.stem))
    for directory, name in places:
        pattern = staging_name(name)
        try:
            entries = [e for e in os.listdir(directory) if pattern.fullmatch(e)]
        except OSError:
            continue
        for entry in entries:
            path = directory / entry
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


class AtomicOutput:
    """A temporary output beside the target: an archive directory for OTF2, a file
    for text. :meth:`commit` moves it into place (replacing ``target``, as
    returned by :func:`output_target`), :meth:`discard` removes it; ``path`` is
    where to write (the anchor file inside the temporary directory, or the
    temporary file).

    Files and directories are created with the modes ``open``/``mkdir`` give (the
    umask applies). Directories created for the output (``out/`` of
    ``out/sub/traces.otf2``) are removed again by :meth:`discard` if empty. An
    OSError while creating or moving raises :class:`OutputError` naming the path
    and the reason. :meth:`commit` is :func:`compensate.interrupt.commit_point`:
    after SIGINT/SIGTERM the output is never moved into place.

    The output is locked (:class:`OutputLock`) from creation until the commit or
    discard: a second writer of the same output fails at once; ``force`` (the
    command's ``--force``; None: replace whatever is there) makes the commit
    check again that the output may be replaced (:func:`check_target`).
    """

    def __init__(self, out_path: str | Path, target: Path | None = None, *,
                 force: bool | None = None) -> None:
        out = Path(out_path).absolute()
        #: the output's format (:class:`~compensate.formats.registry.Format`)
        self.trace_format: Format = format_of(out)
        #: its name, ``"otf2"`` or ``"text"`` (for callers that compare names)
        self.format = self.trace_format.name
        if target is None:
            target = self.trace_format.target(out)
        self.out, self.target = out, target
        self._dir: Path | None = None
        self._file: Path | None = None
        self._parents: list[Path] = []
        self._inside = False
        self._lock = OutputLock(out_path, target, force)
        try:
            self._parents = _make_parents(target.parent)
            if self.trace_format.archive:
                self._dir, self._inside = staging_dir(target, out)
                self.path = str(self._dir / out.name)
            else:
                self._file = make_temp_file(out.parent, staging_prefix(out.name, "tmp"))
                self.path = str(self._file)
        except OSError as exc:
            self.discard()
            raise output_error(out_path, "create the output", exc) from None

    def commit(self, before: Callable[[], None] | None = None) -> None:
        """Move the output into place; ``before()`` runs right before (after the
        interrupt check: e.g. moving a summary file into place). The rules of
        :func:`check_target` are checked once more first, under the output's lock
        (another run may have written the output since this one started)."""
        with interrupt.shielded():
            self._lock.check()
            interrupt.commit_point()
            if before is not None:
                before()
            try:
                if self._dir is not None:
                    install_staged(self._dir, self.target, self.out.name, self._inside)
                    self._dir = None
                elif self._file is not None:
                    os.replace(self._file, self.out)
                    self._file = None
            except OSError as exc:
                raise output_error(self.out, "move the output into place", exc) from None
            self._parents = []
            self._lock.release(keep_parents=True)

    def discard(self) -> None:
        """Remove the temporary output, and the directories created for it
        (idempotent; nothing after :meth:`commit`). Called while an exception
        propagates (a failed write), it rewrites the temporary path in the
        exception's message to the output's, so that the user reads the path
        they gave."""
        with interrupt.shielded():
            tmp_dir, self._dir = self._dir, None
            tmp_file, self._file = self._file, None
            exc = sys.exc_info()[1]
            if exc is not None:
                if tmp_dir is not None:
                    _rename_in_message(exc, str(tmp_dir / self.out.name), str(self.out))
                    _rename_in_message(exc, str(tmp_dir), str(self.target))
                if tmp_file is not None:
                    _rename_in_message(exc, str(tmp_file), str(self.out))
            if tmp_dir is not None:
                shutil.rmtree(tmp_dir, ignore_errors=True)
            if tmp_file is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_file)
            parents, self._parents = self._parents, []
            _remove_empty(parents)
            self._lock.release()


class AtomicFile:
    """A file written under a temporary name beside ``path`` and renamed into place
    by :meth:`commit` (``--summary`` JSON, report JSON): created at once, so that a
    path that cannot be written fails before the work (OutputError naming it and
    the reason), with the umask's mode; :meth:`discard` removes it. With
    ``force=False`` the commit never replaces a file that appeared at ``path``
    meanwhile (a hard link, which fails if the name exists: "exists (use --force
    to replace it)")."""

    def __init__(self, path: str | Path, *, force: bool = True) -> None:
        self.out = Path(path)
        self.force = force
        self._tmp: Path | None = None
        self._parents: list[Path] = []
        if self.out.is_dir():
            raise OutputError("is a directory", file=str(path))
        try:
            self._parents = _make_parents(self.out.absolute().parent)
            self._tmp = make_temp_file(self.out.absolute().parent,
                                       staging_prefix(self.out.name, "tmp"))
        except OSError as exc:
            self.discard()
            raise output_error(path, "write", exc) from None

    @contextlib.contextmanager
    def open(self) -> Generator[IO[str], None, None]:
        """The temporary file for writing (UTF-8 text); an OSError becomes an
        :class:`OutputError` naming the path."""
        if self._tmp is None:
            raise OutputError("already committed or discarded", file=str(self.out))
        try:
            with open(self._tmp, "w", encoding="utf-8") as f:
                yield f
        except OSError as exc:
            raise output_error(self.out, "write", exc) from None

    def write_text(self, text: str) -> None:
        """Write ``text`` (UTF-8) to the temporary file."""
        with self.open() as f:
            f.write(text)

    def commit(self) -> None:
        """Move the file into place (not after an interrupt:
        :func:`compensate.interrupt.commit_point`)."""
        with interrupt.shielded():
            if self._tmp is None:
                return
            if not self.force and os.path.lexists(self.out):
                raise OutputError("exists (use --force to replace it)", file=str(self.out))
            interrupt.commit_point()
            try:
                if self.force or not _link_into_place(self._tmp, self.out):
                    os.replace(self._tmp, self.out)
            except FileExistsError:
                raise OutputError("exists (use --force to replace it)",
                                  file=str(self.out)) from None
            except OSError as exc:
                raise output_error(self.out, "write", exc) from None
            self._tmp, self._parents = None, []

    def discard(self) -> None:
        """Remove the temporary file (idempotent; nothing after :meth:`commit`)."""
        with interrupt.shielded():
            tmp, self._tmp = self._tmp, None
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            parents, self._parents = self._parents, []
            _remove_empty(parents)


def _link_into_place(tmp: Path, out: Path) -> bool:
    """Give ``tmp`` the name ``out`` only if no file has it (FileExistsError
    otherwise), and remove the name ``tmp``; False where the file system has no
    hard links (then the caller renames)."""
    try:
        os.link(tmp, out)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK,
                         errno.ENOSYS):
            return False
        raise
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return True


def _rename_in_message(exc: BaseException, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the string arguments of ``exc`` (its message)
    and in the fields its message is made of: an OSError's strerror and file
    names, a :class:`~compensate.errors.Refusal`'s file and reason."""
    if any(isinstance(a, str) and old in a for a in exc.args):
        exc.args = tuple(a.replace(old, new) if isinstance(a, str) else a for a in exc.args)
    if isinstance(exc, OSError):
        fields: tuple[str, ...] = ("strerror", "filename", "filename2")
    elif isinstance(exc, Refusal):
        fields = ("file", "reason")
    else:
        return
    for attr in fields:
        value = getattr(exc, attr)
        if isinstance(value, str) and old in value:
            setattr(exc, attr, value.replace(old, new))


def replace_entries(new: str | Path, target: str | Path, anchor: str) -> None:
    """Move the entries of directory ``new`` (a complete archive written beside or
    inside ``target``) into ``target``, replacing those of the same names: the old
    anchor goes first and the new one comes last, so that no reader ever opens a
    mix. If a move fails (or is interrupted), the entries moved are put back."""
    new, target = Path(new), Path(target)
    entries = sorted(os.listdir(new), key=lambda name: name == anchor)  # anchor last
    old_dir = None
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        present = sorted((e for e in entries if os.path.lexists(target / e)),
                         key=lambda name: name != anchor)  # anchor first
        if present:
            old_dir = make_temp_dir(target, staging_prefix(Path(anchor).stem, "old"))
            for e in present:
                os.rename(target / e, old_dir / e)
                moved_old.append(e)
        for e in entries:
            os.rename(new / e, target / e)
            moved_new.append(e)
    except BaseException:
        for e in reversed(moved_new):
            with contextlib.suppress(OSError):
                os.rename(target / e, new / e)
        for e in reversed(moved_old):
            with contextlib.suppress(OSError):
                os.rename(old_dir / e, target / e)  # type: ignore[operator]
        if old_dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(old_dir)
        raise
    if old_dir is not None:
        shutil.rmtree(old_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(new)


def staging_dir(target: Path, out: Path) -> tuple[Path, bool]:
    """A new hidden directory to write the OTF2 archive ``out`` (its anchor) into
    before it replaces ``target`` (its archive directory), and whether it lies
    inside ``target``: an existing directory (empty, or the archive --force
    replaces) may be a mount point or sit in a directory we cannot write, so the
    archive is made inside it and moved in by :func:`replace_entries`; else
    beside it, and renamed into place by :func:`_replace_dir`."""
    if target.is_dir():
        return make_temp_dir(target, staging_prefix(out.stem, "tmp")), True
    return make_temp_dir(target.parent, staging_prefix(target.name, "tmp")), False


def install_staged(staged: Path, target: Path, anchor: str, inside: bool) -> None:
    """Put the complete archive in ``staged`` (from :func:`staging_dir`, with
    ``inside`` as it said) in place of ``target``, its archive directory."""
    if inside:
        replace_entries(staged, target, anchor)
    else:
        _replace_dir(staged, target)


def _replace_dir(new: Path, target: Path) -> None:
    """Move directory ``new`` to ``target``, replacing an existing one only after the
    new one is complete."""
    if target.exists():
        if not any(target.iterdir()):
            target.rmdir()
        else:
            old = make_temp_dir(target.parent, staging_prefix(target.name, "old"))
            os.rename(target, old / "archive")
            os.rename(new, target)
            shutil.rmtree(old, ignore_errors=True)
            return
    os.rename(new, target)
