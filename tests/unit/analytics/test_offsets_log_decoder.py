"""Decoding ``__consumer_offsets`` segments into rows, on bytes built the way Kafka builds them."""

from __future__ import annotations

import struct

import pytest

from analytics.decoder import Decoded, decode_segment
from analytics.segments import SegmentHealth
from analytics.synthetic import commit_record, encode_batch
from protocol.codec import codec_for
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.record_batch import build_simple_batch
from tests.unit.analytics import kafka_bytes as kb

T0 = 1_700_000_000_000


def decode_all(data: bytes, health: SegmentHealth | None = None) -> Decoded:
    out = Decoded()
    for chunk in decode_segment(data, health, chunk_rows=3):
        out.commits.extend(chunk.commits)
        out.groups.extend(chunk.groups)
        out.consumer_groups.extend(chunk.consumer_groups)
        out.streams_groups.extend(chunk.streams_groups)
        out.share_groups.extend(chunk.share_groups)
        out.skipped += chunk.skipped
    return out


def commit_rows(d: Decoded) -> list[tuple]:
    c = d.commits
    return list(zip(c.log_offset, c.timestamp, c.group, c.topic, c.partition, c.offset, c.leader_epoch,
                    c.metadata, c.commit_timestamp, c.expire_timestamp, c.tombstone))


def test_offset_commits_as_kafka_writes_them() -> None:
    data = kb.batch(0, [
        (kb.commit_key("g1", "orders", 0), kb.commit_value_v3(42, 5, "", T0), T0),
        (kb.commit_key("g1", "orders", 1), kb.commit_value_v3(7, -1, "meta", T0), T0),
    ]) + kb.batch(2, [
        (kb.commit_key("g1", "orders", 0), kb.commit_value_v1(50, "x", T0 + 10, T0 + 99), T0 + 10),
        (kb.commit_key("g1", "orders", 1, version=0), None, T0 + 11),
    ])
    rows = commit_rows(decode_all(data))
    assert rows == [
        (0, T0, "g1", "orders", 0, 42, 5, "", T0, None, False),
        (1, T0, "g1", "orders", 1, 7, None, "meta", T0, None, False),
        (2, T0 + 10, "g1", "orders", 0, 50, None, "x", T0 + 10, T0 + 99, False),
        (3, T0 + 11, "g1", "orders", 1, None, None, None, None, None, True),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_commit_value_version_matches_the_generated_codec(version: int) -> None:
    key, value = commit_record("grp", "t", 3, 1234567890123, T0, metadata="m\u00e9ta", leader_epoch=9,
                               value_version=version, expire_ts=T0 + 5 if version == 1 else -1)
    assert value is not None
    expected = codec_for(OffsetCommitValue, version).decode_from(value, 2)[0]
    (row,) = commit_rows(decode_all(encode_batch(100, [(key, value)], T0)))
    assert row[5:10] == (expected.offset, expected.leader_epoch if expected.leader_epoch >= 0 else None,
                         expected.metadata, expected.commit_timestamp,
                         expected.expire_timestamp if expected.expire_timestamp >= 0 else None)


def test_group_metadata_with_members_and_their_assignments() -> None:
    members = [
        {"member_id": "m-1", "instance": "static-1", "client_id": "c1", "host": "/10.0.0.1",
         "topics": ["orders", "audit"], "assigned": {"orders": [0, 1], "audit": [0]}},
        {"member_id": "m-2", "client_id": "c2", "host": "/10.0.0.2", "topics": ["orders"],
         "assigned": {"orders": [2]}},
    ]
    data = kb.batch(10, [
        (kb.group_key("g1"), kb.group_value_v3("consumer", 4, "range", "m-1", T0 - 5, members), T0),
        (kb.group_key("g1"), kb.group_value_v3("consumer", 5, None, None, T0 + 1, []), T0 + 1),
        (kb.group_key("g1"), None, T0 + 2),
    ])
    g = decode_all(data).groups
    assert [(r.log_offset, r.generation, r.protocol, r.leader, r.tombstone) for r in g] == [
        (10, 4, "range", "m-1", False), (11, 5, None, None, False), (12, None, None, None, True)]
    assert g[0].current_state_timestamp == T0 - 5
    first = g[0].members[0]
    assert first["group_instance_id"] == "static-1"
    assert (first["client_id"], first["client_host"], first["session_timeout"]) == ("c1", "/10.0.0.1", 45000)
    assert first["subscribed_topics"] == ["orders", "audit"]
    assert first["assigned_partitions"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1},
                                            {"topic": "audit", "partition": 0}]
    assert g[0].members[1]["group_instance_id"] is None
    assert g[1].members == []


