"""Read an archive's global definitions the way ``otf2-print`` reads them.

The ``otf2`` bindings build each definition in the OTF2 library's callback and
refuse an archive whose definitions are valid OTF2 but not laid out as Score-P
lays them out: a definition given twice (EZTrace 2.0 writes ``MPI_COMM_WORLD``'s
Group 0 as a COMM_LOCATIONS and again as a COMM_GROUP, and repeats identical
definitions), or a reference to a definition that comes later in the file
(``KeyError`` in a callback). EZTrace also numbers each rank's definitions from
``rank * 2**31 / ranks`` (1073741823 for rank 1 of 2), which OTF2 allows
(identifiers need not be dense).

:func:`read_registry` reads them in two steps: the callbacks only record each
definition's arguments in file order; then the definitions are built, a
definition whose reference is not yet built waiting until it is (so the order
in the file does not matter). A second definition with an id already taken is

* dropped if it is identical to the first (``otf2-print``: "duplicate");
* kept beside it if one of the two is a COMM_LOCATIONS group: OTF2 finds that
  group by its paradigm, never by its id (a COMM_GROUP's members are ranks into
  it), while communicators refer to the other by the id, which it keeps; two
  COMM_LOCATIONS groups of a thread paradigm (OPENMP, PTHREAD, ...: a thread
  team's locations) are both kept, the first under the id;
* kept beside it if one of the two Comms is a thread team (its group, the last
  group of that id defined before it in the file, is of a thread paradigm):
  EZTrace numbers its OpenMP thread teams 1, 2, ... in the id space of the MPI
  communicators, and of every rank's teams. A Comm reference in a thread record
  (ThreadTeamBegin/End, ThreadTask*, ThreadCreate/Begin/Wait/End) names a
  thread team, whose members compensate takes from the records (the locations
  that begin it in one process, :mod:`compensate.matching.threads`), never from
  its definition; one in an Mpi* record names an MPI communicator: the MPI one
  keeps the id (the first, if both are thread teams), the other is kept aside;
* kept beside it if the two are COMM_GROUP groups of which one has at most one
  member and the other more (the larger keeps the id), or that list the same
  members; and if the two are Comms of which one is a one-process scope (no
  parent, and its group, by file order as above, has at most one member) and the
  other is not (the other keeps the id), or both are and list the same members
  (the first keeps it). EZTrace's posixio module numbers the Group and Comm it writes as
  each process's scope of its I/O handles 0, 1, ... in the id space of the MPI
  communicators (Comm 0 beside MPI_COMM_WORLD); an Mpi* record names the MPI
  communicator. Where the two list the same members, either gives the same
  ranks;
* refused otherwise (:class:`~compensate.model.TraceError`, one line naming the
  definition kind and id), as is a reference to a definition that is never
  given (e.g. a Location in a location group the archive does not define).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import _otf2
import otf2.reader
from otf2 import definitions as odef
from otf2.enums import GroupType
from otf2.error import TraceReaderError
from otf2.event_reader import BufferedEventReader
from otf2.registry import DefinitionRegistry, _RefRegistry

from compensate.model import TraceError

__all__ = ["TolerantReader", "added_definitions", "read_registry", "register_callbacks",
           "resolve", "write_raw"]

#: the key under which a COMM_LOCATIONS group that shares its id with another
#: group is kept in the group registry (beyond any OTF2 id, which is 32 bits)
SHADOW_BASE = 1 << 40

#: OTF2's undefined value of a 32-bit reference
UNDEFINED_REF = 0xFFFFFFFF

#: the OTF2 paradigms of threads: a group of one is a thread team's (never an
#: MPI communicator's)
THREAD_PARADIGMS = frozenset({"OPENMP", "PTHREAD", "WINTHREAD", "QTTHREAD", "ACETHREAD",
                              "TBBTHREAD"})


class _Pending:
    """The arguments of the definitions the OTF2 library delivered, in file order:
    ``items`` those to build, ``raw`` every definition as (kind, arguments), the
    arguments of ``_otf2.GlobalDefWriter_Write<kind>`` (:func:`write_raw`)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, type, tuple]] = []
        self.raw: list[tuple[str, tuple]] = []
        #: the callbacks: the C library holds only pointers to them, so they
        #: must live as long as the reading
        self.keep: list[Any] = []


