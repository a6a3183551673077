"""What the README tells a new user before the first command holds: the prerequisites match what
the scripts need and install, and auto-created topics are said to have the partitions they get."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from broker.configs.node_config import PROPERTIES

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.MULTILINE | re.DOTALL)
    assert m is not None, f"README has no '{title}' section"
    return m.group(1)


def test_prerequisites_name_python_venv_and_root() -> None:
    text = section("Prerequisites")
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert required == ">=3.11" and "Python 3.11 or newer" in text
    assert "python3-venv" in text
    assert "root" in text


def test_prerequisites_list_every_package_the_test_script_installs() -> None:
    text = section("Prerequisites")
    script = (ROOT / "scripts" / "test.sh").read_text()
    listed = re.search(r"^apt_packages=\((.*)\)$", script, re.MULTILINE)
    assert listed is not None
    extra = re.findall(r"missing\+=\(([^)]*)\)", script)
    packages = set(listed.group(1).split()) | {p for group in extra for p in group.split()}
    packages.discard('"$p"')
    assert packages, script
    for p in sorted(packages):
        assert f"`{p}`" in text, p


def test_auto_created_topics_are_said_to_have_their_real_partition_count() -> None:
    default = next(p.default for p in PROPERTIES if p.name == "num.partitions")
    assert default == 1
    text = section("Pointing clients at it")
    assert "**one** by default" in text and "kcat -G" in text


def test_prerequisites_name_the_reference_kafka_and_what_fetches_it() -> None:
    text = " ".join(section("Prerequisites").split())
    pom = (ROOT / "reference" / "pom.xml").read_text()
    version = re.search(r"<kafka\.version>(.*?)</kafka\.version>", pom)
    assert version is not None
    assert f"Apache Kafka {version.group(1)}" in text
    for needed in ("JDK 17", "Maven", "`scripts/kafka.sh`", "`~/.cache/kcoord`", "nothing of it is committed"):
        assert needed in text, needed
    for part in ("kafka_2.13", "kafka-tools", "kafka-clients", "kafka-streams"):
        assert f"<artifactId>{part}</artifactId>" in pom, part
    assert "differential tests" in text


def test_the_two_commands_are_the_front_page() -> None:
    text = section("The two commands")
    assert "```sh\nbash scripts/run.sh\n```" in text
    assert "```sh\nbash scripts/test.sh\n```" in text
    assert len(README.encode()) <= 30_000, "the README is a front page; move detail into docs/"
