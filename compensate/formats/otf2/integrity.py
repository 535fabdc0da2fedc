"""An OTF2 input checked against itself, by both readers (the C path,
:mod:`compensate.formats.otf2.native`, and the ``otf2`` package path,
:class:`compensate.formats.otf2.read.Otf2Chunks`), so that a damaged archive is
refused with the same one-line message whichever path reads it (docs/messages.md,
"A damaged OTF2 input"):

* **Undefined references** (:meth:`InputChecks.chunk`): a record that names a
  definition the global definitions lack (a region, a communicator, an RMA
  window, a group, a metric, a parameter, a string, an I/O file or paradigm, a
  calling context, an interrupt generator: every reference the ``otf2`` package
  resolves, :data:`REF_FIELDS`) is refused at that
  record: ``FILE: location L, record R: undefined region 17``. OTF2's undefined
  value (all ones of the reference's width, printed ``UNDEFINED`` by
  ``otf2-print``) is accepted except where the OTF2 record documentation says the
  reference "needs to be defined": the region of Enter and Leave
  (:data:`REQUIRED`). An I/O handle is not checked (:data:`UNCHECKED`), nor a
  thread team or contingent (:data:`UNCHECKED_FIELDS`).
* **Lost records** (:meth:`InputChecks.counts`): a location whose event file
  yields fewer records than its Location definition declares
  (``numberOfEvents``) is refused once all its records are read; more than
  declared is a tracer's miscount (EZTrace 2.0 declares 2 for every location) and
  accepted, 0 declared means unknown.
* **An event file that belongs to another location** (:meth:`InputChecks.chunk`):
  besides the count rule, which catches most swaps, a location can hold only the
  records its OTF2 location type allows (:func:`forbidden_kinds`): an
  ACCELERATOR_STREAM or a METRIC location holds no record that only a thread of
  a process makes (MPI, program begin and end, thread management, locks), and a
  METRIC location holds only Metric records (and BufferFlush, MeasurementOnOff).

The checks are vectorised over the numpy columns (a sorted array of the defined
references per definition kind, :func:`numpy.searchsorted`); the ``otf2``
package path also looks at the payload objects of the record kinds whose
references are not in the columns.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np

from compensate.formats.otf2.columns import FIELDS
from compensate.model import (
    ACCELERATOR_STREAM,
    ENTER,
    KIND_CODE,
    KIND_NAMES,
    LEAVE,
    LOCATION_TYPES,
    METRIC_LOCATION,
    Events,
    TraceError,
)

__all__ = ["ARG_REF_KINDS", "COLUMN_REFS", "REF_FIELDS", "REQUIRED", "InputChecks",
           "forbidden_kinds", "lenient_lookups", "ref_fields"]

#: OTF2 reference type -> the ``otf2`` DefinitionRegistry attribute holding its
#: definitions, and the words a message names it by
REGISTRIES: dict[str, tuple[str, str]] = {
    "RegionRef": ("_regions", "region"),
    "CommRef": ("_comms", "communicator"),
    "RmaWinRef": ("_rma_wins", "RMA window"),
    "GroupRef": ("_groups", "group"),
    "MetricRef": ("_metrics", "metric"),
    "ParameterRef": ("_parameters", "parameter"),
    "StringRef": ("_strings", "string"),
    "IoHandleRef": ("_io_handles", "I/O handle"),
    "IoFileRef": ("_io_files", "I/O file"),
    "IoParadigmRef": ("_io_paradigms", "I/O paradigm"),
    "CallingContextRef": ("_calling_contexts", "calling context"),
    "InterruptGeneratorRef": ("_interrupt_generators", "interrupt generator"),
}

#: reference types a record may name without a definition: an I/O handle, which
#: compensate does not model (I/O records are local records) and writes back as
#: read. EZTrace 2.0's posixio module defines only rank 0's handles: every other
#: rank numbers its own, whose definitions the archive lacks (``otf2-print``:
#: ``Handle: INVALID <211>``)
UNCHECKED = frozenset({"IoHandleRef"})

#: record fields that may name a Comm the definitions lack: a thread team or
#: thread contingent, whose members the matching takes from the records naming
#: it (compensate.matching.threads), never from a definition, and which is
#: written back as read. EZTrace 2.0's openmp module leaves some nested teams
#: undefined (``otf2-print``: ``Thread Team: INVALID <5>``)
UNCHECKED_FIELDS = frozenset({"thread_team", "thread_contingent"})

#: the words for a reference field whose kind of definition says too little
#: ("thread team 3", not "communicator 3")
_FIELD_WORDS = {"thread_team": "thread team", "thread_contingent": "thread contingent"}

#: OTF2's undefined value of a 32-bit reference (every reference above is 32 bits)
UNDEFINED = 0xFFFFFFFF


def ref_fields(kind: str) -> tuple[tuple[int, str, str], ...]:
    """(argument position, ``otf2`` attribute name, reference type) of each
    definition reference of OTF2 record kind ``kind``, as the ``otf2`` package's
    event class lists its fields; only those before the first array argument,
    whose position is the same among the C reader's arguments."""
    import otf2.events as oev

    cls = getattr(oev, kind, None)
    if cls is None or not hasattr(cls, "_fields"):
        return ()
    names = [p for p in inspect.signature(cls.__init__).parameters
             if p not in ("self", "time", "attributes")]
    types = [t for name, t, *_ in cls._fields if name not in ("time", "attributes")]
    out = []
    for j, (name, t) in enumerate(zip(names, types, strict=False)):
        if t == "array":
            break
        if t in REGISTRIES:
            out.append((j, name, t))
    return tuple(out)


