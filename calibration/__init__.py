"""Platform calibration: measure the tracer's per-record overhead and the buffer copy
cost on the machine where a trace was recorded, and write the platform file that
``compensate --platform`` reads (see docs/platform-file.md)."""


def main(argv: list[str] | None = None) -> int:
    """The ``calibrate`` command (console-script entry point): :mod:`calibration.cli`
    imported with SIGINT/SIGTERM handled, so that an interrupt during its imports
    is one line and 130/143 like any other (:func:`compensate.cli.launch`)."""
    from compensate.cli import launch

    return launch("calibrate", "calibration.cli", argv)
