"""The records of ``__consumer_offsets``: which record a key holds, and how every record is read
and written. The coordinator, startup replay, ``kcoord dump-log``, the Spark decoder and the
synthetic log generator all go through here, so they cannot disagree about a record; the field
tables themselves are declared in ``protocol.messages.offsets_log``.

Framing (Kafka's ``CoordinatorRecordSerde``): a key is an int16 and then the key struct. The int16
began as the key's version and became the record type: 0 and 1 are offset commits (same layout),
2 is a classic group's metadata, and KIP-848 consumer groups, share groups and streams groups took
3 and up. Key structs are never flexible. A value is an int16 version and then the value struct in
that version's layout; a null value is a tombstone.

Record types decoded here: offset commits (0, 1), classic group metadata (2), and the KIP-848
consumer-group records (3-8, 16), the KIP-932 share-group records (10-15) and the KIP-1071
streams-group records (17, 19-23), each as a NamedTuple of its key fields (``group`` first,
always) and ``value``, None for a tombstone.

Value versions above the newest declared one. KIP-915 made OffsetCommitValue and
GroupMetadataValue flexible at v4 so that later fields can be tagged fields that older readers
skip, and Kafka adds fields that way without a new version (KAFKA-19141 put a tagged TopicId in
OffsetCommitValue v4 for 4.1). What Kafka does with a version number above 4 depends on the
release:

* Before 4.0, the KIP-848 coordinator's ``CoordinatorRecordSerde.readMessage`` hands the version
  to the generated reader, whose field checks are ``version >= N`` for fields still present: the
  value is read with the newest layout known, unknown tags are skipped and bytes left after the
  struct are ignored.
* From 4.0 (KAFKA-18672) ``deserialize`` refuses it (``UnknownRecordVersionException``) and the
  loader, which only skips unknown record *types*, fails the partition.
* The classic coordinator (``GroupMetadataManager``) always refused it.

kcoord reads such a value the pre-4.0 way, everywhere, so that neither the broker nor a tool stops
at a record a newer broker wrote, and all of them say the same about it; a later Kafka that put a
new untagged field into a new version would be misread, which is why 4.0 refuses. ``LogRecord``
keeps the version as written so that tools can show the value was read with an older layout. The
one rule is ``readable_version``.
"""

from __future__ import annotations

import struct
from types import MappingProxyType
from typing import Any, NamedTuple

from protocol.codec import codec_for
from protocol.errors import DecodeError, EncodeError
from protocol.messages.offsets_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.messages.offsets_log_consumer_groups import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.messages.offsets_log_share_groups import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from protocol.messages.offsets_log_streams_groups import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
)
from protocol.schema import Message

OFFSET_COMMIT = "OffsetCommit"
GROUP_METADATA = "GroupMetadata"
CONSUMER_GROUP_METADATA = "ConsumerGroupMetadata"
CONSUMER_GROUP_PARTITION_METADATA = "ConsumerGroupPartitionMetadata"
CONSUMER_GROUP_MEMBER_METADATA = "ConsumerGroupMemberMetadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = "ConsumerGroupTargetAssignmentMetadata"
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = "ConsumerGroupTargetAssignmentMember"
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = "ConsumerGroupCurrentMemberAssignment"
CONSUMER_GROUP_REGULAR_EXPRESSION = "ConsumerGroupRegularExpression"

# Record type names by key version, from Kafka's group-coordinator message specs (the *Key.json
# files; ``apiKey`` of the "coordinator-key" specs from 4.0 on, the key's version before that).
# Offset, classic-group and consumer-group records are decoded here; the rest are named so that
# readers can say what they skip. The streams-group types (17 on) were renumbered while KIP-1071 was in development: these
# are the numbers of the latest specs.
RECORD_TYPES = MappingProxyType({
    0: OFFSET_COMMIT,  # LegacyOffsetCommitKey in 4.x: same layout as 1
    1: OFFSET_COMMIT,
    2: GROUP_METADATA,
    3: CONSUMER_GROUP_METADATA,
    4: CONSUMER_GROUP_PARTITION_METADATA,  # read only: Kafka 4.1 writes only its tombstone
    5: CONSUMER_GROUP_MEMBER_METADATA,
    6: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    7: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    8: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: CONSUMER_GROUP_REGULAR_EXPRESSION,
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
    24: "StreamsGroupTargetAssignmentResolvedTopicIds",
})

