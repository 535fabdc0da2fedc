"""The engine's anchor loop in C for the inline point-to-point path (issue #18).

The engine's Python loop (:meth:`compensate.engine.run._Engine._python_loop`)
evaluates anchors one location at a time, most of them eager receives completing
one message (code ``FAST_P2P``: R2, R2f), each a Python call of
:func:`compensate.engine.receive.receive_time`. ``loop.c``'s ``cmp_run_fast``
evaluates a run of such anchors of one location and stops at the first one Python
must handle: a generic anchor (rule objects), one whose send is not computed yet
(the location parks), one a location waits for or another rank asked for
(``watched``: Python computes it and wakes the waiters). So parking, waking, the
generic rules and the distributed exchange stay in Python, and the kernel only
replaces the arithmetic of the common case: ``fast_value``, ``receive_time``'s C
twin, with the same double operations in the same order (compiled with
``-ffp-contract=off``, :data:`compensate.nativebuild.FLAGS`): the same values bit
for bit, and the same case counters. ``cmp_schedule`` also takes the engine's
scheduling (:meth:`compensate.engine.run._Engine._scheduled`), in the distributed
run too: it writes the values other ranks asked for into the exchange's outbox as
it computes them (``cmp_put``, :class:`compensate.engine.exchange.Outbox`, which
Python sends) and returns when nothing is runnable
(Python takes what arrived and wakes the locations parked on it,
:meth:`Scheduler.wake`). Given a wire (:class:`compensate.engine.exchange.Wire`,
``Outbox.wire``: the MPI library's functions, where its ABI is MPICH's) it sends
and takes the messages itself, and returns only when nothing is runnable and no
value has come for a while: the Python call per message is what a chain of
values crossing ranks paid most.

The C file is compiled on first use into the per-user cache and loaded with
ctypes (:mod:`compensate.nativebuild`, as the OTF2 C path). If it cannot be built
or loaded, or ``COMPENSATE_NATIVE=0``, the engine runs its Python loop (said once
on stderr when the build fails).
"""

from __future__ import annotations

import ctypes
from array import array
from pathlib import Path
from typing import Any

from compensate.engine.exchange import Outbox, Wire
from compensate.nativebuild import ENV_SWITCH, compiled, load_once

__all__ = ["BUDGET", "DONE", "ENV_SWITCH", "GENERIC", "OUT", "FastLoop", "Scheduler",
           "available", "fast_loop"]

SOURCE = Path(__file__).with_name("loop.c")


#: :func:`cmp_schedule`'s answers: nothing runnable; a generic anchor for Python;
#: the budget of anchors spent (a progress report is due); a location's run computed
#: anchors other ranks asked for (:meth:`Scheduler.taken`)
DONE, GENERIC, BUDGET, OUT = 0, 1, 2, 3


class _Loop(ctypes.Structure):
    """``cmp_loop`` of loop.c: the addresses of the graph's per-anchor arrays."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "A", "code", "has_prev", "prev_s", "s_anchor", "s_off", "e_anchor", "e_off",
        "enter_c", "extra", "cs", "bound_c", "observed", "overlapped", "fit", "watched",
        "cnt")] + [("fitted", ctypes.c_int64)]


class _Sched(ctypes.Structure):
    """``cmp_sched`` of loop.c: the scheduler's state (arrays shared with Python)."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "cur", "a_end", "stack", "wait_head", "wait_next", "need_lo", "need_hi",
        "needs")] + [
        (name, ctypes.c_int64) for name in ("sp", "out_li", "evaluated")] + [
        ("out", ctypes.c_void_p), ("nout", ctypes.c_int64)] + [
        (name, ctypes.c_void_p) for name in (
            "route_first", "route_anchor", "route_rank", "route_ident", "route_off")] + [
        ("nroute", ctypes.c_int64)] + [
        (name, ctypes.c_void_p) for name in ("box", "box_n", "box_sent", "dirty", "wire")]


