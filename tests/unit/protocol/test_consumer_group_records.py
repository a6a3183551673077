"""The KIP-848 consumer-group records of ``__consumer_offsets`` (types 3-8 and 16): the bytes kcoord
writes for each, tombstones, and values written by a Kafka newer than the declared version.
Expected bytes are packed by hand from Kafka 4.1's record specs (flexible v0 values: compact
strings and arrays, a tagged-field block after every struct)."""

from __future__ import annotations

import struct
import uuid

import pytest

from protocol.messages.offsets_log_consumer_groups import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.payloads.offsets_log_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerGroupRegularExpressionRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    decode_record,
    encode_record,
    encode_record_generic,
    read_record,
)

TOPIC = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8").bytes


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(text: str) -> bytes:
    return i16(len(text.encode())) + text.encode()


def compact(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text.encode()) + 1]) + text.encode()


def n_items(n: int) -> bytes:
    return bytes([n + 1])


def partitions(*ps: int) -> bytes:
    return n_items(len(ps)) + b"".join(i32(p) for p in ps)


NO_TAGS = b"\x00"

EPOCH = ConsumerGroupMetadataRecord("g", ConsumerGroupMetadataValue(epoch=7, metadata_hash=0x0102))
TARGET_EPOCH = ConsumerGroupTargetAssignmentMetadataRecord("g", ConsumerGroupTargetAssignmentMetadataValue(
    assignment_epoch=6))
MEMBER = ConsumerGroupMemberMetadataRecord("g", "m1", ConsumerGroupMemberMetadataValue(
    instance_id=None, rack_id="r", client_id="c", client_host="/h", subscribed_topic_names=["a", "b"],
    subscribed_topic_regex=None, rebalance_timeout_ms=300, server_assignor="uniform"))
TARGET = ConsumerGroupTargetAssignmentMemberRecord("g", "m1", ConsumerGroupTargetAssignmentMemberValue(
    topic_partitions=[ConsumerGroupTargetAssignmentMemberValue.TopicPartition(topic_id=TOPIC, partitions=[0, 2])]))
TP = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
CURRENT = ConsumerGroupCurrentMemberAssignmentRecord("g", "m1", ConsumerGroupCurrentMemberAssignmentValue(
    member_epoch=7, previous_member_epoch=6, state=2, assigned_partitions=[TP(topic_id=TOPIC, partitions=[0])],
    partitions_pending_revocation=[TP(topic_id=TOPIC, partitions=[1])]))
REGEX = ConsumerGroupRegularExpressionRecord("g", "a.*", ConsumerGroupRegularExpressionValue(
    topics=["a1"], version=12, timestamp=1000))
PARTITIONS = ConsumerGroupPartitionMetadataRecord("g", ConsumerGroupPartitionMetadataValue(topics=[
    ConsumerGroupPartitionMetadataValue.TopicMetadata(topic_id=TOPIC, topic_name="a", num_partitions=3)]))

WRITTEN = [
    (EPOCH, i16(3) + s16("g"),
     i16(0) + i32(7) + b"\x01" + b"\x00\x08" + i64(0x0102)),  # metadata_hash: tag 0, 8 bytes
    (PARTITIONS, i16(4) + s16("g"),
     i16(0) + n_items(1) + TOPIC + compact("a") + i32(3) + n_items(0) + NO_TAGS + NO_TAGS),
    (MEMBER, i16(5) + s16("g") + s16("m1"),
     i16(0) + compact(None) + compact("r") + compact("c") + compact("/h") + n_items(2) + compact("a")
     + compact("b") + compact(None) + i32(300) + compact("uniform") + NO_TAGS),
    (TARGET_EPOCH, i16(6) + s16("g"), i16(0) + i32(6) + NO_TAGS),
    (TARGET, i16(7) + s16("g") + s16("m1"),
     i16(0) + n_items(1) + TOPIC + partitions(0, 2) + NO_TAGS + NO_TAGS),
    (CURRENT, i16(8) + s16("g") + s16("m1"),
     i16(0) + i32(7) + i32(6) + i8(2) + n_items(1) + TOPIC + partitions(0) + NO_TAGS
     + n_items(1) + TOPIC + partitions(1) + NO_TAGS + NO_TAGS),
    (REGEX, i16(16) + s16("g") + s16("a.*"),
     i16(0) + n_items(1) + compact("a1") + i64(12) + i64(1000) + NO_TAGS),
]


@pytest.mark.parametrize(("record", "key", "value"), WRITTEN, ids=lambda x: type(x).__name__)
def test_what_kcoord_writes_and_reads_back(record: object, key: bytes, value: bytes) -> None:
    assert encode_record(record) == encode_record_generic(record) == (key, value)  # type: ignore[arg-type]
    assert decode_record(key, value) == record
    rec = read_record(key, value)
    assert (rec.value_version, rec.newer_than_known, rec.value) == (0, False, record.value)  # type: ignore[attr-defined]