OFFSET_COMMIT_KEY_VERSIONS = frozenset((0, 1))
GROUP_METADATA_KEY_VERSION = 2

# What kcoord writes, as Kafka 3.x and 4.0 do: key v1 + OffsetCommitValue v3, or v1 when the
# commit has an explicit expire timestamp (the only version with that field); key v2 +
# GroupMetadataValue v3. The flexible v4 values are only read.
OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
# Every consumer-group value has the one version 0, which Kafka 4.x writes (fields added since
# are tagged fields of v0).
CONSUMER_GROUP_VALUE_VERSION = 0

CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_PARTITION_METADATA_TYPE = 4
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE = 16

_INT16 = struct.Struct(">h")
_KEY_HEAD = struct.Struct(">hh")  # record type, group length
_INT16_MAX = 0x7FFF


# NamedTuples rather than frozen dataclasses: the coordinator makes one per committed partition,
# and a frozen dataclass costs twice as much to build.
class OffsetCommitRecord(NamedTuple):
    group: str
    topic: str
    partition: int
    value: Any | None  # OffsetCommitValue, or None for a tombstone


class GroupMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # GroupMetadataValue, or None for a tombstone


# The KIP-848 consumer-group records: the key's fields (``group`` is the key's group_id), then the
# value, None for a tombstone.


class ConsumerGroupMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ConsumerGroupMetadataValue


class ConsumerGroupPartitionMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ConsumerGroupPartitionMetadataValue


class ConsumerGroupMemberMetadataRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ConsumerGroupMemberMetadataValue


class ConsumerGroupTargetAssignmentMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ConsumerGroupTargetAssignmentMetadataValue


class ConsumerGroupTargetAssignmentMemberRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ConsumerGroupTargetAssignmentMemberValue


class ConsumerGroupCurrentMemberAssignmentRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ConsumerGroupCurrentMemberAssignmentValue


class ConsumerGroupRegularExpressionRecord(NamedTuple):
    group: str
    regular_expression: str
    value: Any | None  # ConsumerGroupRegularExpressionValue


# The KIP-1071 streams-group records, the same way.


class StreamsGroupMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # StreamsGroupMetadataValue


class StreamsGroupTopologyRecord(NamedTuple):
    group: str
    value: Any | None  # StreamsGroupTopologyValue


class StreamsGroupMemberMetadataRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # StreamsGroupMemberMetadataValue


class StreamsGroupTargetAssignmentMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # StreamsGroupTargetAssignmentMetadataValue


class StreamsGroupTargetAssignmentMemberRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # StreamsGroupTargetAssignmentMemberValue


class StreamsGroupCurrentMemberAssignmentRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # StreamsGroupCurrentMemberAssignmentValue


StreamsGroupRecord = (
    StreamsGroupMetadataRecord
    | StreamsGroupTopologyRecord
    | StreamsGroupMemberMetadataRecord
    | StreamsGroupTargetAssignmentMetadataRecord
    | StreamsGroupTargetAssignmentMemberRecord
    | StreamsGroupCurrentMemberAssignmentRecord
)
STREAMS_GROUP_RECORDS = (StreamsGroupMetadataRecord, StreamsGroupTopologyRecord, StreamsGroupMemberMetadataRecord,
                         StreamsGroupTargetAssignmentMetadataRecord, StreamsGroupTargetAssignmentMemberRecord,
                         StreamsGroupCurrentMemberAssignmentRecord)
# The KIP-932 share-group records (types 10-15), the same way.


class ShareGroupMemberMetadataRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ShareGroupMemberMetadataValue


class ShareGroupMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ShareGroupMetadataValue


class ShareGroupTargetAssignmentMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ShareGroupTargetAssignmentMetadataValue


class ShareGroupTargetAssignmentMemberRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ShareGroupTargetAssignmentMemberValue


class ShareGroupCurrentMemberAssignmentRecord(NamedTuple):
    group: str
    member_id: str
    value: Any | None  # ShareGroupCurrentMemberAssignmentValue


class ShareGroupStatePartitionMetadataRecord(NamedTuple):
    group: str
    value: Any | None  # ShareGroupStatePartitionMetadataValue


