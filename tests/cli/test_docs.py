"""docs/cli.md is the page compensate.cli.docs generates from the parsers: a
changed option, help text or subcommand fails here until the page is generated
again (``python -m compensate.cli.docs > docs/cli.md``)."""

import re

import pytest

from compensate.cli.docs import commands, page, python_version

from ..conftest import ROOT


def test_the_committed_page_is_the_generated_one():
    committed = (ROOT / "docs" / "cli.md").read_text()
    made_with = re.search(r"\(Python (\d+\.\d+)\)", committed)
    if made_with and made_with.group(1) != python_version():
        pytest.skip(f"docs/cli.md was generated with Python {made_with.group(1)}, whose "
                    f"argparse lays out help differently from {python_version()}'s")
    assert committed == page(), ("docs/cli.md is out of date: run "
                                 "`python -m compensate.cli.docs > docs/cli.md`")


def test_the_page_holds_every_command_and_option():
    text = page()
    for title, _, parser in commands():
        assert f"## `{title}`" in text
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, (title, option)
