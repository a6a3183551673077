"""Every topic config of Apache Kafka 4.4: its type, the broker property it defaults to (its
synonym), the default when that property is not known here, and the values it accepts, as Kafka's
LogConfig checks them. kcoord enforces the log settings (retention, cleanup policy, segments,
compaction, indexes), ``max.message.bytes`` and ``message.timestamp.type``; the others are kept
and shown (docs/limits.md says which)."""

from __future__ import annotations

from broker.configs.model import ConfigDef, ConfigType, InvalidValue, at_least, between, one_of

B, S, INT, L, D, LI = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
                     ConfigType.LIST)
LONG_MAX = "9223372036854775807"


def _gzip_level(value: object) -> None:
    assert isinstance(value, int)
    if value != -1 and not 1 <= value <= 9:
        raise InvalidValue("Value must be between 1 and 9, or -1 (the codec's default)")


def _throttled(value: object) -> None:
    assert isinstance(value, list)
    for item in value:
        if item != "*" and (":" not in item or not all(p.strip().isdigit() for p in item.split(":"))):
            raise InvalidValue("Must be '*' or a list of partition:broker pairs")


_T = (
    ("cleanup.policy", LI, "delete", ("log.cleanup.policy",), one_of("compact", "delete"),
     "What happens to old segments: delete (retention by time and size), compact (the last record of each key "
     "is kept), or both."),
    ("compression.gzip.level", INT, "-1", ("compression.gzip.level",), _gzip_level,
     "Compression level when compression.type is gzip."),
    ("compression.lz4.level", INT, "9", ("compression.lz4.level",), between(1, 17),
     "Compression level when compression.type is lz4."),
    ("compression.type", S, "producer", ("compression.type",),
     one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
     "Compression of the topic's batches; producer keeps what the producer sent."),
    ("compression.zstd.level", INT, "3", ("compression.zstd.level",), between(-131072, 22),
     "Compression level when compression.type is zstd."),
    ("delete.retention.ms", L, "86400000", ("log.cleaner.delete.retention.ms",), at_least(0),
     "How long tombstones are kept by compaction once the log head passed them."),
    ("errors.deadletterqueue.group.enable", B, "false", (), None,
     "Whether groups may use this topic as their dead-letter queue."),
    ("file.delete.delay.ms", L, "60000", ("log.segment.delete.delay.ms",), at_least(0),
     "Delay before a deleted segment's files are removed."),
    ("flush.messages", L, LONG_MAX, ("log.flush.interval.messages",), at_least(1),
     "Records between two forced flushes of the log."),
    ("flush.ms", L, LONG_MAX, (), at_least(0), "Time between two forced flushes of the log."),
    ("follower.replication.throttled.replicas", LI, "", (), _throttled,
     "Replicas whose replication is throttled on the follower side."),
    ("index.interval.bytes", INT, "4096", ("log.index.interval.bytes",), at_least(0),
     "Bytes of log between two entries of the offset index."),
    ("leader.replication.throttled.replicas", LI, "", (), _throttled,
     "Replicas whose replication is throttled on the leader side."),
    ("local.retention.bytes", L, "-2", ("log.local.retention.bytes",), at_least(-2),
     "Size retention of the local log with tiered storage (-2: retention.bytes)."),
    ("local.retention.ms", L, "-2", ("log.local.retention.ms",), at_least(-2),
     "Time retention of the local log with tiered storage (-2: retention.ms)."),
    ("max.compaction.lag.ms", L, LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), at_least(1),
     "Longest time a record may stay uncompacted."),
    ("max.decompressed.message.bytes", INT, "2147483639", ("max.decompressed.message.bytes",), at_least(1),
     "Largest decompressed record batch accepted."),
    ("max.message.bytes", INT, "1048588", ("message.max.bytes",), at_least(0),
     "Largest record batch accepted by Produce (after compression)."),
    ("message.timestamp.after.max.ms", L, "3600000", ("log.message.timestamp.after.max.ms",), at_least(0),
     "How far in the future a record's timestamp may be."),
    ("message.timestamp.before.max.ms", L, LONG_MAX, ("log.message.timestamp.before.max.ms",), at_least(0),
     "How far in the past a record's timestamp may be."),
    ("message.timestamp.type", S, "CreateTime", ("log.message.timestamp.type",), one_of("CreateTime", "LogAppendTime"),
     "Whether a record keeps its producer's timestamp (CreateTime) or gets the broker's (LogAppendTime)."),
    ("min.cleanable.dirty.ratio", D, "0.5", ("log.cleaner.min.cleanable.ratio",), between(0, 1),
     "Share of the log not yet compacted above which compaction runs."),
    ("min.compaction.lag.ms", L, "0", ("log.cleaner.min.compaction.lag.ms",), at_least(0),
     "Records younger than this are not compacted."),
    ("min.insync.replicas", INT, "1", ("min.insync.replicas",), at_least(1),
     "Replicas that must have a write for acks=all to succeed."),
    ("preallocate", B, "false", ("log.preallocate",), None, "Whether segment files are preallocated."),
    ("remote.copy.lag.bytes", L, "-1", ("log.remote.copy.lag.bytes",), None,
     "Tiered storage: bytes a segment may wait before its copy."),
    ("remote.copy.lag.ms", L, "0", ("log.remote.copy.lag.ms",), None,
     "Tiered storage: time a segment may wait before its copy."),
    ("remote.log.copy.disable", B, "false", (), None, "Tiered storage: stop copying segments."),
    ("remote.log.delete.on.disable", B, "false", (), None, "Tiered storage: delete remote data when disabled."),
    ("remote.storage.enable", B, "false", (), None, "Tiered storage for this topic."),
    ("retention.bytes", L, "-1", ("log.retention.bytes",), None,
     "Size per partition above which old segments are deleted (-1: no limit)."),
    ("retention.ms", L, "604800000", ("log.retention.ms",), at_least(-1),
     "Age above which old segments are deleted (-1: no limit)."),
    ("segment.bytes", INT, "1073741824", ("log.segment.bytes",), at_least(1048576),
     "Size of a segment file; the active segment rolls once it is reached."),
    ("segment.index.bytes", INT, "10485760", ("log.index.size.max.bytes",), at_least(4),
     "Size of a segment's offset and time indexes."),
    ("segment.jitter.ms", L, "0", (), at_least(0), "Random jitter subtracted from segment.ms."),
    ("segment.ms", L, "604800000", (), at_least(1), "Age after which the active segment rolls."),
    ("unclean.leader.election.enable", B, "false", ("unclean.leader.election.enable",), None,
     "Whether a replica out of sync may become leader."),
)

TOPIC_DEFS: dict[str, ConfigDef] = {
    name: ConfigDef(name, typ, default, doc, check, synonyms) for name, typ, default, synonyms, check, doc in _T
}


def check_topic_config(name: str, value: str) -> None:
    """Raises InvalidValue for a value topic config ``name`` does not accept."""
    TOPIC_DEFS[name].parse(value)
