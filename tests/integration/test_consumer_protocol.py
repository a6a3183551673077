"""KIP-848 consumer groups with librdkafka's `group.protocol=consumer`: the broker assigns."""

from __future__ import annotations

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.integration.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for

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