def register_callbacks(registry: DefinitionRegistry, callbacks: Any) -> _Pending:
    """Set ``callbacks`` (an ``OTF2_GlobalDefReaderCallbacks``) so that every
    definition's arguments are recorded (not built) for :func:`resolve`; the
    ClockProperties go to ``registry`` directly."""
    pending = _Pending()

    def recorder(sub: Any) -> Any:
        def gen(definition_type: type | None = None) -> Any:
            cls = definition_type or sub._default_type

            def callback(_registry: Any, *args: Any) -> None:
                pending.items.append((sub, cls, args))
                pending.raw.append((cls.__name__, args))
            pending.keep.append(callback)
            return callback
        return gen

    def clock(_registry: Any, *args: Any) -> None:
        pending.raw.append(("ClockProperties", args))
        registry._set_clock_properties(None, *args)

    subs = [v for v in vars(registry).values() if hasattr(v, "_callback_gen")]
    for sub in subs:
        sub._callback_gen = recorder(sub)  # (an instance attribute: the method's shadow)
    try:
        registry._set_global_def_reader_callbacks(callbacks)
    finally:
        for sub in subs:
            del sub._callback_gen
    _otf2.GlobalDefReaderCallbacks_SetClockPropertiesCallback(callbacks, clock)
    pending.keep.append(clock)
    return pending


def _build(registry: DefinitionRegistry, cls: type, args: tuple) -> Any:
    """The definition ``cls`` of ``args`` (a callback's arguments), or None if it
    refers to a definition not (yet) built."""
    try:
        return cls._construct(registry, *args)
    except KeyError:
        return None
    except TraceReaderError as exc:  # a COMM_GROUP before its COMM_LOCATIONS group
        if "Missing referenced group" in str(exc):
            return None
        raise


def _kind(cls: type) -> str:
    return "Comm" if cls.__name__ == "InterComm" else cls.__name__


def _shadow(sub: Any, ref: int, kept: Any, aside: Any) -> None:
    """Register ``kept`` under ``ref`` and ``aside`` under a key beyond any OTF2
    id (:data:`SHADOW_BASE`), both found by their content."""
    shadow = SHADOW_BASE + ref
    while shadow in sub._elements_by_ref:
        shadow += 1 << 32
    sub._elements_by_ref[shadow] = aside
    sub._elements_by_ref[ref] = kept
    sub._elements_by_key[kept._key] = kept
    sub._elements_by_key[aside._key] = aside


def _thread_group(group: Any) -> bool:
    return _enum_name(group.paradigm) in THREAD_PARADIGMS


def _enum_name(value: Any) -> str:
    return str(value).rsplit(".", 1)[-1]  # (Paradigm.OPENMP: the _otf2 enums have no name)


def _register(sub: Any, obj: Any, path: str, teams: Any = (), scopes: Any = ()) -> None:
    """Register ``obj`` in ``sub``, tolerating a duplicate (module docstring);
    ``teams``: the ids (``id()``) of the Comm objects that are thread teams,
    ``scopes`` those that are one-process scopes (:func:`_scope_comms`)."""
    if not isinstance(sub, _RefRegistry):
        sub._register(obj)
        return
    ref = obj._ref
    old = sub._elements_by_ref.get(ref)
    if old is None:
        sub._register(obj)
        return
    if old._key == obj._key:
        return  # the same definition again
    if isinstance(obj, odef.Group) and isinstance(old, odef.Group):
        locations = [g for g in (old, obj) if g.group_type == GroupType.COMM_LOCATIONS]
        if len(locations) == 1:
            _shadow(sub, ref, obj if locations[0] is old else old, locations[0])
            return
        if len(locations) == 2 and all(_thread_group(g) for g in locations):
            _shadow(sub, ref, old, obj)
            return
    if isinstance(obj, odef.Comm) and isinstance(old, odef.Comm) and (
            id(obj) in teams or id(old) in teams):
        mpi_second = id(obj) not in teams and id(old) in teams
        kept, aside = (obj, old) if mpi_second else (old, obj)
        _shadow(sub, ref, kept, aside)
        return
    kept = _wider(old, obj, scopes)
    if kept is not None:
        _shadow(sub, ref, kept, obj if kept is old else old)
        return
    raise TraceError(f"conflicting definitions: {_kind(type(obj))} {ref} is defined twice "
                     f"with different content ({_fields(old)} / {_fields(obj)})",
                     source=path)


def _member_refs(group: Any) -> tuple[int, ...]:
    return tuple(int(getattr(m, "_ref", m)) for m in (group.members or ()))


def _wider(old: Any, obj: Any, scopes: Any) -> Any:
    """Of two different definitions of one id, the one that keeps it where the
    other is a one-process scope or lists the same members (module docstring);
    None if neither (a conflict)."""
    if isinstance(old, odef.Group) and isinstance(obj, odef.Group):
        if GroupType.COMM_LOCATIONS in (old.group_type, obj.group_type) or \
                old.paradigm != obj.paradigm:
            return None
        a, b = _member_refs(old), _member_refs(obj)
        if a == b:
            return old
        if min(len(a), len(b)) <= 1 < max(len(a), len(b)):
            return old if len(a) > len(b) else obj
        return None
    if isinstance(old, odef.Comm) and isinstance(obj, odef.Comm) and \
            not isinstance(old, odef.InterComm) and not isinstance(obj, odef.InterComm):
        small = (id(old) in scopes, id(obj) in scopes)
        if small[0] != small[1]:
            return obj if small[0] else old
        if small[0] and old.group is not None and obj.group is not None and \
                _member_refs(old.group) == _member_refs(obj.group):
            return old
    return None


