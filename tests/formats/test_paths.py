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
