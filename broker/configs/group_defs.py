"""The configs a Kafka 4.4 group accepts (GroupConfig): per-group overrides of the broker's
``group.*`` settings. kcoord's KIP-848 consumer groups obey ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``; its share groups obey the ``share.*`` configs
(docs/share-groups.md says which); its streams groups the ``streams.*`` timings, standby replicas,
rack tags and assignment interval, and tell their members the task offset interval and acceptable
recovery lag (the assignor name and warm-up replicas are kept and shown only: kcoord has one streams
assignor, which places no warm-up tasks). The three ``*.assignor.offload.enable`` configs are kept and
shown only: Kafka 4.4 marks them internal and does not act on them yet (KAFKA-20930)."""

from __future__ import annotations

from collections.abc import Mapping

from broker.configs.model import ConfigDef, ConfigType, InvalidValue, at_least, one_of
from broker.share_partitions.core.settings import parse_reset

B, S, INT, LONG, LI = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.LIST


def _share_reset(value: object) -> None:
    assert isinstance(value, str)
    if parse_reset(value) is None:
        raise InvalidValue(f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                           "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _dead_letter_topic(value: object) -> None:
    assert isinstance(value, str)
    if value.strip().startswith("__"):
        raise InvalidValue("DLQ topic name must not start with '__'")


_G = (
    ("consumer.assignment.interval.ms", INT, "1000", ("group.consumer.assignment.interval.ms",), at_least(0),
     "Time between two target assignments of a consumer group."),
    ("consumer.assignor.offload.enable", B, "true", ("group.consumer.assignor.offload.enable",), None,
     "Kept and shown only: Kafka 4.4 defines it and does not act on it; kcoord computes a consumer group's "
     "assignment in its coordinator's operation."),
    ("consumer.heartbeat.interval.ms", INT, "5000", ("group.consumer.heartbeat.interval.ms",), None,
     "Heartbeat interval the coordinator gives the group's consumer-protocol members."),
    ("consumer.session.timeout.ms", INT, "45000", ("group.consumer.session.timeout.ms",), None,
     "A consumer-protocol member silent this long is fenced from the group."),
    ("errors.deadletterqueue.copy.record.enable", B, "false", ("errors.deadletterqueue.copy.record.enable",), None,
     "Share groups: copy the record itself onto the dead-letter queue."),
    ("errors.deadletterqueue.topic.name", S, "", ("errors.deadletterqueue.topic.name",), _dead_letter_topic,
     "Share groups: the dead-letter queue topic (empty: none)."),
    ("share.assignment.interval.ms", INT, "1000", ("group.share.assignment.interval.ms",), at_least(0),
     "Time between two target assignments of a share group."),
    ("share.assignor.offload.enable", B, "true", ("group.share.assignor.offload.enable",), None,
     "Kept and shown only: Kafka 4.4 defines it and does not act on it; kcoord computes a share group's "
     "assignment in its coordinator's operation."),
    ("share.auto.offset.reset", S, "latest", ("share.auto.offset.reset",), _share_reset,
     "Where a share group starts reading a partition."),
    ("share.delivery.count.limit", INT, "5", ("group.share.delivery.count.limit",), at_least(2),
     "Deliveries of a record before a share group gives up on it."),
    ("share.heartbeat.interval.ms", INT, "5000", ("group.share.heartbeat.interval.ms",), at_least(1),
     "Heartbeat interval of share group members."),
    ("share.isolation.level", S, "read_uncommitted", ("share.isolation.level",),
     one_of("read_committed", "read_uncommitted"), "Whether a share group sees aborted transactional records."),
    ("share.partition.max.record.locks", INT, "2000", ("group.share.partition.max.record.locks",), at_least(100),
     "Records a share partition may hold locked at once."),
    ("share.record.lock.duration.ms", INT, "30000", ("group.share.record.lock.duration.ms",), at_least(1000),
     "How long a share group member holds a record."),
    ("share.renew.acknowledge.enable", B, "true", ("share.renew.acknowledge.enable",), None,
     "Whether share consumers may renew their acquisition of a record."),
    ("share.session.timeout.ms", INT, "45000", ("group.share.session.timeout.ms",), at_least(1),
     "A share group member silent this long is fenced."),
    ("streams.acceptable.recovery.lag", LONG, "10000", ("group.streams.acceptable.recovery.lag",), at_least(0),
     "Offsets a streams group member may lag behind and still be told it caught up (told to members)."),
    ("streams.assignment.interval.ms", INT, "1000", ("group.streams.assignment.interval.ms",), at_least(0),
     "Time between two target assignments of a streams group."),
    ("streams.assignor.name", S, "sticky", ("group.streams.assignors",), None,
     "The task assignor of a streams group."),
    ("streams.assignor.offload.enable", B, "true", ("group.streams.assignor.offload.enable",), None,
     "Kept and shown only: Kafka 4.4 defines it and does not act on it; kcoord computes a streams group's "
     "assignment in its coordinator's operation."),
    ("streams.heartbeat.interval.ms", INT, "5000", ("group.streams.heartbeat.interval.ms",), None,
     "Heartbeat interval of streams group members."),
    ("streams.initial.rebalance.delay.ms", INT, "3000", ("group.streams.initial.rebalance.delay.ms",), at_least(0),
     "Wait for more members when a streams group forms."),
    ("streams.num.standby.replicas", INT, "0", ("group.streams.num.standby.replicas",), at_least(0),
     "Standby replicas of each task of a streams group."),
    ("streams.num.warmup.replicas", INT, "2", ("group.streams.num.warmup.replicas",), at_least(0),
     "Kept and shown only: kcoord's streams assignor places no warm-up tasks."),
    ("streams.rack.aware.assignment.tags", LI, "", ("group.streams.rack.aware.assignment.tags",), None,
     "Client tags a streams group spreads standby tasks over."),
    ("streams.session.timeout.ms", INT, "45000", ("group.streams.session.timeout.ms",), None,
     "A streams group member silent this long is fenced."),
    ("streams.task.offset.interval.ms", INT, "60000", ("group.streams.task.offset.interval.ms",), at_least(1),
     "How often a streams group's members report their task offsets (told to members)."),
)

GROUP_DEFS: dict[str, ConfigDef] = {
    name: ConfigDef(name, typ, default, doc, check, synonyms) for name, typ, default, synonyms, check, doc in _G
}

# Kafka 4.4 defines these as internal: accepted and described when a group sets them, left out of a
# group's description otherwise (their broker properties are internal too, and unset).
INTERNAL = frozenset({"consumer.assignor.offload.enable", "share.assignor.offload.enable",
                      "streams.acceptable.recovery.lag", "streams.assignor.offload.enable",
                      "streams.num.warmup.replicas", "streams.task.offset.interval.ms"})

# The range each bounded group config must stay within: the broker's min and max properties
# (``group.share.min.<name>`` and ``group.share.max.<name>`` for the share configs here); Kafka's
# defaults of those properties stand in where the broker gives none (the streams bounds always).
SHARE_BOUNDED = {
    "share.delivery.count.limit": "delivery.count.limit",
    "share.heartbeat.interval.ms": "heartbeat.interval.ms",
    "share.partition.max.record.locks": "partition.max.record.locks",
    "share.record.lock.duration.ms": "record.lock.duration.ms",
    "share.session.timeout.ms": "session.timeout.ms",
    "share.assignment.interval.ms": "assignment.interval.ms",
}
FIXED_RANGES = {
    "share.assignment.interval.ms": (0, 15000),
    "share.delivery.count.limit": (2, 10),
    "share.heartbeat.interval.ms": (5000, 15000),
    "share.partition.max.record.locks": (100, 4000),
    "share.record.lock.duration.ms": (15000, 60000),
    "share.session.timeout.ms": (45000, 60000),
    "streams.heartbeat.interval.ms": (5000, 15000),
    "streams.num.standby.replicas": (0, 2),
    "streams.num.warmup.replicas": (0, 20),
    "streams.session.timeout.ms": (45000, 60000),
    "streams.task.offset.interval.ms": (15000, 2**31 - 1),
}

# Bounded on one side only by the broker (the definition bounds the other), as Kafka words it.
_AT_MOST = frozenset({"streams.num.standby.replicas", "streams.num.warmup.replicas"})
_AT_LEAST = frozenset({"streams.task.offset.interval.ms"})


def check_group_configs(values: Mapping[str, object], ranges: Mapping[str, tuple[int, int]]) -> None:
    """Kafka's GroupConfig checks of a group's effective configs (overrides over the broker's):
    each bounded value within its range, each heartbeat interval below its session timeout."""
    for name, (low, high) in ranges.items():
        value = values.get(name)
        if name in _AT_MOST and isinstance(value, int) and value > high:
            raise InvalidValue(f"{name} must be less than or equal to {high}")
        if name in _AT_LEAST and isinstance(value, int) and value < low:
            raise InvalidValue(f"{name} must be greater than or equal to {low}")
        if isinstance(value, int) and not low <= value <= high:
            raise InvalidValue(f"{name} must be in the range {low} to {high} inclusive.")
    tags = values.get("streams.rack.aware.assignment.tags")
    if isinstance(tags, list) and len(set(tags)) != len(tags):
        # Kafka 4.4 refuses a repeated tag key (its list parsing would drop the repeat silently).
        raise InvalidValue("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    for kind in ("consumer", "share", "streams"):
        beat, session = values.get(f"{kind}.heartbeat.interval.ms"), values.get(f"{kind}.session.timeout.ms")
        if isinstance(beat, int) and isinstance(session, int) and beat >= session:
            raise InvalidValue(f"{kind}.heartbeat.interval.ms must be less than {kind}.session.timeout.ms")
