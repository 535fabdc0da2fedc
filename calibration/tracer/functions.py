"""Record Enter/Leave of the traced program's own Python functions.

The program's script and the modules named with ``--functions`` are compiled from
an AST in which every ``def`` gets one more, innermost decorator,
``@__compensate_record__``, which wraps the function in a recorder of its Enter
and Leave (like compiler instrumentation in Score-P or TAU: only the chosen
functions pay anything). The alternative, ``sys.setprofile``, was measured and
rejected: its callback runs for *every* Python and C call of the process (each
``random.random()``, each numpy call) at about 0.3 µs each, and that cost is never
recorded, so no compensation could remove it; the decorator costs about as much as
the two records it writes and nothing elsewhere.

Not recorded: generator and async functions (their Enter/Leave would bracket only
the creation of the generator), lambdas, functions of modules imported before
the tracer started, and C functions. Line numbers, ``__name__``, ``__doc__`` and
zero-argument ``super()`` are unaffected.
"""

from __future__ import annotations

import _thread
import ast
import builtins
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import random
import sys
import types
from collections.abc import Callable, Sequence
from threading import get_ident
from time import monotonic_ns
from typing import Any

from calibration.tracer.buffer import (
    BUFFER_FLUSH,
    ENTER,
    KIND_BITS,
    LAYER_ENTER,
    LAYER_LEAVE,
    LEAVE,
    Recorder,
)

DECORATOR = "__compensate_record__"


def _is_generator(fn: ast.AST) -> bool:
    """Does this function's own body (not nested ones) yield or await?"""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                             ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


class _Decorate(ast.NodeTransformer):
    """Appends the decorator (innermost) to every non-generator ``def``. In a class
    body it is ``(lambda: DECORATOR)()``: a name there is looked up in the class
    namespace first, which a metaclass's ``__prepare__`` may make answer for any
    name; the lambda's is a global lookup."""

    def __init__(self) -> None:
        self._in_class = False

    def _inside(self, node: ast.AST, in_class: bool) -> bool:
        """Visit ``node``'s children in a class body (``in_class``) or a function's;
        returns whether ``node`` itself is in a class body."""
        outer, self._in_class = self._in_class, in_class
        self.generic_visit(node)
        self._in_class = outer
        return outer

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self._inside(node, True)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        in_class = self._inside(node, False)
        if not _is_generator(node):
            name: ast.expr = ast.Name(DECORATOR, ast.Load())
            if in_class:
                no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                        kw_defaults=[], defaults=[])
                name = ast.Call(ast.Lambda(no_args, name), [], [])
            node.decorator_list.append(ast.copy_location(name, node))
        return node

    def _function_scope(self, node: ast.AST) -> ast.AST:
        self._inside(node, False)  # async functions and lambdas: not decorated
        return node

    visit_AsyncFunctionDef = visit_Lambda = _function_scope


def instrument(source: str | bytes, filename: str) -> Any:
    """Compile module source with every (non-generator) function decorated."""
    tree = ast.parse(source, filename)
    tree = ast.fix_missing_locations(_Decorate().visit(tree))
    return compile(tree, filename, "exec", dont_inherit=True)


