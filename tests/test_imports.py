"""The import graph keeps the layers: the engine evaluates and knows nothing of
who runs it (no import of compensate.parallel, .cli, .pipeline or .api from
compensate/engine/, not even for type checking), no module imports a private
name (``_x``) of another package, and only the format layer (compensate/formats/)
knows the ``otf2`` package: everything after it reads record fields through
compensate.formats.fields."""

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


#: the ``otf2`` bindings' packages, and the names of their enums' internals
OTF2_PACKAGES = ("otf2", "_otf2")
OTF2_INTERNALS = ("_names", "EnumBase")


def _otf2_uses(tree: ast.AST):
    """(line, what) of each import of an ``otf2`` package in ``tree`` (any form: at
    top level or inside a function, ``import``, ``from ... import``,
    ``importlib.import_module``/``__import__`` of a literal name) and each read of
    an ``otf2`` enum's internals (an attribute, or a literal name as getattr takes it)."""
    for line, module, _ in _imports(tree):
        if module.split(".")[0] in OTF2_PACKAGES:
            yield line, f"import {module}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            arg = node.args[0].value
            if called in ("import_module", "__import__") and isinstance(arg, str) \
                    and arg.split(".")[0] in OTF2_PACKAGES:
                yield node.lineno, f"{called}({arg!r})"
        if isinstance(node, ast.Attribute) and node.attr in OTF2_INTERNALS:
            yield node.lineno, f".{node.attr}"
        elif isinstance(node, ast.Constant) and node.value in OTF2_INTERNALS:
            yield node.lineno, repr(node.value)
        elif isinstance(node, ast.Name) and node.id == "EnumBase":
            yield node.lineno, node.id


def test_only_the_format_layer_knows_the_otf2_package():
    """No module of compensate/ outside compensate/formats/ imports ``otf2`` or
    ``_otf2`` or reads an OTF2 enum's ``_names`` (matching, the engine, the
    distributed run, verification and analysis read payloads through
    compensate.formats.fields). calibration/ writes OTF2 itself and is not held to
    this."""
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path, name, _, tree in _modules()
             if name.startswith("compensate") and name != "compensate.formats"
             and not name.startswith("compensate.formats.")
             for line, what in _otf2_uses(tree)]
    assert found == []


def test_the_otf2_check_finds_every_form():
    """The check above sees imports inside functions, dotted and aliased imports,
    literal dynamic imports and the enum internals, and nothing else."""
    tree = ast.parse("import json\n"
                     "def f(v):\n"
                     "    import otf2.events as oev\n"
                     "    from _otf2 import Config\n"
                     "    import importlib; importlib.import_module('otf2.enums')\n"
                     "    __import__('_otf2')\n"
                     "    a = type(v)._names\n"
                     "    b = getattr(type(v), '_names', None)\n"
                     "    return issubclass(type(v), EnumBase), a, b, v.names\n")
    assert sorted(line for line, _ in _otf2_uses(tree)) == [3, 4, 5, 6, 7, 8, 9]
