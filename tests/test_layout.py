"""The package layout (issue #14): no import circles, large modules justified, one
handler per dependency kind, every handler and invariant module a family's (the
registry, compensate/families.py; tests/test_families.py checks its entries), and a
README layout section that matches the tree."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from compensate.engine.kinds import COLLECTIVE_KINDS, MESSAGE_KINDS
from compensate.families import FAMILIES, Rows
from compensate.matching.collectives import COLLECTIVE_CLASSES, N_TO_N

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compensate", "calibration")
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that ``name`` imports anywhere in its text (top level, inside
    functions, under TYPE_CHECKING: each is an edge)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_import_graph_has_no_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert sum(len(e) for e in graph.values()) > 100  # the walk found the imports
    assert _cycles(graph) == []


def test_the_engine_does_not_import_its_callers():
    """The engine is the evaluator: no module of compensate/engine imports the
    distributed run, the command, the API or the pipeline, not even for type hints
    (it states what it needs of the distributed run's exchange itself:
    compensate.engine.exchange)."""
    callers = ("compensate.parallel", "compensate.cli", "compensate.api", "compensate.pipeline")
    modules = _modules()
    for name, path in modules.items():
        if name.startswith("compensate.engine"):
            bad = sorted(t for t in _imports(name, path, modules)
                         if t.startswith(callers))
            assert not bad, f"{name} imports {bad}"


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_large_modules_say_why():
    """A module over ~600 lines is one cohesive thing and its docstring says why."""
    for name, path in _modules().items():
        text = path.read_text()
        if text.count("\n") > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            assert "Why one module" in doc, f"{name}: {text.count(chr(10))} lines"


def test_every_collective_class_has_a_handler():
    classes = set(COLLECTIVE_CLASSES.values()) | {N_TO_N}
    for cls in classes:
        for nonblocking in (False, True):
            assert (cls, nonblocking) in COLLECTIVE_KINDS, (cls, nonblocking)
    assert set(MESSAGE_KINDS) == {"eager", "synchronous"}


def test_handler_modules_document_their_kind():
    """Each handler module says what depends on what and where matching finds it."""
    for path in sorted((ROOT / "compensate" / "engine" / "kinds").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if path.name != "__init__.py":
            assert "Matching:" in doc, path.name


def test_every_handler_and_invariant_module_belongs_to_a_family():
    """A module of the engine's handler table or of the verifier's invariants that
    no family of compensate/families.py names is a family left out of the registry
    (the verifier's other modules: running the checks, their result, coverage)."""
    handlers = {m.__name__.rpartition(".")[2] for f in FAMILIES if isinstance(f.rules, Rows)
                for m in f.rules.modules}
    assert handlers == {p.stem for p in (ROOT / "compensate" / "engine" / "kinds").glob("*.py")
                        if p.name != "__init__.py"}
    invariants = {inspect.getmodule(f.check).__name__.rpartition(".")[2] for f in FAMILIES
                  if callable(f.check)}
    assert invariants == {p.stem for p in (ROOT / "compensate" / "verify").glob("*.py")} - {
        "__init__", "checks", "result", "coverage"}


def test_readme_layout_matches_tree():
    """Every package of the tree is named in docs/layout.md, and every path named
    there exists."""
    section = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"`([\w./-]+/?)`", section))
    for p in named:
        if "/" in p:
            assert (ROOT / p).exists(), f"docs/layout.md names {p}, which does not exist"
    for pkg in PACKAGES:
        for d in sorted((ROOT / pkg).rglob("__init__.py")):
            rel = d.parent.relative_to(ROOT).as_posix() + "/"
            assert rel in named, f"docs/layout.md does not name {rel}"


def _complexity(fn: ast.AST) -> int:
    """McCabe's number of a function as radon counts it (1 + decisions): each
    if/elif, loop, except, with, assert, conditional expression, comprehension
    clause and its ifs, and each extra operand of a boolean operator; nested
    functions and classes count on their own."""
    n = 1
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp,
                             ast.ExceptHandler, ast.With, ast.AsyncWith, ast.Assert)):
            n += 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.match_case):
            n += 1
        stack.extend(ast.iter_child_nodes(node))
    return n


def test_engine_and_pipeline_functions_fit_on_a_screen():
    """Every function of the engine and the pipeline: at most 80 lines and a
    McCabe complexity of at most 25 (radon's measure; `radon cc -s compensate/engine
    compensate/pipeline` prints the same grades)."""
    found = []
    for folder in ("engine", "pipeline"):
        for path in sorted((ROOT / "compensate" / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    cc = _complexity(node)
                    if lines > 80 or cc > 25:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: "
                                     f"{lines} lines, complexity {cc}")
    assert found == []
