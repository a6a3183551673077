"""The client side and the format owners stay off the server: kclient and doctor import nothing of
broker, and protocol nothing of the packages above it (imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ABOVE_PROTOCOL = ("broker", "storage", "kclient", "kcoord", "doctor", "analytics", "testkit")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Module path -> the top-level packages it imports."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = names
    return out


@pytest.mark.parametrize("package", ["kclient", "doctor"])
def test_clients_and_the_doctor_use_nothing_of_the_broker(package: str) -> None:
    modules = imported_packages(package)
    assert modules
    assert {m: sorted(names) for m, names in modules.items() if "broker" in names} == {}


def test_protocol_imports_nothing_above_it() -> None:
    modules = imported_packages("protocol")
    assert {m: sorted(names & set(ABOVE_PROTOCOL)) for m, names in modules.items() if names & set(ABOVE_PROTOCOL)} == {}
