"""KIP-848 consumer groups with librdkafka's `group.protocol=consumer`: the broker assigns."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for

pytestmark = pytest.mark.timeout(180)

# Short timings so that reconciliation takes seconds, not the production defaults' minutes.
FAST = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}


def consumer(broker, group: str, topics: list[str], **conf) -> ThreadedConsumer:
    return ThreadedConsumer(broker.bootstrap, group, topics, **{"group.protocol": "consumer", **conf})


def test_three_members_split_six_partitions_and_the_others_take_over_after_a_close(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "events", 6)
    members = [consumer(broker, "kip848", ["events"]) for _ in range(3)]
    try:
        wait_for(lambda: covers_exactly(members, "events", 6) and all(len(m.held()) == 2 for m in members), 60,
                 "3 members to hold 2 partitions each")
        members[0].close()
        rest = members[1:]
        wait_for(lambda: covers_exactly(rest, "events", 6) and all(len(m.held()) == 3 for m in rest), 60,
                 "the 2 others to hold 3 partitions each")
    finally:
        for m in members[1:]:
            m.close()


def test_batched_assignments_still_split_the_partitions_and_the_broker_says_so(broker_factory) -> None:
    """Kafka 4.4's default assignment interval (1 s, KIP-1263; the test brokers run 0): members
    joining within it wait for a heartbeat after it (the group Assigning meanwhile), librdkafka
    copes, and the three split six partitions, the group Stable."""
    broker = broker_factory({**FAST, "group.consumer.assignment.interval.ms": "1000"})
    create_topic(broker.bootstrap, "batched", 6)
    members = [consumer(broker, "kip1263", ["batched"]) for _ in range(3)]
    try:
        wait_for(lambda: covers_exactly(members, "batched", 6) and all(len(m.held()) == 2 for m in members), 60,
                 "3 members to hold 2 partitions each")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = admin.describe_consumer_groups(["kip1263"])["kip1263"].result(20)
        assert described.type == ConsumerGroupType.CONSUMER and described.state == ConsumerGroupState.STABLE
    finally:
        for m in members:
            m.close()


def test_commits_with_the_member_epoch_are_kept(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "orders", 2)
    member = consumer(broker, "committer", ["orders"])
    try:
        wait_for(lambda: len(member.held()) == 2, 60, "the member to hold both partitions")
        # librdkafka commits with OffsetCommit v9 and its member epoch; a wrong epoch would fail.
        member.commit([TopicPartition("orders", 0, 17), TopicPartition("orders", 1, 4)])
    finally:
        member.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("committer")])
    got = {(tp.partition, tp.offset) for tp in listed["committer"].result(20).topic_partitions}
    assert got == {(0, 17), (1, 4)}


def test_a_static_member_restarting_gets_its_partitions_back(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "static", 4)
    members = [consumer(broker, "statics", ["static"], **{"group.instance.id": f"i{i}"}) for i in range(2)]
    try:
        wait_for(lambda: covers_exactly(members, "static", 4) and all(len(m.held()) == 2 for m in members), 60,
                 "2 static members to hold 2 partitions each")
        before = members[1].held()
        # The first to join held all four until the second arrived: count only what follows.
        revoked = members[0].revocations
        members[1].close()  # a static member's close is a temporary leave (epoch -2)
        members[1] = consumer(broker, "statics", ["static"], **{"group.instance.id": "i1"})
        wait_for(lambda: members[1].held() == before, 60, "the restarted instance to get its partitions back")
        assert members[0].revocations == revoked
    finally:
        for m in members:
            m.close()


def test_a_regex_subscription_picks_up_a_topic_created_afterwards(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "metrics-a", 2)
    member = consumer(broker, "regex", ["^metrics-.*"])
    try:
        wait_for(lambda: member.held() == {("metrics-a", 0), ("metrics-a", 1)}, 60, "the matching topic")
        create_topic(broker.bootstrap, "metrics-b", 1)
        wait_for(lambda: ("metrics-b", 0) in member.held(), 60, "the topic created afterwards")
    finally:
        member.close()


def test_admin_client_describes_and_lists_it_as_a_consumer_group(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "watched", 2)
    member = consumer(broker, "described", ["watched"], **{"client.id": "watcher"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_for(lambda: len(member.held()) == 2, 60, "the member to hold both partitions")
        group = admin.describe_consumer_groups(["described"])["described"].result(20)
        assert group.type == ConsumerGroupType.CONSUMER
        assert group.state == ConsumerGroupState.STABLE
        (described,) = group.members
        assert described.client_id == "watcher"
        assert {(tp.topic, tp.partition) for tp in described.assignment.topic_partitions} == {
            ("watched", 0), ("watched", 1)}
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(20)
        assert [(g.group_id, g.type) for g in listed.valid] == [("described", ConsumerGroupType.CONSUMER)]
        assert admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(20).valid == []
    finally:
        member.close()


def test_partitions_added_to_a_topic_are_assigned_without_any_member_doing_anything(broker_factory) -> None:
    broker = broker_factory(FAST)
    create_topic(broker.bootstrap, "growing", 2)
    members = [consumer(broker, "growers", ["growing"], **{"topic.metadata.refresh.interval.ms": 500})
               for _ in range(2)]
    try:
        wait_for(lambda: covers_exactly(members, "growing", 2), 60, "2 members to hold 1 partition each")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("growing", 4)])["growing"].result(15)
        wait_for(lambda: covers_exactly(members, "growing", 4) and all(len(m.held()) == 2 for m in members), 60,
                 "the new partitions to be shared out")
    finally:
        for m in members:
            m.close()


class Journal:
    """When each member got and gave up each partition, in the order it happened. A member logs a
    revocation in its callback, before it acknowledges it to the broker, and a partition it gets
    can only have been released before: so two members holding one partition in this journal held
    it at the same time for real."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, set[tuple[str, int]]]] = []

    def log(self, member: str, kind: str, parts: set[tuple[str, int]]) -> None:
        with self.lock:
            self.entries.append((member, kind, set(parts)))

    def overlaps(self) -> list[str]:
        owner: dict[tuple[str, int], str] = {}
        found = []
        with self.lock:
            for member, kind, parts in self.entries:
                for tp in parts:
                    if kind == "assign":
                        if owner.get(tp, member) != member:
                            found.append(f"{tp} given to {member} while {owner[tp]} held it")
                        owner[tp] = member
                    elif owner.get(tp) == member:
                        del owner[tp]
        return found


