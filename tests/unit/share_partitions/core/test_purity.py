"""The share cores are pure: ``broker/share_partitions/core``, ``broker/coordinators/group/core/share``
and ``broker/coordinators/share/core`` import only ``protocol``, each other's pure packages, the
runtime's timer requests and the standard library's data modules (no trio, no clock, no I/O), so
the operations are ``op(state, request, now)`` and replay rebuilds them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
STDLIB_ALLOWED = {"__future__", "collections", "dataclasses", "typing", "enum", "itertools", "functools", "re"}
PURE_BROKER = ("broker.coordinators.group.core", "broker.share_partitions.core", "broker.coordinators.share.core",
               "broker.runtime.timer_requests")


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["broker/share_partitions/core", "broker/coordinators/group/core/share",
                                     "broker/coordinators/share/core"])
def test_share_cores_import_nothing_impure(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules
    for path in modules:
        for name in imports(path):
            top = name.split(".")[0]
            ok = top in STDLIB_ALLOWED or top == "protocol" or name.startswith(PURE_BROKER)
            assert ok, f"{path.relative_to(ROOT)} imports {name}"
