"""``__consumer_offsets`` values written and read with kafka-python's protocol types, laid out from
Kafka's message specs (OffsetCommitValue.json, GroupMetadataValue.json, and Kafka 4.1's
ConsumerGroup*Value.json): an implementation of the record format that shares no code with ours,
to check ours against.

A version above the newest Kafka declares (4 for both) is written the way KIP-915 has Kafka add
fields, as the v4 layout whose tag buffers carry fields older readers do not know, and read with
the v4 layout (kafka-python's own ``ApiData.decode`` takes ``min(version, newest)`` the same way).
"""

from __future__ import annotations

import io
import uuid
from typing import Any

from kafka.protocol.old.types import (
    UUID,
    Array,
    Bytes,
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)

NEWEST_COMMIT_VALUE = 4
NEWEST_GROUP_VALUE = 4
FIRST_FLEXIBLE = 4


def _strings(layout: int) -> Any:
    return CompactString("utf-8") if layout >= FIRST_FLEXIBLE else String("utf-8")


def commit_value_schema(layout: int) -> Schema:
    fields: list[tuple[str, Any]] = [("offset", Int64)]
    if layout >= 3:
        fields.append(("leader_epoch", Int32))
    fields += [("metadata", _strings(layout)), ("commit_timestamp", Int64)]
    if layout == 1:
        fields.append(("expire_timestamp", Int64))
    if layout >= FIRST_FLEXIBLE:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def member_schema(layout: int) -> Schema:
    text = _strings(layout)
    raw = CompactBytes if layout >= FIRST_FLEXIBLE else Bytes
    fields: list[tuple[str, Any]] = [("member_id", text)]
    if layout >= 3:
        fields.append(("group_instance_id", text))
    fields += [("client_id", text), ("client_host", text)]
    if layout >= 1:
        fields.append(("rebalance_timeout", Int32))
    fields += [("session_timeout", Int32), ("subscription", raw), ("assignment", raw)]
    if layout >= FIRST_FLEXIBLE:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def group_value_schema(layout: int) -> Schema:
    text = _strings(layout)
    fields: list[tuple[str, Any]] = [("protocol_type", text), ("generation", Int32), ("protocol", text),
                                     ("leader", text)]
    if layout >= 2:
        fields.append(("current_state_timestamp", Int64))
    members = CompactArray(member_schema(layout)) if layout >= FIRST_FLEXIBLE else Array(member_schema(layout))
    fields.append(("members", members))
    if layout >= FIRST_FLEXIBLE:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def _row(schema: Schema, values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(name, {}) if name == "tags" else values[name] for name in schema.names)


def encode_commit_value(version: int, values: dict[str, Any], trailing: bytes = b"") -> bytes:
    """``values`` by field name; ``tags`` ({tag: bytes}) is used by the flexible layout only."""
    schema = commit_value_schema(min(version, NEWEST_COMMIT_VALUE))
    return Int16.encode(version) + schema.encode(_row(schema, values)) + trailing


def encode_group_value(version: int, values: dict[str, Any], trailing: bytes = b"") -> bytes:
    layout = min(version, NEWEST_GROUP_VALUE)
    schema = group_value_schema(layout)
    members = [_row(member_schema(layout), m) for m in values["members"]]
    return Int16.encode(version) + schema.encode(_row(schema, {**values, "members": members})) + trailing


def _as_dict(schema: Schema, decoded: tuple[Any, ...]) -> dict[str, Any]:
    return {name: value for name, value in zip(schema.names, decoded) if name != "tags"}


def decode_commit_value(data: bytes) -> tuple[int, dict[str, Any]]:
    stream = io.BytesIO(data)
    version = Int16.decode(stream)
    schema = commit_value_schema(min(version, NEWEST_COMMIT_VALUE))
    return version, _as_dict(schema, schema.decode(stream))


def decode_group_value(data: bytes) -> tuple[int, dict[str, Any]]:
    stream = io.BytesIO(data)
    version = Int16.decode(stream)
    layout = min(version, NEWEST_GROUP_VALUE)
    schema = group_value_schema(layout)
    value = _as_dict(schema, schema.decode(stream))
    value["members"] = [_as_dict(member_schema(layout), m) for m in value["members"]]
    return version, value


def commit_key(key_version: int, group: str, topic: str, partition: int) -> bytes:
    return Int16.encode(key_version) + String("utf-8").encode(group) + String("utf-8").encode(topic) \
        + Int32.encode(partition)


def group_key(group: str) -> bytes:
    return Int16.encode(2) + String("utf-8").encode(group)


# ---- KIP-848 consumer-group values (record types 3-8, 16), from Kafka 4.1's ConsumerGroup*Value.json
# Every one is flexible at its only version, 0. A value is a dict by field name (topic ids as 16
# bytes); tagged fields (a group's metadata hash, a classic member's protocols) go in the tag block.