class _Wire(ctypes.Structure):
    """``cmp_wire`` of loop.c (:class:`compensate.engine.exchange.Wire`)."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "isend", "iprobe", "recv", "get_count")] + [
        (name, ctypes.c_int64) for name in ("comm", "int64", "tag", "any_source")] + [
        ("wanted", ctypes.c_void_p), ("nwanted", ctypes.c_int64)] + [
        (name, ctypes.c_void_p) for name in ("sent_to", "taken_from", "tally",
                                             "requests")] + [
        ("nrequests", ctypes.c_int64), ("inbox", ctypes.c_void_p),
        ("ninbox", ctypes.c_int64), ("spin_ns", ctypes.c_int64)]


def _wire(w: Wire) -> _Wire:
    """The ``cmp_wire`` of ``w`` (its arrays must outlive it)."""
    def addr(a: array) -> int:
        return a.buffer_info()[0]
    return _Wire(*w.functions, *w.handles, addr(w.wanted), w.nwanted, addr(w.sent_to),
                 addr(w.taken_from), addr(w.tally), addr(w.requests), len(w.requests),
                 addr(w.inbox), len(w.inbox), w.spin_ns)


_state: dict[str, Any] = {}


def _load() -> tuple[Any, Any]:
    dll = ctypes.CDLL(str(compiled(SOURCE.read_bytes(), "engineloop")))
    fn = dll.cmp_run_fast
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    sched = dll.cmp_schedule
    sched.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    sched.restype = ctypes.c_int64
    return fn, sched


def _kernel() -> Any:
    """(``cmp_run_fast``, ``cmp_schedule``), built and loaded on first use; None if
    switched off or if they cannot be built or loaded (said once)."""
    return load_once(_state, "fns", _load, "the engine's C loop",
                     "evaluating the anchors in Python (slower)")


def available() -> bool:
    """Whether the C loop can be used."""
    return _kernel() is not None


class FastLoop:
    """The C loop bound to one graph's arrays and the engine's anchor values ``A``.

    ``watched[k]`` (kept in step by the engine: set when a location starts waiting
    for anchor ``k`` or another rank asks for it) makes the loop stop before ``k``;
    ``counts()`` gives the m.1 a1, m.1 a2, m.2, clamped and overridden counts it
    added.
    The arrays must not be resized while this object is used (their addresses are
    taken once)."""

    def __init__(self, fns: tuple[Any, Any], g: Any, A: array, fitted: bool) -> None:
        na = len(A)
        self.watched = array("B", bytes(na))
        self._cnt = array("q", [0, 0, 0, 0, 0])
        # keep every buffer alive as long as the structure that points into it
        self._keep = (A, g.code, g.has_prev, g.prev_s, g.f_s_anchor, g.f_s_off,
                      g.f_e_anchor, g.f_e_off, g.f_enter_c, g.f_extra, g.f_cs, g.f_bound_c,
                      g.f_observed, g.f_overlapped, g.f_fit, self.watched, self._cnt)
        for a in self._keep:
            if len(a) < (5 if a is self._cnt else na):
                raise ValueError("an anchor array is shorter than the anchors")
        self._struct = _Loop(*(a.buffer_info()[0] for a in self._keep), int(fitted))
        self._ptr = ctypes.addressof(self._struct)
        self._fn, self._sched = fns
        #: ``kernel(address, k, end)`` is :meth:`run` without a Python call in
        #: between (the engine's Python loop calls it once per run of receives)
        self.kernel, self.address = self._fn, self._ptr

    def run(self, k: int, end: int) -> int:
        """Evaluate anchors ``k, k+1, ...`` below ``end`` while the C loop can;
        returns the first anchor it did not evaluate."""
        return self._fn(self._ptr, k, end)

    def scheduler(self, cur: list[int], a_end: list[int], runnable: list[int],
                  generic: dict[int, tuple], watched: int = 0,
                  outbox: Outbox | None = None) -> Scheduler:
        """A :class:`Scheduler` over these anchors: locations ``runnable`` on the
        stack (the last one runs first), each from anchor ``cur[li]``; ``generic``
        the graph's generic anchors (anchor -> (rules, gap)); ``watched``: how many
        anchors are marked in :attr:`watched` (other ranks asked for them);
        ``outbox``: where their values go (else :meth:`Scheduler.taken` lists them)."""
        return Scheduler(self, cur, a_end, runnable, generic, watched, outbox)

    def counts(self) -> tuple[int, int, int, int, int]:
        c = self._cnt
        return c[0], c[1], c[2], c[3], c[4]


class Scheduler:
    """``cmp_schedule``'s state: per location the next anchor (``cur``), the stack of
    runnable locations, and the locations parked on each anchor (a list through
    ``wait_head[anchor]`` and ``wait_next[location]``). :meth:`step` runs until a
    generic anchor whose needs are all known (Python evaluates its rules, then
    :meth:`computed`), a location's run computed watched anchors (:meth:`taken`),
    nothing is runnable or ``budget`` anchors were evaluated."""

    def __init__(self, loop: FastLoop, cur: list[int], a_end: list[int],
                 runnable: list[int], generic: dict[int, tuple], watched: int = 0,
                 outbox: Outbox | None = None) -> None:
        n, na = len(cur), len(loop.watched)
        self.cur = array("q", cur)
        self._a_end = array("q", a_end)
        self._stack = array("q", runnable) + array("q", bytes(8 * (n - len(runnable))))
        self._wait_head = array("q", [-1]) * na
        self._wait_next = array("q", [-1]) * max(n, 1)
        lo, hi, needs = _needs(generic, na)
        self._out = array("q", bytes(8 * (watched + 1)))  # (each computed once)
        self._keep = (self.cur, self._a_end, self._stack, self._wait_head, self._wait_next,
                      lo, hi, needs, self._out)
        box: tuple = (None,) * 5 + (0,) + (None,) * 5
        self._boxed = outbox is not None
        if outbox is not None:  # (the C loop writes the values into it: cmp_put)
            ob = outbox
            self._keep += (ob.first, ob.anchor, ob.rank, ob.ident, ob.offset, ob.box,
                           ob.box_n, ob.box_sent, ob.dirty)
            addr = [a.buffer_info()[0] for a in self._keep[9:]]
            wire = None
            if ob.wire is not None:  # (and sends and takes the messages itself)
                self._wire = _wire(ob.wire)
                self._keep += (ob.wire,)
                wire = ctypes.addressof(self._wire)
            box = (*addr[:5], len(ob.anchor), *addr[5:], wire)
        self.state = _Sched(*(a.buffer_info()[0] for a in self._keep[:8]), len(runnable),
                            -1, 0, self._out.buffer_info()[0], 0, *box)
        self._args = (loop._ptr, ctypes.addressof(self.state))
        self._fn = loop._sched

    def step(self, budget: int) -> int:
        """Run; :data:`DONE`, :data:`GENERIC` (anchor ``cur[state.out_li]``, that
        location off the stack) or :data:`BUDGET`."""
        return self._fn(*self._args, budget)

    def computed(self, li: int, k: int) -> None:
        """Python computed anchor ``k`` of location ``li``: wake its waiters, and
        ``li`` goes on with its next anchor first."""
        st, stack, nxt = self.state, self._stack, self._wait_next
        sp = st.sp
        w = self._wait_head[k]
        if w >= 0:
            self._wait_head[k] = -1
            while w >= 0:
                stack[sp] = w
                sp += 1
                w = nxt[w]
        stack[sp] = li
        st.sp = sp + 1
        st.evaluated += 1
        self.cur[li] = k + 1

    def taken(self) -> list[int]:
        """The watched anchors the C loop computed since the last call (none listed
        with an outbox: their values are in it)."""
        st = self.state
        n, st.nout = st.nout, 0
        return [] if self._boxed else self._out[:n].tolist()

    def wake(self, ks: list[int]) -> None:
        """Anchors ``ks`` got their values (from other ranks): the locations parked
        on them are runnable again."""
        st, stack, nxt, head = self.state, self._stack, self._wait_next, self._wait_head
        sp = st.sp
        for k in ks:
            w = head[k]
            if w >= 0:
                head[k] = -1
                while w >= 0:
                    stack[sp] = w
                    sp += 1
                    w = nxt[w]
        st.sp = sp


def _needs(generic: dict[int, tuple], na: int) -> tuple[array, array, array]:
    """The anchors each generic anchor's rules need, in the rules' order, as one
    flat array and a range per anchor (``lo``, ``hi``; empty for other anchors).
    A needs list shared by several anchors (the members of a collective instance,
    ``kinds.SharedNeeds``) is laid out once."""
    lo, hi = array("q", bytes(8 * na)), array("q", bytes(8 * na))
    flat = array("q")
    shared: dict[int, tuple[int, int]] = {}
    for k, (rules, _) in generic.items():
        if len(rules) == 1:
            needs = rules[0].needs
            span = shared.get(id(needs))
            if span is None:
                n = len(flat)
                flat.extend([need[0] for need in needs])
                span = shared[id(needs)] = (n, len(flat))
            lo[k], hi[k] = span
        else:
            lo[k] = len(flat)
            flat.extend([need[0] for rule in rules for need in rule.needs])
            hi[k] = len(flat)
    if not flat:
        flat.append(0)  # (a valid address)
    return lo, hi, flat


def fast_loop(g: Any, A: array, fitted: bool) -> FastLoop | None:
    """A :class:`FastLoop` for graph ``g``, None where the Python loop must run."""
    fns = _kernel()
    return FastLoop(fns, g, A, fitted) if fns is not None else None