def test_every_consumer_group_type_is_covered() -> None:
    assert {int.from_bytes(key[:2], "big") for _, key, _ in WRITTEN} == CONSUMER_GROUP_RECORD_TYPES


@pytest.mark.parametrize(("record", "key", "value"), WRITTEN, ids=lambda x: type(x).__name__)
def test_tombstones(record: object, key: bytes, value: bytes) -> None:
    dead = record._replace(value=None)  # type: ignore[attr-defined]
    assert encode_record(dead) == (key, None)
    assert decode_record(key, None) == dead
    assert dead.group == "g"


def test_a_metadata_hash_of_zero_is_not_written() -> None:
    record = ConsumerGroupMetadataRecord("g", ConsumerGroupMetadataValue(epoch=7))
    assert encode_record(record)[1] == i16(0) + i32(7) + NO_TAGS


def test_a_classic_member_carries_its_protocols_in_tag_0() -> None:
    meta = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata(
        session_timeout_ms=45000,
        supported_protocols=[ConsumerGroupMemberMetadataValue.ClassicMemberMetadata.ClassicProtocol(
            name="range", metadata=b"\x00\x01")])
    value = ConsumerGroupMemberMetadataValue(instance_id=None, rack_id=None, client_id="c", client_host="/h",
                                             subscribed_topic_regex=None, server_assignor=None,
                                             classic_member_metadata=meta)
    # The nullable struct is written as a presence byte and the struct, inside tag 0's bytes.
    body = b"\x01" + i32(45000) + n_items(1) + compact("range") + b"\x03\x00\x01" + NO_TAGS + NO_TAGS
    expected = (i16(0) + compact(None) + compact(None) + compact("c") + compact("/h") + n_items(0) + compact(None)
                + i32(-1) + compact(None) + b"\x01" + b"\x00" + bytes([len(body)]) + body)
    key, written = encode_record(ConsumerGroupMemberMetadataRecord("g", "m", value))
    assert written == expected
    back = decode_record(key, written)
    assert isinstance(back, ConsumerGroupMemberMetadataRecord) and back.value == value


def test_a_null_classic_member_metadata_in_tag_0_as_kafka_writes_it() -> None:
    """Kafka 4.4 writes a consumer-protocol member's null ClassicMemberMetadata as tag 0 holding a
    varint 0 (its generator compares the field with an empty struct, not with null); a nullable
    struct inside a tagged field has a varint presence marker, not the int8 -1 of other fields."""
    key = i16(5) + s16("probe848") + s16("OuACKnaWQBu5G2qkAy6OQA")
    kafka_bytes = bytes.fromhex("000000000872646b61666b610b2f3132372e302e302e310203743201000493e00001000100")
    rec = decode_record(key, kafka_bytes)
    assert rec == ConsumerGroupMemberMetadataRecord("probe848", "OuACKnaWQBu5G2qkAy6OQA", ConsumerGroupMemberMetadataValue(
        instance_id=None, rack_id=None, client_id="rdkafka", client_host="/127.0.0.1", subscribed_topic_names=["t2"],
        subscribed_topic_regex="", rebalance_timeout_ms=300000, server_assignor=None, classic_member_metadata=None))
    # kcoord leaves the tag out for null (the default); both read back the same.
    assert decode_record(*encode_record(rec)) == rec


def test_a_value_from_a_newer_kafka_reads_with_the_v0_layout() -> None:
    """A later Kafka adds fields to v0 as tags (as 4.3 did with the assignment timestamp, tag 0);
    one that also bumped the version is read the pre-4.0 way: v0's layout, known tags read, unknown
    tags and trailing bytes skipped, the version as written kept for the tools."""
    key = i16(6) + s16("g")
    later = i16(3) + i32(41) + b"\x02" + b"\x00\x08" + i64(99) + b"\x05\x02\xaa\xbb" + b"more"
    rec = read_record(key, later)
    assert (rec.type_name, rec.value_version, rec.read_as, rec.newer_than_known) == (
        "ConsumerGroupTargetAssignmentMetadata", 3, 0, True)
    assert rec.value.assignment_epoch == 41
    assert decode_record(key, later) == ConsumerGroupTargetAssignmentMetadataRecord(
        "g", ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=41, assignment_timestamp=99))
    # A known tag still reads in a newer version: the metadata hash of a v2 group record.
    epoch = decode_record(i16(3) + s16("g"), i16(2) + i32(9) + b"\x02" + b"\x00\x08" + i64(5) + b"\x04\x00")
    assert epoch == ConsumerGroupMetadataRecord("g", ConsumerGroupMetadataValue(epoch=9, metadata_hash=5))