# The records the classic coordinator writes and replays.
Record = OffsetCommitRecord | GroupMetadataRecord
ConsumerGroupRecord = (
    ConsumerGroupMetadataRecord
    | ConsumerGroupPartitionMetadataRecord
    | ConsumerGroupMemberMetadataRecord
    | ConsumerGroupTargetAssignmentMetadataRecord
    | ConsumerGroupTargetAssignmentMemberRecord
    | ConsumerGroupCurrentMemberAssignmentRecord
    | ConsumerGroupRegularExpressionRecord
)
ShareGroupRecord = (
    ShareGroupMemberMetadataRecord
    | ShareGroupMetadataRecord
    | ShareGroupTargetAssignmentMetadataRecord
    | ShareGroupTargetAssignmentMemberRecord
    | ShareGroupCurrentMemberAssignmentRecord
    | ShareGroupStatePartitionMetadataRecord
)
# Every record decoded here.
AnyRecord = Record | ConsumerGroupRecord | StreamsGroupRecord | ShareGroupRecord


class _RecordType(NamedTuple):
    """How one consumer-group record type maps onto its key and value tables."""

    record_type: int
    record: type[Any]
    key: Message
    value: Message
    key_fields: tuple[str, ...]  # the key struct's fields after group_id, in the record's order


_CONSUMER_GROUP_TYPES: tuple[_RecordType, ...] = (
    _RecordType(CONSUMER_GROUP_METADATA_TYPE, ConsumerGroupMetadataRecord,
                ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, ()),
    _RecordType(CONSUMER_GROUP_PARTITION_METADATA_TYPE, ConsumerGroupPartitionMetadataRecord,
                ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue, ()),
    _RecordType(CONSUMER_GROUP_MEMBER_METADATA_TYPE, ConsumerGroupMemberMetadataRecord,
                ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ("member_id",)),
    _RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE, ConsumerGroupTargetAssignmentMetadataRecord,
                ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue, ()),
    _RecordType(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE, ConsumerGroupTargetAssignmentMemberRecord,
                ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue, ("member_id",)),
    _RecordType(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE, ConsumerGroupCurrentMemberAssignmentRecord,
                ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue, ("member_id",)),
    _RecordType(CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE, ConsumerGroupRegularExpressionRecord,
                ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue, ("regular_expression",)),
)
CONSUMER_GROUP_RECORD_TYPES = frozenset(t.record_type for t in _CONSUMER_GROUP_TYPES)
_STREAMS_GROUP_TYPES: tuple[_RecordType, ...] = (
    _RecordType(17, StreamsGroupMetadataRecord, StreamsGroupMetadataKey, StreamsGroupMetadataValue, ()),
    _RecordType(19, StreamsGroupMemberMetadataRecord,
                StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue, ("member_id",)),
    _RecordType(20, StreamsGroupTargetAssignmentMetadataRecord,
                StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMetadataValue, ()),
    _RecordType(21, StreamsGroupTargetAssignmentMemberRecord,
                StreamsGroupTargetAssignmentMemberKey, StreamsGroupTargetAssignmentMemberValue, ("member_id",)),
    _RecordType(22, StreamsGroupCurrentMemberAssignmentRecord,
                StreamsGroupCurrentMemberAssignmentKey, StreamsGroupCurrentMemberAssignmentValue, ("member_id",)),
    _RecordType(23, StreamsGroupTopologyRecord, StreamsGroupTopologyKey, StreamsGroupTopologyValue, ()),
)
STREAMS_GROUP_RECORD_TYPES = frozenset(t.record_type for t in _STREAMS_GROUP_TYPES)
_SHARE_GROUP_TYPES: tuple[_RecordType, ...] = (
    _RecordType(10, ShareGroupMemberMetadataRecord,
                ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue, ("member_id",)),
    _RecordType(11, ShareGroupMetadataRecord, ShareGroupMetadataKey, ShareGroupMetadataValue, ()),
    _RecordType(12, ShareGroupTargetAssignmentMetadataRecord,
                ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue, ()),
    _RecordType(13, ShareGroupTargetAssignmentMemberRecord,
                ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue, ("member_id",)),
    _RecordType(14, ShareGroupCurrentMemberAssignmentRecord,
                ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue, ("member_id",)),
    _RecordType(15, ShareGroupStatePartitionMetadataRecord,
                ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue, ()),
)
SHARE_GROUP_RECORD_TYPES = frozenset(t.record_type for t in _SHARE_GROUP_TYPES)
_GROUP_TYPES = _CONSUMER_GROUP_TYPES + _STREAMS_GROUP_TYPES + _SHARE_GROUP_TYPES
_BY_TYPE: dict[int, _RecordType] = {t.record_type: t for t in _GROUP_TYPES}
_BY_CLASS: dict[type[Any], _RecordType] = {t.record: t for t in _GROUP_TYPES}

