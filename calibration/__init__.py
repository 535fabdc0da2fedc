"""Platform calibration: measure the tracer's per-record overhead and the buffer copy
cost on the machine where a trace was recorded, and write the platform file that
``compensate --platform`` reads (see docs/platform-file.md)."""
