"""compensate.formats.paths: the output rules (umask modes, directories made for an
output removed again, OS errors as one-line OutputErrors, no commit after an
interrupt; the input recognised by device and inode, one writer per output, the
"exists" check at the commit, stale staging entries removed, names within
NAME_MAX)."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

import compensate.interrupt as interrupt
from compensate.formats.paths import (
    NAME_MAX,
    AtomicFile,
    AtomicOutput,
    OutputError,
    is_part_of_input,
    output_target,
    staging_prefix,
)


@pytest.mark.parametrize("name", ["o.trace", "traces.otf2"])
def test_discard_removes_the_directories_it_made(tmp_path, name):
    out = AtomicOutput(tmp_path / "a" / "b" / "c" / name)
    assert (tmp_path / "a").is_dir()
    out.discard()
    assert os.listdir(tmp_path) == []


def test_commit_keeps_the_directories(tmp_path):
    out = AtomicOutput(tmp_path / "a" / "b.trace")
    with open(out.path, "w") as f:
        f.write("x")
    out.commit()
    out.discard()  # nothing after the commit
    assert (tmp_path / "a" / "b.trace").read_text() == "x"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_temporary_outputs_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        d = AtomicOutput(tmp_path / "x" / "traces.otf2")
        f = AtomicOutput(tmp_path / "y.trace")
        j = AtomicFile(tmp_path / "z.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(os.path.dirname(d.path)).st_mode) == 0o777 & ~umask
    assert stat.S_IMODE(os.stat(f.path).st_mode) == 0o666 & ~umask
    j.write_text("{}")
    j.commit()
    assert stat.S_IMODE(os.stat(tmp_path / "z.json").st_mode) == 0o666 & ~umask
    d.discard()
    f.discard()


def test_os_errors_name_the_path_and_the_reason(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError) as exc:
        AtomicOutput(tmp_path / "file" / "o" / "traces.otf2")
    assert str(exc.value).startswith(f"{tmp_path}/file/o/traces.otf2: cannot create the output")
    assert str(exc.value).endswith(os.strerror(errno.ENOTDIR))
    with pytest.raises(OutputError, match="is a directory"):
        AtomicFile(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_no_commit_after_an_interrupt(tmp_path):
    out = AtomicOutput(tmp_path / "o.trace")
    summary = AtomicFile(tmp_path / "s.json")
    summary.write_text("{}")
    with interrupt.handling():
        with interrupt.shielded():  # as if swallowed by C code
            signal.raise_signal(signal.SIGINT)
        with pytest.raises(interrupt.Interrupted):
            out.commit(before=summary.commit)
    out.discard()
    summary.discard()
    assert os.listdir(tmp_path) == []


def _archive(directory, stem="traces", text="new"):
    """A stand-in OTF2 archive (anchor, definitions, data directory) in ``directory``."""
    os.makedirs(directory / stem, exist_ok=True)
    (directory / f"{stem}.otf2").write_text(text)
    (directory / f"{stem}.def").write_text(text)
    (directory / stem / "0.evt").write_text(text)


def test_an_existing_directory_is_written_into_not_replaced(tmp_path):
    """An existing archive directory (empty, or the archive --force replaces) is
    kept, as a mount point or a directory in an unwritable parent must be: the
    archive is staged inside it and moved in file by file."""
    target = tmp_path / "out"
    target.mkdir()
    inode = target.stat().st_ino
    out = AtomicOutput(target / "traces.otf2")
    assert os.path.dirname(os.path.dirname(out.path)) == str(target)  # staged inside
    _archive(tmp_path / "out" / os.path.basename(os.path.dirname(out.path)))
    out.commit()
    assert target.stat().st_ino == inode
    assert sorted(os.listdir(target)) == ["traces", "traces.def", "traces.otf2"]
    # --force over it: the same directory, the new files, nothing else left
    out = AtomicOutput(target / "traces.otf2")
    _archive(target / os.path.basename(os.path.dirname(out.path)), text="newer")
    out.commit()
    assert target.stat().st_ino == inode
    assert sorted(os.listdir(target)) == ["traces", "traces.def", "traces.otf2"]
    assert {(target / n).read_text() for n in ("traces.otf2", "traces.def", "traces/0.evt")} \
        == {"newer"}


def test_a_failed_move_puts_the_old_archive_back(tmp_path, monkeypatch):
    target = tmp_path / "out"
    _archive(target, text="old")
    out = AtomicOutput(target / "traces.otf2")
    _archive(target / os.path.basename(os.path.dirname(out.path)))
    real = os.rename

    def rename(src, dst):
        if str(dst) == str(target / "traces.otf2") and "old" not in str(src):
            raise OSError(errno.EIO, "I/O error")  # the new anchor, last
        real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OutputError, match="cannot move the output into place"):
        out.commit()
    monkeypatch.undo()
    out.discard()
    assert sorted(os.listdir(target)) == ["traces", "traces.def", "traces.otf2"]
    assert {(target / n).read_text() for n in ("traces.otf2", "traces.def", "traces/0.evt")} \
        == {"old"}


@pytest.mark.parametrize("name", ["o/traces.otf2", "o.trace"])
def test_a_failed_write_names_the_output_not_the_temporary_path(tmp_path, name):
    """An error raised while writing (the OTF2 library names the file it failed
    on) reaches the user with the output's path once the temporary one is gone."""
    out = AtomicOutput(tmp_path / name)
    tmp = out.path
    with pytest.raises(OSError) as exc:
        try:
            raise OSError(errno.ENOSPC, f"{tmp}: No space left on device")
        except OSError:
            out.discard()
            raise
    assert tmp not in str(exc.value)
    assert str(tmp_path / name) in str(exc.value)
    assert os.listdir(tmp_path) == []