class TrackedConsumer(ThreadedConsumer):
    def __init__(self, journal: Journal, name: str, bootstrap: str, group: str, topics: list[str],
                 **conf: object) -> None:
        self.journal, self.name = journal, name
        super().__init__(bootstrap, group, topics, **conf)

    def _on_assign(self, consumer: object, parts: list[TopicPartition]) -> None:
        self.journal.log(self.name, "assign", {(p.topic, p.partition) for p in parts})
        super()._on_assign(consumer, parts)

    def _on_revoke(self, consumer: object, parts: list[TopicPartition]) -> None:
        # An eager (classic) member gives up everything, whatever librdkafka lists.
        gone = {(p.topic, p.partition) for p in parts} if self.cooperative else self.held()
        self.journal.log(self.name, "revoke", gone)
        super()._on_revoke(consumer, parts)

    def close(self) -> None:
        # The poll loop stops first: from then on this member consumes nothing, so its partitions
        # are released in the journal before the broker can hand them to anyone else.
        self.stop_flag.set()
        self.thread.join(15)
        self.journal.log(self.name, "revoke", self.held())
        self.consumer.close()


# Only the range assignor: librdkafka's cooperative-sticky assignor writes its own state as user data
# into each assignment, and Kafka 4.4 refuses to upgrade a classic group whose assignments carry user
# data (GROUP_ID_NOT_FOUND to the consumer-protocol member, fatal to librdkafka), as kcoord does
# (tests/differential/test_group_upgrade_clients.py). Whether the refusal meets the new member
# depends on the moment it arrives (while a rebalance has cleared the assignments it does not), so a
# rolling upgrade of such a group cannot be a test that passes.
@pytest.mark.parametrize("strategy", ["range"])
def test_a_classic_group_rolls_to_the_consumer_protocol_one_member_at_a_time_and_back(broker_factory,
                                                                                        strategy: str) -> None:
    broker = broker_factory({**FAST, "group.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, "roll", 6)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(6):
        for n in range(30):
            producer.produce("roll", value=b"%d" % n, partition=p)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    journal = Journal()
    names = iter(f"m{i}" for i in range(100))

    def start(protocol: str) -> TrackedConsumer:
        conf = {"group.protocol": protocol}
        if protocol == "classic":
            # Eager (range) members give everything up at each rebalance; cooperative ones keep
            # their partitions, so the consumer-protocol members must wait for them to revoke.
            conf["partition.assignment.strategy"] = strategy
        return TrackedConsumer(journal, next(names), broker.bootstrap, "rolling", ["roll"], **conf)

    def group_type() -> ConsumerGroupType:
        return admin.describe_consumer_groups(["rolling"])["rolling"].result(20).type

    members = [start("classic") for _ in range(3)]
    try:
        wait_for(lambda: covers_exactly(members, "roll", 6), 60, "3 classic members to share the topic")
        assert group_type() == ConsumerGroupType.CLASSIC
        for m in members:
            m.commit([TopicPartition(t, p, 10 + p) for t, p in sorted(m.held())])
        first = list(members)
        for target, kind in (("consumer", ConsumerGroupType.CONSUMER), ("classic", ConsumerGroupType.CLASSIC)):
            for i in range(3):
                members[i].close()
                members[i] = start(target)
                wait_for(lambda: covers_exactly(members, "roll", 6) and all(len(m.held()) == 2 for m in members),
                         90, f"member {i} on the {target} protocol to get its share")
                assert journal.overlaps() == []
            wait_for(lambda kind=kind: group_type() == kind, 30, f"the group to be a {target} group")
        # Every member started after the commit resumed from the committed offsets.
        later = [m for m in members if m not in first]
        wait_for(lambda: {p for m in later for _, p, _, _ in m.messages} == set(range(6)), 60,
                 "the last members to consume from every partition")
    finally:
        for m in members:
            m.close()
    assert journal.overlaps() == []
    resumed = [(p, o) for m in members if m not in first for _, p, o, _ in m.messages]
    assert resumed and all(o >= 10 + p for p, o in resumed), resumed[:10]
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("rolling")])
    got = {(tp.partition, tp.offset) for tp in listed["rolling"].result(20).topic_partitions}
    assert got == {(p, 10 + p) for p in range(6)}
