"""A config change reaching open partition logs, without a server: a topic's own change and a
broker default under it move segment rolling, retention, compaction and the produce limits of
the partitions already open."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.configs.model import ConfigOp, ResourceType
from broker.configs.service import Change, ConfigService
from broker.configs.store import DynamicConfigStore
from broker.log_runtime.runtime import LogRuntime
from broker.topics.catalog import Topic, TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.record_batch import build_simple_batch
from storage.config import LogConfig


def batch(n: int, size: int = 100) -> bytes:
    return build_simple_batch([(None, b"v" * size, 1_000 + i) for i in range(n)], producer_id=-1, producer_epoch=0,
                              base_sequence=-1)


def setup(tmp_path: Path) -> tuple[TopicLogs, ConfigService]:
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None)
    logs = TopicLogs(runtime, TopicCatalog(tmp_path, 3), max_message_bytes=1 << 20)

    def on_topic(topic: Topic) -> None:
        logs.reconfigure(topic)

    def on_defaults() -> None:
        logs.defaults = service.log_defaults()
        logs.max_message_bytes = int(service.topic_defaults()["max.message.bytes"])
        for topic in logs.catalog.topics.values():
            if not topic.internal:
                logs.reconfigure(topic)

    service = ConfigService(1, logs.catalog, DynamicConfigStore(tmp_path), {}, (), {},
                            on_topic=on_topic, on_defaults=on_defaults, on_groups=lambda: None)
    return logs, service


def test_topic_change_reaches_the_open_log(tmp_path: Path) -> None:
    logs, service = setup(tmp_path)
    logs.catalog.create("t", 1)
    state = logs.get("t", 0)
    assert state is not None and not state.log.config.compact
    for _ in range(5):
        state.log.append_batch(batch(10))
    assert state.log.segment_count == 1
    service.alter(ResourceType.TOPIC, "t", [Change("segment.bytes", ConfigOp.SET, "1048576"),
                                            Change("cleanup.policy", ConfigOp.SET, "compact"),
                                            Change("max.message.bytes", ConfigOp.SET, "1000")],
                  incremental=True, validate_only=False)
    assert state.log.config.compact and state.max_message_bytes == 1000
    for _ in range(120):  # past the new segment size: the active segment rolls by it
        state.log.append_batch(batch(10, 1000))
    assert state.log.segment_count > 1
    # Back to delete with a retention of 1 ms: the closed segments go at the next pass.
    service.alter(ResourceType.TOPIC, "t", [Change("cleanup.policy", ConfigOp.SET, "delete"),
                                            Change("retention.ms", ConfigOp.SET, "1")],
                  incremental=True, validate_only=False)
    trio.run(logs.runtime._retain_all)
    assert state.log.log_start_offset > 0 and state.log.segment_count == 1
    logs.runtime.close()


def test_broker_default_reaches_topics_without_their_own(tmp_path: Path) -> None:
    logs, service = setup(tmp_path)
    logs.catalog.create("follows", 1)
    logs.catalog.create("own", 1, {"max.message.bytes": "5000"})
    follows, own = logs.get("follows", 0), logs.get("own", 0)
    assert follows is not None and own is not None
    service.alter(ResourceType.BROKER, "", [Change("message.max.bytes", ConfigOp.SET, "2000"),
                                            Change("log.retention.ms", ConfigOp.SET, "60000")],
                  incremental=True, validate_only=False)
    assert (follows.max_message_bytes, own.max_message_bytes) == (2000, 5000)
    assert follows.log.config.retention_ms == own.log.config.retention_ms == 60000
    service.alter(ResourceType.BROKER, "1", [Change("log.retention.ms", ConfigOp.SET, "30000")],
                  incremental=True, validate_only=False)
    assert follows.log.config.retention_ms == 30000  # this broker's own value wins over the default
    logs.runtime.close()