def test_a_killed_runs_staging_directory_does_not_count_as_content(tmp_path):
    """A run killed while writing into an existing archive directory leaves its
    hidden staging directory there: the next run does not count it (no --force
    needed for an otherwise empty directory, no 'holds more than an archive')."""
    src = tmp_path / "in" / "traces.otf2"
    _archive(src.parent)
    out = tmp_path / "out"
    (out / ".traces.tmp-0123abcd").mkdir(parents=True)
    assert output_target(src, out / "traces.otf2", force=False) == out
    _archive(out, text="old")
    with pytest.raises(OutputError, match="exists"):
        output_target(src, out / "traces.otf2", force=False)
    assert output_target(src, out / "traces.otf2", force=True) == out
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        output_target(src, tmp_path / "file" / "traces.otf2", force=True)


# -- the output is never the input, by device and inode ---------------------------------

@contextlib.contextmanager
def bind_mount(source, mount_point):
    """``mount --bind SOURCE MOUNT_POINT`` for the duration (a second name of the same
    directory, as container volumes and NFS give); skips the test where this
    process may not mount."""
    os.makedirs(mount_point, exist_ok=True)
    try:
        done = subprocess.run(["mount", "--bind", str(source), str(mount_point)],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], capture_output=True, timeout=20)


@pytest.mark.parametrize("out", ["in/traces.otf2", "in/traces/0/traces.otf2",
                                 "in/traces/o.trace", "in/sub/traces.otf2", "traces.trace"])
def test_the_input_through_a_bind_mount_is_refused(tmp_path, out):
    """OUT = IN (or inside its archive) under a second mount of the input's
    directory: refused, though no path string is the input's."""
    _archive(tmp_path / "a" / "in")
    (tmp_path / "a" / "traces.trace").write_text("text input\n")
    text = out == "traces.trace"
    src = tmp_path / "a" / ("traces.trace" if text else "in/traces.otf2")
    with bind_mount(tmp_path / "a", tmp_path / "b"):
        with pytest.raises(OutputError, match="would overwrite the input"):
            output_target(src, tmp_path / "b" / out, force=True)


def test_a_symlinked_directory_alias_is_refused(tmp_path):
    _archive(tmp_path / "a" / "in")
    (tmp_path / "alias").symlink_to(tmp_path / "a")
    src = tmp_path / "a" / "in" / "traces.otf2"
    for out in ("alias/in/traces.otf2", "alias/in/sub/traces.otf2", "alias/in/traces/o.trace"):
        with pytest.raises(OutputError, match="would overwrite the input"):
            output_target(src, tmp_path / out, force=True)
    assert is_part_of_input(tmp_path / "alias" / "in" / "traces" / "0.evt", src)
    assert is_part_of_input(tmp_path / "alias" / "in" / "traces.def", src)
    assert not is_part_of_input(tmp_path / "alias" / "s.json", src)


def test_the_output_never_lies_inside_the_inputs_archive_directory(tmp_path):
    """An OTF2 output in a directory inside the input's archive directory (or the
    input inside the output's) is refused; a text output beside the anchor is
    not a part of the archive and stays allowed."""
    _archive(tmp_path / "in")
    src = tmp_path / "in" / "traces.otf2"
    for out in ("in/sub/traces.otf2", "in/sub/deeper/t.otf2", "traces.otf2"):
        with pytest.raises(OutputError, match="would overwrite the input"):
            output_target(src, tmp_path / out, force=True)
    assert output_target(src, tmp_path / "in" / "o.trace", force=False) == \
        tmp_path / "in" / "o.trace"
    # (a way out of it through "..": not inside)
    assert output_target(src, tmp_path / "in" / ".." / "out" / "traces.otf2", force=False) \
        == tmp_path / "in" / ".." / "out"


# -- one writer at a time; the "exists" check at the commit ------------------------------

@pytest.mark.parametrize("name", ["o.trace", "out/traces.otf2"])
def test_a_second_writer_of_the_same_output_fails_at_once(tmp_path, name):
    first = AtomicOutput(tmp_path / name)
    with pytest.raises(OutputError, match="another run is writing"):
        AtomicOutput(tmp_path / name)
    (tmp_path / "alias").symlink_to(tmp_path)  # by another name too
    with pytest.raises(OutputError, match="another run is writing"):
        AtomicOutput(tmp_path / "alias" / name)
    first.discard()
    assert sorted(os.listdir(tmp_path)) == ["alias"]  # no lock file stays
    second = AtomicOutput(tmp_path / name)
    second.discard()


