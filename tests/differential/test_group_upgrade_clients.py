"""A classic group rolled over to the consumer protocol by real clients, on Apache Kafka and on
kcoord: three librdkafka members (range) hold a 6-partition topic 2/2/2; each is closed and at once
replaced by a member with ``group.protocol=consumer``. The first one converts the live group (Kafka's
``convertToConsumerGroup``); the group must end 2/2/2 with no client error and every offset kept
on both brokers (docs/differential.md, "Classic groups rolled over to the consumer protocol")."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.differential.harness import Pair, Target
from tests.integration.helpers.cluster import wait_for

pytestmark = pytest.mark.differential

PARTITIONS = 6
RECORDS = 60


class Member(threading.Thread):
    """A consumer polling until told to stop, with what it holds and every error it was given."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, protocol: str) -> None:
        super().__init__(daemon=True, name=name)
        self.conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                     "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "consumer":
            self.conf["group.protocol"] = "consumer"
        else:
            self.conf.update({"partition.assignment.strategy": "range", "session.timeout.ms": 10000,
                              "heartbeat.interval.ms": 1000})
        self.topic = topic
        self.held: set[int] = set()
        self.errors: list[str] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        def assigned(c: Any, parts: list[Any]) -> None:
            self.held |= {p.partition for p in parts}

        def revoked(c: Any, parts: list[Any]) -> None:
            self.held -= {p.partition for p in parts}

        consumer = Consumer(self.conf)
        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        try:
            while not self.stop_flag.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.errors.append(msg.error().name())
                else:  # what it read, committed at once: offsets the next owner must start from
                    consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()


def roll_over(t: Target) -> object:
    bootstrap = f"{t.host}:{t.port}"
    topic, group = f"roll-{uuid.uuid4().hex[:8]}", f"roll-group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    members = [Member(bootstrap, group, topic, f"classic-{i}", "classic") for i in range(3)]
    for m in members:
        m.start()

    def spread() -> list[int]:
        return sorted(len(m.held) for m in members if m.is_alive())

    steps: list[object] = []
    try:
        wait_for(lambda: spread() == [2, 2, 2], 90, "the classic members to hold 2/2/2", seen=spread)
        for i in range(3):
            members[i].stop_flag.set()
            members[i].join(30)
            members[i] = Member(bootstrap, group, topic, f"consumer-{i}", "consumer")
            members[i].start()
            wait_for(lambda: spread() == [2, 2, 2] and len({p for m in members for p in m.held}) == PARTITIONS,
                     90, f"2/2/2 after replacing member {i}", seen=lambda: [sorted(m.held) for m in members])
            steps.append(spread())
        wait_for(lambda: all_committed(bootstrap, group, topic), 60, "every record's offset committed")
        errors = sorted({e for m in members for e in m.errors})
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(30)
    return {"spreads": steps, "errors": errors, "committed": all_committed(bootstrap, group, topic)}


def all_committed(bootstrap: str, group: str, topic: str) -> bool:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        reader.close()
    return sum(tp.offset for tp in got if tp.offset > 0) == RECORDS


def test_classic_members_replaced_one_at_a_time_by_consumer_protocol_members(pair: Pair) -> None:
    answers = pair.compare(roll_over)
    assert answers == {"spreads": [[2, 2, 2]] * 3, "errors": [], "committed": True}


def test_a_classic_group_preparing_a_rebalance_is_upgraded_with_the_assignments_it_held(pair: Pair) -> None:
    """Kafka's rule for the moment of an upgrade (``GroupMetadataManager.prepareRebalance`` and
    ``ConsumerGroup.fromClassicGroup``): a stable classic group that starts a rebalance keeps its
    members' last assignments (only a rebalance that interrupts CompletingRebalance clears them), so
    a consumer-protocol member joining it then converts it with what each member held; a classic
    member's JoinGroup waiting in that rebalance is answered REBALANCE_IN_PROGRESS."""
    from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    from protocol.payloads.consumer_protocol import encode_assignment, encode_subscription
    from tests.differential.consumer_ops import Member, assignment_by_name, create_topics, member_id
    from tests.differential.harness import retry, unique
    from tests.differential.ops import JOIN_V, describe, join, join_request, stable_member

    group, topic = unique("upgrade-preparing"), unique("upgrade-preparing-t")

    def scenario(t: Target) -> object:
        c, a, b = t.client("consumer"), t.client("classic-a"), t.client("classic-b")
        create_topics(c, {topic: 2})
        subscription = encode_subscription(ConsumerProtocolSubscription(topics=[topic]), 1)
        held = encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0, 1])]), 1)
        first = stable_member(a, group, held, metadata=subscription)
        required = join(b, group, "", metadata=subscription)  # MEMBER_ID_REQUIRED: its id
        waiting = b.send(11, JOIN_V, join_request(group, required.member_id, metadata=subscription))
        preparing = retry(lambda: describe(c, group), lambda r: r.groups[0].group_state == "PreparingRebalance")
        m = Member(c, group, member_id(group), topics=[topic])
        answer = m.heartbeat()
        parked = b.recv(11, JOIN_V, waiting)
        described = c.call(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
        members = {mem.member_id: sorted(p for tp in mem.assignment.topic_partitions for p in tp.partitions)
                   for mem in described.groups[0].members}
        ids = [first.member_id, required.member_id, m.mid]
        return {"member_ids": ids,
                "before": preparing.groups[0].group_state, "heartbeat": assignment_by_name(c, answer),
                "parked join": parked.error_code, "group": (described.groups[0].error_code,
                                                            described.groups[0].group_epoch),
                "assignments (a, b, the new member)": [members.get(mid) for mid in ids]}

    answers = pair.compare(scenario)
    assert isinstance(answers, dict)
    assert answers["parked join"] == 27  # REBALANCE_IN_PROGRESS
    assert answers["assignments (a, b, the new member)"] == [[0, 1], [], []]  # what each held
