"""Every repository path the documentation names exists.

README.md and docs/*.md name files and folders of this repository in backticks
(inline code and fenced code blocks) and in Markdown links. When a module moves,
the text that names it goes stale silently; this test reads every such path and
checks it against the tree.

What counts as a repository path:

* a token of inline code or of a fenced code block, or a Markdown link target, that
  starts with one of :data:`PREFIXES` (``compensate/engine/run.py``,
  ``python benchmarks/accuracy.py`` names ``benchmarks/accuracy.py``);
* in a file under docs/, a link target that is a bare file name
  (``[realrun.md](realrun.md#the-table)`` names ``docs/realrun.md``).

Not checked: URLs, anchors within the page (``#errors``), placeholders
(``out/traces.otf2``, ``run/...``, ``sim/...``, ``platform.json``,
``x/traces.otf2``: none starts with a prefix), anything with ``...`` or ``<...>``,
and glob patterns (``tests/cases/r5_*.trace``, ``compensate/analysis/{a,b}.py``).
A trailing ``:line`` (or ``::test``) and ``#anchor`` are stripped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PREFIXES = ("compensate/", "calibration/", "benchmarks/", "docs/", "tests/", "examples/",
            "notebooks/", ".ci/")

FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
GLOB = re.compile(r"[*?\[\]{}]")
# characters that may wrap a path inside a token: quotes, brackets, punctuation
STRIP = "\"'()[],;.!"


def _candidates(doc: Path) -> list[tuple[int, str, str]]:
    """``(line number, how it was found, text)`` for every backticked token and every
    link target of ``doc``."""
    found: list[tuple[int, str, str]] = []
    fenced = False
    for no, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if fenced:
            found += [(no, "code", tok) for tok in line.split()]
            continue
        for m in CODE_SPAN.finditer(line):
            found += [(no, "code", tok) for tok in m.group(2).split()]
        found += [(no, "link", m.group(1)) for m in LINK.finditer(line)]
    return found


def _repo_path(doc: Path, how: str, text: str) -> str | None:
    """The repository path (relative to the root) that ``text`` names, or None if it
    names none that this test checks."""
    if "://" in text or text.startswith(("#", "mailto:")):
        return None
    text = text.split("#", 1)[0]
    if "=" in text:  # --option=path
        text = text.split("=", 1)[1]
    text = text.strip(STRIP)
    if text.startswith("./"):
        text = text[2:]
    text = re.sub(r":.*$", "", text)  # file.py:120, tests/x.py::test_y
    if (not text or "..." in text or "…" in text or "<" in text or ">" in text
            or GLOB.search(text)):
        return None
    if text.startswith(PREFIXES):
        return text.rstrip("/") or None
    if how == "link" and doc.parent.name == "docs" and "/" not in text \
            and text.endswith(".md"):
        return f"docs/{text}"
    return None


def _built() -> set[str]:
    """Paths a Makefile of the repository builds (``make -C calibration`` makes
    ``calibration/microbench``): named by the docs, absent from a clean tree."""
    out = set()
    for makefile in ROOT.glob("*/Makefile"):
        for line in makefile.read_text().splitlines():
            if m := re.match(r"^([\w.-]+(?:\s+[\w.-]+)*)\s*:(?!=)", line):
                out |= {f"{makefile.parent.name}/{t}" for t in m.group(1).split()}
    return out


def _missing(doc: Path) -> list[str]:
    out = []
    built = _built()
    for no, how, text in _candidates(doc):
        path = _repo_path(doc, how, text)
        if path is not None and path not in built and not (ROOT / path).exists():
            out.append(f"{doc.relative_to(ROOT)}:{no}: {path}")
    return out


def test_the_scan_finds_paths() -> None:
    """The extraction works at all (guards against a regex that matches nothing)."""
    design = ROOT / "docs" / "design.md"
    doc = design if design.exists() else ROOT / "docs" / "compensation.md"
    paths = {_repo_path(doc, how, text) for _, how, text in _candidates(doc)}
    assert any(p and p.startswith("compensate/") for p in paths)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(doc: Path) -> None:
    missing = _missing(doc)
    assert not missing, ("paths named in the documentation that do not exist:\n  "
                         + "\n  ".join(missing))
