"""The config service built over the services a config change reaches (the topic logs, the topic
admin, the group shards), and the task that follows what other nodes of a cluster change."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.configs.group_defs import SHARE_BOUNDED
from broker.configs.node_config import BrokerConfig
from broker.configs.service import ConfigService
from broker.configs.store import DynamicConfigStore
from broker.configs.topic_defs import TOPIC_DEFS
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.network.connection_limits import ConnectionCounter
from broker.observability import logs
from broker.topics.admin import TopicAdmin
from broker.topics.catalog import Topic, TopicCatalog
from broker.topics.partitions import TopicLogs

FOLLOW_INTERVAL_S = 0.5


def _text(value: object) -> str:
    """A property's value as Kafka's DescribeConfigs writes it: booleans ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_config_service(config: BrokerConfig, node_id: int, data_dir: Path, *, shared: bool,
                         catalog: TopicCatalog, topic_logs: TopicLogs, admin: TopicAdmin,
                         shards: GroupCoordinatorService, connections: ConnectionCounter) -> ConfigService:
    """The service, with what was changed before this start already in effect."""
    store = DynamicConfigStore(data_dir, shared=shared)

    def on_topic(topic: Topic) -> None:
        topic_logs.reconfigure(topic)

    def on_defaults() -> None:
        defaults = service.topic_defaults()
        topic_logs.defaults = service.log_defaults()
        topic_logs.max_message_bytes = int(defaults.get("max.message.bytes", TOPIC_DEFS["max.message.bytes"].default
                                                        or "1048588"))
        topic_logs.timestamp_type = defaults.get("message.timestamp.type", "CreateTime")
        admin.config_defaults = defaults
        for topic in list(catalog.topics.values()):
            if not topic.internal:
                topic_logs.reconfigure(topic)
        connections.update(service.connection_limits())

    def on_groups() -> None:
        shards.set_group_timings(service.group_timings(), service.share_group_timings())
        shards.set_group_configs(service.group_configs())

    ranges = {f"consumer.{name}": (config.get_int(f"group.consumer.min.{name}"),
                                   config.get_int(f"group.consumer.max.{name}"))
              for name in ("session.timeout.ms", "heartbeat.interval.ms", "assignment.interval.ms")}
    ranges.update({group_name: (config.get_int(f"group.share.min.{suffix}"), config.get_int(f"group.share.max.{suffix}"))
                   for group_name, suffix in SHARE_BOUNDED.items()})
    service = ConfigService(node_id, catalog, store, {k: _text(v) for k, v in config.values.items()}, config.given,
                            ranges,
                            on_topic=on_topic, on_defaults=on_defaults, on_groups=on_groups,
                            on_log_level=logs.set_level)
    on_defaults()
    on_groups()
    return service


async def follow(service: ConfigService) -> None:
    """Cluster mode: what another node changed (topic configs in the shared catalog, broker and
    group configs in the shared document) takes effect here too, within ``FOLLOW_INTERVAL_S``."""
    while True:
        await trio.sleep(FOLLOW_INTERVAL_S)
        service.catalog.refresh()
        names, service.catalog.reconfigured = service.catalog.reconfigured, []
        for name in dict.fromkeys(names):
            topic = service.catalog.get(name)
            if topic is not None:
                service.on_topic(topic)
        service.sync()
