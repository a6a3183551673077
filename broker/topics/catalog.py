"""The topic catalog: which topics exist, their ids, partition counts and configs.

It is small and changes rarely, so it is one JSON document in the data dir, replaced atomically
(write temp, fsync, rename, fsync dir) on every change so topics survive restarts and crashes.

In a cluster the nodes share the data dir and so the document: a node changes it under an
exclusive lock on ``kcoord-topics.lock`` after re-reading it, and every node re-reads it when the
file changed (``refresh``), turning what others changed into the same topic changes its own
requests would have made. It also lists the topics deleted lately (``deleted``: name, id,
partition count, when), so that a directory is removed by whoever owns it only when its
``partition.metadata`` names a topic known to be deleted, never because a topic is unknown.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.topics.changes import PartitionsAdded, TopicChange, TopicCreated, TopicDeleted
from protocol.group_events import EVENTS_TOPIC as EVENTS_TOPIC
from storage.layout import OFFSETS_TOPIC as OFFSETS_TOPIC

CATALOG_FILE = "kcoord-topics.json"
CATALOG_LOCK_FILE = "kcoord-topics.lock"
# How long a deleted topic stays listed: its directories are gone within seconds while any node
# runs; this only bounds the list.
DELETED_KEPT_MS = 7 * 86_400_000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249


class TopicError(ValueError):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class DeletedTopic:
    name: str
    topic_id: bytes
    partitions: int
    deleted_at_ms: int


@dataclass
class Topic:
    name: str
    topic_id: bytes
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


def validate_topic_name(name: str) -> str | None:
    """Kafka's rules (Topic.validate): the reason a name is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return "topic name may only contain ASCII letters, digits, '.', '_' and '-'"
    return None


