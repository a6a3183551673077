"""The dynamic configs of brokers and groups (Kafka keeps them in its metadata log): one JSON
document in the data dir, ``kcoord-configs.json``, replaced durably (write temp, fsync, rename, fsync
dir) before the change is answered.

In a cluster the nodes share the data dir and so the document, as they share the topic catalog: a
node changes it under an exclusive lock on ``kcoord-configs.lock`` after re-reading it, and every
node re-reads it when the file changed (``refresh``, cheap: a stat)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.durable_json import write_durably

CONFIGS_FILE = "kcoord-configs.json"
CONFIGS_LOCK_FILE = "kcoord-configs.lock"
# Kinds of resources the document holds: broker (name "" is the cluster-wide default) and group.
BROKERS, GROUPS = "brokers", "groups"

Overrides = dict[str, dict[str, str]]
BOOTSTRAP_CLUSTER_DEFAULTS = {"min.insync.replicas": "1"}


class DynamicConfigStore:
    def __init__(self, data_dir: Path, shared: bool = False) -> None:
        self.path = data_dir / CONFIGS_FILE
        self.shared = shared
        self._seen: tuple[int, int, int] | None = None
        # Before anything is altered, the cluster-wide defaults a Kafka 4 cluster is formatted with:
        # its storage tool bootstraps min.insync.replicas=1 (DYNAMIC_DEFAULT_BROKER_CONFIG), which
        # DescribeConfigs of every topic and broker shows, and which may be altered or deleted.
        self.docs: dict[str, Overrides] = {BROKERS: {"": dict(BOOTSTRAP_CLUSTER_DEFAULTS)}, GROUPS: {}}
        # Rises whenever what is held changes (here or, found by ``refresh``, on another node).
        self.version = 0
        self._read()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _read(self) -> None:
        self._seen = self._stamp()
        if self._seen is None:
            return
        doc = json.loads(self.path.read_text())
        self.docs = {kind: {name: dict(values) for name, values in doc.get(kind, {}).items()}
                     for kind in (BROKERS, GROUPS)}
        self.version += 1

    def refresh(self) -> bool:
        """Shared mode: re-reads the document if another node replaced it; True if it did."""
        if not self.shared or self._stamp() == self._seen:
            return False
        self._read()
        return True

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        if not self.shared:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent / CONFIGS_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            self.refresh()
            yield
        finally:
            os.close(fd)

    def get(self, kind: str, name: str) -> dict[str, str]:
        return dict(self.docs[kind].get(name, {}))

    def names(self, kind: str) -> list[str]:
        return [name for name, values in self.docs[kind].items() if values]

    def put(self, kind: str, name: str, values: dict[str, str]) -> None:
        """Replaces the overrides of one resource, durably, before returning."""
        with self._exclusive():
            docs = {k: {n: dict(v) for n, v in d.items()} for k, d in self.docs.items()}
            if values:
                docs[kind][name] = dict(values)
            else:
                docs[kind].pop(name, None)
            write_durably(self.path, {"version": 1, **docs})
            self.docs = docs
            self._seen = self._stamp()
            self.version += 1
