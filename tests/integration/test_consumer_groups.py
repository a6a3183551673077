"""Consumer groups formed by real clients: assignment, leaving, crashing, static membership, admin views."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from confluent_kafka import ConsumerGroupState, KafkaError
from confluent_kafka.admin import AdminClient

from tests.integration.clients import (
    ThreadedConsumer,
    covers_exactly,
    create_topic,
    start_consumer_process,
    wait_for,
)

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
        time.sleep(2)
        assert [m.revocations for m in members[:2]] == revocations, "the other members saw a rebalance"
        assert covers_exactly(members, "static", 6)
    finally:
        for m in members:
            m.close()


def test_second_consumer_with_a_live_instance_id_fences_the_first(broker) -> None:
    create_topic(broker.bootstrap, "fence", 2)
    errors: list[KafkaError] = []
    lock = threading.Lock()

    def on_error(err: KafkaError) -> None:
        with lock:
            errors.append(err)

    first = ThreadedConsumer(broker.bootstrap, "fenced", ["fence"], error_cb=on_error,
                             **{"group.instance.id": "shared", "session.timeout.ms": 20000})
    try:
        wait_for(lambda: len(first.held()) == 2, 30, "the first static member to be assigned")
        second = ThreadedConsumer(broker.bootstrap, "fenced", ["fence"],
                                  **{"group.instance.id": "shared", "session.timeout.ms": 20000})
        try:
            wait_for(lambda: len(second.held()) == 2, 30, "the newer static member to take over")
            wait_for(lambda: any(e.code() == KafkaError.FENCED_INSTANCE_ID for e in errors), 30,
                     "the first consumer to be fenced")
        finally:
            second.close()
    finally:
        first.stop_flag.set()
        first.thread.join(10)


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
            [kdesc] = kp.describe_consumer_groups(["admin-group"])
            assert kdesc.state == "Stable" and len(kdesc.members) == 2
            assert ("admin-group", "consumer") in kp.list_consumer_groups()
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
