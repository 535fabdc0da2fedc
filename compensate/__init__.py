"""compensate: remove tracing overhead from MPI event traces.

Read a measured trace (OTF2 or the `.trace` text format), subtract the per-record
tracer overhead, re-time communication with the lower- or upper-bound model of
Wolf, Malony, Shende and Morris, check happened-before order, and write an
approximation of the uninstrumented run. See README.md and docs/.

The Python API (:mod:`compensate.api`)::

    import compensate as c
    t = c.read("run/traces.otf2")                   # OTF2 anchor file or *.trace
    r = c.compensate(t, bound="lower", overhead="250ns")   # or platform="platform.json"
    c.write(r.trace, "out/traces.otf2")
    print(c.compare(t, r.trace).percent("execution"))

``read``, ``compensate``, ``write``; ``profile``, ``wait_states``, ``compare``
(:mod:`compensate.analysis`); ``to_dataframe`` (pandas). They are imported on first
use, so that ``import compensate`` (and the command's ``--version``) stays fast.
Simulated runs with their ground truth: :func:`compensate.simulate.simulate`.
"""

__version__ = "0.1.0"

#: What ``compensate.<name>`` imports from :mod:`compensate.api` on first use.
_API = ("CompensationResult", "OutputError", "Platform", "PlatformError", "Trace",
        "TraceError", "VerificationError", "compare", "compensate", "profile", "read",
        "to_dataframe", "wait_states", "write")

__all__ = sorted([*_API, "__version__"])


def __getattr__(name: str):
    if name in _API:
        from compensate import api

        value = getattr(api, name)
        globals()[name] = value  # next time a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