#: The wrapper of one function, generated per parameter list (:func:`_factory`).
#: ``{params}``: the function's own parameter list, ``{args}``: the call passing
#: them on. A wrapper with the function's signature is called like the function
#: (CPython specialises and inlines a call of an exact-arity Python function, not
#: one of ``*args, **kwargs``) and calls it likewise, where a ``*args, **kwargs``
#: wrapper packs a tuple and a dict twice per call.
_WRAPPER = """
def _cr_factory(_cr_fn, _cr_enter, _cr_leave, _cr_main_add, _cr_adders, _cr_orphan,
                _cr_get_ident, _cr_now, _cr_when_threaded, _cr_layer, _cr_period,
                _cr_k):
    _cr_single = True

    def _cr_threaded():
        nonlocal _cr_single
        _cr_single = False

    def traced({params}):
        nonlocal _cr_k
        _cr_t = _cr_now()
        if _cr_single:
            _cr_add = _cr_main_add
        else:
            try:
                _cr_add = _cr_adders[_cr_get_ident()]
            except KeyError:  # a thread not started through threading.Thread
                _cr_add = _cr_orphan().add
        _cr_add(_cr_t)
        _cr_add(_cr_enter)
        try:
            _cr_k -= 1
            if _cr_k > 0:
                return _cr_fn({args})
            _cr_k = _cr_period
            return _cr_layer({args})
        finally:
            _cr_add(_cr_now())
            _cr_add(_cr_leave)

    _cr_when_threaded(_cr_threaded, traced)
    return traced
"""
_GENERIC = ("*_cr_args, **_cr_kwargs", "*_cr_args, **_cr_kwargs")
_FACTORIES: dict[tuple[str, str, int], tuple[dict | None, Callable]] = {}
_CODES: dict[tuple[str, str], Any] = {}
_DEFINING = _thread.allocate_lock()  # never traced: the threading module's is
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def signature_text(code: Any) -> tuple[str, str]:
    """(parameter list, call passing them on) of the function with ``code``:
    positional-only, positional-or-keyword, ``*args``, keyword-only and
    ``**kwargs`` parameters by their own names (defaults are the function's
    ``__defaults__`` and ``__kwdefaults__``, set on the wrapper). The generic
    ``*args, **kwargs`` pair if a name could clash with the wrapper's own
    (``_cr_`` prefix)."""
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    nposonly = code.co_posonlyargcount
    varargs = bool(code.co_flags & _CO_VARARGS)
    varkw = bool(code.co_flags & _CO_VARKEYWORDS)
    names = code.co_varnames[:npos + nkw + varargs + varkw]
    if any(n.startswith("_cr_") for n in names):
        return _GENERIC
    pos, kwonly = names[:npos], names[npos:npos + nkw]
    rest = names[npos + nkw:]
    params, args = list(pos[:nposonly]), list(pos)
    if nposonly:
        params.append("/")
    params.extend(pos[nposonly:])
    if varargs:
        params.append("*" + rest[0])
        args.append("*" + rest[0])
    elif kwonly:
        params.append("*")
    params.extend(kwonly)
    args.extend(f"{n}={n}" for n in kwonly)
    if varkw:
        params.append("**" + rest[-1])
        args.append("**" + rest[-1])
    return ", ".join(params), ", ".join(args)


#: File name of the wrappers' template code (a wrapper's own code names its function).
WRAPPER_FILE = "<compensate-record>"
#: The code objects of the wrappers made so far (:func:`identity`): frames running
#: one are the tracer's (calibration/record.py takes them out of tracebacks).
WRAPPER_CODES: set[Any] = set()


