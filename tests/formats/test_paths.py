"""compensate.formats.paths: the output rules (umask modes, directories made for an
output removed again, OS errors as one-line OutputErrors, no commit after an
interrupt)."""

from __future__ import annotations

import errno
import os
import signal
import stat

import pytest

import compensate.interrupt as interrupt
from compensate.formats.paths import AtomicFile, AtomicOutput, OutputError


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
    from compensate.formats.paths import output_target  # noqa: PLC0415

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
