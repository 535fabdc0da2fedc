"""The import graph keeps the layers: the engine evaluates and knows nothing of
who runs it (no import of compensate.parallel, .cli, .pipeline or .api from
compensate/engine/, not even for type checking), and no module imports a private
name (``_x``) of another package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compensate", "calibration")
ABOVE_ENGINE = ("compensate.parallel", "compensate.cli", "compensate.pipeline",
                "compensate.api")


def _modules():
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            package = name if parts[-1] == "__init__" else name.rpartition(".")[0]
            yield path, name, package, ast.parse(path.read_text())


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []


def _package_of(module: str) -> str:
    """The package a module named ``module`` belongs to (itself for a package)."""
    path = ROOT.joinpath(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def test_the_engine_imports_nothing_above_it():
    found = [f"{path.relative_to(ROOT)}:{line}: {module}"
             for path, name, _, tree in _modules() if name.startswith("compensate.engine")
             for line, module, _ in _imports(tree)
             if module.startswith(ABOVE_ENGINE)]
    assert found == []


def test_no_private_name_of_another_package_is_imported():
    found = [f"{path.relative_to(ROOT)}:{line}: {module}.{n}"
             for path, _, package, tree in _modules()
             for line, module, names in _imports(tree)
             if module.startswith(PACKAGES) and _package_of(module) != package
             for n in names if n.startswith("_") and not n.startswith("__")]
    assert found == []
