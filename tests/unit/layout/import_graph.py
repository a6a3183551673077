"""The project's import graph as its code draws it, for the tests of its layers: every import
counts, at module level, under ``if TYPE_CHECKING:`` and inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("protocol", "storage", "broker", "kclient", "analytics", "doctor", "testkit", "bench", "kcoord")


def modules_of(packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for top in packages:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = parts[-1] == "__init__"
            if package:
                parts.pop()
            modules[".".join(parts)] = (path, package)
    return modules


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project's modules it imports."""
    modules = modules_of(packages)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (path, package) in modules.items():
        own_package = module if package else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = own_package.split(".")[: len(own_package.split(".")) - (node.level - 1)]
                    base = ".".join([*parent, base] if base else parent)
                for alias in node.names:
                    # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module.
                    submodule = f"{base}.{alias.name}"
                    targets.add(submodule if submodule in modules else base)
        graph[module] = {t for t in map(resolve, targets) if t is not None and t != module}
    return graph


def collapse(graph: dict[str, set[str]], unit: dict[str, str]) -> dict[str, set[str]]:
    """The graph between units (``unit[module]``: the package it counts in); arrows inside a unit
    are dropped."""
    out: dict[str, set[str]] = {u: set() for u in unit.values()}
    for module, targets in graph.items():
        out[unit[module]] |= {unit[t] for t in targets if unit[t] != unit[module]}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
