"""tests/otf2print.py: one ``otf2-print -A`` gives what ``-I``, ``-G`` and the plain
listing print, and a changed archive is listed again."""

import shutil
import subprocess
from pathlib import Path

from compensate.formats import read_trace, write_trace
from tests.otf2print import OTF2_PRINT, listing, needs_print

DATA = Path(__file__).resolve().parent / "data"
ARCHIVES = [DATA / "eztrace" / "nested" / "eztrace_log.otf2",
            DATA / "traces" / "ping-pong-otf2-papi" / "traces.otf2"]


def _section(anchor: Path, option: list[str], header: str) -> str:
    text = subprocess.run([OTF2_PRINT, *option, str(anchor)], capture_output=True,
                          text=True, check=True).stdout
    return text[text.index(header):].rstrip()


@needs_print
def test_the_sections_are_what_each_option_prints(tmp_path):
    ours = tmp_path / "o" / "traces.otf2"
    write_trace(read_trace(str(ARCHIVES[0])), str(ours))
    for anchor in [*ARCHIVES, ours]:
        got = listing(anchor)
        assert got.anchor.rstrip() == _section(anchor, ["-I"], "Content of OTF2 anchor file:")
        assert got.definitions.rstrip() == _section(anchor, ["-G"], "=== Global Definitions")
        assert got.events.rstrip() == _section(anchor, [], "=== Events")


@needs_print
def test_an_archive_written_again_is_listed_again(tmp_path):
    out = tmp_path / "o" / "traces.otf2"
    first = read_trace(str(ARCHIVES[0]))
    write_trace(first, str(out))
    before = listing(out)
    assert listing(out) is before  # (the same files: not run again)
    shutil.rmtree(out.parent)
    write_trace(read_trace(str(ARCHIVES[1])), str(out))
    after = listing(out)
    assert after.events != before.events
    assert after.definitions != before.definitions