_KEYS: dict[int, Message] = {
    0: OffsetCommitKey, 1: OffsetCommitKey, GROUP_METADATA_KEY_VERSION: GroupMetadataKey,
    **{t.record_type: t.key for t in _GROUP_TYPES},
}
_VALUES: dict[int, Message] = {
    0: OffsetCommitValue, 1: OffsetCommitValue, GROUP_METADATA_KEY_VERSION: GroupMetadataValue,
    **{t.record_type: t.value for t in _GROUP_TYPES},
}


def value_message(record_type: int) -> Message | None:
    """The value table of a record type decoded here; None for the others."""
    return _VALUES.get(record_type)


class LogRecord(NamedTuple):
    """One record with the versions it was written in: what tools show."""

    key_version: int
    type_name: str | None  # None for a key version no Kafka release we know of defines
    key: Any | None  # the key struct (OffsetCommitKey, ...); None for the types not decoded here
    value_version: int | None  # as written; None for a tombstone or a type not decoded here
    value: Any | None

    @property
    def read_as(self) -> int | None:
        """The version whose layout the value was read with (``readable_version``)."""
        message = _VALUES.get(self.key_version)
        if message is None or self.value_version is None:
            return None
        return readable_version(message, self.value_version)

    @property
    def newer_than_known(self) -> bool:
        """The value was written in a version above the newest declared one (see the module)."""
        return self.read_as != self.value_version


def record_type_name(key_version: int) -> str | None:
    return RECORD_TYPES.get(key_version)


def key_version(key: bytes | memoryview) -> int:
    """The record type a key starts with."""
    if len(key) < 2:
        raise DecodeError("CoordinatorRecordKey", -1, "shorter than its record type")
    version: int = _INT16.unpack_from(key, 0)[0]
    return version


def key_group(key: bytes) -> tuple[int, bytes]:
    """(record type, group name bytes) of a key, read without decoding the rest: every key struct
    Kafka defines begins with the group."""
    version, length = _KEY_HEAD.unpack_from(key, 0)
    return version, key[4 : 4 + length]


def decode_key(key: bytes) -> tuple[int, Any | None]:
    """(record type, key struct); the struct is None for the record types not decoded here."""
    if len(key) < 2:
        raise DecodeError("CoordinatorRecordKey", -1, "shorter than its record type")
    version: int = _INT16.unpack_from(key, 0)[0]  # key_version, inlined: replay calls this per record
    message = _KEYS.get(version)
    if message is None:
        return version, None
    return version, codec_for(message, version).decode_from(key, 2)[0]


def readable_version(message: Message, version: int) -> int:
    """The layout a value written at ``version`` is read with: its own, or the newest declared
    one for a later version (the pre-4.0 reading described in the module docstring)."""
    if version < message.valid.low:
        raise DecodeError(message.name, version, "unknown version")
    return min(version, message.valid.high)


def decode_value(message: Message, data: bytes) -> tuple[int, Any]:
    """(version as written, value struct) of a version-prefixed value."""
    if len(data) < 2:
        raise DecodeError(message.name, -1, "shorter than its version")
    (version,) = _INT16.unpack_from(data, 0)
    value, _ = codec_for(message, readable_version(message, version)).decode_from(data, 2)
    return version, value


def decode_offset_commit_value(data: bytes) -> tuple[int, Any]:
    return decode_value(OffsetCommitValue, data)


def decode_group_metadata_value(data: bytes) -> tuple[int, Any]:
    return decode_value(GroupMetadataValue, data)


def member_rebalance_timeout(value_version: int, member: Any) -> int:
    """A member's rebalance timeout as Kafka's loader takes it: GroupMetadataValue v0 has none,
    and the session timeout stands in for it."""
    return member.session_timeout if value_version == 0 else member.rebalance_timeout