def test_records_of_other_group_types_are_skipped() -> None:
    # Type 9 (ShareGroupPartitionMetadata) was dropped before share groups were released.
    unknown_key = struct.pack(">h", 9) + kb.s16("share-group")
    data = kb.batch(0, [
        (unknown_key, b"\x00\x00\x00\x00\x00\x01\x00", T0),
        (kb.commit_key("g", "t", 0), kb.commit_value_v3(1, -1, "", T0), T0),
    ])
    d = decode_all(data)
    assert d.skipped == 1
    assert [r[2] for r in commit_rows(d)] == ["g"]
    assert d.consumer_groups == []


def test_consumer_group_records_become_rows_of_their_type() -> None:
    epoch_key = struct.pack(">h", 3) + kb.s16("new-protocol-group")
    member_key = struct.pack(">h", 8) + kb.s16("new-protocol-group") + kb.s16("m-1")
    topic = bytes(range(16))
    # v0: member epoch 5, previous 4, state 1, [topic: [0, 2]] assigned, nothing pending.
    current = (b"\x00\x00" + struct.pack(">iib", 5, 4, 1) + b"\x02" + topic + b"\x03" + struct.pack(">ii", 0, 2)
               + b"\x00" + b"\x01" + b"\x00")
    data = kb.batch(0, [
        (epoch_key, b"\x00\x00\x00\x00\x00\x01\x00", T0),
        (member_key, current, T0 + 1),
        (member_key, None, T0 + 2),
    ])
    d = decode_all(data)
    assert d.skipped == 0 and d.undecodable == 0
    rows = d.consumer_groups
    assert [(r.log_offset, r.record_type, r.group, r.member_id, r.tombstone, r.epoch) for r in rows] == [
        (0, "ConsumerGroupMetadata", "new-protocol-group", None, False, 1),
        (1, "ConsumerGroupCurrentMemberAssignment", "new-protocol-group", "m-1", False, 5),
        (2, "ConsumerGroupCurrentMemberAssignment", "new-protocol-group", "m-1", True, None),
    ]
    assert (rows[1].previous_member_epoch, rows[1].member_state, rows[1].pending_revocation) == (4, 1, [])
    assert rows[1].assignment == [{"topic_id": "AAECAwQFBgcICQoLDA0ODw", "partitions": [0, 2]}]


def test_streams_group_records_become_rows_of_their_type() -> None:
    """Bytes laid out by hand from Kafka 4.4's StreamsGroup*Value schemas (flexible, v0)."""
    def compact_str(text: str) -> bytes:
        return bytes([len(text) + 1]) + text.encode()

    def tasks(*entries: tuple[str, list[int]]) -> bytes:
        out = bytes([len(entries) + 1])
        for subtopology, partitions in entries:
            out += compact_str(subtopology) + bytes([len(partitions) + 1])
            out += b"".join(struct.pack(">i", p) for p in partitions) + b"\x00"
        return out

    group_key = struct.pack(">h", 17) + kb.s16("wordcount")
    current_key = struct.pack(">h", 22) + kb.s16("wordcount") + kb.s16("m-1")
    # v0: group epoch 3, metadata hash 9, no tagged fields.
    metadata = b"\x00\x00" + struct.pack(">iq", 3, 9) + b"\x00"
    # v0: member epoch 3, previous 2, state 0; active 0:[0, 1] and 1:[1]; standby 1:[0]; the rest empty.
    current = (b"\x00\x00" + struct.pack(">iib", 3, 2, 0) + tasks(("0", [0, 1]), ("1", [1])) + tasks(("1", [0]))
               + tasks() + tasks() + tasks() + tasks() + b"\x00")
    data = kb.batch(0, [(group_key, metadata, T0), (current_key, current, T0 + 1), (current_key, None, T0 + 2)])
    d = decode_all(data)
    assert d.skipped == 0 and d.undecodable == 0 and d.consumer_groups == []
    rows = d.streams_groups
    assert [(r.log_offset, r.record_type, r.group, r.member_id, r.tombstone, r.epoch) for r in rows] == [
        (0, "StreamsGroupMetadata", "wordcount", None, False, 3),
        (1, "StreamsGroupCurrentMemberAssignment", "wordcount", "m-1", False, 3),
        (2, "StreamsGroupCurrentMemberAssignment", "wordcount", "m-1", True, None),
    ]
    assert (rows[1].previous_member_epoch, rows[1].member_state) == (2, 0)
    assert rows[1].active_tasks == [{"subtopology_id": "0", "partitions": [0, 1]},
                                    {"subtopology_id": "1", "partitions": [1]}]
    assert rows[1].standby_tasks == [{"subtopology_id": "1", "partitions": [0]}] and rows[1].warmup_tasks == []
    # Reading another kind leaves them out, uncounted.
    other = [c for c in decode_segment(data, kinds=frozenset({"offset_commit"}))]
    assert sum(len(c.streams_groups) + c.skipped for c in other) == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(codec: int) -> None:
    records = [(kb.commit_key("g", "t", p), kb.commit_value_v3(p * 100, -1, "", T0), T0) for p in range(40)]
    # kafka-python compresses gzip with the standard library only; the others via our codec.
    data = kb.batch(0, records, compression=codec) if codec == 1 else build_simple_batch(records, compression=codec)
    d = decode_all(data)
    assert [(r[4], r[5]) for r in commit_rows(d)] == [(p, p * 100) for p in range(40)]