def _one_line(tree: ast.Module) -> ast.Module:
    """The template with the wrapper's whole body on its ``def`` line, so that a
    wrapper given its function's first line (:func:`identity`) shows that line
    wherever it is (a traceback, a warning's stack level), not lines of the
    function's body."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "traced":
            for inner in ast.walk(node):
                if hasattr(inner, "lineno"):
                    inner.lineno = inner.end_lineno = node.lineno
                    inner.col_offset = inner.end_col_offset = -1  # no columns, no carets
    return tree


def identity(make: Callable, fn_code: Any, qualname: str) -> Any:
    """The code of the wrappers ``make`` (a :func:`_factory` factory) makes, as
    their function's: its file, first line, name and qualified name
    (``inspect.getfile``, ``typing.get_overloads``, doctest line numbers, sorting
    functions by ``co_firstlineno`` and tracebacks see the function, where the
    shared template code made them see one ``<compensate-record>`` code for all
    functions of a signature)."""
    template = next(c for c in make.__code__.co_consts
                    if isinstance(c, types.CodeType) and c.co_name == "traced")
    code = template.replace(co_filename=fn_code.co_filename,
                            co_firstlineno=fn_code.co_firstlineno,
                            co_name=fn_code.co_name, co_qualname=qualname)
    WRAPPER_CODES.add(code)
    return code


def _factory(params: str, args: str, module: dict | None = None) -> Callable:
    """The compiled wrapper factory for one parameter list and one module
    namespace (cached: most functions of a program share a few).

    The wrappers it makes have the decorated function's module as their globals
    (the template is run in that namespace and its one name taken out again):
    ``fn.__globals__`` is the program's, and ``warnings`` attributes a warning
    whose stack level points at the wrapper's frame to the program's module (in
    a namespace of its own, a DeprecationWarning with ``stacklevel=2`` from a
    ``__main__`` function was silently filtered out). The wrapper's code uses
    only its closure, never a global."""
    key = (params, args, id(module))
    hit = _FACTORIES.get(key)
    if hit is not None and hit[0] is module:
        return hit[1]
    code = _CODES.get((params, args))
    if code is None:
        code = _CODES[(params, args)] = compile(
            _one_line(ast.parse(_WRAPPER.format(params=params, args=args))),
            WRAPPER_FILE, "exec")
    namespace: dict[str, Any] = {} if module is None else module
    with _DEFINING:  # another thread may be running the template in ``module`` too
        exec(code, namespace)
        made = namespace.pop("_cr_factory")
    _FACTORIES[key] = (module, made)
    return made


#: One call in this many (per function) runs through a second recording layer
#: (:func:`make_decorator`); at most 256, so that the countdown stays within
#: CPython's cached small integers and allocates nothing.
LAYER_PERIOD = 32


def make_decorator(recorder: Recorder, sample: bool = False,
                   period: int = LAYER_PERIOD) -> Callable[[Callable], Callable]:
    """The ``@__compensate_record__`` decorator recording into the calling
    thread's buffer of ``recorder``.

    ``sample``: every ``period``-th call of each function (the first one at a
    random place) calls the function through a second, identical wrapper that
    records a LayerEnter/LayerLeave pair into the same buffer. The sampled
    call's Enter->Leave minus the inner pair's interval is what one decorator
    layer costs around this function in this run, in the program's caches and
    under its load, including the part outside its own Enter and Leave stamps
    that no bracket can see (:func:`calibration.tracer.insitu.split_layers`;
    docs/calibration.md, "The decorator measures itself"). Without ``sample``
    the countdown runs the same way and its sampled calls call the function
    directly, so that a calibration times the path a run takes.

    Each call takes its Enter timestamp, then picks the buffer: the master's while
    the process is single-threaded (one closure variable tested), afterwards the
    calling thread's (``adders[get_ident()]``, the bound ``append`` of its array:
    one C call and one dict lookup per call, not per record), and appends (time,
    code) pairs; the Leave goes to the same buffer. The wrapper has the
    function's own parameter list (:func:`signature_text`): in a stencil's
    update loop this cut the traced call's dilation from ~470 to ~340 ns, and
    the part of it that depends on the calling loop, which no calibration and
    no in-situ bracket sees, from ~55 to ~32 ns (docs/calibration.md, "The
    decorator in situ"). These are the paths
    :func:`calibration.tracer.overhead.function_dilation` times."""
    if not 1 <= period <= 256:
        raise ValueError(f"layer period must be within 1..256, got {period}")
    adders, orphan, main_add = recorder.adders, recorder.orphan, recorder.main.add
    starts = random.Random()

    # per code object: a nested ``def`` runs again and again with the same code.
    # Keyed by identity (the code kept, so its id stays its own): code objects
    # compare equal across files (the file name is not compared), and two modules'
    # identical ``def f(x): return x`` at the same line would share a region
    known: dict[int, tuple[Any, tuple[Callable, int, int, int, int, Any]]] = {}

    def record_function(fn: Callable) -> Callable:
        t = monotonic_ns()
        code = getattr(fn, "__code__", None)
        if code is None:
            return fn
        plain = isinstance(fn, types.FunctionType)
        hit = known.get(id(code)) if plain else None
        made = hit[1] if hit is not None and hit[0] is code else None
        if made is None:
            module = fn.__module__ or ""
            if module == "__main__":
                module = os.path.splitext(os.path.basename(code.co_filename))[0]
            qualname = fn.__qualname__
            rid = recorder.region_id((qualname, f"{module}.{qualname}", code.co_filename,
                                      code.co_firstlineno, "user", "FUNCTION"))
            make = _factory(*(signature_text(code) if plain else _GENERIC),
                            getattr(fn, "__globals__", None))
            made = (make, ENTER | rid << KIND_BITS, LEAVE | rid << KIND_BITS,
                    LAYER_ENTER | rid << KIND_BITS, LAYER_LEAVE | rid << KIND_BITS,
                    identity(make, code, qualname) if plain else None)
            if plain:
                known[id(code)] = (code, made)
        make, enter, leave, layer_enter, layer_leave, own = made
        layer: Callable = fn
        if sample:
            layer = make(fn, layer_enter, layer_leave, main_add, adders, orphan, get_ident,
                         monotonic_ns, recorder.when_threaded, fn, period, period)
        traced = make(fn, enter, leave, main_add, adders, orphan, get_ident, monotonic_ns,
                      recorder.when_threaded, layer, period,
                      1 + int(starts.random() * period))
        if own is not None:  # the wrapper's code as the function's
            traced.__code__ = own
            if layer is not fn:
                layer.__code__ = own
        traced.__defaults__ = getattr(fn, "__defaults__", None)
        traced.__kwdefaults__ = getattr(fn, "__kwdefaults__", None)
        functools.update_wrapper(traced, fn)
        # the tracer's own work in the program's time (each run of a nested
        # ``def`` decorates anew): a BufferFlush, which compensate removes (R6)
        recorder.current().add_record(t, BUFFER_FLUSH, (monotonic_ns(),))
        return traced

    return record_function


class _InstrumentingLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from source (never from a cached .pyc) with its functions
    decorated."""

    def __init__(self, fullname: str, path: str, decorator: Callable) -> None:
        super().__init__(fullname, path)
        self.decorator = decorator

    def get_code(self, fullname: str) -> Any:
        return instrument(self.get_data(self.path), self.path)

    def exec_module(self, module: Any) -> None:
        module.__dict__[DECORATOR] = self.decorator
        super().exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules (and their submodules) named with ``--functions``."""

    def __init__(self, modules: Sequence[str], decorator: Callable) -> None:
        self.modules = tuple(modules)
        self.decorator = decorator
        self.found: set[str] = set()         # names with a module the program imported
        self.instrumented: set[str] = set()  # ... of which one was Python source

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        named = [m for m in self.modules if fullname == m or fullname.startswith(m + ".")]
        if not named:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            self.found.update(named)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        self.instrumented.update(named)
        spec.loader = _InstrumentingLoader(fullname, spec.origin, self.decorator)
        return spec


class FunctionTracing:
    """Installs the decorator for the script and an import hook for ``modules``."""

    def __init__(self, recorder: Recorder, modules: Sequence[str] = (),
                 sample: bool = True, period: int = LAYER_PERIOD) -> None:
        self.decorator = make_decorator(recorder, sample=sample, period=period)
        self.modules = [m for m in modules if m]
        self.finder = _Finder(self.modules, self.decorator)
        self.already_imported_at_start: list[str] = []

    def already_imported(self) -> list[str]:
        """``--functions`` modules that were imported before tracing started (they
        stay uninstrumented)."""
        return [m for m in self.modules if m in sys.modules]

    def unrecorded(self) -> list[str]:
        """One line per ``--functions`` name none of whose modules was recorded
        (after the program): mistyped, never imported, or not Python source. Names
        imported before tracing started are :meth:`already_imported`'s."""
        early = set(self.already_imported_at_start)
        lines = []
        for m in self.modules:
            if m in early or m in self.finder.instrumented:
                continue
            if m in self.finder.found:
                why = "its modules are not Python source (extension modules)"
            elif importlib.util.find_spec(m.partition(".")[0]) is None:
                why = "no module of that name is installed (mistyped?)"
            else:
                why = "the program never imported it"
            lines.append(f"--functions {m}: nothing recorded: {why}")
        return lines

    def install(self) -> None:
        self.already_imported_at_start = self.already_imported()
        sys.meta_path.insert(0, self.finder)

    def uninstall(self) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)

    def compile_script(self, path: str) -> Any:
        with open(path, "rb") as f:
            return instrument(f.read(), path)

    def script_globals(self, path: str) -> dict[str, Any]:
        """A fresh ``__main__`` namespace for the script, with the decorator: what
        ``python prog.py`` gives (the ``builtins`` module as ``__builtins__``, a
        source loader, no ``__cached__``, empty ``__annotations__``)."""
        return {"__name__": "__main__", "__file__": path, "__builtins__": builtins,
                "__package__": None, "__spec__": None, "__doc__": None,
                "__loader__": importlib.machinery.SourceFileLoader("__main__", path),
                "__cached__": None, "__annotations__": {}, DECORATOR: self.decorator}
