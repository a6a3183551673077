"""The error a response reports to metrics: its own code, or the first one nested in it."""

from __future__ import annotations

from broker.network.reply import Reply, first_error_code
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.offset_commit import OffsetCommitResponse
from protocol.messages.offset_fetch import OffsetFetchResponse

T = OffsetCommitResponse.Topic
P = OffsetCommitResponse.Topic.Partition


def test_top_level_code() -> None:
    assert first_error_code(HeartbeatResponse(error_code=27)) == 27
    assert first_error_code(HeartbeatResponse(error_code=0)) == 0


def test_first_nested_code_depth_first() -> None:
    response = OffsetCommitResponse(topics=[
        T(name="a", partitions=[P(partition_index=0, error_code=0), P(partition_index=1, error_code=0)]),
        T(name="b", partitions=[P(partition_index=0, error_code=3), P(partition_index=1, error_code=28)]),
    ])
    assert first_error_code(response) == 3
    assert first_error_code(OffsetCommitResponse(topics=[T(name="a", partitions=[P(partition_index=0)])])) == 0


def test_a_reply_reports_the_top_level_code_where_the_api_has_one() -> None:
    response = OffsetFetchResponse(error_code=16, topics=[OffsetFetchResponse.Topic(name="t", partitions=[
        OffsetFetchResponse.Topic.Partition(partition_index=0, error_code=3)])])
    reply = Reply(OffsetFetchResponse, 7, 42, flexible_header=True)
    reply.set(response)
    assert reply.error_code == 16
    assert reply.ready
    nested = Reply(OffsetCommitResponse, 8, 43, flexible_header=True)
    nested.set(OffsetCommitResponse(topics=[T(name="a", partitions=[P(partition_index=0, error_code=28)])]))
    assert nested.error_code == 28