#: model kind code -> its reference fields (:func:`ref_fields`), for every kind with some
REF_FIELDS: dict[int, tuple[tuple[int, str, str], ...]] = {
    code: spec for code, spec in ((KIND_CODE[k], ref_fields(k)) for k in KIND_NAMES) if spec}

#: :data:`REF_FIELDS` less :data:`UNCHECKED_FIELDS`: the references the checks look at
_CHECKED_FIELDS = {code: tuple(f for f in spec if f[1] not in UNCHECKED_FIELDS)
                   for code, spec in REF_FIELDS.items()}

#: (model kind, attribute) whose reference must be defined, OTF2's undefined value
#: included (the OTF2 record documentation: "Needs to be defined in a definition record")
REQUIRED = frozenset({(ENTER, "region"), (LEAVE, "region")})

#: (model kind, column, reference type, attribute) of the references both readers
#: keep in the columns (formats/otf2/columns.FIELDS): the region of Enter and
#: Leave, the communicator of the MPI records
COLUMN_REFS = tuple(
    (code, column, "RegionRef" if column == "region" else "CommRef", attr)
    for code, fields in FIELDS.items() for column, attr, _convert in fields
    if (column, attr) in (("region", "region"), ("comm", "communicator")))

#: the kinds with a reference outside the columns: the C reader keeps their arguments
ARG_REF_KINDS = frozenset(
    code for code, spec in REF_FIELDS.items()
    if any(not any(c == code and a == attr for c, _col, _t, a in COLUMN_REFS)
           for _j, attr, _t in spec))

def _kind_mask(codes: Any) -> np.ndarray:
    mask = np.zeros(len(KIND_NAMES), bool)
    mask[list(codes)] = True
    return mask


_ARG_KINDS = _kind_mask(ARG_REF_KINDS)
# (column, reference type, attribute, the kinds holding it there, must be defined)
_COLUMN_CHECKS = tuple(
    (column, ref_type, attr,
     _kind_mask(c for c, col, _t, _a in COLUMN_REFS if col == column),
     all((c, attr) in REQUIRED for c, col, _t, _a in COLUMN_REFS if col == column))
    for column, ref_type, attr in (("region", "RegionRef", "region"),
                                   ("comm", "CommRef", "communicator")))

