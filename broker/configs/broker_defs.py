"""The broker's configs as DescribeConfigs and AlterConfigs see them: every kcoord property (its
Kafka type, read-only unless kcoord applies a change while running) and the broker properties of
Kafka that only serve as defaults of topic configs (``log.cleanup.policy``...), all dynamic."""

from __future__ import annotations

from broker.configs.model import ConfigDef, ConfigType, InvalidValue, type_of
from broker.configs.node_config import PROPERTIES, Property
from broker.configs.topic_defs import TOPIC_DEFS

# Kafka's type where the Python default does not say it.
_LONG = frozenset({
    "log.retention.ms", "log.retention.bytes", "log.retention.check.interval.ms", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.backoff.ms", "log.flush.interval.ms",
    "offsets.retention.check.interval.ms", "connections.max.reauth.ms", "group.events.retention.ms",
    "ssl.handshake.timeout.ms", "delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms",
    "delegation.token.expiry.check.interval.ms",
})
_LIST = frozenset({
    "listeners", "advertised.listeners", "log.dirs", "sasl.enabled.mechanisms", "group.consumer.assignors",
    "etcd.endpoints", "ssl.principal.mapping.rules",
})

# The broker properties a change takes effect of while the broker runs (the defaults of topic
# configs, which every topic without its own value follows at once).
_DYNAMIC_OWN = frozenset({
    "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "message.max.bytes",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
})


def _own(prop: Property) -> ConfigDef:
    if prop.secret:
        typ = ConfigType.PASSWORD
    elif prop.name in _LONG:
        typ = ConfigType.LONG
    elif prop.name in _LIST:
        typ = ConfigType.LIST
    else:
        typ = type_of(prop.default)
    default = prop.default
    text = ("true" if default else "false") if isinstance(default, bool) else str(default)

    def check(value: object) -> None:
        if prop.choices and value not in prop.choices:
            raise InvalidValue(f"String must be one of: {', '.join(prop.choices)}")
        if prop.minimum is not None and isinstance(value, (int, float)) and value < prop.minimum:
            raise InvalidValue(f"Value must be at least {prop.minimum}")
        if prop.maximum is not None and isinstance(value, (int, float)) and value > prop.maximum:
            raise InvalidValue(f"Value must be no more than {prop.maximum}")

    return ConfigDef(prop.name, typ, None if prop.secret else text, prop.doc, check, sensitive=prop.secret)


def _build() -> dict[str, ConfigDef]:
    defs = {p.name: _own(p) for p in PROPERTIES}
    for topic_def in TOPIC_DEFS.values():
        for synonym in topic_def.synonyms:
            if synonym not in defs:
                defs[synonym] = ConfigDef(synonym, topic_def.type, topic_def.default,
                                          f"The default of the topic config {topic_def.name}: {topic_def.doc}",
                                          topic_def.check)
    return defs


BROKER_DEFS: dict[str, ConfigDef] = _build()
# What AlterConfigs may change on a broker; the other known properties are read-only.
DYNAMIC_BROKER_CONFIGS = frozenset(_DYNAMIC_OWN | (BROKER_DEFS.keys() - {p.name for p in PROPERTIES}))
