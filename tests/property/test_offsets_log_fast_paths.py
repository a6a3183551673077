"""The hand-packed readers of ``__consumer_offsets`` records agree with ``protocol.payloads.offsets_log_records``:
the analysis decoder's struct path for OffsetCommitValue v1 and v3, and the replay plan's glance
at a key's record type and group. (The packed writer is checked in test_offset_records.py.)"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from analytics.decoder import Decoded, decode_segment
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.payloads.offsets_log_records import (
    OffsetCommitRecord,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_value,
    key_group,
)
from protocol.record_batch import build_simple_batch

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=40)


@given(version=st.sampled_from([1, 3]), offset=int64, epoch=int32, metadata=st.text(max_size=3000),
       commit_ts=int64, expire_ts=int64, key_version=st.sampled_from([0, 1]))
def test_packed_value_reads_equal_the_home(version: int, offset: int, epoch: int, metadata: str, commit_ts: int,
                                           expire_ts: int, key_version: int) -> None:
    value = encode_value(OffsetCommitValue, OffsetCommitValue(
        offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=commit_ts,
        expire_timestamp=expire_ts), version)
    key = encode_offset_commit_key("g", "t", 7, key_version)
    out = Decoded()
    for chunk in decode_segment(build_simple_batch([(key, value, 1)], 40)):
        out.commits.extend(chunk.commits)
        assert chunk.undecodable == 0
    c = out.commits
    (row,) = zip(c.group, c.topic, c.partition, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp,
                 c.expire_timestamp)
    _, home = decode_offset_commit_value(value)
    # The rows show a negative epoch or expiry ("none") as null.
    assert row == ("g", "t", 7, home.offset, home.leader_epoch if home.leader_epoch >= 0 else None, home.metadata,
                   home.commit_timestamp, home.expire_timestamp if home.expire_timestamp >= 0 else None)


@given(group=names, topic=names, partition=int32, key_version=st.sampled_from([0, 1, 2]))
def test_replay_plan_key_glance_equals_the_home(group: str, topic: str, partition: int, key_version: int) -> None:
    key = encode_group_metadata_key(group) if key_version == 2 else \
        encode_offset_commit_key(group, topic, partition, key_version)
    version, decoded = decode_key(key)
    assert key_group(key) == (version, decoded.group.encode())


def _generic_offset_commit(key: bytes, value: bytes | None) -> tuple[Any, ...]:
    _version, k = decode_key(key)
    v = None if value is None else decode_offset_commit_value(value)[1]
    return (k.group, k.topic, k.partition, None if v is None else v.to_dict())


@given(version=st.integers(0, 4), offset=int64, epoch=int32, metadata=st.text(max_size=300), commit_ts=int64,
       expire_ts=int64, key_version=st.sampled_from([0, 1]), group=names, topic=names, partition=int32,
       tombstone=st.booleans(), trailing=st.binary(max_size=3))
def test_replay_reads_offset_commits_as_the_generic_codec(version: int, offset: int, epoch: int, metadata: str,
                                                          commit_ts: int, expire_ts: int, key_version: int,
                                                          group: str, topic: str, partition: int, tombstone: bool,
                                                          trailing: bytes) -> None:
    """decode_record's struct path for OffsetCommit records gives what the generic codec gives."""
    key = encode_offset_commit_key(group, topic, partition, key_version)[:-4] + partition.to_bytes(4, "big",
                                                                                                   signed=True)
    value = None if tombstone else encode_value(OffsetCommitValue, OffsetCommitValue(
        offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=commit_ts,
        expire_timestamp=expire_ts), version) + trailing
    rec = decode_record(key + trailing, value)
    assert isinstance(rec, OffsetCommitRecord)
    assert (rec.group, rec.topic, rec.partition, None if rec.value is None else rec.value.to_dict()) == \
        _generic_offset_commit(key + trailing, value)


@given(key=st.binary(max_size=40), value=st.one_of(st.none(), st.binary(max_size=40)),
       key_version=st.sampled_from([b"\x00\x00", b"\x00\x01"]),
       value_version=st.sampled_from([b"", b"\x00\x01", b"\x00\x03"]))
def test_replay_of_damaged_offset_commits_fails_as_the_generic_codec(key: bytes, value: bytes | None,
                                                                     key_version: bytes, value_version: bytes) -> None:
    key = key_version + key
    value = None if value is None else value_version + value
    try:
        expected: Any = _generic_offset_commit(key, value)
    except Exception as exc:  # whatever the codec raises, the replay raises too
        expected = type(exc)
    try:
        rec = decode_record(key, value)
        assert isinstance(rec, OffsetCommitRecord)
        got: Any = (rec.group, rec.topic, rec.partition, None if rec.value is None else rec.value.to_dict())
    except Exception as exc:
        got = type(exc)
    assert got == expected
