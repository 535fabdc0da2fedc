"""Outputs that cannot be written: one line on stderr naming the path and the reason
(the OS's strerror), exit 3 (2 for a usage error), never "internal error", and
nothing left at OUT or beside it. Outputs created follow the umask.

Real conditions where this machine allows them (a path through a regular file, an
existing output, OUT equal to IN, a directory); injected OSErrors for the others
(read-only file system, permission denied, no space left), since the tests may run
as root, which no mode bit stops.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

import compensate.formats.paths as paths
from compensate.cli import main

from ..conftest import ROOT, TRACES
from ..formats.test_paths import bind_mount

EXAMPLE = ROOT / "examples" / "pingpong.trace"
PLATFORM = {"event_overhead": 1e-7, "copy_time": [{"bytes": 1000, "seconds": 5e-8}]}
OUTS = ["o.trace", "o/traces.otf2"]


@pytest.fixture
def platform_file(tmp_path):
    path = tmp_path / "platform.json"
    path.write_text(json.dumps(PLATFORM))
    return path


def run(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err
    return code, err


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def nothing_beside(directory: Path, keep: set[str]) -> None:
    assert sorted(set(os.listdir(directory)) - keep) == []


@pytest.mark.parametrize("out", OUTS)
@pytest.mark.parametrize("mode", ["streaming", "in-memory"])
def test_path_through_a_regular_file(tmp_path, capsys, platform_file, out, mode):
    (tmp_path / "a").write_text("a file\n")
    target = tmp_path / "a" / "b" / out
    extra = ["--in-memory"] if mode == "in-memory" else []
    code, err = run(capsys, EXAMPLE, target, "--platform", platform_file, *extra)
    line = one_line(err)
    assert code == 3
    assert line.startswith(f"compensate: error: {target}: cannot create the output")
    assert os.strerror(errno.ENOTDIR) in line
    assert (tmp_path / "a").read_text() == "a file\n"


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("out", OUTS)
def test_read_only_or_denied_directory(tmp_path, capsys, platform_file, monkeypatch, error,
                                       out):
    def refuse(directory, prefix):
        raise OSError(error, os.strerror(error), str(directory / prefix))

    monkeypatch.setattr(paths, "make_temp_dir", refuse)
    monkeypatch.setattr(paths, "make_temp_file", refuse)
    target = tmp_path / "ro" / out
    code, err = run(capsys, EXAMPLE, target, "--platform", platform_file)
    line = one_line(err)
    assert code == 3 and str(target) in line and os.strerror(error) in line
    nothing_beside(tmp_path, {"platform.json"})  # the directory made for it is gone too


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
@pytest.mark.parametrize("out", OUTS)
def test_really_read_only_directory(tmp_path, capsys, platform_file, out):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, err = run(capsys, EXAMPLE, ro / out, "--platform", platform_file)
    finally:
        ro.chmod(0o700)
    assert code == 3 and os.strerror(errno.EACCES) in one_line(err)
    assert os.listdir(ro) == []


@pytest.mark.parametrize("mode", ["streaming", "in-memory"])
def test_no_space_left_while_writing(tmp_path, capsys, platform_file, monkeypatch, mode):
    import compensate.formats.text as text
    import compensate.formats.text.write as text_write

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(text_write.TextEventWriter, "write", full)
    monkeypatch.setattr(text, "write_text", full)
    target = tmp_path / "o.trace"
    extra = ["--in-memory"] if mode == "in-memory" else []
    code, err = run(capsys, EXAMPLE, target, "--platform", platform_file, *extra)
    line = one_line(err)
    assert code == 3
    assert line == f"compensate: error: {target}: cannot write: {os.strerror(errno.ENOSPC)}"
    nothing_beside(tmp_path, {"platform.json"})


def test_summary_through_a_device(tmp_path, capsys, platform_file):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    code, err = run(capsys, EXAMPLE, tmp_path / "o.trace", "--platform", platform_file,
                    "--summary", "/dev/full/s.json")
    assert code == 3 and "/dev/full/s.json" in one_line(err)
    assert not (tmp_path / "o.trace").exists()


def test_out_equal_to_in_and_existing_out(tmp_path, capsys, platform_file):
    src = tmp_path / "in.trace"
    src.write_text(EXAMPLE.read_text())
    code, err = run(capsys, src, src, "--platform", platform_file)
    assert code == 3 and "would overwrite the input" in one_line(err)
    assert src.read_text() == EXAMPLE.read_text()
    out = tmp_path / "o.trace"
    out.write_text("keep\n")
    code, err = run(capsys, src, out, "--platform", platform_file)
    assert code == 3 and "exists (use --force" in one_line(err) and str(out) in err
    assert out.read_text() == "keep\n"


@pytest.mark.parametrize("case", ["through-a-file", "directory", "input", "inside-output",
                                  "read-only"])
def test_summary_errors_fail_before_the_work(tmp_path, capsys, platform_file, monkeypatch,
                                             case):
    (tmp_path / "a").write_text("x")
    (tmp_path / "d").mkdir()
    summary = {"through-a-file": tmp_path / "a" / "s.json", "directory": tmp_path / "d",
               "input": EXAMPLE, "inside-output": tmp_path / "o" / "s.json",
               "read-only": tmp_path / "r" / "s.json"}[case]
    if case == "read-only":
        def refuse(directory, prefix):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(directory / prefix))
        monkeypatch.setattr(paths, "make_temp_file", refuse)
    code, err = run(capsys, EXAMPLE, tmp_path / "o" / "traces.otf2", "--platform",
                    platform_file, "--summary", summary)
    line = one_line(err)
    assert code == 3 and line.startswith(f"compensate: error: {summary}: ")
    nothing_beside(tmp_path, {"platform.json", "a", "d"})
    assert sorted(os.listdir(tmp_path / "d")) == []


@pytest.mark.parametrize("member", ["traces.def", "traces/0.evt", "traces/../traces.otf2"])
def test_summary_or_report_json_never_replaces_a_part_of_the_input_archive(
        tmp_path, capsys, member):
    """``--summary`` and ``report --json`` naming a file of the input archive (its
    definitions, an event file) are refused like the anchor itself: both used to
    replace it with JSON and exit 0, destroying the input."""
    src = tmp_path / "in" / "traces.otf2"
    shutil.copytree(TRACES / "ping-pong-otf2", src.parent)
    before = {p: p.read_bytes() for p in src.parent.rglob("*") if p.is_file()}
    code, err = run(capsys, src, tmp_path / "out" / "traces.otf2", "--overhead", "250ns",
                    "--summary", src.parent / member)
    assert code == 3 and "would overwrite the input" in one_line(err)
    code, err = run(capsys, "report", src, "--json", src.parent / member)
    assert code == 3 and "would overwrite the input" in err.splitlines()[-1]
    assert {p: p.read_bytes() for p in src.parent.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "out").exists()


def test_export_and_report_output_errors(tmp_path, capsys):
    (tmp_path / "a").write_text("x")
    code, err = run(capsys, "export", EXAMPLE, tmp_path / "a" / "e.json")
    assert code == 3 and os.strerror(errno.ENOTDIR) in one_line(err)
    code, err = run(capsys, "report", EXAMPLE, "--json", tmp_path / "a" / "r.json")
    assert code == 3 and os.strerror(errno.ENOTDIR) in err.splitlines()[-1]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_outputs_follow_the_umask(tmp_path, capsys, platform_file, umask):
    old = os.umask(umask)
    try:
        assert main([str(EXAMPLE), str(tmp_path / "new" / "o" / "traces.otf2"), "--platform",
                     str(platform_file), "--summary", str(tmp_path / "s.json"),
                     "--quiet"]) == 0
        assert main([str(EXAMPLE), str(tmp_path / "o.trace"), "--platform",
                     str(platform_file), "--quiet"]) == 0
        assert main(["export", str(EXAMPLE), str(tmp_path / "e.json")]) == 0
        assert main(["report", str(EXAMPLE), "--json", str(tmp_path / "r.json")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    made = [p for p in tmp_path.rglob("*") if p.name != "platform.json"]
    assert len(made) > 8
    for p in made:
        want = (0o777 if p.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode))


def test_python_api_output_error_is_one_line(tmp_path):
    import compensate as c

    (tmp_path / "a").write_text("x")
    t = c.read(EXAMPLE)
    with pytest.raises(paths.OutputError, match=f"o.trace: cannot create the output .*: "
                                                 f"{os.strerror(errno.ENOTDIR)}$"):
        c.write(t, tmp_path / "a" / "o.trace")


# -- the input by device and inode; one writer per output; long names --------------------

def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("out", ["in/traces.otf2", "in/sub/traces.otf2", "in/traces/o.trace"])
def test_force_through_a_bind_mount_never_replaces_the_input(tmp_path, capsys, out):
    """OUT = IN through a second mount of its directory, with --force: refused (the
    input's event files used to be replaced by the output, exit 0)."""
    src = tmp_path / "a" / "in" / "traces.otf2"
    shutil.copytree(TRACES / "ping-pong-otf2", src.parent)
    (src.parent / "MANIFEST.md").unlink()  # (the archive alone: --force would replace it)
    before = _tree(tmp_path / "a")
    with bind_mount(tmp_path / "a", tmp_path / "b"):
        for extra in ([], ["--in-memory"]):
            code, err = run(capsys, src, tmp_path / "b" / out, "--overhead", "250ns",
                            "--force", *extra)
            assert code == 3 and "would overwrite the input" in one_line(err)
    assert _tree(tmp_path / "a") == before


def test_an_output_inside_the_inputs_archive_directory_is_refused(tmp_path, capsys):
    src = tmp_path / "in" / "traces.otf2"
    shutil.copytree(TRACES / "ping-pong-otf2", src.parent)
    before = _tree(src.parent)
    code, err = run(capsys, src, src.parent / "sub" / "traces.otf2", "--overhead", "250ns")
    assert code == 3 and "would overwrite the input" in one_line(err)
    assert _tree(src.parent) == before


@pytest.mark.parametrize("out", OUTS)
def test_a_second_writer_fails_at_once_and_the_first_one_commits(tmp_path, capsys,
                                                                platform_file, out):
    """Two --force writers of one OUT: the one that comes while the other holds the
    output exits 3 at once, and OUT is the first one's, complete (they used to mix
    traces.def of one run with .evt files of the other, both exiting 0)."""
    first = paths.AtomicOutput(tmp_path / out)  # a run that is writing OUT
    code, err = run(capsys, EXAMPLE, tmp_path / out, "--platform", platform_file, "--force")
    assert code == 3
    assert one_line(err).startswith(f"compensate: error: {tmp_path / out}: another run is "
                                    f"writing {tmp_path / out}")
    assert not (tmp_path / out).exists()
    first.discard()
    code, err = run(capsys, EXAMPLE, tmp_path / out, "--platform", platform_file, "--quiet")
    assert code == 0 and err == ""
    nothing_beside(tmp_path, {"platform.json", out.split("/")[0]})


@pytest.mark.parametrize("out", OUTS)
def test_an_output_written_meanwhile_is_not_replaced_without_force(tmp_path, capsys,
                                                                  platform_file, monkeypatch,
                                                                  out):
    """The "exists" check is made again at the commit: another run that wrote OUT
    after this one started keeps its output, and this one exits 3."""
    from compensate.cli import compensate as command

    real = command.output_target
    theirs = []

    def and_meanwhile(in_path, out_path, force):
        target = real(in_path, out_path, force)
        monkeypatch.setattr(command, "output_target", real)
        assert main([str(EXAMPLE), str(out_path), "--platform", str(platform_file),
                     "--quiet"]) == 0  # the other run, start to end
        monkeypatch.setattr(command, "output_target", and_meanwhile)
        theirs.append(_tree(tmp_path))
        return target

    monkeypatch.setattr(command, "output_target", and_meanwhile)
    for extra in ([], ["--in-memory"]):
        code, err = run(capsys, EXAMPLE, tmp_path / out, "--platform", platform_file,
                        "--overhead", "1us", *extra)
        assert code == 3 and "exists (use --force to replace it)" in one_line(err)
        assert str(tmp_path / out) in err
        assert _tree(tmp_path) == theirs[-1]  # what the other run wrote
        shutil.rmtree(tmp_path / out.split("/")[0]) if "/" in out else (tmp_path / out).unlink()


@pytest.mark.parametrize("out", ["x" * 249 + ".trace", "d" * 255 + "/traces.otf2"],
                         ids=["text", "archive-directory"])
def test_a_long_legal_output_name_is_written(tmp_path, capsys, platform_file, out):
    code, err = run(capsys, EXAMPLE, tmp_path / out, "--platform", platform_file, "--quiet")
    assert code == 0 and err == ""
    assert (tmp_path / out).is_file()
    nothing_beside(tmp_path, {"platform.json", out.split("/")[0]})


def test_export_does_not_replace_a_file_written_meanwhile(tmp_path, capsys, monkeypatch):
    from compensate.analysis import export

    real = export.trace_events

    def and_meanwhile(*args, **kwargs):
        (tmp_path / "e.json").write_text("theirs")
        return real(*args, **kwargs)

    monkeypatch.setattr(export, "trace_events", and_meanwhile)
    code, err = run(capsys, "export", EXAMPLE, tmp_path / "e.json")
    assert code == 3 and "e.json: exists (use --force to replace it)" in one_line(err)
    assert (tmp_path / "e.json").read_text() == "theirs"
    nothing_beside(tmp_path, {"e.json"})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", [["--version"], ["report", str(EXAMPLE)]],
                         ids=["version", "report"])
def test_a_full_stdout_before_any_output_is_one_line_and_exit_3(argv):
    """Nothing was written: a stdout that cannot take the command's lines is exit 3
    and one line, not a traceback (``--version``) nor the interpreter's "Exception
    ignored" at exit."""
    import subprocess
    import sys

    with open("/dev/full", "w") as sink:
        p = subprocess.run([sys.executable, "-m", "compensate", *argv], stdout=sink,
                           stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 3, p.stderr
    assert len(p.stderr.splitlines()) == 1 and "No space left on device" in p.stderr
