"""The layers' import rules, read from the source (every import statement counts: at the top,
inside functions and under ``TYPE_CHECKING``; so does a string naming one of our modules, as
``importlib.import_module`` registries hold them).

- ``needlescope/`` (the pure core) never imports prefect, ``flows``, ``tasks`` or ``warehouse``;
- ``tasks/`` never imports ``flows/``; ``warehouse/`` never imports prefect, ``flows`` or ``tasks``;
- ``warehouse/store`` never imports ``warehouse/stats``, ``charts`` or ``report``;
- no import cycle runs through modules of different packages.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _folders() -> dict[str, str]:
    """Folder -> the package it is installed as, read from setup.py's FOLDERS (the one place)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "FOLDERS":
            mapping: dict[str, str] = ast.literal_eval(node.value)
            return {folder: package for package, folder in mapping.items()}
    raise AssertionError("setup.py has no FOLDERS")


FOLDERS = _folders()
CORE_EXCLUDED = ("needlescope.flows", "needlescope.tasks", "needlescope.warehouse")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def package_of(module: str) -> str:
    """A package is its own package; a module belongs to the package that holds it."""
    if MODULES[module].name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _known(name: str) -> str | None:
    """``name`` or the nearest enclosing module of ours; None for a third-party name."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def _lazy_exports(package: str) -> dict[str, str]:
    """A package whose ``__init__`` exports names lazily (needlescope/_exports.py): each name
    -> the module it lives in, read from the ``__init__``'s TYPE_CHECKING imports. An import
    of such a name reaches that module, not the package (whose ``__init__`` imports nothing)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if _type_checking(node):
            for stmt in node.body:  # type: ignore[attr-defined]
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    found.update((a.asname or a.name, stmt.module) for a in stmt.names)
    return found


def _imported(module: str, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported name, line) for every import in the tree, relative ones resolved."""
    package = package_of(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            exported = _lazy_exports(base)
            if not exported:
                yield base, node.lineno
            for alias in node.names:
                yield exported.get(alias.name, f"{base}.{alias.name}"), node.lineno
        elif isinstance(node, ast.Constant) and node.value in MODULES:
            yield node.value, node.lineno


# ``needlescope/__init__.py`` is the public facade over every layer (flows and the warehouse
# included), each name imported on first use: it stands outside the layers, and importing it
# imports no Prefect (test_the_facade_imports_nothing_until_asked, below).
FACADE = "needlescope"


def _edges() -> dict[str, dict[str, int]]:
    """module -> {module or third-party top-level name it imports: the first line}"""
    edges: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        if module == FACADE:
            continue
        targets: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _lazy_exports(module):  # its TYPE_CHECKING imports are its names, read through it
            tree.body = [n for n in tree.body if not _type_checking(n)]
        for name, line in _imported(module, tree):
            target = _known(name) if name.startswith("needlescope") else name.split(".")[0]
            if target and target not in (module, FACADE):
                targets.setdefault(target, line)
        edges[module] = targets
    return edges


EDGES = _edges()


def _violations(sources: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    def within(name: str, prefixes: tuple[str, ...]) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    found = []
    for module, targets in EDGES.items():
        if not within(module, sources):
            continue
        if sources == ("needlescope",) and within(module, CORE_EXCLUDED):
            continue
        for target, line in targets.items():
            if within(target, forbidden):
                found.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target}")
    return found


@pytest.mark.parametrize(
    ("sources", "forbidden"),
    [
        (("needlescope",), ("prefect", *CORE_EXCLUDED)),
        (("needlescope.tasks",), ("needlescope.flows",)),
        (("needlescope.warehouse",), ("prefect", "needlescope.flows", "needlescope.tasks")),
        (
            ("needlescope.warehouse.store",),
            (
                "needlescope.warehouse.stats",
                "needlescope.warehouse.charts",
                "needlescope.warehouse.report",
            ),
        ),
    ],
    ids=["core", "tasks", "warehouse", "store"],
)
def test_layers_import_only_downwards(sources: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert _violations(sources, forbidden) == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    graph = {m: [t for t in targets if t in MODULES] for m, targets in EDGES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return components


def test_no_import_cycle_between_packages() -> None:
    crossing = [c for c in _cycles() if len({package_of(m) for m in c}) > 1]
    assert crossing == []


def test_the_rules_see_imports_inside_functions_and_under_type_checking() -> None:
    # config/_models.py imports its providers' types under TYPE_CHECKING, a probe's entry its
    # prompt names inside its validators, its folder its modules by name: all reach the graph.
    assert "needlescope.providers.base" in EDGES["needlescope.config._models"]
    assert "needlescope.probes.templates" in EDGES["needlescope.probes.recall.entry"]
    assert "needlescope.probes.rag.probe" in EDGES["needlescope.probes.rag"]
    assert "needlescope.flows.cli._app" in MODULES


def test_the_facade_imports_nothing_until_asked() -> None:
    """``import needlescope`` imports neither Prefect nor a layer; the core's names come without
    Prefect; a flow's name brings Prefect (in a fresh interpreter)."""
    import subprocess
    import sys

    script = (
        "import sys, needlescope\n"
        "assert 'prefect' not in sys.modules and 'needlescope.config' not in sys.modules\n"
        "needlescope.load_config, needlescope.Warehouse, needlescope.Probe\n"
        "assert 'prefect' not in sys.modules\n"
        "assert needlescope.sweep.name == 'sweep' and 'prefect' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_package_declares_what_it_offers() -> None:
    """Every package's ``__init__`` has ``__all__``; each name it lists resolves, and a package
    that exports lazily lists every name it hands to ``lazy_exports``."""
    import importlib

    missing, unlisted, unresolved = [], [], []
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = [
            n
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            and "__all__" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)
        ]
        if not declared or declared[0].value is None:
            missing.append(module)
            continue
        names = set(ast.literal_eval(declared[0].value))
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "lazy_exports":
                lazy = set(ast.literal_eval(call.args[1]))
                unlisted += [f"{module}.{n}" for n in sorted(lazy - names)]
        package = importlib.import_module(module)
        unresolved += [f"{module}.{n}" for n in sorted(names) if not hasattr(package, n)]
    assert (missing, unlisted, unresolved) == ([], [], [])


def test_no_hand_kept_list_of_probes_outside_their_folders() -> None:
    """Which probes there are is their declarations' (probes/catalog.py): no tuple, list, set
    or dict literal names two probes or more outside a probe's own folder (core or warehouse),
    but for imports/, which maps other tools' task names to our probes."""
    from needlescope.probes.catalog import specs

    names = set(specs())
    allowed = ("needlescope.probes.", "needlescope.warehouse.probes.", "needlescope.imports")
    found = []
    for module, path in MODULES.items():
        inside = module.startswith(allowed) and module.count(".") >= 3
        if inside or module.startswith("needlescope.imports"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                items: list[ast.expr | None] = list(node.elts)
            elif isinstance(node, ast.Dict):
                items = list(node.keys)
            else:
                continue
            named = [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]
            if len(named) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {named}")
    assert found == []
