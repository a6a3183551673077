"""The architecture page lists the packages there are: every folder with Python modules under the
code's top-level packages, two levels deep, is a row of its table, and every row names a real one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
TOP_LEVEL = ("protocol", "broker", "storage", "analytics", "kcoord", "testkit")
DEPTH = 2


def packages_on_disk() -> set[str]:
    found: set[str] = set()
    for top in TOP_LEVEL:
        for module in (ROOT / top).rglob("*.py"):
            folder = module.parent.relative_to(ROOT)
            if len(folder.parts) <= DEPTH and "__pycache__" not in folder.parts:
                found.add(folder.as_posix() + "/")
    return found


def packages_on_page() -> list[str]:
    text = PAGE.read_text()
    section = text.split("\n## Packages\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("| package | what it holds |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([\w/]+/)` \|", table, re.MULTILINE)


def test_every_package_is_on_the_architecture_page() -> None:
    listed = packages_on_page()
    assert len(listed) == len(set(listed)), "a package is listed twice"
    on_disk = packages_on_disk()
    assert len(on_disk) >= 15
    assert sorted(on_disk - set(listed)) == [], "packages missing from docs/architecture.md"
    shallow = {p for p in listed if p.count("/") <= DEPTH}
    assert sorted(shallow - on_disk) == [], "docs/architecture.md lists packages that do not exist"


def test_deeper_rows_name_real_packages() -> None:
    for listed in packages_on_page():
        folder = ROOT / listed
        assert folder.is_dir() and any(folder.glob("*.py")), f"{listed} is not a package folder"
        assert listed.split("/", 1)[0] in TOP_LEVEL, listed


def test_every_other_folder_on_the_page_exists() -> None:
    text = PAGE.read_text()
    table = text.split("| folder | what it holds |", 1)[1].split("\n\n", 1)[0]
    folders = re.findall(r"^\| `([\w/]+/)` \|", table, re.MULTILINE)
    assert {"tests/", "bench/", "deploy/", "scripts/", "reference/"} <= set(folders)
    for folder in folders:
        assert (ROOT / folder).is_dir(), folder
