"""Facts about the machine a calibration ran on, stored beside the numbers.

A platform file is only valid for the machine (and software stack) it was
measured on; these facts let a reader check that later.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys

from calibration.copycost import cache_sizes


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The ``model name`` line of /proc/cpuinfo (or what the platform module knows)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(module: str) -> str:
    """``module.__version__`` or "unknown" (never fails)."""
    try:
        mod = __import__(module)
    except ImportError:
        return "not installed"
    return str(getattr(mod, "__version__", "unknown"))


def machine_facts() -> dict:
    """Host, CPU, caches, OS and library versions, for the platform file's ``machine`` key."""
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "caches": cache_sizes(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "otf2": _version("otf2"),
    }


def now_iso() -> str:
    """The current local time, ISO 8601 with UTC offset, to the second."""
    return _dt.datetime.now(_dt.UTC).astimezone().isoformat(timespec="seconds")