def _fields(obj: Any) -> str:
    text = obj._str_fields()
    return text if len(text) <= 120 else text[:117] + "..."


def _missing(registry: DefinitionRegistry, cls: type, args: tuple) -> str:
    """What the definition of ``cls`` with ``args`` refers to that is not defined."""
    ref = args[0] if issubclass(cls, odef._RefDefinition) else None
    values = args[1:] if ref is not None else args
    for value, field in zip(values, cls._fields, strict=False):
        t = field.type
        if isinstance(t, type) and issubclass(t, odef._RefDefinition):
            try:
                registry._get(t, value)
            except KeyError:
                return f"{_kind(t)} {value}"
    if cls is odef.Group:
        return "the COMM_LOCATIONS group its ranks refer to"
    return "a definition"


def _team_comms(items: list) -> set[int]:
    """The ``id()`` of the arguments of each Comm definition among ``items`` (in
    file order) that is a thread team: its group (:func:`_comms_whose_group`) is of
    a thread paradigm (:data:`THREAD_PARADIGMS`). Only the file order tells
    EZTrace's team Comm 1 (group 1: the team's COMM_LOCATIONS) from its MPI_COMM_1
    (group 1: a COMM_GROUP), both defined right after their group."""
    # (Group: (self, name, type, paradigm, flags, members))
    return _comms_whose_group(items, lambda g: _enum_name(g[3]) in THREAD_PARADIGMS)


def _scope_comms(items: list) -> set[int]:
    """The ``id()`` of the arguments of each Comm definition among ``items`` (in
    file order) without a parent whose group (:func:`_comms_whose_group`) is a
    COMM_GROUP with at most one member: one process's scope, as EZTrace's posixio
    module writes for its I/O handles under the ids of MPI communicators."""
    # (Group: (self, name, type, paradigm, flags, members); Comm: (self, name,
    # group, parent, flags))
    return _comms_whose_group(
        items, lambda g: g[2] == GroupType.COMM_GROUP and len(g[5] or ()) <= 1,
        lambda c: c[3] == UNDEFINED_REF)


def _comms_whose_group(items: list, group: Callable[[tuple], bool],
                       comm: Callable[[tuple], bool] = lambda c: True) -> set[int]:
    """The ``id()`` of the arguments of each Comm definition among ``items`` (in
    file order) that ``comm`` accepts and whose group ``group`` accepts: the last
    Group of that id before the Comm in the file, else the first after it."""
    # (Comm: (self, name, group, ...))
    first: dict[int, bool] = {}  # group id -> what ``group`` says of its first definition
    for _sub, cls, args in items:
        if cls is odef.Group:
            first.setdefault(args[0], group(args))
    last: dict[int, bool] = {}  # group id -> ... of its last definition so far
    out: set[int] = set()
    for _sub, cls, args in items:
        if cls is odef.Group:
            last[args[0]] = group(args)
        elif cls is odef.Comm and comm(args) and last.get(args[2], first.get(args[2], False)):
            out.add(id(args))
    return out


def _unfiled(registry: DefinitionRegistry, waiting: list) -> bool:
    """Let each IoHandle among ``waiting`` (definitions that wait for something never
    defined) whose file is not defined refer to no file (OTF2's undefined value);
    whether there was one. EZTrace's posixio module gives every handle a file id
    it never defines (``otf2-print``: ``File: INVALID``); compensate does not use
    a handle's file, and the output repeats the definition as read."""
    changed = False
    for n, (sub, cls, args) in enumerate(waiting):
        # (IoHandle: (self, name, file, ioParadigm, flags, comm, parent))
        if cls is odef.IoHandle and args[2] != UNDEFINED_REF and \
                int(args[2]) not in registry._io_files._elements_by_ref:
            waiting[n] = (sub, cls, (*args[:2], UNDEFINED_REF, *args[3:]))
            changed = True
    return changed


