"""The import graph keeps the layers: the engine evaluates and knows nothing of
who runs it (no import of compensate.parallel, .cli, .pipeline or .api from
compensate/engine/, not even for type checking), no module imports a private
name (``_x``) of another package, none uses a private attribute (``obj._x``) of
an object whose class another package defines, and only the format layer
(compensate/formats/) knows the ``otf2`` package: everything after it reads record
fields through compensate.formats.fields."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compensate", "calibration")
ABOVE_ENGINE = ("compensate.parallel", "compensate.cli", "compensate.pipeline",
                "compensate.api")


@functools.cache
def _modules() -> tuple:
    """(path, module, package, AST) of every module, parsed once for the tests
    below (the trees are only read)."""
    out = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            package = name if parts[-1] == "__init__" else name.rpartition(".")[0]
            out.append((path, name, package, ast.parse(path.read_text())))
    return tuple(out)



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


# -- private attributes of other packages' classes ---------------------------------------

class _Classes:
    """The classes of a set of modules, and what a name means in each module (its
    imports anywhere in the text, lazy ones too, followed through re-exports), for
    :func:`_foreign_private_accesses`. ``modules``: ``(name, package, tree)``."""

    def __init__(self, modules: list[tuple[str, str, ast.Module]]) -> None:
        self.trees = {name: tree for name, _, tree in modules}
        self.package = {name: package for name, package, _ in modules}
        self.nodes = {(m, n.name): n for m, tree in self.trees.items()
                      for n in tree.body if isinstance(n, ast.ClassDef)}
        self.names = {m: self._imports(m, tree) for m, tree in self.trees.items()}
        #: the modules and the packages above them (``import a.b`` binds ``a``)
        self.modules = {".".join(m.split(".")[:i]) for m in self.trees
                        for i in range(1, m.count(".") + 2)}
        self._defined: dict[tuple[str, str], set[str]] = {}

    def _imports(self, module: str, tree: ast.Module) -> dict[str, tuple[str, str | None]]:
        """Local name -> (module, None) for a module, (module, name) for a name of one."""
        out: dict[str, tuple[str, str | None]] = {}
        anchor = module.split(".") if self.package[module] == module else \
            module.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = \
                        (a.name if a.asname else a.name.split(".")[0], None)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = anchor[:len(anchor) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out[a.asname or a.name] = (sub, None) if sub in self.trees else \
                        (base, a.name)
        return out

    def meaning(self, module: str, node: ast.AST, depth: int = 0) -> tuple | None:
        """What the expression ``node`` names in ``module``: ("class", (module, name)),
        ("module", name) or None (a string annotation is parsed, ``C | None`` and
        ``Optional[C]`` give ``C``)."""
        if depth > 10:
            return None
        if isinstance(node, ast.Name):
            if (module, node.id) in self.nodes:
                return ("class", (module, node.id))
            target = self.names.get(module, {}).get(node.id)
            if target is None:
                return None
            if target[1] is None:
                return ("module", target[0]) if target[0] in self.modules else None
            return self.meaning(target[0], ast.Name(target[1]), depth + 1)
        if isinstance(node, ast.Attribute):
            base = self.meaning(module, node.value, depth + 1)
            if base is None or base[0] != "module":
                return None
            sub = f"{base[1]}.{node.attr}"
            return ("module", sub) if sub in self.modules else \
                self.meaning(base[1], ast.Name(node.attr), depth + 1)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.meaning(module, ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.meaning(module, node.left, depth + 1) or \
                self.meaning(module, node.right, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.meaning(module, node.slice, depth + 1)
        return None

    def class_of(self, module: str, node: ast.AST | None) -> tuple[str, str] | None:
        found = self.meaning(module, node) if node is not None else None
        return found[1] if found and found[0] == "class" else None

    def bases(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        return [b for b in (self.class_of(cls[0], e) for e in self.nodes[cls].bases) if b]

    def defined(self, cls: tuple[str, str]) -> set[str]:
        """What the body of ``cls`` defines: methods, nested classes, class
        attributes, and what its methods assign to ``self.x``."""
        if cls not in self._defined:
            out: set[str] = set()
            for n in ast.walk(self.nodes[cls]):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(n.name)
                targets = n.targets if isinstance(n, ast.Assign) else \
                    [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []
                for t in targets:
                    for e in ast.walk(t):
                        if isinstance(e, ast.Name):
                            out.add(e.id)
                        elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
                                and e.value.id == "self":
                            out.add(e.attr)
            self._defined[cls] = out
        return self._defined[cls]

    def owner(self, cls: tuple[str, str], attr: str,
              seen: set | None = None) -> tuple[str, str] | None:
        """The first class of ``cls`` and its bases (depth first) that defines ``attr``."""
        seen = set() if seen is None else seen
        if cls in seen:
            return None
        seen.add(cls)
        if attr in self.defined(cls):
            return cls
        return next((o for b in self.bases(cls) if (o := self.owner(b, attr, seen))), None)


def _foreign_private_accesses(classes: _Classes) -> list[str]:
    """``module:line: expression (class)`` of every access to a private attribute
    that a class of another package defines (see the test below for the scope)."""
    return [line for module in classes.trees for line in _accesses_in(classes, module)]


def _accesses_in(classes: _Classes, module: str) -> list[str]:
    """:func:`_foreign_private_accesses` in one module."""
    found: list[str] = []
    package = classes.package[module]

    def key(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return f"{node.value.id}.{node.attr}"
        return None

    def bound(body: list[ast.AST], env: dict) -> dict:
        """``env`` plus the names ``body`` binds to instances: ``x = C(...)``,
        ``x: C = ...``, ``self.x = C(...)``."""
        env = dict(env)
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
                    cls = classes.class_of(module, n.value.func)
                    for t in n.targets:
                        if cls and key(t):
                            env[key(t)] = ("instance", cls)
                elif isinstance(n, ast.AnnAssign) and key(n.target):
                    cls = classes.class_of(module, n.annotation) or (
                        classes.class_of(module, n.value.func)
                        if isinstance(n.value, ast.Call) else None)
                    if cls:
                        env[key(n.target)] = ("instance", cls)
        return env

    def visit(node: ast.AST, env: dict, cls: tuple[str, str] | None) -> None:
        if isinstance(node, ast.ClassDef):
            here = (module, node.name) if (module, node.name) in classes.nodes else None
            for child in node.body:
                visit(child, env, here)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for outer in [*getattr(node, "decorator_list", []), *node.args.defaults,
                          *node.args.kw_defaults]:
                if outer is not None:
                    visit(outer, env, cls)
            env = dict(env)
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for i, a in enumerate(params):
                annotated = classes.class_of(module, a.annotation)
                if annotated:
                    env[a.arg] = ("instance", annotated)
                elif i == 0 and cls is not None and not isinstance(node, ast.Lambda):
                    env[a.arg] = ("instance", cls)  # self, cls
            if cls is not None and not isinstance(node, ast.Lambda):
                env["super()"] = ("super", cls)
            body = node.body if isinstance(node.body, list) else [node.body]
            env = bound(body, env)
            for child in body:
                visit(child, env, None)
            return
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id == "super" and "super()" in env:
                bases = classes.bases(env["super()"][1])
                where = next((o for b in bases if (o := classes.owner(b, node.attr))), None)
            else:
                what = env.get(key(value)) if key(value) else None
                if what is None:  # the class itself: C._x
                    c = classes.class_of(module, value) if key(value) not in env else None
                    what = ("class", c) if c else None
                where = what and (classes.owner(what[1], node.attr) or what[1])
            if where and classes.package[where[0]] != package:
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)} "
                             f"({where[0]}.{where[1]})")
        for child in ast.iter_child_nodes(node):
            visit(child, env, cls)

    visit(classes.trees[module], bound(classes.trees[module].body, {}), None)
    return found


def test_no_private_attribute_of_another_packages_class_is_used():
    """No module of compensate/ or calibration/ reads or calls a private attribute
    (``x._name``, not ``__dunder__``) of an object whose class is defined in
    another package (a subpackage counts as another package, as for the imports
    above): a package's private methods and attributes may change without telling
    the others, as ``compensate.parallel.cutting`` once drove the one-process
    cutter through ``_steps``, ``_merge``, ``_bounds`` and ``_balance``.

    The check is static (the AST), so its scope is what the source says of an
    object's class, for classes of compensate/ and calibration/ (imported from
    anywhere in the module, re-exports followed) and local subclasses of them:

    * a name bound by a constructor call (``x = C(...)``, also ``self.x = C(...)``)
      or by an annotation (a parameter, ``x: C``; ``C | None``, ``Optional[C]``
      and string annotations give ``C``);
    * ``self`` / ``cls`` (a method's first parameter) and ``super()`` in a method;
    * the class itself (``C._x``).

    The attribute belongs to the first class, of the object's class and its bases
    depth first, whose body defines it (a method, a class attribute, an assignment
    to ``self._x``): a subclass's own private names are its own, those it inherits
    are its base's package's. Not followed: objects returned by calls, held in
    containers, reached through more than one attribute (``a.b._c``) or bound
    only in another function; names bound in nested functions count for the
    whole enclosing function."""
    modules = [(name, package, tree) for _, name, package, tree in _modules()]
    assert _foreign_private_accesses(_Classes(modules)) == []


def test_private_attribute_check_finds_them():
    """The check above on a hand-made pair of packages: what it must find, and
    what it must leave (the class's own package, a subclass's own names, dunders)."""
    base = """
class Base:
    def _secret(self): ...
    def open(self): ...
"""
    same = """
from a.base import Base
def f(x: Base):
    return x._secret(), Base()._secret
"""
    use = """
from a.base import Base
import a.base as b
class Local(b.Base):
    def _own(self): ...
    def run(self):
        self._own()
        self._secret()
        super()._secret()
        return self.__class__
def f(x: Base, y: "Base | None"):
    z = Local()
    z._own()
    x._secret(); y._secret(); z._secret(); Base._secret
    import a.base
    return x.open(), a.base.Base._secret
"""
    modules = [(name, name.rpartition(".")[0], ast.parse(src))
               for name, src in (("a.base", base), ("a.same", same), ("b.use", use))]
    found = _foreign_private_accesses(_Classes(modules))
    assert found == [
        "b.use:8: self._secret (a.base.Base)",
        "b.use:9: super()._secret (a.base.Base)",
        "b.use:14: x._secret (a.base.Base)",
        "b.use:14: y._secret (a.base.Base)",
        "b.use:14: z._secret (a.base.Base)",
        "b.use:14: Base._secret (a.base.Base)",
        "b.use:16: a.base.Base._secret (a.base.Base)",
    ]
