"""The tests' own layout: what test modules share lives in helper modules (``helpers/``, the
``*_ops.py`` of the differential tests, conftest fixtures), never in another test module, so that
a test module can be read, moved or deleted alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def imports_of_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) among the tests' modules ``source`` imports."""
    return sorted(m for m in imported_modules(Path(source))
                  if m.startswith("tests.") and m.rsplit(".", 1)[-1].startswith("test_"))




def test_no_test_module_imports_another() -> None:
    offenders = {str(p.relative_to(TESTS)): found for p in sorted(TESTS.rglob("*.py"))
                 if (found := imports_of_test_modules(str(p)))}
    assert offenders == {}


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text("def test_a():\n    from tests.differential.test_configs import settle\n")
    assert imports_of_test_modules(str(module)) == ["tests.differential.test_configs"]
