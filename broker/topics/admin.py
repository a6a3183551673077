"""Topic administration: creating, growing and deleting topics, as CreateTopics, CreatePartitions,
DeleteTopics and auto-creation do it. The catalog records the change, the topic logs follow it, and
the group coordinator (a subscriber of ``TopicChanges``) learns of it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from broker.observability import logs
from broker.runtime.countdown import Countdown
from broker.topics.catalog import Topic, TopicCatalog, TopicError
from broker.topics.changes import PartitionsAdded, TopicChanges, TopicCreated, TopicDeleted
from broker.topics.partitions import KAFKA_TOPIC_CONFIGS, TopicLogs, topic_log_config
from protocol.errors import ErrorCode


class TopicAdmin:
    def __init__(self, catalog: TopicCatalog, topic_logs: TopicLogs, changes: TopicChanges,
                 config_defaults: Mapping[str, str], check_config: Callable[[str, str], object]) -> None:
        """``config_defaults`` are the broker's defaults of the topic configs a topic shows
        (CreateTopics), which its own configs override; the config service keeps them current.
        ``check_config(name, value)`` raises ValueError for a value the config does not accept
        (the topic configs' definitions, broker/configs/topic_defs.py, which sit above topics)."""
        self.check_config = check_config
        self.catalog = catalog
        self.topic_logs = topic_logs
        self.changes = changes
        self.config_defaults = dict(config_defaults)
        # When each topic was last deleted here (monotonic seconds): see ``deleted_within``.
        self.deleted_at: dict[str, float] = {}

    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     validate_only: bool = False) -> Topic:
        unknown = sorted(set(configs) - KAFKA_TOPIC_CONFIGS)
        if unknown:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
        for key, text in configs.items():
            try:
                self.check_config(key, text)
            except ValueError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {text} for configuration {key}: {exc}") from None
        try:
            topic_log_config(self.topic_logs.defaults, configs)
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"invalid topic config: {exc}") from None
        topic = self.catalog.create(name, partitions, configs, validate_only=validate_only)
        self.catch_up()
        if not validate_only:
            self.topic_logs.create_topic(topic)
            logs.event("topic.created", topic=name, partitions=partitions)
            self.changes.publish(TopicCreated(name, topic.topic_id, partitions))
        return topic

    def grow_topic(self, name: str, count: int) -> Topic:
        """Raises a topic's partition count (validated by the caller). Once the catalog has
        persisted it, Metadata lists the new partitions and the data plane serves them."""
        old = self.catalog.partition_count(name)
        assert old is not None
        topic = self.catalog.grow(name, count)
        self.catch_up()
        self.topic_logs.grow_topic(topic, old)
        logs.event("topic.partitions_added", topic=name, partitions=count, previous=old)
        self.changes.publish(PartitionsAdded(name, topic.topic_id, old, count))
        return topic

    def delete_topic(self, name: str, settlement: Countdown | None = None) -> Topic:
        """Deletes a topic, its logs and (through the group coordinator, which subscribes to
        topic changes) every group's committed offsets of it; ``settlement`` learns when those
        offset tombstones are durable."""
        topic = self.catalog.delete(name)
        self.catch_up()
        self.topic_logs.delete_topic(name)
        self.deleted_at[name] = time.monotonic()
        logs.event("topic.deleted", topic=name)
        self.changes.publish(TopicDeleted(name, topic.topic_id, topic.partitions), settlement)
        return topic

    def catch_up(self) -> None:
        """Shared mode: what other nodes changed in the catalog, as its last re-read noted it, is
        done here too: their deleted topics' partitions no longer served, their new topics'
        partitions this node holds claims for opened, and each change published. A change of this
        node's own re-reads the catalog first, so this runs before it: a topic another node
        deleted a moment ago and this node creates again is the new topic's from then on (applied
        after it, the old topic's deletion closed the new topic's partitions)."""
        changes, self.catalog.changes = self.catalog.changes, []
        for change in changes:
            if isinstance(change, TopicDeleted):
                self.topic_logs.deleted_elsewhere(change)
            elif isinstance(change, TopicCreated):
                self.topic_logs.resume_owned(change.topic)
            self.changes.publish(change)

    def deleted_within(self, name: str, seconds: float) -> bool:
        """Whether ``name`` was deleted here less than ``seconds`` ago."""
        at = self.deleted_at.get(name)
        if at is None:
            return False
        if time.monotonic() - at < seconds:
            return True
        del self.deleted_at[name]
        return False

    def topic_configs(self, topic: Topic) -> dict[str, str]:
        configs = dict(self.config_defaults)
        configs.update(topic.configs)
        return configs
