"""``otf2-print``, the reference OTF2 reader, as the tests run it: once per archive.

A run of ``otf2-print`` costs about 0.1 s of CPU whatever the archive's size
(most of it system time: the OTF2 library's buffers faulted in), and a test that
compares an output's records and definitions with its input's ran it four times.
:func:`listing` runs ``otf2-print -A`` once per archive as it is on disk (the
sizes, modification times and inodes of its anchor, definition and event files)
and keeps its parts: the anchor file's content, the global definitions and the
events, each the same text as ``-I``, ``-G`` and the plain listing print from
their section header on (``tests/test_otf2print.py`` checks it on archives of
EZTrace, Score-P and this writer). Changing a file of the archive makes the next call run it again.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

OTF2_PRINT = shutil.which("otf2-print")
needs_print = pytest.mark.skipif(OTF2_PRINT is None, reason="otf2-print is not installed")

#: the section headers of ``otf2-print -A``, in the order it prints them
_ANCHOR, _DEFINITIONS, _EVENTS = ("Content of OTF2 anchor file:", "=== Global Definitions",
                                  "=== Events")


@dataclass(frozen=True)
class Listing:
    """What ``otf2-print -A`` printed of an archive: ``anchor`` (what ``-I`` prints),
    ``definitions`` (``-G``), ``events`` (the plain listing), each from its section
    header on; ``warnings``: its standard error."""

    anchor: str
    definitions: str
    events: str
    warnings: str


#: listings of the latest archive states, least recently used first
_CACHE: collections.OrderedDict[tuple, Listing] = collections.OrderedDict()
_KEPT = 128


def _state(anchor: Path) -> tuple:
    """The archive's files as they are now: (path, size, mtime, inode) of each."""
    files = [anchor, anchor.with_suffix(".def")]
    trace_dir = anchor.with_suffix("")
    if trace_dir.is_dir():
        files += sorted(p for p in trace_dir.rglob("*") if p.is_file())
    out = []
    for f in files:
        try:
            st = f.stat()
        except FileNotFoundError:
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def listing(anchor: Path | str) -> Listing:
    """``otf2-print -A anchor``'s sections (:class:`Listing`); it must exit 0."""
    anchor = Path(anchor).resolve()
    key = _state(anchor)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    res = subprocess.run([OTF2_PRINT, "-A", str(anchor)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    a, d, e = (text.index(h) for h in (_ANCHOR, _DEFINITIONS, _EVENTS))
    assert a < d < e, "otf2-print -A printed its sections in another order"
    out = Listing(text[a:d], text[d:e], text[e:], res.stderr)
    _CACHE[key] = out
    while len(_CACHE) > _KEPT:
        _CACHE.popitem(last=False)
    return out
