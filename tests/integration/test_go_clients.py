"""Go clients against a real broker: a Sarama consumer group of two members and a kafka-go group
reader, each producing, consuming and committing, built offline from Debian's Go packages.

The programs live in ``tests/go/``. They are compiled with the distribution's library sources
(``GO111MODULE=off``, ``GOPATH`` = Debian's Go source tree), never downloading a module, and the
binaries are kept in the tests' build cache (``testkit.cache``) under a hash of everything that goes
into them, so only the first run on a machine pays for the compiler. Without Go or a library, its tests are skipped.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from testkit.cache import build_cache
from testkit.kcoord import ROOT
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.offsets import committed

pytestmark = pytest.mark.timeout(300)

GO_PROGRAMS = ROOT / "tests" / "go"
# Where Debian's golang-*-dev packages install library sources (a GOPATH tree).
DEBIAN_GOPATH = Path("/usr/share/gocode")
SARAMA = ("github.com/Shopify/sarama", "golang-github-shopify-sarama-dev")
KAFKA_GO = ("github.com/segmentio/kafka-go", "golang-github-segmentio-kafka-go-dev")
PARTITIONS, MESSAGES = 4, 40



def _library_fingerprint(import_path: str) -> bytes:
    """Names, sizes and modification times of a library's sources: a new package version changes it."""
    root = DEBIAN_GOPATH / "src" / import_path
    entries = sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*.go"))
    return repr(entries).encode()


def go_binary(program: str, library: tuple[str, str]) -> Path:
    """The compiled program, built once per change of its source, the library or the compiler."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("Go is not installed (Debian package golang-go)")
    import_path, package = library
    if not (DEBIAN_GOPATH / "src" / import_path).is_dir():
        pytest.skip(f"{import_path} is not installed (Debian package {package})")
    source = GO_PROGRAMS / program / "main.go"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(DEBIAN_GOPATH), "GOFLAGS": "", "GOPROXY": "off"}
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True, env=env).stdout
    digest = hashlib.sha256(source.read_bytes() + version.encode() + _library_fingerprint(import_path)).hexdigest()
    cache = build_cache("go-clients")
    binary = cache / f"{program}-{digest[:16]}"
    if binary.exists():
        return binary
    env["GOCACHE"] = str(cache / "go-build")
    partial = binary.with_suffix(f".{os.getpid()}.tmp")
    built = subprocess.run([go, "build", "-o", str(partial), str(source)], capture_output=True, text=True,
                           env=env, cwd=source.parent, timeout=240)
    assert built.returncode == 0, f"go build {program} failed:\n{built.stderr[-4000:]}"
    partial.replace(binary)  # atomic: a parallel run sees either nothing or the whole binary
    return binary


def run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=150)


def check_sarama_group(broker: Any, version: str) -> None:
    binary = go_binary("sarama_group", SARAMA)
    topic, group = f"sarama-{version}", f"sarama-group-{version}"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    result = run(binary, broker.bootstrap, topic, group, version, str(MESSAGES))

    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.splitlines()
    held = [set(map(int, line.split("[")[1].rstrip("]").split())) for line in lines if line.startswith("member ")]
    assert len(held) == 2 and all(held) and held[0].isdisjoint(held[1])
    assert held[0] | held[1] == set(range(PARTITIONS))
    assert f"consumed {MESSAGES}" in lines
    # The round-robin producer put MESSAGES / PARTITIONS on each partition; every one is committed.
    assert committed(broker.bootstrap, group) == {(topic, p): MESSAGES // PARTITIONS for p in range(PARTITIONS)}


def test_sarama_consumer_group_at_kafka_2_1(broker: Any) -> None:
    check_sarama_group(broker, "2.1.0")


def test_sarama_consumer_group_at_kafka_0_10(broker: Any) -> None:
    check_sarama_group(broker, "0.10.2.0")


@pytest.mark.slow  # ~20 s while it fails: the writer retries before giving up
def test_kafka_go_group_reader(broker: Any) -> None:
    binary = go_binary("kafkago_group", KAFKA_GO)
    topic, group = "kafka-go", "kafka-go-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    result = run(binary, broker.bootstrap, topic, group, str(MESSAGES))

    assert result.returncode == 0, result.stderr[-4000:]
    assert f"consumed {MESSAGES}" in result.stdout.splitlines()
    assert committed(broker.bootstrap, group) == {(topic, p): MESSAGES // PARTITIONS for p in range(PARTITIONS)}
