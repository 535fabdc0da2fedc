"""The manual builds with MkDocs in strict mode: a broken link, a page missing
from the navigation or a docstring mkdocstrings cannot render fails the build
(``mkdocs.yml``, docs/index.md "Building this manual")."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs_narration import PAGES

ROOT = Path(__file__).resolve().parent.parent

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None
    or importlib.util.find_spec("mkdocstrings_handlers") is None,
    reason="mkdocs and mkdocstrings-python are not installed (pip install -e '.[docs]')")


def nav_pages() -> set[str]:
    """The pages ``mkdocs.yml``'s nav names (``- Title: page.md``)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", text, flags=re.M))


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    nav = nav_pages()
    assert nav, "no page found in mkdocs.yml's nav"
    assert pages - nav == set(), f"pages not in mkdocs.yml's nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries with no page: {sorted(nav - pages)}"


_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def headless_tables(text: str) -> list[int]:
    """Line numbers (1-based) of the tables in Markdown ``text`` whose second row
    is not a header separator (``|---|---|``): Markdown then renders no table, only
    the rows as text. Fenced code blocks are skipped."""
    bad, fenced, block = [], False, []
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        if not fenced and stripped.startswith("|"):
            block.append((number, stripped))
            continue
        if block and (len(block) < 2 or not _SEPARATOR.match(block[1][1])):
            bad.append(block[0][0])
        block = []
    return bad


def test_headless_tables_are_found() -> None:
    good = "| a | b |\n|---|---:|\n| 1 | 2 |\n"
    assert headless_tables(good) == []
    assert headless_tables("text\n\n| 1 | 2 |\n| 3 | 4 |\n") == [3]
    assert headless_tables("```\n| 1 | 2 |\n```\n") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_table_has_a_header(page: Path) -> None:
    """A table whose header row went missing renders as a paragraph of pipes."""
    assert headless_tables(page.read_text(encoding="utf-8")) == []


@pytest.mark.slow
@needs_mkdocs
def test_the_manual_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict`` into a temporary directory exits 0, and the API page
    holds the docstrings of compensate/api.py."""
    # not --quiet: it hides the warnings that --strict counts, and the build passes
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "CompensationResult" in api and "VerificationError" in api
