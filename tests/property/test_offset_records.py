"""The packed OffsetCommit key/value bytes equal what the message declarations encode."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import EncodeError
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.payloads.offsets_log_records import (
    OffsetCommitRecord,
    decode_record,
    encode_record,
    encode_record_generic,
)

names = st.text(max_size=300)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def commits(draw: st.DrawFn) -> OffsetCommitRecord:
    value = None
    if draw(st.booleans()):
        value = OffsetCommitValue(
            offset=draw(int64),
            leader_epoch=draw(st.integers(-(2**31), 2**31 - 1)),
            metadata=draw(st.text(max_size=5000)),
            commit_timestamp=draw(int64),
            expire_timestamp=draw(st.one_of(st.just(-1), int64)),
        )
    return OffsetCommitRecord(draw(names), draw(names), draw(st.integers(-(2**31), 2**31 - 1)), value)


@given(commits())
def test_packed_layout_matches_declaration(record: OffsetCommitRecord) -> None:
    assert encode_record(record) == encode_record_generic(record)


@given(commits())
def test_packed_layout_reads_back(record: OffsetCommitRecord) -> None:
    key, value = encode_record(record)
    back = decode_record(key, value)
    assert isinstance(back, OffsetCommitRecord)
    assert (back.group, back.topic, back.partition) == (record.group, record.topic, record.partition)
    if record.value is None:
        assert back.value is None
    else:
        assert back.value is not None
        assert back.value.offset == record.value.offset
        assert back.value.metadata == record.value.metadata
        assert back.value.commit_timestamp == record.value.commit_timestamp
        assert back.value.expire_timestamp == record.value.expire_timestamp
        # Value v1 has no leader epoch; v3 keeps it.
        expected_epoch = record.value.leader_epoch if record.value.expire_timestamp == -1 else -1
        assert back.value.leader_epoch == expected_epoch


@pytest.mark.parametrize("encode", [encode_record, encode_record_generic])
def test_oversized_names_are_refused_like_the_declaration(encode: Callable[..., object]) -> None:
    with pytest.raises(EncodeError):
        encode(OffsetCommitRecord("g" * 40000, "t", 0, None))
