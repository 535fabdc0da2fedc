"""The command line: ``compensate`` (:mod:`~compensate.cli.compensate`), its
``report`` and ``export`` subcommands (:mod:`~compensate.cli.report`) and
``compensate-simulate`` (:mod:`~compensate.cli.simulate`)."""

from compensate.cli.compensate import main

__all__ = ["main"]
