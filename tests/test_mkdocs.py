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