def read_record(key: bytes, value: bytes | None) -> LogRecord:
    """Any record, tombstones and record types not decoded here included."""
    version, k = decode_key(key)
    name = RECORD_TYPES.get(version)
    if k is None or value is None:
        return LogRecord(version, name, k, None, None)
    value_version, v = decode_value(_VALUES[version], value)
    return LogRecord(version, name, k, value_version, v)


def decode_record(key: bytes, value: bytes | None) -> AnyRecord | None:
    """The record the coordinator replays; None for the other record types (share groups,
    unknown types), which replay skips as Kafka's loader does."""
    if key[:2] in _OFFSET_COMMIT_KEY_PREFIXES:
        fast = _read_offset_commit(key, value)
        if fast is not None:
            return fast
    version, k = decode_key(key)
    if k is None:
        return None
    kind = _BY_TYPE.get(version)
    if kind is not None:
        v = None if value is None else decode_value(kind.value, value)[1]
        return kind.record(k.group_id, *[getattr(k, name) for name in kind.key_fields], v)
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        v = None if value is None else decode_value(OffsetCommitValue, value)[1]
        return OffsetCommitRecord(k.group, k.topic, k.partition, v)
    if value is None:
        return GroupMetadataRecord(k.group, None)
    value_version, v = decode_value(GroupMetadataValue, value)
    if value_version == 0:
        for member in v.members:
            member.rebalance_timeout = member_rebalance_timeout(0, member)
    return GroupMetadataRecord(k.group, v)


# Replaying a partition decodes mostly offset commits: key v0/v1 with value v1 or v3 are read
# here with ``struct`` (~1 us instead of ~6 us through the generic codec); anything else, or
# anything these do not read cleanly, goes the generic way, which raises the right errors.
# tests/property/test_offsets_log_fast_paths.py holds the two against each other.
_OFFSET_COMMIT_KEY_PREFIXES = frozenset(_INT16.pack(v) for v in OFFSET_COMMIT_KEY_VERSIONS)
_READ_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_READ_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_READ_INT16 = struct.Struct(">h")
_READ_INT32 = struct.Struct(">i")
_READ_INT64 = struct.Struct(">q")
_READ_INT64_PAIR = struct.Struct(">qq")
_new = object.__new__
_OffsetCommitValueClass = OffsetCommitValue.cls


def _read_offset_commit(key: bytes, value: bytes | None) -> OffsetCommitRecord | None:
    try:
        (glen,) = _READ_INT16.unpack_from(key, 2)
        end = 4 + glen
        (tlen,) = _READ_INT16.unpack_from(key, end)
        tend = end + 2 + tlen
        (partition,) = _READ_INT32.unpack_from(key, tend)
        if glen < 0 or tlen < 0:
            return None
        group = str(key[4:end], "utf-8")
        topic = str(key[end + 2 : tend], "utf-8")
        if value is None:
            return OffsetCommitRecord(group, topic, partition, None)
        if value[:2] == b"\x00\x03":
            _version, offset, epoch, mlen = _READ_V3_HEAD.unpack_from(value, 0)
            (commit_ts,) = _READ_INT64.unpack_from(value, 16 + mlen)
            expire = -1
            start = 16
        elif value[:2] == b"\x00\x01":
            _version, offset, mlen = _READ_V1_HEAD.unpack_from(value, 0)
            commit_ts, expire = _READ_INT64_PAIR.unpack_from(value, 12 + mlen)
            epoch = -1
            start = 12
        else:
            return None
        if mlen < 0:
            return None
        metadata = str(value[start : start + mlen], "utf-8")
    except (struct.error, UnicodeDecodeError):
        return None
    v = _new(_OffsetCommitValueClass)
    v.offset = offset
    v.leader_epoch = epoch
    v.metadata = metadata
    v.commit_timestamp = commit_ts
    v.expire_timestamp = expire
    return OffsetCommitRecord(group, topic, partition, v)


# ---- writing ---------------------------------------------------------------------------------

# The OffsetCommit key and value layouts of every commit, packed directly: the generic codec costs
# ~4 us per record, a third of a commit's CPU. tests/property/test_offset_records.py checks these
# bytes against the declarations.
_KEY_PARTITION = struct.Struct(">i")
_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_VALUE_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_INT64 = struct.Struct(">q")
_INT64_PAIR = struct.Struct(">qq")


