"""One base class for what the tool refuses: an input, a platform or an output it
will not use, which every command reports as one line and exit status 3
(docs/messages.md).

A refusal's message is ``FILE: location L, record R: REASON``, each part before
the reason optional (a location without a record: ``FILE: location L: REASON``).
The parts are also fields (:attr:`Refusal.file`, :attr:`Refusal.location`,
:attr:`Refusal.record`, :attr:`Refusal.reason`), so that code which must rename
one (the distributed run names a trimmed ghost's original record,
compensate/parallel/trim.py; an output's temporary path becomes the output's,
compensate/formats/paths.py) changes the field with :meth:`Refusal.update`
instead of parsing the message. The subclasses keep their names and modules:
:class:`compensate.model.TraceError` (bad input),
:class:`compensate.platform.PlatformError` (a platform file or overhead value),
:class:`compensate.formats.OutputError` (an output path that cannot be used).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

__all__ = ["FIELDS", "Refusal", "records_named", "renumber"]

#: the fields :meth:`Refusal.update` may change
FIELDS = ("file", "location", "record", "reason")


class Refusal(Exception):
    """A one-line refusal: ``reason``, and optionally the ``file`` (a path; with
    a text trace's line number, ``PATH:LINE``), the ``location`` id and the
    ``record`` index (counted over the whole location) it concerns. ``str()`` is
    the message (:meth:`message`); a record is named only with its location."""

    #: what the message names in place of a missing ``file`` (None: nothing)
    unnamed: ClassVar[str | None] = None

    def __init__(self, reason: str, *, file: str | None = None, location: int | None = None,
                 record: int | None = None) -> None:
        self.reason = reason
        self.file = file or None
        self.location = location
        self.record = record
        super().__init__(self.message())

    def message(self, **changes: Any) -> str:
        """The one line, ``FILE: location L, record R: REASON``; with ``changes``
        (fields by name, :data:`FIELDS`) the line those fields would give."""
        fields = {name: getattr(self, name) for name in FIELDS}
        unknown = set(changes).difference(FIELDS)
        if unknown:
            raise TypeError(f"not a field of a refusal: {sorted(unknown)[0]}")
        fields.update(changes)
        parts = []
        where = fields["file"] or self.unnamed
        if where:
            parts.append(where)
        if fields["location"] is not None:
            record = fields["record"]
            parts.append(f"location {fields['location']}"
                         + (f", record {record}" if record is not None else ""))
        parts.append(fields["reason"])
        return ": ".join(parts)

    def update(self, **changes: Any) -> None:
        """Change fields (by name, :data:`FIELDS`) and the message with them (in
        place: e.g. before the exception propagates further)."""
        line = self.message(**changes)
        for name, value in changes.items():
            setattr(self, name, value)
        self.args = (line,)

    def __reduce__(self) -> tuple[Any, ...]:
        # (pickled with its fields: the default would call __init__ with the whole
        # message as the reason, prefixing the file and location a second time)
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type[Refusal], args: tuple[Any, ...], fields: dict[str, Any]) -> Refusal:
    """A pickled refusal: its fields and message as they were."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(fields)
    return exc


#: a record as a message names it: "location L, record R", or "record R" of the
#: location named last before it
_RECORD = re.compile(r"(?:location (\d+), )?record (\d+)")


def _named(text: str) -> Iterator[tuple[re.Match, int | None, int]]:
    """Each match of :data:`_RECORD` in ``text`` with its (location, record); the
    location None for a bare "record R" before any location."""
    loc = None
    for m in _RECORD.finditer(text):
        loc = int(m.group(1)) if m.group(1) is not None else loc
        yield m, loc, int(m.group(2))


def records_named(text: str) -> list[tuple[int, int]]:
    """The (location, record) pairs ``text`` names (:func:`renumber` maps them)."""
    return [(loc, r) for _m, loc, r in _named(text) if loc is not None]


def renumber(text: str, record_of: Callable[[int, int], int]) -> str:
    """``text`` (an error message, a verification example) with each record it
    names given as ``record_of(location, record)``: what a segment of the stream
    or a rank's trimmed view numbers its own way, named as in the whole trace."""
    out, end = [], 0
    for m, loc, r in _named(text):
        if loc is None:
            continue
        out.append(text[end:m.start(2)] + str(record_of(loc, r)))
        end = m.end(2)
    return "".join(out) + text[end:]