_MPI_PREFIXES = ("Mpi", "NonBlockingCollective")
_THREAD_ONLY = ("ProgramBegin", "ProgramEnd", "ThreadFork", "ThreadJoin", "ThreadTeamBegin",
                "ThreadTeamEnd", "ThreadCreate", "ThreadBegin", "ThreadEnd", "ThreadWait",
                "ThreadAcquireLock", "ThreadReleaseLock", "OmpFork", "OmpJoin",
                "OmpAcquireLock", "OmpReleaseLock")
_METRIC_ONLY = ("Metric", "BufferFlush", "MeasurementOnOff")


def forbidden_kinds(location_type: str) -> np.ndarray:
    """A bool per model kind code: whether a location of OTF2 type
    ``location_type`` cannot hold a record of that kind (module docstring)."""
    out = np.zeros(len(KIND_NAMES), bool)
    if location_type in (ACCELERATOR_STREAM, METRIC_LOCATION):
        for code, name in enumerate(KIND_NAMES):
            out[code] = name.startswith(_MPI_PREFIXES) or name in _THREAD_ONLY
    if location_type == METRIC_LOCATION:
        out[:] = True
        for name in _METRIC_ONLY:
            out[KIND_CODE[name]] = False
    return out


class _Undefined:
    """What a lenient registry gives for a reference it lacks (:func:`lenient_lookups`):
    the reference, so that the record reads and :class:`InputChecks` refuses it."""

    __slots__ = ("_ref",)

    def __init__(self, ref: int) -> None:
        self._ref = ref

    name = ""

    def __repr__(self) -> str:
        return f"<undefined {self._ref}>"


class _UndefinedString(str):
    """A string reference the definitions lack (:func:`lenient_lookups`)."""

    _ref: int


def _lenient_class(cls: type) -> type:
    def __getitem__(self: Any, ref: Any) -> Any:
        try:
            return cls.__getitem__(self, ref)
        except KeyError:
            if not isinstance(ref, int):
                raise
            if cls.__name__ == "_StringRegistry":
                s = _UndefinedString("")
                s._ref = ref
                return s
            return _Undefined(ref)
    return type("Lenient" + cls.__name__, (cls,), {"__getitem__": __getitem__})


_LENIENT: dict[type, type] = {}


def lenient_lookups(registry: Any) -> None:
    """Make the ``otf2`` reader's registry give a placeholder holding the
    reference for a reference its definitions lack (of the kinds records refer
    to, :data:`REGISTRIES`), instead of raising KeyError inside the OTF2 library's
    callback: the record is read, and :class:`InputChecks` refuses it with the
    message the C path gives."""
    for attr, _words in REGISTRIES.values():
        sub = getattr(registry, attr, None)
        if sub is None or type(sub).__name__.startswith("Lenient"):
            continue
        cls = type(sub)
        if cls not in _LENIENT:
            _LENIENT[cls] = _lenient_class(cls)
        sub.__class__ = _LENIENT[cls]


def _defined_refs(registry: Any, attr: str) -> np.ndarray:
    sub = getattr(registry, attr, None)
    refs = getattr(sub, "_elements_by_ref", {}) if sub is not None else {}
    return np.array(sorted(int(r) for r, obj in refs.items() if obj is not None), np.uint64)


def _is_undefined(value: Any) -> bool:
    return isinstance(value, (_Undefined, _UndefinedString))