def offset_commit_value_version(value: Any) -> int:
    """The OffsetCommitValue version kcoord writes ``value`` in."""
    return OFFSET_COMMIT_VALUE_VERSION if value.expire_timestamp == -1 else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY


def encode_offset_commit(group: str, topic: str, partition: int, value: Any | None) -> tuple[bytes, bytes | None]:
    """Key v1 and value v3 (v1 with an expire timestamp) of one committed offset, or of its
    tombstone when ``value`` is None."""
    g = group.encode()
    t = topic.encode()
    if len(g) > _INT16_MAX or len(t) > _INT16_MAX:
        raise EncodeError("cannot encode OffsetCommitKey v1: group or topic longer than an int16 length")
    key = _KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(g)) + g + _INT16.pack(len(t)) + t + _KEY_PARTITION.pack(partition)
    if value is None:
        return key, None
    m = value.metadata.encode()
    if len(m) > _INT16_MAX:
        raise EncodeError("cannot encode OffsetCommitValue: metadata longer than an int16 length")
    if value.expire_timestamp == -1:
        head = _VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, len(m))
        return key, head + m + _INT64.pack(value.commit_timestamp)
    head = _VALUE_V1_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY, value.offset, len(m))
    return key, head + m + _INT64_PAIR.pack(value.commit_timestamp, value.expire_timestamp)


def encode_key(key_version: int, key: Any) -> bytes:
    """A key struct behind its record type, through the declaration."""
    message = _KEYS.get(key_version)
    if message is None:
        raise EncodeError(f"cannot encode a key of record type {key_version}: not a record type decoded here")
    out = bytearray(_INT16.pack(key_version))
    codec_for(message, key_version).encode_into(key, out)
    return bytes(out)


def encode_value(message: Message, value: Any, version: int) -> bytes:
    """A value struct behind its version, in any declared version."""
    if version not in message.valid:
        raise EncodeError(f"cannot encode {message.name} v{version}: not a declared version")
    out = bytearray(_INT16.pack(version))
    codec_for(message, version).encode_into(value, out)
    return bytes(out)


def encode_offset_commit_key(group: str, topic: str, partition: int, key_version: int = OFFSET_COMMIT_KEY_VERSION) -> bytes:
    if key_version not in OFFSET_COMMIT_KEY_VERSIONS:
        raise EncodeError(f"record type {key_version} is not an offset commit")
    return encode_key(key_version, OffsetCommitKey(group=group, topic=topic, partition=partition))


def encode_group_metadata_key(group: str) -> bytes:
    return encode_key(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def encode_record(record: AnyRecord) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes (value None for a tombstone), exactly as Kafka writes them."""
    if isinstance(record, OffsetCommitRecord):
        return encode_offset_commit(record.group, record.topic, record.partition, record.value)
    return encode_record_generic(record)


def encode_consumer_group_record(
        record: ConsumerGroupRecord | StreamsGroupRecord | ShareGroupRecord) -> tuple[bytes, bytes | None]:
    """A consumer-, streams- or share-group record: its key, and its value at v0 (what Kafka 4.x writes)."""
    kind = _BY_CLASS.get(type(record))
    if kind is None:
        raise EncodeError(f"cannot encode {type(record).__name__}: not a consumer-group record")
    fields = dict(zip(("group_id", *kind.key_fields), record[:-1], strict=True))
    key = encode_key(kind.record_type, kind.key(**fields))
    if record.value is None:
        return key, None
    return key, encode_value(kind.value, record.value, CONSUMER_GROUP_VALUE_VERSION)


def encode_record_generic(record: AnyRecord) -> tuple[bytes, bytes | None]:
    """``encode_record`` through the message declarations alone: the reference the packed
    OffsetCommit layout is checked against."""
    if not isinstance(record, (OffsetCommitRecord, GroupMetadataRecord)):
        return encode_consumer_group_record(record)
    if isinstance(record, OffsetCommitRecord):
        key = encode_offset_commit_key(record.group, record.topic, record.partition)
        if record.value is None:
            return key, None
        return key, encode_value(OffsetCommitValue, record.value, offset_commit_value_version(record.value))
    key = encode_group_metadata_key(record.group)
    if record.value is None:
        return key, None
    return key, encode_value(GroupMetadataValue, record.value, GROUP_METADATA_VALUE_VERSION)
