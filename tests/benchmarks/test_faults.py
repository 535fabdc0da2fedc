"""benchmarks/faults.py, the fault campaign (docs/faults.md): its oracles decide from
the files, not from the exit status. The whole campaign takes minutes; here the
script runs against a stand-in ``compensate`` (a few lines that copy, drop a record,
touch the input, leave a staging file or hang) so that each oracle is seen to fire,
and the reference readers are checked on real files."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from faults import damage, oracles  # noqa: E402
from faults.runner import run  # noqa: E402

FAKE = textwrap.dedent('''
    import os, shutil, sys, time
    mode = os.environ["FAKE_MODE"]
    inp, out = sys.argv[1], sys.argv[2]
    if mode == "hang":
        time.sleep(100)
    if mode == "modify":
        with open(inp, "a") as f:
            f.write("# touched\\n")
    if mode == "leave":
        open(os.path.join(os.path.dirname(out), ".x.tmp-1"), "w").close()
        print("compensate: error: " + out + ": cannot write", file=sys.stderr)
        sys.exit(3)
    lines = open(inp).read().splitlines(keepends=True)
    if mode == "drop":
        last = max(i for i, x in enumerate(lines) if x[:1].isdigit())
        del lines[last]
    open(out, "w").write("".join(lines))
''')


def campaign(tmp_path: Path, mode: str, *extra: str) -> subprocess.CompletedProcess:
    """Run the corrupt-text family's two undamaged controls against the stand-in."""
    tree = tmp_path / "tree"
    (tree / "compensate").mkdir(parents=True)
    (tree / "compensate" / "__init__.py").write_text("")
    (tree / "compensate" / "__main__.py").write_text(FAKE)
    env = dict(os.environ, FAKE_MODE=mode)
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "faults.py"),
                           "--tree", str(tree), "--family", "corrupt-text", "--runs", "0",
                           "--cache", str(tmp_path / "cache"), *extra],
                          capture_output=True, text=True, env=env, timeout=60)


def row(stdout: str, family: str) -> list[str]:
    return next(x.split() for x in stdout.splitlines() if x.startswith(family + " "))


@pytest.mark.parametrize("mode, column", [("copy", None), ("drop", 3), ("modify", 4),
                                          ("leave", 5), ("hang", 6)])
def test_each_oracle_fires(tmp_path, mode, column):
    """A faithful copy is clean (exit 0); a dropped record, a touched input, a staging
    entry left beside OUT and a hang are each counted in their column (exit 1)."""
    # (the hanging stand-in sleeps 100 s: half a second already tells it from a run)
    r = campaign(tmp_path, mode, "--timeout", "0.5" if mode == "hang" else "30")
    cells = row(r.stdout, "corrupt-text")
    assert cells[1] == "2", r.stdout + r.stderr
    if column is None:
        assert r.returncode == 0, r.stdout + r.stderr
        assert cells[2] == "2"
    else:
        assert r.returncode == 1, r.stdout + r.stderr
        assert cells[column] == "2", r.stdout
        assert "FAIL" in r.stdout
    assert "clean runs:" in r.stdout and "wall time" in r.stdout


def test_text_records_reads_the_format(tmp_path):
    """Comments, quoted values with '#', defaults and time fields are read as the
    format says; a record line without a kind makes the file unreadable (None)."""
    p = tmp_path / "t.trace"
    p.write_text('compensate-trace 1\nevents\n# c\n1 0 Enter region=1  # c\n'
                 '2 0 X name="a # b" k=v\n3 1 MpiCollectiveEnd op=BARRIER comm=0\n'
                 '4 1 BufferFlush stop=9\n')
    assert oracles.text_records(p) == {
        "0": ["Enter region=1", "X k=v name=a # b"],
        "1": ["MpiCollectiveEnd comm=0 op=BARRIER received=0 root=- sent=0",
              "BufferFlush"]}
    p.write_text(p.read_text() + "5 1\n")
    assert oracles.text_records(p) is None


def test_otf2_reference_refuses_a_truncated_archive(tmp_path):
    """otf2-print is the reference: it reads the example and refuses it truncated;
    the per-location records match the input's location count."""
    anchor = damage.copy_archive(damage.MONTECARLO, tmp_path / "a")
    events = oracles.otf2_events(anchor)
    assert events is not None and sorted(events) == ["0", "1", "2", "3"]
    assert all(len(v) > 100 for v in events.values())
    os.truncate(anchor.parent / "traces" / "1.evt", 5000)
    assert oracles.otf2_events(anchor) is None


def test_damage_is_seeded_and_changes_the_archive(tmp_path):
    """The same seed damages the same way; every damage changes the tree's hash."""
    whats, hashes = [], []
    for k in range(2):
        anchor = damage.copy_archive(damage.MONTECARLO, tmp_path / str(k))
        before = oracles.tree_hash(anchor.parent)
        whats.append(damage.damage_archive(random.Random(7), anchor))
        hashes.append(oracles.tree_hash(anchor.parent))
        assert oracles.hash_diff(before, hashes[-1])
    assert whats[0] == whats[1] and hashes[0] == hashes[1]


def test_run_kills_the_group_on_timeout():
    """A run that outlives its timeout is killed with its children and marked hung."""
    cmd = [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    proc = run(cmd, dict(os.environ), 0.5)
    assert proc.hung and proc.rc is None and proc.seconds < 10
    assert shutil.which("otf2-print")