def test_transactional_commits_are_marked_with_how_their_transaction_ended() -> None:
    def txn(base: int, pid: int, offset: int) -> bytes:
        return kb.batch(base, [(kb.commit_key("g", "t", 0), kb.commit_value_v3(offset, -1, "", T0), T0)],
                        producer_id=pid, transactional=True)

    data = (txn(0, 7, 10) + txn(1, 8, 20) + txn(2, 9, 30) + kb.control_batch(3, 7, commit=True, ts=T0)
            + kb.control_batch(4, 8, commit=False, ts=T0)
            + kb.batch(5, [(kb.commit_key("g", "t", 1), kb.commit_value_v3(40, -1, "", T0), T0)]))
    d = decode_all(data)
    assert list(zip([r[5] for r in commit_rows(d)], d.commits.txn)) == [
        (10, "committed"), (20, "aborted"), (40, None), (30, "open")]


def test_a_record_that_does_not_decode_is_skipped_and_counted() -> None:
    bad_value = struct.pack(">hq", 3, 1)  # cut short after the offset
    data = kb.batch(0, [
        (kb.commit_key("g", "t", 0), bad_value, T0),
        (kb.commit_key("g", "t", 1), kb.commit_value_v3(5, -1, "", T0), T0),
    ])
    health = SegmentHealth()
    d = decode_all(data, health)
    assert [(r[4], r[5]) for r in commit_rows(d)] == [(1, 5)]
    assert len(set(map(len, vars(d.commits).values()))) == 1
    assert health.problems == ["1 records could not be decoded and were skipped"]


def test_reading_one_kind_gives_the_same_rows_as_reading_both() -> None:
    members = [{"member_id": "m", "client_id": "c", "host": "/h", "topics": ["t"], "assigned": {"t": [0]}}]
    data = kb.batch(0, [
        (kb.commit_key("g", "t", 0), kb.commit_value_v3(1, -1, "", T0), T0),
        (kb.group_key("g"), kb.group_value_v3("consumer", 1, "range", "m", T0, members), T0 + 1),
        (kb.commit_key("g", "t", 1), kb.commit_value_v3(2, -1, "", T0), T0 + 2),
        (kb.group_key("g"), None, T0 + 3),
    ] + [(kb.commit_key("g", "t", p), kb.commit_value_v3(p, -1, "", T0), T0 + 4) for p in range(200)])
    both = decode_all(data)
    groups_only = [g for chunk in decode_segment(data, kinds=frozenset({"group_metadata"})) for g in chunk.groups]
    commits_only = Decoded()
    for chunk in decode_segment(data, kinds=frozenset({"offset_commit"})):
        commits_only.commits.extend(chunk.commits)
        assert chunk.groups == []
    assert groups_only == both.groups and [g.log_offset for g in groups_only] == [1, 3]
    assert commit_rows(commits_only) == commit_rows(both)
