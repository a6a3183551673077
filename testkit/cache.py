"""The cache the tests keep outside any work tree: what they fetch once (Apache Kafka's jars, the
OIDC provider's, client test suites) and what they compile once (the Go and Java test programs,
under a hash of everything that goes into them). ``$KCOORD_CACHE``, by default ``~/.cache/kcoord``,
the root scripts/maven-libs.sh fills too. A new clone of the project, as CI makes for every run,
finds there what an earlier one built, where pytest's own cache starts empty."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("KCOORD_CACHE", Path.home() / ".cache" / "kcoord"))


def build_cache(name: str) -> Path:
    """The directory, made if missing, where the programs of ``name`` are built: each build is
    named by its inputs' hash and put in place by one rename, so runs beside each other (and
    other clones) share it."""
    path = cache_root() / "builds" / name
    path.mkdir(parents=True, exist_ok=True)
    return path
