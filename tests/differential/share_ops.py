"""Share-group heartbeats, share sessions (ShareFetch, ShareAcknowledge) and share-partition
start offsets as the differential tests send them."""

from __future__ import annotations

import time
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from tests.differential.consumer_ops import topic_names

HB_V = 1
FETCH_V = 1
ACK_V = 1
ACCEPT, RELEASE, REJECT = 1, 2, 3


def heartbeat(c: WireClient, group: str, mid: str, epoch: int, topics: list[str] | None = None) -> object:
    answer: ShareGroupHeartbeatResponse = c.call(76, HB_V, ShareGroupHeartbeatRequest(
        group_id=group, member_id=mid, member_epoch=epoch, subscribed_topic_names=topics))
    names = topic_names(c) if answer.assignment is not None else {}
    return {"error_code": answer.error_code, "member_id": answer.member_id, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms,
            "assignment": None if answer.assignment is None else {
                names.get(t.topic_id, "?"): sorted(t.partitions) for t in answer.assignment.topic_partitions}}


def until_assigned(c: WireClient, group: str, mid: str, epoch: int) -> dict[str, object]:
    """Heartbeats until the member is given partitions: a share group assigns a partition only once
    its share state is initialized, which follows the first heartbeat that needs it."""
    deadline = time.monotonic() + 60
    while True:
        answer = heartbeat(c, group, mid, epoch)
        if answer["error_code"] or answer["assignment"] or time.monotonic() > deadline:  # type: ignore[index]
            return answer  # type: ignore[return-value]
        epoch = answer["member_epoch"]  # type: ignore[index]
        time.sleep(0.1)


class Session:
    def __init__(self, c: WireClient, group: str, member: str, topic_id: bytes) -> None:
        self.c, self.group, self.member, self.topic_id = c, group, member, topic_id
        self.epoch = 0

    def fetch(self, acks: list[tuple[int, int, list[int]]] | None = None, *, epoch: int | None = None,
              wait_ms: int = 0, member: str | None = None) -> ShareFetchResponse:
        P = ShareFetchRequest.FetchTopic.FetchPartition
        answer: ShareFetchResponse = self.c.call(78, FETCH_V, ShareFetchRequest(
            group_id=self.group, member_id=member or self.member,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
            topics=[ShareFetchRequest.FetchTopic(topic_id=self.topic_id, partitions=[P(
                partition_index=0, acknowledgement_batches=[
                    P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                    for f, last, types in acks or []])])],
            forgotten_topics_data=[]))
        if epoch is None and answer.error_code == 0:
            self.epoch += 1
        return answer

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], *, epoch: int | None = None) -> Any:
        P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
        answer = self.c.call(79, ACK_V, ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member, share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=self.topic_id, partitions=[P(
                partition_index=0, acknowledgement_batches=[
                    P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=types)
                    for f, last, types in acks])])]))
        if epoch is None and answer.error_code == 0:
            self.epoch += 1
        return answer

    def until_acquired(self) -> ShareFetchResponse:
        deadline = time.monotonic() + 60
        while True:
            answer = self.fetch(wait_ms=500)
            acquired = [a for t in answer.responses for p in t.partitions for a in p.acquired_records]
            if answer.error_code or acquired or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)


def wait_started(c: WireClient, group: str, topic: str, seconds: float) -> int:
    """The share partition's start offset once it has one (DescribeShareGroupOffsets), or -1
    after ``seconds``."""
    R = DescribeShareGroupOffsetsRequest.Group
    deadline = time.monotonic() + seconds
    while True:
        answer = c.call(90, 0, DescribeShareGroupOffsetsRequest(groups=[R(group_id=group, topics=[
            R.Topic(topic_name=topic, partitions=[0])])]))
        start: int = answer.groups[0].topics[0].partitions[0].start_offset if answer.groups[0].topics else -1
        if start >= 0 or time.monotonic() > deadline:
            return start
        time.sleep(0.1)
