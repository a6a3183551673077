"""The Java test programs (tests/java/): where they are and how they are compiled, once per
change of the sources, the jars or the compiler (the ``java_classes`` fixture)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.cache import build_cache
from testkit.kafka import classpath
from testkit.kcoord import ROOT

SOURCES = ROOT / "tests" / "java"


MAIN = "KafkaClients"


def compiled_java(kafka_libs: Path) -> Path:
    """The compiled programs, built once per change of the sources, the jars or the compiler."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac is not installed (a JDK, e.g. Debian's default-jdk-headless)")
    sources = sorted(SOURCES.glob("*.java"))
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, check=True)
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + source.read_bytes())
    digest.update(repr(sorted((j.name, j.stat().st_size) for j in kafka_libs.glob("*.jar"))).encode())
    digest.update((version.stdout + version.stderr).encode())
    cache = build_cache("java-clients")
    classes = cache / f"classes-{digest.hexdigest()[:16]}"
    if (classes / f"{MAIN}.class").exists():
        return classes
    partial = cache / f"classes-{digest.hexdigest()[:16]}.{os.getpid()}.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    built = subprocess.run([javac, "-cp", classpath(kafka_libs), "-d", str(partial), *map(str, sources)],
                           capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, f"javac failed:\n{built.stdout}\n{built.stderr}"
    try:
        partial.rename(classes)  # atomic: a parallel run sees either nothing or every class
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)  # another run got there first
    return classes


