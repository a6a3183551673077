"""``__consumer_offsets`` values written and read with kafka-python's protocol types, laid out from
Kafka's message specs (OffsetCommitValue.json, GroupMetadataValue.json): an implementation of the
record format that shares no code with ours, to check ours against.

A version above the newest Kafka declares (4 for both) is written the way KIP-915 has Kafka add
fields, as the v4 layout whose tag buffers carry fields older readers do not know, and read with
the v4 layout (kafka-python's own ``ApiData.decode`` takes ``min(version, newest)`` the same way).
"""

from __future__ import annotations

import io
from typing import Any

from kafka.protocol.old.types import (
    Array,
    Bytes,
    CompactArray,
    CompactBytes,
    CompactString,
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