def test_the_lock_is_held_until_the_commit_and_no_lock_file_stays(tmp_path):
    out = AtomicOutput(tmp_path / "o.trace")
    with open(out.path, "w") as f:
        f.write("x")
    out.commit()
    again = AtomicOutput(tmp_path / "o.trace")  # free again
    again.discard()
    assert sorted(os.listdir(tmp_path)) == ["o.trace"]


@pytest.mark.parametrize("name", ["o.trace", "out/traces.otf2"])
def test_the_exists_check_is_repeated_at_the_commit(tmp_path, name):
    """Another writer finished OUT after this run's start check: without --force
    the commit refuses, and what the other wrote stays."""
    out = AtomicOutput(tmp_path / name, force=False)
    if name.endswith(".otf2"):
        with open(out.path, "w") as f:
            f.write("mine")
        _archive(tmp_path / "out", text="theirs")
    else:
        (tmp_path / name).write_text("theirs")
    with pytest.raises(OutputError, match="exists"):
        out.commit()
    out.discard()
    assert (tmp_path / ("out/traces.otf2" if name.endswith(".otf2") else name)).read_text() \
        == "theirs"
    assert [p for p in tmp_path.rglob("*") if ".tmp-" in p.name or ".lock" in p.name] == []


def test_a_summary_file_is_not_replaced_without_force(tmp_path):
    j = AtomicFile(tmp_path / "s.json", force=False)
    j.write_text("mine")
    (tmp_path / "s.json").write_text("theirs")
    with pytest.raises(OutputError, match="exists"):
        j.commit()
    j.discard()
    assert os.listdir(tmp_path) == ["s.json"] and (tmp_path / "s.json").read_text() == "theirs"


def test_a_killed_runs_staging_entries_are_removed_by_the_next_writer(tmp_path):
    """Holding the lock proves that no live run owns them; another output's entries
    (and names that only look alike) stay."""
    _archive(tmp_path / "out", text="old")
    stale = [tmp_path / ".out.tmp-0123abcd", tmp_path / ".out.old-89abcdef",
             tmp_path / "out" / ".traces.tmp-00000000", tmp_path / "out" / ".traces.old-ffffffff",
             tmp_path / ".o.trace.tmp-12345678"]
    kept = [tmp_path / ".other.tmp-0123abcd", tmp_path / ".out.tmp-notmine",
            tmp_path / "out" / ".x.tmp-00000000"]
    for p in stale[:4] + kept[1:]:
        p.mkdir()
        (p / "f").write_text("")
    for p in stale[4:] + kept[:1]:
        p.write_text("")
    out = AtomicOutput(tmp_path / "out" / "traces.otf2", force=True)
    text = AtomicOutput(tmp_path / "o.trace")
    assert [p for p in stale if os.path.lexists(p)] == []
    assert all(p.exists() for p in kept)
    out.discard()
    text.discard()


# -- long names -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["x" * 249 + ".trace", "é" * 122 + "xx.trace",
                                  "d" * 255 + "/traces.otf2", "out/" + "s" * 250 + ".otf2"],
                         ids=["text", "text-utf8", "archive-directory", "archive-stem"])
def test_long_legal_output_names_can_be_staged(tmp_path, name):
    """Temporary and staging names stay within NAME_MAX (the name's head and a
    hash), and a killed run's are still recognised."""
    path = tmp_path / name
    out = AtomicOutput(path)
    names = [os.fsencode(p.name) for p in tmp_path.rglob("*")]
    assert names and max(map(len, names)) <= NAME_MAX
    if name.endswith(".trace"):
        with open(out.path, "w") as f:
            f.write("x")
    else:
        _archive(Path(out.path).parent, stem=path.stem)
    out.commit()
    assert path.exists() and max(len(os.fsencode(p.name)) for p in tmp_path.rglob("*")) \
        <= NAME_MAX
    target = path.parent if name.endswith(".otf2") else path
    stale = target.parent / (staging_prefix(target.name, "tmp") + "0123abcd")
    stale.mkdir()
    AtomicOutput(path).discard()
    assert not stale.exists()


def test_the_lock_file_lives_inside_an_existing_directory_whose_parent_is_read_only(
        tmp_path, monkeypatch):
    """(root ignores modes: the parent's refusal is injected.) The lock file goes
    into the archive directory, where it does not count as content, and a second
    writer still finds it."""
    import compensate.formats.paths as paths

    target = tmp_path / "out"
    target.mkdir()
    real = os.open

    def read_only_parent(path, flags, mode=0o777):
        if os.path.dirname(path) == str(tmp_path) and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path, flags, mode)

    monkeypatch.setattr(paths.os, "open", read_only_parent)
    first = AtomicOutput(target / "traces.otf2", force=False)
    assert (target / ".out.lock").exists()
    with pytest.raises(OutputError, match="another run is writing"):
        AtomicOutput(target / "traces.otf2")
    _archive(Path(first.path).parent)  # (staged inside the directory)
    first.commit()  # (the lock file is no content: no "exists")
    assert sorted(os.listdir(target)) == ["traces", "traces.def", "traces.otf2"]
