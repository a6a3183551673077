"""The records of ``__transaction_state``: one per change of a transactional id's metadata.

Key: int16 version 0, then TransactionLogKey (the transactional id). Value: int16 version, then
TransactionLogValue; null for a tombstone. Kafka writes value version 0 unless the client uses
transactions version 2, which this broker does not serve, so version 0 is what is written here;
both versions are read.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from protocol.errors import DecodeError
from protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
_VERSION = struct.Struct(">h")


class TransactionRecord(NamedTuple):
    """One ``__transaction_state`` record; ``value`` None is a tombstone."""

    transactional_id: str
    value: Any | None  # a TransactionLogValue


def encode_transaction_record(record: TransactionRecord) -> tuple[bytes, bytes | None]:
    key = _VERSION.pack(KEY_VERSION) + TransactionLogKey.encode(
        TransactionLogKey(transactional_id=record.transactional_id), KEY_VERSION)
    if record.value is None:
        return key, None
    return key, _VERSION.pack(VALUE_VERSION) + TransactionLogValue.encode(record.value, VALUE_VERSION)


def decode_transaction_record(key: bytes, value: bytes | None) -> TransactionRecord:
    """Raises ``DecodeError`` for a key or value this broker cannot read."""
    if len(key) < 2:
        raise DecodeError("TransactionLogKey", 0, "shorter than its version")
    (version,) = _VERSION.unpack_from(key)
    if version != KEY_VERSION:
        raise DecodeError("TransactionLogKey", version, "unknown key version")
    txn_id = TransactionLogKey.decode(key[2:], KEY_VERSION).transactional_id
    if value is None:
        return TransactionRecord(txn_id, None)
    if len(value) < 2:
        raise DecodeError("TransactionLogValue", 0, "shorter than its version")
    (value_version,) = _VERSION.unpack_from(value)
    if value_version not in TransactionLogValue.valid:
        raise DecodeError("TransactionLogValue", value_version, "unknown value version")
    return TransactionRecord(txn_id, TransactionLogValue.decode(value[2:], value_version))
