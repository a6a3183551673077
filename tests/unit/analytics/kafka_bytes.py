"""``__consumer_offsets`` records packed by hand from Kafka's schemas, in batches built by
kafka-python's record-batch builder: bytes as a Kafka broker writes them, made without our codecs."""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


def commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    return struct.pack(">h", version) + s16(group) + s16(topic) + struct.pack(">i", partition)


def commit_value_v3(offset: int, epoch: int, metadata: str, commit_ts: int) -> bytes:
    return struct.pack(">hqi", 3, offset, epoch) + s16(metadata) + struct.pack(">q", commit_ts)


def commit_value_v1(offset: int, metadata: str, commit_ts: int, expire_ts: int) -> bytes:
    return struct.pack(">hq", 1, offset) + s16(metadata) + struct.pack(">qq", commit_ts, expire_ts)


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + s16(group)


def subscription_v0(topics: list[str]) -> bytes:
    return struct.pack(">hi", 0, len(topics)) + b"".join(s16(t) for t in topics) + struct.pack(">i", -1)


def assignment_v0(assigned: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(assigned))
    for topic, parts in assigned.items():
        out += s16(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


def group_value_v3(protocol_type: str, generation: int, protocol: str | None, leader: str | None,
                   state_ts: int, members: list[dict]) -> bytes:
    out = struct.pack(">h", 3) + s16(protocol_type) + struct.pack(">i", generation) + s16(protocol)
    out += s16(leader) + struct.pack(">q", state_ts) + struct.pack(">i", len(members))
    for m in members:
        out += s16(m["member_id"]) + s16(m.get("instance")) + s16(m["client_id"]) + s16(m["host"])
        out += struct.pack(">ii", 300000, 45000)
        out += b32(subscription_v0(m["topics"])) + b32(assignment_v0(m["assigned"]))
    return out


def batch(base_offset: int, records: list[tuple[bytes, bytes | None, int]], compression: int = 0,
          producer_id: int = -1, transactional: bool = False) -> bytes:
    """A Kafka record batch (kafka-python's builder), renumbered to start at ``base_offset``."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 20)
    for i, (key, value, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, base_offset)  # outside the CRC
    return bytes(raw)


def control_batch(base_offset: int, producer_id: int, commit: bool, ts: int) -> bytes:
    """A COMMIT/ABORT marker, which only brokers write (so the builder cannot)."""
    from protocol.record_batch import build_end_txn_marker

    return build_end_txn_marker(base_offset, producer_id=producer_id, producer_epoch=0, commit=commit,
                                coordinator_epoch=0, timestamp=ts)
