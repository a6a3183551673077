"""The documentation's lists stay whole: every page of docs/ is in its index, every benchmark script
in the benchmarks page, and the front page links to the index."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_every_page_is_in_the_index() -> None:
    index = (DOCS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert len(pages) >= 10
    assert sorted(pages - linked) == [], "pages missing from docs/README.md"


def test_every_benchmark_script_is_on_the_benchmarks_page() -> None:
    page = (DOCS / "benchmarks.md").read_text()
    listed = set(re.findall(r"`(\w+\.py)`", page))
    scripts = {p.name for p in (ROOT / "bench").glob("*.py")} - {"__init__.py"}
    assert "harness.py" in scripts
    assert sorted(scripts - listed) == [], "bench scripts missing from docs/benchmarks.md"


def test_the_front_page_points_at_every_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/README.md)" in readme
    for page in ("configuration", "security", "cluster", "transactions", "journal", "analysis",
                 "operations", "limits", "benchmarks", "architecture"):
        assert f"(docs/{page}.md)" in readme, page
