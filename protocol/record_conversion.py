"""Conversion between record batches (magic 2, what the log stores) and the older message sets.

Down-conversion follows what Kafka brokers before 4.0 did for a Fetch below v4 (``RecordsUtil``):
control batches are left out (old clients know no transaction markers), a batch keeps its codec,
timestamp type and the offsets of its records, headers are dropped (the old formats have no
place for them), and a zstd batch cannot be converted (the old formats had no zstd). Records
below the fetch offset are dropped from uncompressed batches only: a compressed message set is
kept whole, as its wrapper must be. Transactional data is converted like any other: Fetch below
v4 has no isolation level, so it reads uncommitted.

Up-conversion serves Produce v0-2: the message set becomes one batch with the same codec,
offsets renumbered from 0 (the broker assigns the real ones) and the messages' timestamps
(NO_TIMESTAMP for magic 0).
"""

from __future__ import annotations

from protocol.legacy_records import MAGIC1, Entry, build_message_set, iter_messages
from protocol.record import Record
from protocol.record_batch import (
    COMPRESSION_MASK,
    MAGIC,
    build_batch,
    decode_records,
    iter_batches,
)
from protocol.record_compression import ZSTD

_MAGIC_OFFSET = 16


class UnconvertibleBatchError(Exception):
    """A batch the target format cannot express (zstd below magic 2)."""


def fetch_magic(fetch_version: int) -> int:
    """The newest message format a Fetch version's reader knows: 0 for v0-1, 1 for v2-3, else 2."""
    if fetch_version <= 1:
        return 0
    return MAGIC1 if fetch_version <= 3 else MAGIC


def down_convert(data: bytes, to_magic: int, first_offset: int) -> bytes:
    """The whole batches of ``data`` as a message set of ``to_magic`` (0 or 1); a partial batch
    at the end is left out. Raises ``UnconvertibleBatchError`` for a zstd batch."""
    out = bytearray()
    for batch in iter_batches(data, verify_crc=False, allow_partial=True):
        if batch.is_control:
            continue
        if batch.compression == ZSTD:
            raise UnconvertibleBatchError("Down-conversion of zstandard-compressed batches is not supported")
        compressed = batch.compression != 0
        entries = []
        for r in decode_records(batch):
            offset = batch.base_offset + r.offset_delta
            if compressed or offset >= first_offset:
                entries.append(Entry(offset, batch.base_timestamp + r.timestamp_delta, r.key, r.value))
        if not entries:
            continue
        append_time = batch.max_timestamp if batch.log_append_time else None
        out += build_message_set(entries, to_magic, batch.compression, append_time)
    return bytes(out)


def is_message_set(data: bytes) -> bool:
    """Whether ``data`` starts with a message of magic 0 or 1 (rather than a record batch)."""
    return len(data) > _MAGIC_OFFSET and data[_MAGIC_OFFSET] in (0, 1)


def up_convert(data: bytes) -> bytes:
    """A message set as one record batch (empty bytes for an empty set). Raises
    ``CorruptBatchError``."""
    messages = list(iter_messages(data))
    if not messages:
        return b""
    codec = data[_MAGIC_OFFSET + 1] & COMPRESSION_MASK  # the first (wrapper) message's attributes
    base_ts = messages[0].timestamp
    records = [Record(i, m.timestamp - base_ts, m.key, m.value, []) for i, m in enumerate(messages)]
    return build_batch(records, 0, base_timestamp=base_ts, compression=codec)
