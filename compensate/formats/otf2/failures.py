"""What the OTF2 C path says when the OTF2 library fails
(:mod:`compensate.formats.otf2.native`): the file concerned, the location and the
reason in words, never an exception name (docs/messages.md, "A damaged OTF2
input")."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from compensate.formats.otf2.diagnostics import _diagnostics, code_words
from compensate.model import TraceError

__all__ = ["open_failure", "otf2_reason", "raise_code"]

# what cmp_open was doing when it failed (its AT_* stage, gen_native.py): the file
# concerned ("def"/"evt": the location's, "anchor": the archive's) and the words for it
_STAGES = {
    1: ("anchor", "cannot open the OTF2 archive"),
    2: ("anchor", "cannot read the global definitions"),
    3: ("anchor", "cannot select the location for reading"),
    4: ("anchor", "cannot open the local definition files"),
    5: ("def", "cannot be read"),
    6: ("anchor", "cannot close the local definition files"),
    7: ("anchor", "cannot open the event files"),
    8: ("evt", "cannot be read"),
    9: ("anchor", "cannot open the global event reader"),
    10: ("anchor", "cannot register the C path's callbacks"),
    11: ("anchor", "out of memory"),
}

#: what a location's file is called in a message, by its kind
_FILE_NAMES = {"def": "local definition file", "evt": "event file"}


def open_failure(path: str, locations: np.ndarray, rc: int, stage: int, at: int
                 ) -> TraceError:
    """The TraceError for a failed ``cmp_open`` of the archive ``path`` (``rc``
    the OTF2 error code, negative: no handle; ``stage`` what it was doing; ``at``
    the index into ``locations`` of the location concerned, -1: none). A location's
    file is named as the ``otf2`` package's path names it (``location 2, record 0:
    its event file traces/2.evt cannot be read: ...``; record 0 for an event file:
    none of its records can be read)."""
    kind, action = _STAGES.get(stage, ("anchor", "cannot read OTF2 archive"))
    loc = int(locations[at]) if 0 <= at < len(locations) else None
    if loc is None or kind not in _FILE_NAMES:
        return TraceError(f"{action}: {otf2_reason(rc)}", source=path, location=loc)
    name = f"{os.path.basename(os.path.splitext(path)[0])}/{loc}.{kind}"
    reason = code_words(*_diagnostics[0]) if _diagnostics else otf2_reason(rc)
    return TraceError(f"its {_FILE_NAMES[kind]} {name} {action}: {reason}", source=path,
                      location=loc, index=0 if kind == "evt" else None)


def otf2_reason(rc: int) -> str:
    """A failed OTF2 call's reason in words: what the OTF2 library reported
    meanwhile (its first diagnostic, which carries the operating system's reason,
    e.g. ``Too many open files``) and the error code's description; never an
    exception name."""
    import _otf2
    what = ""
    if rc > 0:
        try:
            what = str(_otf2.Error_GetDescription(_otf2.ErrorCode(rc)) or "")
        except Exception:  # an unknown code: the diagnostic alone
            what = ""
    text = " ".join(_diagnostics[0][1].split()) if _diagnostics else ""
    if _diagnostics and (rc <= 0 or _diagnostics[0][0] != rc):
        # the diagnostic's own code carries the operating system's reason
        # ("Too many opened files"), where the failing call returned no code
        with contextlib.suppress(Exception):
            what = str(_otf2.Error_GetDescription(_otf2.ErrorCode(_diagnostics[0][0])) or what)
    if text and what and what not in text:
        return f"{what}: {text}"
    return text or what or f"the OTF2 library failed ({'no handle' if rc < 0 else rc})"


def raise_code(rc: int, path: str, action: str) -> None:
    """Raise what the ``otf2`` package raises for a failed call (turned into a
    one-line TraceError by the caller's library_errors), or a TraceError."""
    import _otf2
    if rc > 0:
        _otf2.HandleErrorCode(_otf2.ErrorCode(rc))
    if _diagnostics:  # what OTF2 printed meanwhile: "File or directory does not exist: ..."
        raise TraceError(f"{action}: {_diagnostics[0][1]}", source=path)
    raise TraceError(f"{action}: the OTF2 C path failed ({rc})", source=path)
