"""Consumer groups formed by real clients: assignment, leaving, crashing, static membership, admin views."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tests.integration.helpers.clients import (
    ThreadedConsumer,
    covers_exactly,
    create_topic,
    start_consumer_process,
    wait_for,
)
from tests.integration.helpers.metrics import requests_answered

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_split_six_partitions_and_survive_a_close(broker, assignor: str) -> None:
    create_topic(broker.bootstrap, "events", 6)
    consumers = [ThreadedConsumer(broker.bootstrap, f"g-{assignor}", ["events"],
                                  **{"partition.assignment.strategy": assignor}) for _ in range(3)]
    try:
        wait_for(lambda: covers_exactly(consumers, "events", 6), 30, "3 consumers to share 6 partitions")
        consumers[0].close()
        rest = consumers[1:]
        wait_for(lambda: covers_exactly(rest, "events", 6), 30, "2 consumers to cover all partitions")
    finally:
        for c in consumers[1:]:
            c.close()


def test_killed_consumer_is_expelled_after_session_timeout(broker) -> None:
    create_topic(broker.bootstrap, "jobs", 4)
    survivor = ThreadedConsumer(broker.bootstrap, "crashy", ["jobs"])
    proc = start_consumer_process(broker.bootstrap, "crashy", "jobs")
    try:
        wait_for(lambda: len(survivor.held()) == 2, 30, "the two consumers to split 4 partitions")
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wait_for(lambda: len(survivor.held()) == 4, 30, "the survivor to take every partition")
        # Nothing told the broker: only the 6 s session timeout can have removed the member.
        assert time.monotonic() - killed_at >= 5.0
        assert "session" in broker.log().lower()
    finally:
        survivor.close()
        if proc.poll() is None:
            proc.kill()


def test_static_member_restart_keeps_partitions_without_rebalance(broker) -> None:
    create_topic(broker.bootstrap, "static", 6)
    conf = {"session.timeout.ms": 20000}
    members = [ThreadedConsumer(broker.bootstrap, "statics", ["static"], **conf, **{"group.instance.id": f"i{i}"})
               for i in range(3)]
    try:
        wait_for(lambda: covers_exactly(members, "static", 6), 40, "static members to share 6 partitions")
        before = members[2].held()
        revocations = [m.revocations for m in members[:2]]
        members[2].close()  # a static member's close sends no LeaveGroup: the group stays as it is
        restarted = ThreadedConsumer(broker.bootstrap, "statics", ["static"], **conf, **{"group.instance.id": "i2"})
        members[2] = restarted
        wait_for(lambda: restarted.held() == before, 30, "the restarted static member to get its partitions back")
        # Each member heartbeats every 300 ms: after many more heartbeats, a rebalance the rejoin
        # had started would have reached the other members.
        beats = requests_answered(broker.metrics_port, "Heartbeat")
        wait_for(lambda: requests_answered(broker.metrics_port, "Heartbeat") >= beats + 15, 60,
                 "the members to heartbeat", step=0.1, seen=lambda: requests_answered(broker.metrics_port, "Heartbeat"))
        assert [m.revocations for m in members[:2]] == revocations, "the other members saw a rebalance"
        assert covers_exactly(members, "static", 6)
    finally:
        for m in members:
            m.close()


def test_second_consumer_with_a_live_instance_id_fences_the_first(broker) -> None:
    from kclient.wire_client import WireClient
    from protocol.errors import ErrorCode
    from protocol.messages import ApiKey
    from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    from protocol.messages.heartbeat import HeartbeatRequest
    from protocol.messages.join_group import JoinGroupRequest
    from protocol.messages.sync_group import SyncGroupRequest
    from protocol.payloads.consumer_protocol import encode_assignment, encode_subscription

    create_topic(broker.bootstrap, "fence", 2)
    # The first holder of instance id "shared" speaks the raw protocol so that we can see exactly
    # what the broker answers it once a real client takes the id over.
    first = WireClient("127.0.0.1", broker.port)
    join = first.call(ApiKey.JoinGroup, 7, JoinGroupRequest(
        group_id="fenced", session_timeout_ms=20000, rebalance_timeout_ms=20000, member_id="",
        group_instance_id="shared", protocol_type="consumer",
        protocols=[JoinGroupRequest.Protocol(name="range", metadata=encode_subscription(
            ConsumerProtocolSubscription(topics=["fence"]), 0))]))
    assert join.error_code == 0
    sync = first.call(ApiKey.SyncGroup, 5, SyncGroupRequest(
        group_id="fenced", generation_id=join.generation_id, member_id=join.member_id,
        group_instance_id="shared", protocol_type="consumer", protocol_name="range",
        assignments=[SyncGroupRequest.Assignment(member_id=join.member_id, assignment=encode_assignment(
            ConsumerProtocolAssignment(assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic="fence", partitions=[0, 1])]), 0))]))
    assert sync.error_code == 0

    second = ThreadedConsumer(broker.bootstrap, "fenced", ["fence"],
                              **{"group.instance.id": "shared", "session.timeout.ms": 20000})
    try:
        wait_for(lambda: len(second.held()) == 2, 30, "the newer static member to take both partitions")
        hb = first.call(ApiKey.Heartbeat, 4, HeartbeatRequest(
            group_id="fenced", generation_id=join.generation_id, member_id=join.member_id,
            group_instance_id="shared"))
        assert hb.error_code == ErrorCode.FENCED_INSTANCE_ID
    finally:
        second.close()
        first.close()


def test_admin_clients_describe_list_and_delete_groups(broker) -> None:
    from kafka.admin import KafkaAdminClient

    create_topic(broker.bootstrap, "admin-topic", 4)
    consumers = [ThreadedConsumer(broker.bootstrap, "admin-group", ["admin-topic"], **{"client.id": f"c{i}"})
                 for i in range(2)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_for(lambda: covers_exactly(consumers, "admin-topic", 4), 30, "assignment")
        desc = admin.describe_consumer_groups(["admin-group"])["admin-group"].result(10)
        assert desc.state == ConsumerGroupState.STABLE
        assert desc.partition_assignor == "range"
        assert sorted(m.client_id for m in desc.members) == ["c0", "c1"]
        assigned = {(tp.topic, tp.partition) for m in desc.members for tp in m.assignment.topic_partitions}
        assert assigned == {("admin-topic", p) for p in range(4)}

        listed = admin.list_consumer_groups().result(10)
        assert "admin-group" in {g.group_id for g in listed.valid}

        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            kdesc = kp.describe_groups(["admin-group"])["admin-group"]
            assert kdesc["group_state"] == "Stable" and kdesc["protocol_data"] == "range"
            assert sorted(m["client_id"] for m in kdesc["members"]) == ["c0", "c1"]
            assert {m["client_host"] for m in kdesc["members"]} == {"/127.0.0.1"}
            parts = sorted(p for m in kdesc["members"] for a in m["member_assignment"]["assigned_partitions"]
                           for p in a["partitions"])
            assert parts == [0, 1, 2, 3]
            listed = {g["group_id"]: g for g in kp.list_groups()}
            assert listed["admin-group"]["group_state"] == "Stable"
        finally:
            kp.close()

        with pytest.raises(Exception, match=r"NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups(["admin-group"])["admin-group"].result(10)
    finally:
        for c in consumers:
            c.close()
    wait_for(lambda: admin.describe_consumer_groups(["admin-group"])["admin-group"].result(10).state
             == ConsumerGroupState.EMPTY, 30, "the group to become Empty")
    admin.delete_consumer_groups(["admin-group"])["admin-group"].result(10)
    assert "admin-group" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
