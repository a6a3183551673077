"""Configuring a streams group's topology against the broker's topics (Kafka's
``InternalTopicManager.configureTopics``): how many partitions each repartition and changelog
topic needs, which internal topics must be created, how many tasks each subtopology has, and the
statuses a member is told while the topology cannot run (missing source topics, internal topics
missing or partitioned wrongly)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from broker.coordinators.group.core.base.context import TopicView

STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5
MISSING_CLIENT_TAGS = 6
# Kafka's StreamsGroupHeartbeatResponse.Status names, as the journal and the doctor name a status.
STATUS_NAMES = {STALE_TOPOLOGY: "STALE_TOPOLOGY", MISSING_SOURCE_TOPICS: "MISSING_SOURCE_TOPICS",
                INCORRECTLY_PARTITIONED_TOPICS: "INCORRECTLY_PARTITIONED_TOPICS",
                MISSING_INTERNAL_TOPICS: "MISSING_INTERNAL_TOPICS", SHUTDOWN_APPLICATION: "SHUTDOWN_APPLICATION",
                ASSIGNMENT_DELAYED: "ASSIGNMENT_DELAYED", MISSING_CLIENT_TAGS: "MISSING_CLIENT_TAGS"}


@dataclass(frozen=True)
class InternalTopic:
    """A topic the broker creates for the group: ``partitions`` as the topology needs them."""

    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]


@dataclass
class ConfiguredTopology:
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology -> number of tasks
    # subtopology -> the topics whose partitions a task of it reads (sources and repartition sources)
    source_topics: dict[str, list[str]] = field(default_factory=dict)
    to_create: list[InternalTopic] = field(default_factory=list)
    # Subtopologies with state (a changelog topic): only their tasks get standby copies.
    stateful: set[str] = field(default_factory=set)
    statuses: list[tuple[int, str]] = field(default_factory=list)

    @property
    def statuses_block_assignment(self) -> bool:
        """Tasks are assigned only once every topic is there with the partitions it needs."""
        return bool(self.statuses)

    def named_statuses(self) -> list[dict[str, str]]:
        """The statuses as the journal writes them: Kafka's name and the detail members are told."""
        return [{"status": STATUS_NAMES.get(code, str(code)), "detail": detail} for code, detail in self.statuses]


def topics_named(topology: Any) -> set[str]:
    names: set[str] = set()
    for sub in topology.subtopologies:
        names.update(sub.source_topics)
        names.update(sub.repartition_sink_topics)
        names.update(t.name for t in sub.repartition_source_topics)
        names.update(t.name for t in sub.state_changelog_topics)
    return names


def metadata_hash(topology: Any, topics: TopicView) -> int:
    """A hash of every topic the topology names with its partition count (a change of either is
    what makes the group configure its topology again); a signed 64-bit value."""
    h = hashlib.sha256()
    for name in sorted(topics_named(topology)):
        h.update(f"{name}:{topics.partition_count(name)};".encode())
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def configure(topology: Any, topics: TopicView) -> ConfiguredTopology:
    out = ConfiguredTopology()
    subs = list(topology.subtopologies)
    missing = sorted({t for s in subs for t in s.source_topics if topics.partition_count(t) is None})
    if missing:
        out.statuses.append((MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."))
        return out
    # Repartition topics: a fixed count, or the largest source of the subtopologies writing them,
    # repeated until nothing changes (a repartition topic can feed another).
    repartition: dict[str, int] = {}
    for s in subs:
        for t in s.repartition_source_topics:
            if t.partitions > 0:
                repartition[t.name] = t.partitions
    for _ in range(len(subs) + 1):
        changed = False
        for s in subs:
            counts = [topics.partition_count(t) or 0 for t in s.source_topics]
            counts += [repartition.get(t.name, 0) for t in s.repartition_source_topics]
            most = max(counts, default=0)
            if most <= 0:
                continue
            for sink in s.repartition_sink_topics:
                if repartition.get(sink, 0) < most and not _fixed(subs, sink):
                    repartition[sink] = most
                    changed = True
        if not changed:
            break
    # Copartition groups: every member topic gets the same count (external topics decide).
    wrong: list[str] = []
    for s in subs:
        for g in s.copartition_groups:
            external = [s.source_topics[i] for i in g.source_topics]
            internal = [s.repartition_source_topics[i].name for i in g.repartition_source_topics]
            found = {topics.partition_count(t) or 0 for t in external}
            if len(found) > 1:
                wrong += external
                continue
            target = found.pop() if found else max((repartition.get(t, 0) for t in internal), default=0)
            for t in internal:
                if not _fixed(subs, t):
                    repartition[t] = target
    if wrong:
        out.statuses.append((INCORRECTLY_PARTITIONED_TOPICS,
                             f"Following topics do not have the same number of partitions: [{', '.join(sorted(set(wrong)))}]"))
        return out
    missing_internal: list[str] = []
    for s in subs:
        parts = [topics.partition_count(t) or 0 for t in s.source_topics]
        parts += [repartition.get(t.name, 0) for t in s.repartition_source_topics]
        n = max(parts, default=0)
        out.tasks[s.subtopology_id] = n
        if s.state_changelog_topics:
            out.stateful.add(s.subtopology_id)
        out.source_topics[s.subtopology_id] = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
        needed = [(t, repartition.get(t.name, 0)) for t in s.repartition_source_topics]
        needed += [(t, n) for t in s.state_changelog_topics]
        for info, count in needed:
            have = topics.partition_count(info.name)
            if have is None:
                missing_internal.append(info.name)
                out.to_create.append(InternalTopic(info.name, count, info.replication_factor,
                                                   tuple((c.key, c.value) for c in info.topic_configs)))
            elif have != count:
                wrong.append(info.name)
    if missing_internal:
        out.statuses.append((MISSING_INTERNAL_TOPICS,
                             f"Internal topics are missing: {', '.join(sorted(set(missing_internal)))}"))
    if wrong:
        out.statuses.append((INCORRECTLY_PARTITIONED_TOPICS,
                             f"Internal topics have the wrong number of partitions: [{', '.join(sorted(set(wrong)))}]"))
    return out


def _fixed(subs: list[Any], topic: str) -> bool:
    return any(t.name == topic and t.partitions > 0 for s in subs for t in s.repartition_source_topics)
