"""The records of ``__share_group_state`` as bytes, in the share coordinator's framing (Kafka's
``CoordinatorRecordSerde``): an int16 record type (0 ShareSnapshot, 1 ShareUpdate) and the key
struct; an int16 version and the value struct. The key names the share partition: group, topic
id and partition."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from protocol.codec import codec_for
from protocol.errors import DecodeError
from protocol.messages.share_state_log import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)

SNAPSHOT = 0
UPDATE = 1
VALUE_VERSION = 0
_INT16 = struct.Struct(">h")
_KEYS = {SNAPSHOT: ShareSnapshotKey, UPDATE: ShareUpdateKey}
_VALUES = {SNAPSHOT: ShareSnapshotValue, UPDATE: ShareUpdateValue}


class ShareStateRecord(NamedTuple):
    record_type: int  # SNAPSHOT or UPDATE
    group: str
    topic_id: bytes
    partition: int
    value: Any | None  # ShareSnapshotValue or ShareUpdateValue; None for a tombstone


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    kind = record.record_type
    key_message = _KEYS[kind]
    key = bytearray(_INT16.pack(kind))
    codec_for(key_message, kind).encode_into(
        key_message(group_id=record.group, topic_id=record.topic_id, partition=record.partition), key)
    if record.value is None:
        return bytes(key), None
    value = bytearray(_INT16.pack(VALUE_VERSION))
    codec_for(_VALUES[kind], VALUE_VERSION).encode_into(record.value, value)
    return bytes(key), bytes(value)


def decode(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """The record; None for a record type this reader does not know (skipped, as Kafka does)."""
    if len(key) < 2:
        raise DecodeError("ShareStateKey", -1, "shorter than its record type")
    (kind,) = _INT16.unpack_from(key, 0)
    if kind not in _KEYS:
        return None
    k, _ = codec_for(_KEYS[kind], kind).decode_from(key, 2)
    v = None
    if value is not None:
        if len(value) < 2:
            raise DecodeError(_VALUES[kind].name, -1, "shorter than its version")
        (version,) = _INT16.unpack_from(value, 0)
        message = _VALUES[kind]
        if version < message.valid.low:
            raise DecodeError(message.name, version, "unknown version")
        v, _ = codec_for(message, min(version, message.valid.high)).decode_from(value, 2)
    return ShareStateRecord(kind, k.group_id, k.topic_id, k.partition, v)