class InputChecks:
    """The checks of one archive's records (module docstring), made chunk by
    chunk as a reader reads them: ``registry`` is the ``otf2`` definition
    registry, ``path`` the anchor file the messages name."""

    def __init__(self, registry: Any, path: str) -> None:
        self.path = path
        self._defined: dict[str, np.ndarray] = {}
        self._registry = registry
        self.declared: dict[int, int] = {}
        self._forbidden: dict[int, np.ndarray] = {}
        for loc in getattr(registry, "locations", ()):
            ref = int(loc._ref)
            self.declared[ref] = int(getattr(loc, "number_of_events", 0) or 0)
            forbidden = forbidden_kinds(_location_type(getattr(loc, "type", None)))
            if forbidden.any():
                self._forbidden[ref] = forbidden
        by_type: dict[bytes, tuple[list[int], np.ndarray]] = {}
        for ref, table in self._forbidden.items():
            by_type.setdefault(table.tobytes(), ([], table))[0].append(ref)
        #: (the locations, the kinds they cannot hold) per location type that forbids some
        self._forbidden_by_type = [(np.array(locs, np.uint64), table)
                                   for locs, table in by_type.values()]

    def defined(self, ref_type: str) -> np.ndarray:
        """The sorted references of the definitions of ``ref_type``."""
        if ref_type not in self._defined:
            self._defined[ref_type] = _defined_refs(self._registry, REGISTRIES[ref_type][0])
        return self._defined[ref_type]

    def undefined(self, ref_type: str, values: np.ndarray, required: bool) -> np.ndarray:
        """Positions of ``values`` (as uint64) that name no definition of
        ``ref_type``; OTF2's undefined value counts only if ``required``."""
        if ref_type in UNCHECKED:
            return np.zeros(0, dtype=np.int64)
        refs = self.defined(ref_type)
        v = values.astype(np.uint64, copy=False)
        if len(refs):
            k = np.minimum(np.searchsorted(refs, v), len(refs) - 1)
            bad = refs[k] != v
        else:
            bad = np.ones(len(v), bool)
        if not required:
            bad &= v != UNDEFINED
        return np.flatnonzero(bad)

    def _refuse(self, ref_type: str, attr: str, value: int, location: int, index: int) -> None:
        words = _FIELD_WORDS.get(attr, REGISTRIES[ref_type][1])
        shown = "UNDEFINED" if value == UNDEFINED else str(value)
        raise TraceError(f"undefined {words} {shown}", source=self.path, location=location,
                         index=index)

    def chunk(self, ref: int, events: Events, base: int, payload: bool = False) -> None:
        """Check the records ``base`` on of location ``ref``: the references in
        the columns, the kinds its location type allows, and (``payload``: the
        ``otf2`` package path) the references of the payload objects."""
        forbidden = self._forbidden.get(ref)
        if forbidden is not None and len(events):
            bad = np.flatnonzero(forbidden[events.kind])
            if bad.size:
                self._refuse_kind(ref, int(events.kind[bad[0]]), base + int(bad[0]))
        self._columns(ref, events, base)
        if payload:
            self._payload(ref, events, base)

    def _refuse_kind(self, ref: int, kind: int, index: int) -> None:
        raise TraceError(f"{KIND_NAMES[kind]} record on a location of type "
                         f"{_location_type_name(self._registry, ref)}, which cannot hold one: "
                         "is its event file another location's?", source=self.path,
                         location=ref, index=index)

    def _columns(self, ref: int, events: Events, base: int) -> None:
        first = self._first_column(events.kind, events.region, events.comm)
        if first is not None:
            self._refuse(first[1], first[2], first[3], ref, base + first[0])

    def _first_column(self, kind: np.ndarray, region: np.ndarray, comm: np.ndarray
                      ) -> tuple[int, str, str, int] | None:
        """The first record (position, reference type, attribute, value) whose
        region or communicator column names no definition; None if none."""
        first: tuple[int, str, str, int] | None = None
        columns = {"region": region, "comm": comm}
        for column, ref_type, attr, kinds, required in _COLUMN_CHECKS:
            rows = np.flatnonzero(kinds[kind])
            if not rows.size:
                continue
            values = columns[column][rows].astype(np.int64)
            u = np.where(values < 0, UNDEFINED, values).astype(np.uint64)
            bad = self.undefined(ref_type, u, required)
            if bad.size and (first is None or rows[bad[0]] < first[0]):
                first = (int(rows[bad[0]]), ref_type, attr, int(u[bad[0]]))
        return first

    def _payload(self, ref: int, events: Events, base: int) -> None:
        """The ``otf2`` package path: a payload object's reference the
        definitions lack is a lenient registry's placeholder."""
        rows = np.flatnonzero(_ARG_KINDS[events.kind])
        for i in rows.tolist():
            ev = events.payload[i]
            for _j, attr, ref_type in _CHECKED_FIELDS[int(events.kind[i])]:
                v = getattr(ev, attr, None)
                if _is_undefined(v) and ref_type not in UNCHECKED:
                    self._refuse(ref_type, attr, int(v._ref), ref, base + i)

    def args(self, kind: np.ndarray, args: np.ndarray) -> tuple[int, str, str, int] | None:
        """The C path: the first record (position, reference type, attribute,
        value) among flat records of kinds ``kind`` with arguments ``args`` (one
        row per record, the C reader's argument positions) whose reference names
        no definition; None if there is none. (Enter, Leave and the
        communicators are in the columns, :meth:`_first_column`.)"""
        first = None
        present = np.flatnonzero(np.bincount(kind[_ARG_KINDS[kind]].astype(np.int64),
                                             minlength=1))
        for code in present.tolist():
            spec = _CHECKED_FIELDS[code]
            rows = np.flatnonzero(kind == code)
            for j, attr, ref_type in spec:
                if any(c == code and a == attr for c, _col, _t, a in COLUMN_REFS):
                    continue
                bad = self.undefined(ref_type, args[rows, j] & np.uint64(UNDEFINED),
                                     (code, attr) in REQUIRED)
                if bad.size and (first is None or rows[bad[0]] < first[0]):
                    first = (int(rows[bad[0]]), ref_type, attr, int(args[rows[bad[0]], j]))
        return first

    def block(self, flat: Mapping[str, np.ndarray], counted: Mapping[int, int]) -> None:
        """The C path, a block of records at once (``flat``: their ``loc``,
        ``kind``, ``region``, ``comm`` and ``args`` rows; ``counted``: each
        location's records before the block): refuse the first whose reference
        names no definition or whose location's type cannot hold it."""
        loc, kind = flat["loc"], flat["kind"]
        found = [f for f in (self.args(kind, flat["args"]),
                             self._first_column(kind, flat["region"], flat["comm"]))
                 if f is not None]
        wrong = None
        for locs, table in self._forbidden_by_type:
            rows = np.flatnonzero(table[kind] & np.isin(loc, locs))
            if rows.size and (wrong is None or rows[0] < wrong):
                wrong = int(rows[0])
        first = min((f[0] for f in found), default=None)
        if wrong is not None and (first is None or wrong < first):
            ref = int(loc[wrong])
            index = counted.get(ref, 0) + int(np.count_nonzero(loc[:wrong] == ref))
            self._refuse_kind(ref, int(kind[wrong]), index)
        if first is not None:
            f = next(f for f in found if f[0] == first)
            ref = int(loc[first])
            index = counted.get(ref, 0) + int(np.count_nonzero(loc[:first] == ref))
            self._refuse(f[1], f[2], f[3] & UNDEFINED, ref, index)

    def read(self, chunk: Mapping[int, Events], counted: Mapping[int, int],
             payload: bool = False) -> None:
        """Check a reader's ``chunk`` (``counted``: each location's records read
        so far, this chunk's included); an empty chunk is the end of reading,
        where the counts are checked (:meth:`counts`)."""
        for ref, events in chunk.items():
            self.chunk(ref, events, counted[ref] - len(events), payload)
        if not chunk:
            self.counts(counted)

    def counts(self, counted: Mapping[int, int]) -> None:
        """At the end of reading: refuse the first location (in ``counted``'s
        order) that yielded fewer records than its definition declares."""
        for ref, n in counted.items():
            want = self.declared.get(int(ref), 0)
            if want and n < want:
                raise TraceError(f"its event file holds {n:,} records but its definition "
                                 f"declares {want:,}: records lost", source=self.path,
                                 location=int(ref))


def _location_type(value: Any) -> str:
    """The model's name of an OTF2 location type (``otf2`` enum or int)."""
    try:
        code = int(getattr(value, "value", value))
    except (TypeError, ValueError):
        return "UNKNOWN"
    return LOCATION_TYPES[code] if 0 <= code < len(LOCATION_TYPES) else "UNKNOWN"


def _location_type_name(registry: Any, ref: int) -> str:
    for loc in getattr(registry, "locations", ()):
        if int(loc._ref) == ref:
            return _location_type(getattr(loc, "type", None))
    return "UNKNOWN"
