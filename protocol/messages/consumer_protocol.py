"""The consumer embedded protocol: the opaque bytes a consumer puts in JoinGroup's protocol
metadata (its subscription) and the leader puts in SyncGroup's assignments.

Each blob starts with an int16 version. Kafka decodes a blob of a newer version with the
newest layout it knows, because later versions may only append fields; we do the same.
"""

from __future__ import annotations

import struct as _struct
from typing import Any

from protocol.codec import codec_for, encode
from protocol.errors import DecodeError
from protocol.schema import BYTES, INT32, STRING, ArrayOf, Message, array, f, message

ConsumerProtocolSubscription = message(
    "ConsumerProtocolSubscription",
    [
        f("topics", ArrayOf(STRING)),
        f("user_data", BYTES, nullable="0+", default=None),
        f(
            "owned_partitions",
            array(
                "TopicPartition",
                f("topic", STRING, "1+"),
                f("partitions", ArrayOf(INT32), "1+"),
            ),
            "1+",
            ignorable=True,
        ),
        f("generation_id", INT32, "2+", default=-1, ignorable=True),
        f("rack_id", STRING, "3+", nullable="3+", default=None, ignorable=True),
    ],
    valid="0-3",
)

ConsumerProtocolAssignment = message(
    "ConsumerProtocolAssignment",
    [
        f(
            "assigned_partitions",
            array(
                "TopicPartition",
                f("topic", STRING),
                f("partitions", ArrayOf(INT32)),
            ),
        ),
        f("user_data", BYTES, nullable="0+", default=None),
    ],
    valid="0-3",
)


def _decode_versioned(msg: Message, data: bytes) -> tuple[int, Any]:
    if len(data) < 2:
        raise DecodeError(msg.name, -1, "missing version prefix", None)
    (version,) = _struct.unpack_from(">h", data, 0)
    if version < 0:
        raise DecodeError(msg.name, version, "negative version", None)
    readable = min(version, msg.valid.high)
    obj, _ = codec_for(msg, readable).decode_from(bytes(data), 2)
    return version, obj


def decode_subscription(data: bytes) -> Any:
    """A JoinGroup protocol's metadata -> ``ConsumerProtocolSubscription`` instance."""
    return _decode_versioned(ConsumerProtocolSubscription, data)[1]


def decode_assignment(data: bytes) -> Any:
    """A SyncGroup assignment -> ``ConsumerProtocolAssignment`` instance.

    An empty blob (what a member gets when the leader left it out) is an empty assignment.
    """
    if not data:
        return ConsumerProtocolAssignment()
    return _decode_versioned(ConsumerProtocolAssignment, data)[1]


def subscription_version(data: bytes) -> int:
    """The version a member wrote its subscription in (it tells which fields it understands)."""
    return _decode_versioned(ConsumerProtocolSubscription, data)[0]


def encode_subscription(obj: Any, version: int) -> bytes:
    return _struct.pack(">h", version) + encode(ConsumerProtocolSubscription, obj, version)


def encode_assignment(obj: Any, version: int) -> bytes:
    return _struct.pack(">h", version) + encode(ConsumerProtocolAssignment, obj, version)
