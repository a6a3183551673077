"""The classic-group records of ``__consumer_offsets`` and their exact bytes.

Keys carry an int16 version that doubles as the record type (0/1 offset commit, 2 group
metadata); values carry their own int16 version. We write what Kafka 4.x writes: key v1 +
OffsetCommitValue v3 (v1 when the commit has an explicit expire timestamp, the only version with
that field) and key v2 + GroupMetadataValue v3. Every value version 0-4 is read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, TypeVar

from protocol.codec import codec_for, encode
from protocol.errors import DecodeError, EncodeError
from protocol.messages.offsets_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT16_MAX = 0x7FFF
# The OffsetCommit key and value layouts that every commit writes, packed directly: the generic
# codec costs ~4 us per record, a third of a commit's CPU. tests/property/test_offset_records.py
# checks these bytes against the declarations in protocol.messages.offsets_log.
_KEY_HEAD = struct.Struct(">hh")  # key version, group length
_KEY_PARTITION = struct.Struct(">i")
_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_VALUE_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_INT64 = struct.Struct(">q")
_INT64_PAIR = struct.Struct(">qq")


# NamedTuples rather than frozen dataclasses: every commit makes one per partition, and a frozen
# dataclass costs twice as much to build.
class OffsetCommitRecord(NamedTuple):
    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None  # None for a tombstone


class GroupMetadataRecord(NamedTuple):
    group: str
    value: GroupMetadataValue | None  # None for a tombstone


Record = OffsetCommitRecord | GroupMetadataRecord


def encode_offset_commit(
    group: str, topic: str, partition: int, value: OffsetCommitValue | None
) -> tuple[bytes, bytes | None]:
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


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes (value None for a tombstone), exactly as Kafka writes them."""
    if isinstance(record, OffsetCommitRecord):
        return encode_offset_commit(record.group, record.topic, record.partition, record.value)
    return encode_record_generic(record)


def encode_record_generic(record: Record) -> tuple[bytes, bytes | None]:
    """``encode_record`` through the message declarations alone: the reference the packed
    OffsetCommit layout is checked against."""
    if isinstance(record, OffsetCommitRecord):
        key_obj = OffsetCommitKey(group=record.group, topic=record.topic, partition=record.partition)
        key = _INT16.pack(OFFSET_COMMIT_KEY_VERSION) + encode(OffsetCommitKey, key_obj, OFFSET_COMMIT_KEY_VERSION)
        if record.value is None:
            return key, None
        version = (
            OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
            if record.value.expire_timestamp != -1
            else OFFSET_COMMIT_VALUE_VERSION
        )
        return key, _INT16.pack(version) + encode(OffsetCommitValue, record.value, version)
    group_key = GroupMetadataKey(group=record.group)
    key = _INT16.pack(GROUP_METADATA_KEY_VERSION) + encode(GroupMetadataKey, group_key, GROUP_METADATA_KEY_VERSION)
    if record.value is None:
        return key, None
    value = _INT16.pack(GROUP_METADATA_VALUE_VERSION) + encode(
        GroupMetadataValue, record.value, GROUP_METADATA_VALUE_VERSION
    )
    return key, value


# Constraints as strings: at run time the messages are tables, not classes.
_Value = TypeVar("_Value", "OffsetCommitValue", "GroupMetadataValue")


def _decode_versioned(msg: type[_Value], data: bytes) -> tuple[int, _Value]:
    if len(data) < 2:
        raise DecodeError(msg.name, -1, "missing version prefix")
    (version,) = _INT16.unpack_from(data, 0)
    if version < msg.valid.low:
        raise DecodeError(msg.name, version, "unknown version")
    # Later value versions may only add tagged fields (KIP-915), so the newest layout reads them.
    readable = min(version, msg.valid.high)
    obj, _ = codec_for(msg, readable).decode_from(bytes(data), 2)
    return version, obj


def decode_record(key: bytes, value: bytes | None) -> Record | None:
    """Parses one record; None for record types that are not classic-group records (skipped)."""
    if len(key) < 2:
        raise DecodeError("CoordinatorRecordKey", -1, "missing version prefix")
    (key_version,) = _INT16.unpack_from(key, 0)
    if key_version in (0, 1):
        k, _ = codec_for(OffsetCommitKey, key_version).decode_from(bytes(key), 2)
        if value is None:
            return OffsetCommitRecord(k.group, k.topic, k.partition, None)
        _, v = _decode_versioned(OffsetCommitValue, value)
        return OffsetCommitRecord(k.group, k.topic, k.partition, v)
    if key_version == GROUP_METADATA_KEY_VERSION:
        k, _ = codec_for(GroupMetadataKey, key_version).decode_from(bytes(key), 2)
        if value is None:
            return GroupMetadataRecord(k.group, None)
        version, metadata = _decode_versioned(GroupMetadataValue, value)
        if version == 0:
            # v0 has no rebalance timeout; Kafka's default -1 makes the loader use the session timeout.
            for member in metadata.members:
                member.rebalance_timeout = -1
        return GroupMetadataRecord(k.group, metadata)
    return None
