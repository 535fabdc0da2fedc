"""compensate.interrupt in-process: where a signal raises, where it is only recorded,
the point of no return, and the status run() gives (the command-level contract is in
tests/cli/test_interrupt.py)."""

from __future__ import annotations

import signal

import pytest

import compensate.interrupt as interrupt
from compensate.interrupt import Interrupted


def _kill(sig: int = signal.SIGINT) -> None:
    # to this thread; the Python-level handler has run when raise_signal returns
    signal.raise_signal(sig)


def test_outside_handling_everything_is_a_no_op():
    interrupt.check()
    interrupt.commit_point()
    with interrupt.deferred("x"), interrupt.shielded():
        pass
    assert interrupt.received() is None


def test_a_signal_raises_and_is_recorded():
    with interrupt.handling():
        with pytest.raises(Interrupted) as exc:
            _kill(signal.SIGTERM)
        assert exc.value.signum == signal.SIGTERM
        assert interrupt.received() == signal.SIGTERM
        with pytest.raises(Interrupted):
            interrupt.check()  # it stays recorded


def test_deferred_records_and_raises_when_the_region_ends():
    reached = []
    with interrupt.handling():
        with pytest.raises(Interrupted):
            with interrupt.deferred():
                _kill()
                reached.append("after the signal")  # what C callbacks would still do
        assert reached == ["after the signal"]


def test_shielded_cleanup_is_not_cut_short_and_a_second_signal_only_records():
    steps = []
    with interrupt.handling():
        with pytest.raises(Interrupted):
            _kill()
        _kill(signal.SIGTERM)  # a second signal during the cleanup of the first
        steps.append("cleanup ran on")
        with interrupt.shielded():
            steps.append("shielded")
        assert interrupt.received() == signal.SIGINT  # the first one counts
    assert steps == ["cleanup ran on", "shielded"]
    assert interrupt.received() is None  # the next run starts afresh
    interrupt.check()


def test_commit_point_raises_before_and_ignores_after():
    with interrupt.handling():
        with interrupt.shielded():
            _kill()  # swallowed by C code, say
        with pytest.raises(Interrupted):
            interrupt.commit_point()
    with interrupt.handling():
        interrupt.commit_point()
        _kill()  # after the output was moved into place: the run is complete
        interrupt.check()
        assert interrupt.received() is None


def test_run_status_and_one_line(capsys):
    def body():
        _kill(signal.SIGTERM)
        return 0

    assert interrupt.run("prog", body) == 143
    assert capsys.readouterr().err == "prog: interrupted by SIGTERM; nothing written\n"


def test_run_never_returns_0_after_a_swallowed_interrupt(capsys):
    def body():
        try:
            with interrupt.shielded():  # as if a C library had swallowed it
                _kill()
        except KeyboardInterrupt:
            pass
        return 0

    assert interrupt.run("prog", body) == 130
    assert capsys.readouterr().err.count("\n") == 1


def test_run_reports_an_error_an_interrupt_caused(capsys):
    def body():
        with interrupt.shielded():
            _kill()
        raise ImportError("PyCapsule_Import could not import module")  # as numpy does

    assert interrupt.run("prog", body) == 130
    assert capsys.readouterr().err == "prog: interrupted by SIGINT; nothing written\n"
    with pytest.raises(ImportError):  # without a signal it is the error it is
        interrupt.run("prog", lambda: __import__("no_such_module_here"))


def test_run_is_reentrant_and_cleans_up(capsys):
    cleaned = []
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when started from a background job

    def inner():
        _kill()
        return 0

    assert interrupt.run("outer", lambda: interrupt.run("inner", inner),
                         cleanup=lambda: cleaned.append(True)) == 130
    assert cleaned == [True]
    assert capsys.readouterr().err == "outer: interrupted by SIGINT; nothing written\n"
    assert interrupt.run("prog", lambda: 3) == 3
    assert signal.getsignal(signal.SIGINT) is before  # restored, whatever it was


def test_with_a_cleanup_there_is_no_point_of_no_return():
    def body():
        interrupt.commit_point()  # a first output of several
        _kill()
        return 0

    assert interrupt.run("prog", body, cleanup=lambda: None) == 130


def test_hook(monkeypatch):
    monkeypatch.setenv(interrupt.TEST_HOOK, "TERM:here:2")
    with interrupt.handling():
        interrupt.checkpoint("here")
        interrupt.checkpoint("elsewhere")
        with pytest.raises(Interrupted) as exc:
            interrupt.checkpoint("here")
        assert exc.value.signum == signal.SIGTERM


def test_a_finished_runs_signal_does_not_surface_later():
    with interrupt.handling():
        with interrupt.shielded():
            _kill()
        assert interrupt.received() == signal.SIGINT
    # outside handling() every function is a no-op: a later library call (another
    # test, the API in a notebook) must not raise the old run's interrupt
    interrupt.check()
    with interrupt.deferred():
        pass


def _command_module(tmp_path, monkeypatch, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_launch_imports_the_command_then_runs_its_main(tmp_path, monkeypatch, capsys):
    _command_module(tmp_path, monkeypatch, "cmd_ok",
                    "def main(argv):\n    print('ran', argv)\n    return 7\n")
    assert interrupt.launch("cmd", "cmd_ok", ["x"]) == 7
    assert capsys.readouterr().out == "ran ['x']\n"


@pytest.mark.parametrize("where", ["raises", "swallowed"])
def test_launch_interrupted_while_importing_is_130_and_main_never_runs(
        tmp_path, monkeypatch, capsys, where):
    # "raises": a KeyboardInterrupt stops the import; "swallowed": the signal comes
    # while the import runs (only recorded there), which then completes
    kill = ("raise KeyboardInterrupt\n" if where == "raises"
            else "signal.raise_signal(signal.SIGINT)\n")
    name = f"cmd_{where}"
    _command_module(tmp_path, monkeypatch, name,
                    "import signal\n" + kill + "def main(argv):\n    print('ran')\n    return 0\n")
    assert interrupt.launch("cmd", name) == 130
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "cmd: interrupted by SIGINT; nothing written\n"


def test_an_interrupt_before_the_handlers_is_one_line_and_130(monkeypatch, capsys):
    import compensate.cli as cli

    def early(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", early)
    assert cli.main([]) == 130
    assert capsys.readouterr().err == "compensate: interrupted by SIGINT; nothing written\n"