NEWEST_CONSUMER_GROUP_VALUE = 0
_TEXT = CompactString("utf-8")
_TOPIC_PARTITIONS: list[tuple[str, Any]] = [("topic_id", "uuid"), ("partitions", ("array", Int32))]
CLASSIC_MEMBER_METADATA: list[tuple[str, Any]] = [
    ("session_timeout_ms", Int32),
    ("supported_protocols", ("array", [("name", _TEXT), ("metadata", CompactBytes)])),
]
CONSUMER_GROUP_VALUES: dict[int, list[tuple[str, Any]]] = {
    3: [("epoch", Int32)],
    4: [("topics", ("array", [("topic_id", "uuid"), ("topic_name", _TEXT), ("num_partitions", Int32),
                              ("partition_metadata", ("array", [("partition", Int32),
                                                                ("racks", ("array", _TEXT))]))]))],
    5: [("instance_id", _TEXT), ("rack_id", _TEXT), ("client_id", _TEXT), ("client_host", _TEXT),
        ("subscribed_topic_names", ("array", _TEXT)), ("subscribed_topic_regex", _TEXT),
        ("rebalance_timeout_ms", Int32), ("server_assignor", _TEXT)],
    6: [("assignment_epoch", Int32)],
    7: [("topic_partitions", ("array", _TOPIC_PARTITIONS))],
    8: [("member_epoch", Int32), ("previous_member_epoch", Int32), ("state", Int8),
        ("assigned_partitions", ("array", _TOPIC_PARTITIONS)),
        ("partitions_pending_revocation", ("array", _TOPIC_PARTITIONS))],
    16: [("topics", ("array", _TEXT)), ("version", Int64), ("timestamp", Int64)],
}
# The one tagged field of a type: (its name, tag 0's bytes from its value, its value from them).
_TAGGED: dict[int, tuple[str, Any, Any]] = {
    3: ("metadata_hash", lambda v: None if v == 0 else Int64.encode(v),
        lambda raw: 0 if raw is None else Int64.decode(io.BytesIO(raw))),
    6: ("assignment_timestamp", lambda v: None if v == 0 else Int64.encode(v),
        lambda raw: 0 if raw is None else Int64.decode(io.BytesIO(raw))),
    5: ("classic_member_metadata",
        # A nullable struct: a presence byte, then the struct.
        lambda v: None if v is None else Int8.encode(1) + _schema(CLASSIC_MEMBER_METADATA).encode(_struct_row(CLASSIC_MEMBER_METADATA, v)),
        lambda raw: None if raw is None else _from_row(CLASSIC_MEMBER_METADATA, _schema(CLASSIC_MEMBER_METADATA).decode(io.BytesIO(raw[1:])))),
}


def _wire_type(typ: Any) -> Any:
    if isinstance(typ, list):
        return _schema(typ)
    if isinstance(typ, tuple):
        return CompactArray(_wire_type(typ[1]))
    return UUID if typ == "uuid" else typ


def _schema(spec: list[tuple[str, Any]]) -> Schema:
    return Schema(*[(name, _wire_type(typ)) for name, typ in spec], ("tags", TaggedFields))


def _to_wire(typ: Any, v: Any) -> Any:
    if isinstance(typ, list):
        return _struct_row(typ, v)
    if isinstance(typ, tuple):
        return None if v is None else [_to_wire(typ[1], x) for x in v]
    return uuid.UUID(bytes=v) if typ == "uuid" else v


def _struct_row(spec: list[tuple[str, Any]], values: dict[str, Any], tags: dict[int, bytes] | None = None) -> tuple[Any, ...]:
    return (*[_to_wire(typ, values[name]) for name, typ in spec], tags or {})


def _from_wire(typ: Any, v: Any) -> Any:
    if isinstance(typ, list):
        return _from_row(typ, v)
    if isinstance(typ, tuple):
        return None if v is None else [_from_wire(typ[1], x) for x in v]
    if typ == "uuid":
        return bytes(16) if v is None else v.bytes  # kafka-python reads the zero uuid as None
    return v


def _from_row(spec: list[tuple[str, Any]], row: tuple[Any, ...]) -> dict[str, Any]:
    return {name: _from_wire(typ, v) for (name, typ), v in zip(spec, row)}


def encode_consumer_group_value(record_type: int, version: int, values: dict[str, Any],
                                unknown_tags: dict[int, bytes] | None = None, trailing: bytes = b"") -> bytes:
    """``values`` by field name, the type's tagged field included; ``unknown_tags`` (tags above 0)
    are fields a later Kafka added, written the way it would."""
    spec = CONSUMER_GROUP_VALUES[record_type]
    tags = dict(unknown_tags or {})
    if record_type in _TAGGED:
        name, encode, _ = _TAGGED[record_type]
        raw = encode(values[name])
        if raw is not None:
            tags[0] = raw
    return Int16.encode(version) + _schema(spec).encode(_struct_row(spec, values, dict(sorted(tags.items())))) + trailing


def decode_consumer_group_value(record_type: int, data: bytes) -> tuple[int, dict[str, Any]]:
    stream = io.BytesIO(data)
    version = Int16.decode(stream)
    spec = CONSUMER_GROUP_VALUES[record_type]
    row = _schema(spec).decode(stream)
    values = _from_row(spec, row)
    if record_type in _TAGGED:
        name, _, decode = _TAGGED[record_type]
        tags = row[len(spec)] if len(row) > len(spec) else {}  # kafka-python drops an empty tag block
        values[name] = decode(tags.get(0))
    return version, values


def consumer_group_key(record_type: int, group: str, second: str | None) -> bytes:
    """Every consumer-group key is the group id, and for types 5, 7, 8 the member id, for 16 the
    regular expression: int16-length strings."""
    text = String("utf-8")
    return Int16.encode(record_type) + text.encode(group) + (b"" if second is None else text.encode(second))