class TopicCatalog:
    def __init__(self, data_dir: Path, offsets_partitions: int, shared: bool = False) -> None:
        self.path = data_dir / CATALOG_FILE
        self.shared = shared
        self._seen: tuple[int, int, int] | None = None
        # Changes other nodes made, found by ``refresh``, for the broker to publish.
        self.changes: list[TopicChange] = []
        # Topics whose configs another node changed, found by ``refresh``, for their logs to follow.
        self.reconfigured: list[str] = []
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        # Shared mode: topics deleted lately, by topic id (see the module's docstring).
        self.deleted: dict[bytes, DeletedTopic] = {}
        # Rises with every change of the topic set or of a partition count: consumer groups
        # recompute their subscriptions when it moves.
        self.version = 0
        self._load()
        with self._exclusive():
            self.refresh()
            offsets = self.topics.get(OFFSETS_TOPIC)
            if offsets is None:
                self._add(Topic(OFFSETS_TOPIC, uuid.uuid4().bytes, offsets_partitions,
                                {"cleanup.policy": "compact", "compression.type": "producer"}, internal=True))
                self._save()
        self.changes.clear()

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Shared mode: no other node changes the document meanwhile (and ours starts from theirs)."""
        if not self.shared:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent / CATALOG_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            self.refresh()
            yield
        finally:
            os.close(fd)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def refresh(self) -> None:
        """Shared mode: re-read the document if another node replaced it, noting in ``changes``
        the topics created, grown and deleted since the last read."""
        if not self.shared:
            return
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return
        self._seen = stamp
        topics, self.deleted = self._read()
        found = {t.name: t for t in topics}
        for name, topic in found.items():
            mine = self.topics.get(name)
            if mine is None or mine.topic_id != topic.topic_id:
                if mine is not None:
                    # Deleted and created again since the last read: the old topic is gone (its
                    # logs, its committed offsets) before the new one, of the same name, comes.
                    self._drop(mine)
                    if not mine.internal:
                        self.changes.append(TopicDeleted(name, mine.topic_id, mine.partitions))
                self._add(topic)
                if not topic.internal:
                    self.changes.append(TopicCreated(name, topic.topic_id, topic.partitions))
            elif topic.partitions > mine.partitions:
                old, mine.partitions = mine.partitions, topic.partitions
                mine.configs = topic.configs
                self.version += 1
                self.changes.append(PartitionsAdded(name, mine.topic_id, old, topic.partitions))
                self.reconfigured.append(name)
            elif topic.configs != mine.configs:
                mine.configs = topic.configs
                self.reconfigured.append(name)
        for name, mine in list(self.topics.items()):
            if name not in found and not mine.internal:
                self._drop(mine)
                self.changes.append(TopicDeleted(name, mine.topic_id, mine.partitions))

    def _drop(self, topic: Topic) -> None:
        self.topics.pop(topic.name, None)
        self.by_id.pop(topic.topic_id, None)
        self.version += 1

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self.version += 1

    def _load(self) -> None:
        self._seen = self._stamp()
        topics, self.deleted = self._read()
        for topic in topics:
            self._add(topic)

    def _read(self) -> tuple[list[Topic], dict[bytes, DeletedTopic]]:
        if not self.path.exists():
            return [], {}
        doc = json.loads(self.path.read_text())
        topics = [Topic(entry["name"], bytes.fromhex(entry["id"]), entry["partitions"],
                        dict(entry.get("configs", {})), bool(entry.get("internal", False)))
                  for entry in doc["topics"]]
        deleted = [DeletedTopic(entry["name"], bytes.fromhex(entry["id"]), int(entry["partitions"]),
                                int(entry["deleted_at_ms"])) for entry in doc.get("deleted", [])]
        return topics, {d.topic_id: d for d in deleted}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc: dict[str, object] = {"version": 1, "topics": [
            {"name": t.name, "id": t.topic_id.hex(), "partitions": t.partitions, "configs": t.configs,
             "internal": t.internal} for t in self.topics.values()]}
        if self.deleted:
            doc["deleted"] = [{"name": d.name, "id": d.topic_id.hex(), "partitions": d.partitions,
                               "deleted_at_ms": d.deleted_at_ms} for d in self.deleted.values()]
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._seen = self._stamp()
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def ensure_internal(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        """The internal topic ``name``, created (and persisted) the first time it is asked for, and
        grown to ``partitions`` if it has fewer (never shrunk: its logs stay readable). In shared
        mode under the catalog's lock, so that nodes starting together agree on one topic id."""
        with self._exclusive():
            topic = self.topics.get(name)
            if topic is None or topic.configs != configs or topic.partitions < partitions:
                if topic is None:
                    topic = Topic(name, uuid.uuid4().bytes, partitions, dict(configs), internal=True)
                    self._add(topic)
                else:
                    topic.configs = dict(configs)
                    if topic.partitions < partitions:
                        topic.partitions = partitions
                        self.version += 1
                self._save()
        return topic

    def get(self, name: str) -> Topic | None:
        topic = self.topics.get(name)
        if topic is None and self.shared:
            self.refresh()  # perhaps created by another node a moment ago
            topic = self.topics.get(name)
        return topic

    def partition_count(self, topic: str) -> int | None:
        t = self.get(topic)
        return None if t is None else t.partitions

    def topic_id(self, topic: str) -> bytes | None:
        t = self.get(topic)
        return None if t is None else t.topic_id

    def topic_name(self, topic_id: bytes) -> str | None:
        t = self.by_id.get(topic_id)
        if t is None and self.shared:
            self.refresh()  # perhaps created by another node a moment ago
            t = self.by_id.get(topic_id)
        return None if t is None else t.name

    def topic_names(self) -> list[str]:
        return [name for name, t in self.topics.items() if not t.internal]

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               validate_only: bool = False) -> Topic:
        from protocol.errors import ErrorCode

        reason = validate_topic_name(name)
        if reason:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        with self._exclusive():
            return self._create(name, partitions, configs, validate_only)

    def _create(self, name: str, partitions: int, configs: dict[str, str] | None, validate_only: bool) -> Topic:
        from protocol.errors import ErrorCode

        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        topic = Topic(name, uuid.uuid4().bytes, partitions, dict(configs or {}))
        if not validate_only:
            self._add(topic)
            self._save()
        return topic

    def grow(self, name: str, count: int) -> Topic:
        """Raises the partition count of ``name`` to ``count`` (checked by the caller) and persists
        it before returning, so that the new partitions survive a restart."""
        with self._exclusive():
            return self._grow(name, count)

    def _grow(self, name: str, count: int) -> Topic:
        from protocol.errors import ErrorCode

        topic = self.topics.get(name)
        if topic is None or count <= topic.partitions:  # another node changed it meanwhile
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic '{name}' changed meanwhile; ask again.")
        old, topic.partitions = topic.partitions, count
        try:
            self._save()
        except OSError:
            topic.partitions = old  # nothing may serve partitions the catalog on disk lacks
            raise
        self.version += 1
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replaces the configs set on ``name`` (AlterConfigs) and persists them before returning."""
        from protocol.errors import ErrorCode

        with self._exclusive():
            topic = self.topics.get(name)
            if topic is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            old, topic.configs = topic.configs, dict(configs)
            try:
                self._save()
            except OSError:
                topic.configs = old
                raise
            return topic

    def delete(self, name: str) -> Topic:
        with self._exclusive():
            return self._delete(name)

    def _delete(self, name: str) -> Topic:
        from protocol.errors import ErrorCode

        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        if topic.internal:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' is internal and cannot be deleted.")
        del self.topics[name]
        self.by_id.pop(topic.topic_id, None)
        self.version += 1
        if self.shared:
            now = int(time.time() * 1000)
            self.deleted = {i: d for i, d in self.deleted.items() if now - d.deleted_at_ms < DELETED_KEPT_MS}
            self.deleted[topic.topic_id] = DeletedTopic(name, topic.topic_id, topic.partitions, now)
        self._save()
        return topic
