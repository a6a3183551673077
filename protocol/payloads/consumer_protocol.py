"""Whole blobs of the consumer embedded protocol: a consumer's subscription (JoinGroup protocol
metadata) and a member's assignment (SyncGroup), each an int16 version followed by the table of
``protocol.messages.consumer_protocol`` at that version.

Kafka decodes a blob of a newer version with the newest layout it knows, because later versions
may only append fields; we do the same.
"""

from __future__ import annotations

import struct as _struct
from typing import TypeVar

from protocol.codec import codec_for, encode
from protocol.errors import DecodeError
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription

# Constraints as strings: at run time the messages are tables, not classes.
_D = TypeVar("_D", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment")


def _decode_versioned(msg: type[_D], data: bytes) -> tuple[int, _D]:
    if len(data) < 2:
        raise DecodeError(msg.name, -1, "missing version prefix", None)
    (version,) = _struct.unpack_from(">h", data, 0)
    if version < 0:
        raise DecodeError(msg.name, version, "negative version", None)
    readable = min(version, msg.valid.high)
    obj, _ = codec_for(msg, readable).decode_from(bytes(data), 2)
    return version, obj


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """A JoinGroup protocol's metadata -> ``ConsumerProtocolSubscription`` instance."""
    return _decode_versioned(ConsumerProtocolSubscription, data)[1]


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """A SyncGroup assignment -> ``ConsumerProtocolAssignment`` instance.

    An empty blob (what a member gets when the leader left it out) is an empty assignment.
    """
    if not data:
        return ConsumerProtocolAssignment()
    return _decode_versioned(ConsumerProtocolAssignment, data)[1]


def subscription_version(data: bytes) -> int:
    """The version a member wrote its subscription in (it tells which fields it understands)."""
    return _decode_versioned(ConsumerProtocolSubscription, data)[0]


def encode_subscription(obj: ConsumerProtocolSubscription, version: int) -> bytes:
    return _struct.pack(">h", version) + encode(ConsumerProtocolSubscription, obj, version)


def encode_assignment(obj: ConsumerProtocolAssignment, version: int) -> bytes:
    return _struct.pack(">h", version) + encode(ConsumerProtocolAssignment, obj, version)
