"""``protocol.payloads.offsets_log_records``: record types by key version, the version rules for values,
tombstones, and the bytes kcoord writes. Expected bytes are packed by hand from Kafka's specs."""

from __future__ import annotations

import struct

import pytest

from protocol.errors import DecodeError, EncodeError
from protocol.messages.offsets_log import GroupMetadataValue, OffsetCommitValue
from protocol.payloads.offsets_log_records import (
    GROUP_METADATA,
    OFFSET_COMMIT,
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_record,
    encode_value,
    read_record,
    readable_version,
    record_type_name,
)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    return i16(len(text.encode())) + text.encode()


def compact(text: str) -> bytes:
    return bytes([len(text.encode()) + 1]) + text.encode()


COMMIT_KEY = i16(1) + s16("g") + s16("t") + i32(3)
GROUP_KEY = i16(2) + s16("g")


@pytest.mark.parametrize(("key_version", "name"), [
    (0, OFFSET_COMMIT), (1, OFFSET_COMMIT), (2, GROUP_METADATA), (3, "ConsumerGroupMetadata"),
    (8, "ConsumerGroupCurrentMemberAssignment"), (9, "ShareGroupPartitionMetadata"),
    (15, "ShareGroupStatePartitionMetadata"), (16, "ConsumerGroupRegularExpression"), (17, "StreamsGroupMetadata"),
    (25, None), (-1, None), (32767, None),
])
def test_record_types_by_key_version(key_version: int, name: str | None) -> None:
    assert record_type_name(key_version) == name


@pytest.mark.parametrize("key_version", [9, 18, 24, 99, -3])
def test_other_record_types_are_reported_not_decoded(key_version: int) -> None:
    rec = read_record(i16(key_version) + s16("group") + b"\x01\x02", b"\x00\x00\x09")
    assert (rec.key_version, rec.type_name, rec.key, rec.value_version, rec.value) == (
        key_version, record_type_name(key_version), None, None, None)
    assert decode_record(i16(key_version) + b"junk", None) is None


def test_a_key_too_short_for_its_record_type_is_an_error() -> None:
    with pytest.raises(DecodeError):
        read_record(b"\x00", None)


def test_tombstones_of_both_types() -> None:
    assert decode_record(COMMIT_KEY, None) == OffsetCommitRecord("g", "t", 3, None)
    assert decode_record(GROUP_KEY, None) == GroupMetadataRecord("g", None)
    rec = read_record(i16(0) + s16("g") + s16("t") + i32(3), None)  # key v0 reads like v1
    assert (rec.type_name, rec.key.to_dict(), rec.value_version, rec.value) == (
        OFFSET_COMMIT, {"group": "g", "topic": "t", "partition": 3}, None, None)


def test_a_newer_offset_value_reads_with_the_newest_layout() -> None:
    # v4's layout, two tagged fields nobody declares yet, then bytes a later layout appended.
    tags = b"\x02" + b"\x00\x10" + bytes(range(16)) + b"\x07\x01\xff"
    value = i16(9) + i64(7) + i32(3) + compact("md") + i64(10) + tags + b"later"
    rec = read_record(COMMIT_KEY, value)
    assert (rec.value_version, rec.read_as, rec.newer_than_known) == (9, 4, True)
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata, rec.value.commit_timestamp,
            rec.value.expire_timestamp) == (7, 3, "md", 10, -1)
    record = decode_record(COMMIT_KEY, value)
    assert isinstance(record, OffsetCommitRecord) and record.value == rec.value


def test_a_newer_group_value_reads_with_the_newest_layout() -> None:
    member = (compact("m") + b"\x00" + compact("c") + compact("/h") + i32(300) + i32(100)
              + b"\x02\x01" + b"\x01" + b"\x01\x00\x01\x05")  # ... subscription, assignment, one unknown tag
    value = i16(5) + compact("consumer") + i32(4) + compact("range") + compact("m") + i64(77) + b"\x02" + member \
        + b"\x01\x03\x02\xaa\xbb"
    rec = read_record(GROUP_KEY, value)
    assert (rec.value_version, rec.read_as, rec.newer_than_known) == (5, 4, True)
    assert rec.value.to_dict() == {
        "protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m",
        "current_state_timestamp": 77, "members": [{
            "member_id": "m", "group_instance_id": None, "client_id": "c", "client_host": "/h",
            "rebalance_timeout": 300, "session_timeout": 100, "subscription": b"\x01", "assignment": b""}]}


def test_versions_below_the_first_are_refused() -> None:
    assert readable_version(OffsetCommitValue, 0) == 0
    assert readable_version(OffsetCommitValue, 4) == 4
    with pytest.raises(DecodeError):
        decode_record(COMMIT_KEY, i16(-1) + i64(7))


def test_a_v0_member_takes_its_session_timeout_as_rebalance_timeout() -> None:
    v0 = (i16(0) + s16("consumer") + i32(4) + s16("range") + s16("m") + i32(1)
          + s16("m") + s16("c") + s16("/h") + i32(9000) + i32(0) + i32(0))
    record = decode_record(GROUP_KEY, v0)
    assert isinstance(record, GroupMetadataRecord)
    assert [(m.rebalance_timeout, m.session_timeout) for m in record.value.members] == [(9000, 9000)]
    # Tools show the struct as stored.
    assert read_record(GROUP_KEY, v0).value.members[0].rebalance_timeout == 0


def test_what_kcoord_writes() -> None:
    commit = OffsetCommitValue(offset=100, leader_epoch=5, metadata="m", commit_timestamp=1000)
    assert encode_record(OffsetCommitRecord("g", "t", 3, commit)) == (
        COMMIT_KEY, i16(3) + i64(100) + i32(5) + s16("m") + i64(1000))
    expiring = OffsetCommitValue(offset=100, leader_epoch=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    assert encode_record(OffsetCommitRecord("g", "t", 3, expiring))[1] == (
        i16(1) + i64(100) + s16("") + i64(1000) + i64(2000))
    empty = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                               current_state_timestamp=5, members=[])
    assert encode_record(GroupMetadataRecord("g", empty)) == (
        GROUP_KEY, i16(3) + s16("") + i32(0) + i16(-1) + i16(-1) + i64(5) + i32(0))
    assert encode_offset_commit_key("g", "t", 3) == COMMIT_KEY
    assert encode_group_metadata_key("g") == GROUP_KEY


def test_only_declared_versions_are_written() -> None:
    value = OffsetCommitValue(offset=1, leader_epoch=-1, metadata="", commit_timestamp=0)
    assert encode_value(OffsetCommitValue, value, 4) == i16(4) + i64(1) + i32(-1) + compact("") + i64(0) + b"\x00"
    with pytest.raises(EncodeError):
        encode_value(OffsetCommitValue, value, 5)
    with pytest.raises(EncodeError):
        encode_offset_commit_key("g", "t", 0, key_version=2)