def resolve(registry: DefinitionRegistry, pending: _Pending, path: str) -> None:
    """Build and register the ``pending`` definitions, each once what it refers
    to is built; TraceError for a conflicting duplicate or a reference to a
    definition the archive never gives (naming the first such definition)."""
    todo = pending.items
    team_args, scope_args = _team_comms(todo), _scope_comms(todo)
    teams: dict[int, Any] = {}  # id() -> the Comm (kept alive: its id stays its own)
    scopes: dict[int, Any] = {}
    while todo:
        waiting = []
        for sub, cls, args in todo:
            obj = _build(registry, cls, args)
            if obj is None:
                waiting.append((sub, cls, args))
                continue
            if id(args) in team_args:
                teams[id(obj)] = obj
            if id(args) in scope_args:
                scopes[id(obj)] = obj
            _register(sub, obj, path, teams, scopes)
        if len(waiting) == len(todo) and not _unfiled(registry, waiting):
            sub, cls, args = waiting[0]
            what = f"{_kind(cls)} {args[0]}" if issubclass(cls, odef._RefDefinition) \
                else cls.__name__
            raise TraceError(f"{what} refers to {_missing(registry, cls, args)}, which the "
                             "archive does not define", source=path)
        todo = waiting


def read_registry(handle: Any, path: str) -> tuple[DefinitionRegistry, tuple]:
    """The global definitions of the archive open as ``handle`` (an ``otf2``
    reader handle whose collective callbacks are set), read tolerantly (module
    docstring), and every definition as it was in the file (:func:`write_raw`).
    ``path`` names the definitions file in messages."""
    registry = DefinitionRegistry()
    reader = _otf2.Reader_GetGlobalDefReader(handle)
    callbacks = _otf2.GlobalDefReaderCallbacks_New()
    try:
        pending = register_callbacks(registry, callbacks)
        _otf2.Reader_RegisterGlobalDefCallbacks(handle, reader, callbacks, registry)
    finally:
        _otf2.GlobalDefReaderCallbacks_Delete(callbacks)
    _otf2.Reader_ReadAllGlobalDefinitions(handle, reader)
    _otf2.Reader_CloseGlobalDefReader(handle, reader)
    resolve(registry, pending, path)
    return registry, tuple(pending.raw)


def write_raw(handle: Any, raw: tuple, clock: tuple[int, int, int, int],
              counts: dict[int, int]) -> None:
    """Write the definitions ``raw`` (:func:`read_registry`) with the OTF2 global
    definition writer ``handle``, each as it was read, in the same order with
    the same ids (duplicates included, so that ``otf2-print`` shows the input's
    definitions), except the ClockProperties, which become ``clock``
    (resolution, offset, length, realtime timestamp), and each Location's
    ``numberOfEvents``, which becomes its count in ``counts`` (0 if absent)."""
    for kind, args in raw:
        if kind == "ClockProperties":
            args = clock
        elif kind == "Location":  # (self, name, type, numberOfEvents, group)
            args = (args[0], args[1], args[2], int(counts.get(int(args[0]), 0)), args[4])
        getattr(_otf2, "GlobalDefWriter_Write" + kind)(handle, *args)


def added_definitions(registry: DefinitionRegistry, raw: tuple) -> list[Any]:
    """The definitions of ``registry`` that are not among those read (``raw``,
    :func:`read_registry`): what was added to it after reading (e.g. a String
    the ``otf2`` package's event writer creates for a value it does not find),
    in the registry's order, to be written after the ones read."""
    refs: dict[int, set[int]] = {}
    counts: dict[int, int] = {}
    for kind, args in raw:
        if kind == "ClockProperties":
            continue
        sub = registry._registry_for_type(getattr(odef, kind))
        if isinstance(sub, _RefRegistry):
            refs.setdefault(id(sub), set()).add(int(args[0]))
        else:
            counts[id(sub)] = counts.get(id(sub), 0) + 1
    out: list[Any] = []
    for sub in vars(registry).values():
        if isinstance(sub, _RefRegistry):
            known = refs.get(id(sub), set())
            out.extend(obj for obj in sub if int(obj._ref) not in known)
        elif hasattr(sub, "_elements"):
            out.extend(sub._elements[counts.get(id(sub), 0):])
    return out


class TolerantReader(otf2.reader.Reader):
    """The ``otf2`` package's Reader, its global definitions read by
    :func:`read_registry` (the events as the package reads them). ``defs_path``
    is the file messages about the definitions name."""

    def __init__(self, anchor: str, defs_path: str, batch_events: int = 100) -> None:
        self._handle = _otf2.Reader_Open(anchor)
        self._global_evt_reader_handle = None
        try:
            _otf2.Reader_SetSerialCollectiveCallbacks(self._handle)
            self._definitions, self.raw_definitions = read_registry(self._handle, defs_path)
            if self._definitions.clock_properties is None:
                raise TraceError("the archive has no ClockProperties definition",
                                 source=defs_path)
        except BaseException:
            self.close()
            raise
        self.batch_events = batch_events
        self._locations = list(self._definitions.locations)
        self._event_reader = BufferedEventReader(self, batch_events)
