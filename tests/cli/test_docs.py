"""docs/cli.md is the page compensate.cli.docs generates from the parsers: a
changed option, help text or subcommand fails here until the page is generated
again (``python -m compensate.cli.docs > docs/cli.md``)."""

from compensate.cli.docs import commands, page

from ..conftest import ROOT


def test_the_committed_page_is_the_generated_one():
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert committed == page(), ("docs/cli.md is out of date: run "
                                 "`python -m compensate.cli.docs > docs/cli.md`")


def test_the_page_holds_every_command_and_option():
    text = page()
    for title, _, parser in commands():
        assert f"## `{title}`" in text
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, (title, option)
