"""__consumer_offsets records: the bytes Kafka writes, and every version Kafka may have written."""

from __future__ import annotations

import struct

from broker.coordinators.group.core import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    encode_record,
)
from protocol.messages.offsets_log import GroupMetadataValue, OffsetCommitValue
from protocol.payloads.offsets_log_records import ShareGroupMetadataRecord
from tests.unit.coordinators.group.core.harness import Harness


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    return i16(len(text)) + text.encode()


def test_offset_commit_bytes() -> None:
    value = OffsetCommitValue(offset=100, leader_epoch=5, metadata="m", commit_timestamp=1000)
    key, val = encode_record(OffsetCommitRecord("g", "t", 3, value))
    assert key == i16(1) + s16("g") + s16("t") + i32(3)
    assert val == i16(3) + i64(100) + i32(5) + s16("m") + i64(1000)
    expiring = OffsetCommitValue(offset=100, leader_epoch=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    _, val = encode_record(OffsetCommitRecord("g", "t", 3, expiring))
    assert val == i16(1) + i64(100) + s16("") + i64(1000) + i64(2000)
    assert encode_record(OffsetCommitRecord("g", "t", 3, None)) == (key, None)


def test_group_metadata_bytes() -> None:
    member = GroupMetadataValue.MemberMetadata(
        member_id="a", group_instance_id=None, client_id="c", client_host="/h", rebalance_timeout=300,
        session_timeout=100, subscription=b"\x01", assignment=b"\x02\x03")
    value = GroupMetadataValue(protocol_type="consumer", generation=1, protocol="range", leader="a",
                               current_state_timestamp=77, members=[member])
    key, val = encode_record(GroupMetadataRecord("g", value))
    assert key == i16(2) + s16("g")
    assert val == (i16(3) + s16("consumer") + i32(1) + s16("range") + s16("a") + i64(77) + i32(1)
                   + s16("a") + i16(-1) + s16("c") + s16("/h") + i32(300) + i32(100)
                   + i32(1) + b"\x01" + i32(2) + b"\x02\x03")
    empty = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                               current_state_timestamp=5, members=[])
    _, val = encode_record(GroupMetadataRecord("g", empty))
    assert val == i16(3) + s16("") + i32(0) + i16(-1) + i16(-1) + i64(5) + i32(0)


def test_every_offset_value_version_decodes() -> None:
    key = i16(0) + s16("g") + s16("t") + i32(1)  # key v0 reads like v1
    v0 = i16(0) + i64(7) + s16("md") + i64(10)
    v2 = i16(2) + i64(7) + s16("md") + i64(10)
    v4 = i16(4) + i64(7) + i32(3) + bytes([3]) + b"md" + i64(10) + b"\x00"
    for raw, epoch in [(v0, -1), (v2, -1), (v4, 3)]:
        rec = decode_record(key, raw)
        assert isinstance(rec, OffsetCommitRecord) and (rec.group, rec.topic, rec.partition) == ("g", "t", 1)
        assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata, rec.value.commit_timestamp) == (
            7, epoch, "md", 10)


def test_v0_group_metadata_loads_with_the_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    key = i16(2) + s16("old")
    v0 = (i16(0) + s16("consumer") + i32(4) + s16("range") + s16("m") + i32(1)
          + s16("m") + s16("c") + s16("/h") + i32(9000) + i32(0) + i32(0))
    rec = decode_record(key, v0)
    assert isinstance(rec, GroupMetadataRecord)
    h.shard = h._new_shard()
    h.shard.replay(rec)
    h.shard.on_loaded(h.now)
    member = h.group("old").members["m"]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (9000, 9000)
    assert h.state("old") == "Stable" and h.group("old").generation == 4


def test_unwritten_streams_record_types_are_skipped_and_share_ones_decoded() -> None:
    # StreamsGroupPartitionMetadata: not written by Kafka 4.4, skipped as its loader skips it.
    assert decode_record(i16(18) + b"whatever", None) is None
    # ShareGroupMetadata (type 11), value v0: epoch 3, metadata hash 0, no tagged fields.
    record = decode_record(i16(11) + s16("g"), i16(0) + (3).to_bytes(4, "big") + bytes(8) + b"\x00")
    assert isinstance(record, ShareGroupMetadataRecord) and record.group == "g" and record.value.epoch == 3
