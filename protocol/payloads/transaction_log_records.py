"""The records of ``__transaction_state``: one per change of a transactional id's metadata.

Key: int16 version 0, then TransactionLogKey (the transactional id). Value: int16 version, then
TransactionLogValue; null for a tombstone. Kafka writes value version 1 (flexible, with the previous
and next producer ids and the client's transaction version as tagged fields) when the cluster's
finalized ``transaction.version`` is 1 or more, and version 0 otherwise; a record says which
(``TransactionRecord.version``). Both versions are read.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from protocol.errors import DecodeError
from protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
_VERSION = struct.Struct(">h")


class TransactionRecord(NamedTuple):
    """One ``__transaction_state`` record; ``value`` None is a tombstone."""

    transactional_id: str
    value: Any | None  # a TransactionLogValue
    version: int = 0  # the value's version: 0, or 1 (flexible)


def encode_transaction_record(record: TransactionRecord) -> tuple[bytes, bytes | None]:
    key = _VERSION.pack(KEY_VERSION) + TransactionLogKey.encode(
        TransactionLogKey(transactional_id=record.transactional_id), KEY_VERSION)
    if record.value is None:
        return key, None
    return key, _VERSION.pack(record.version) + TransactionLogValue.encode(record.value, record.version)


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
    return TransactionRecord(txn_id, TransactionLogValue.decode(value[2:], value_version), value_version)
