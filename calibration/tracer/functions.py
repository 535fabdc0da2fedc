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

import ast
import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Sequence
from threading import get_ident
from time import monotonic_ns
from typing import Any

from calibration.tracer.buffer import ENTER, KIND_BITS, LEAVE, Recorder

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
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if not _is_generator(node):
            node.decorator_list.append(
                ast.copy_location(ast.Name(DECORATOR, ast.Load()), node))
        return node


def instrument(source: str | bytes, filename: str) -> Any:
    """Compile module source with every (non-generator) function decorated."""
    tree = ast.parse(source, filename)
    tree = ast.fix_missing_locations(_Decorate().visit(tree))
    return compile(tree, filename, "exec", dont_inherit=True)


def make_decorator(recorder: Recorder) -> Callable[[Callable], Callable]:
    """The ``@__compensate_record__`` decorator recording into the calling
    thread's buffer of ``recorder``.

    Each call takes its Enter timestamp, then picks the buffer: the master's while
    the process is single-threaded (one closure variable tested), afterwards the
    calling thread's (``adders[get_ident()]``, the bound ``append`` of its array:
    one C call and one dict lookup per call, not per record), and appends (time,
    code) pairs; the Leave goes to the same buffer. These are the paths
    :func:`calibration.tracer.overhead.function_dilation` times."""
    adders, orphan, main_add = recorder.adders, recorder.orphan, recorder.main.add
    single = True

    def threaded() -> None:
        nonlocal single
        single = False

    recorder.when_threaded(threaded)

    def record_function(fn: Callable) -> Callable:
        code = getattr(fn, "__code__", None)
        if code is None:
            return fn
        module = fn.__module__ or ""
        if module == "__main__":
            module = os.path.splitext(os.path.basename(code.co_filename))[0]
        qualname = fn.__qualname__
        rid = recorder.region_id((qualname, f"{module}.{qualname}", code.co_filename,
                                  code.co_firstlineno, "user", "FUNCTION"))
        enter, leave = ENTER | rid << KIND_BITS, LEAVE | rid << KIND_BITS

        def traced(*args: Any, **kwargs: Any) -> Any:
            t = monotonic_ns()
            if single:
                add = main_add
            else:
                try:
                    add = adders[get_ident()]
                except KeyError:  # a thread not started through threading.Thread
                    add = orphan().add
            add(t)
            add(enter)
            try:
                return fn(*args, **kwargs)
            finally:
                add(monotonic_ns())
                add(leave)

        return functools.update_wrapper(traced, fn)

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

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not any(fullname == m or fullname.startswith(m + ".") for m in self.modules):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _InstrumentingLoader(fullname, spec.origin, self.decorator)
        return spec


class FunctionTracing:
    """Installs the decorator for the script and an import hook for ``modules``."""

    def __init__(self, recorder: Recorder, modules: Sequence[str] = ()) -> None:
        self.decorator = make_decorator(recorder)
        self.modules = [m for m in modules if m]
        self.finder = _Finder(self.modules, self.decorator)

    def already_imported(self) -> list[str]:
        """``--functions`` modules that were imported before tracing started (they
        stay uninstrumented)."""
        return [m for m in self.modules if m in sys.modules]

    def install(self) -> None:
        sys.meta_path.insert(0, self.finder)

    def uninstall(self) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)

    def compile_script(self, path: str) -> Any:
        with open(path, "rb") as f:
            return instrument(f.read(), path)

    def script_globals(self, path: str) -> dict[str, Any]:
        """A fresh ``__main__`` namespace for the script, with the decorator."""
        return {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__,
                "__package__": None, "__spec__": None, "__doc__": None,
                DECORATOR: self.decorator}
