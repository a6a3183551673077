"""Consumer-group (KIP-848) members and topics as the differential tests drive them."""

from __future__ import annotations

import uuid

from kclient.wire_client import WireClient
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.differential.harness import unique
from tests.differential.ops import create_topic

HB_V = 1


TP = ConsumerGroupHeartbeatRequest.TopicPartitions


def member_id(seed: str) -> str:
    """A member id as the Java client makes one (a base64 UUID), the same on both brokers."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid5(uuid.NAMESPACE_OID, seed).bytes).decode().rstrip("=")


class Member:
    """One KIP-848 consumer: its id, epoch and the partitions it owns (by topic id)."""

    def __init__(self, c: WireClient, group: str, mid: str, topics: list[str] | None = None,
                 regex: str | None = None, instance: str | None = None) -> None:
        self.c, self.group, self.mid = c, group, mid
        self.topics, self.regex, self.instance = topics, regex, instance
        self.epoch = 0
        self.owned: list[TP] = []

    def heartbeat(self, *, full: bool = False, epoch: int | None = None, **fields: object) -> ConsumerGroupHeartbeatResponse:
        joining = self.epoch == 0 or full
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.mid, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance, rebalance_timeout_ms=30000 if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=None, topic_partitions=self.owned if joining or self.epoch else None)
        for k, v in fields.items():
            setattr(request, k, v)
        answer: ConsumerGroupHeartbeatResponse = self.c.call(68, HB_V, request)
        if answer.error_code == 0 and epoch is None:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                # The member takes what it is given at once (it has nothing to commit first).
                self.owned = [TP(topic_id=t.topic_id, partitions=sorted(t.partitions))
                              for t in answer.assignment.topic_partitions]
        return answer


def topic_names(c: WireClient) -> dict[bytes, str]:
    from protocol.messages.metadata import MetadataRequest

    meta = c.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {t.topic_id: t.name for t in meta.topics}


def create_topics(c: WireClient, topics: dict[str, int]) -> None:
    """Creates the topics and waits until the group coordinator sees them: Kafka's coordinator
    learns of a new topic a little after Metadata shows it, and a member joining in between would
    get a smaller assignment and one more epoch bump. A throwaway member subscribed to them
    heartbeats until it is given every partition, then leaves (setup, not comparison)."""
    import time

    for name, partitions in topics.items():
        create_topic(c, name, partitions)
    probe = unique("probe")
    m = Member(c, probe, member_id(probe), topics=sorted(topics))
    deadline = time.monotonic() + 60
    while True:
        m.heartbeat()
        names = topic_names(c)
        owned = {names.get(t.topic_id): len(t.partitions) for t in m.owned}
        if owned == topics or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    m.heartbeat(epoch=-1)
    assert owned == topics, f"the group coordinator does not see {topics}: {owned}"


def assignment_by_name(c: WireClient, answer: ConsumerGroupHeartbeatResponse) -> object:
    """The heartbeat answer with its assignment as {topic name: partitions}."""
    names = topic_names(c) if answer.assignment is not None else {}
    return {"error_code": answer.error_code, "member_id": answer.member_id, "member_epoch": answer.member_epoch,
            "heartbeat_interval_ms": answer.heartbeat_interval_ms,
            "assignment": None if answer.assignment is None else {
                names.get(t.topic_id, "?"): sorted(t.partitions) for t in answer.assignment.topic_partitions}}


def describe(c: WireClient, *groups: str) -> ConsumerGroupDescribeResponse:
    answer: ConsumerGroupDescribeResponse = c.call(69, 0, ConsumerGroupDescribeRequest(group_ids=list(groups)))
    for g in answer.groups:
        for m in g.members:
            for a in (m.assignment, m.target_assignment):
                if a is not None:
                    a.topic_partitions.sort(key=lambda t: t.topic_name)
                    for t in a.topic_partitions:
                        t.partitions.sort()
                        t.topic_id = b""  # compared by name: each broker makes its own ids
            m.subscribed_topic_names.sort()
    return answer
