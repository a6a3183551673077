"""The rebalance journal with real clients: each way a member goes (poll loop stalls, SIGKILL, close
with a reason, static restart, a topic growing) is recorded with its cause, readable by any Kafka
client from `__kcoord_group_events`, and the stall the journal measured matches what the clients
saw, within a heartbeat interval."""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kclient.group_history import read_events
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic, start_consumer_process, wait_for
from tests.integration.helpers.journal import (
    consumer,
    groups_command,
    history,
    member_closing_with_a_reason,
    member_killed_with_sigkill,
    member_stops_polling,
    partition_count_change,
)

pytestmark = pytest.mark.timeout(120)

# The client learns of a rebalance at its next heartbeat and of its end when its SyncGroup returns:
# its own view of a stall (revoke to assign) is inside the journal's, shorter by up to a heartbeat
# interval plus the time its rejoin takes on a loaded machine.


























def static_member_restarting(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "static-t", 2)
    first = start_consumer_process(broker.bootstrap, "static-g", "static-t", instance_id="worker-1")
    assert first.stdout is not None and "ASSIGNED" in first.stdout.readline()
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    since = int(time.time() * 1000)
    second = start_consumer_process(broker.bootstrap, "static-g", "static-t", instance_id="worker-1")
    try:
        assert second.stdout is not None and "ASSIGNED" in second.stdout.readline()

        def recent() -> list[dict[str, Any]]:
            return [e for e in read_events(broker.bootstrap, "static-g") if e["timestamp"] >= since]

        # The journal is readable once flushed (every log.flush.interval.ms).
        wait_for(lambda: any(e["cause"] == "static-member-rejoined" for e in recent()), 10, "the rejoin")
        events = recent()
        [rejoined] = [e for e in events if e["cause"] == "static-member-rejoined"]
        assert rejoined["instance_id"] == "worker-1" and rejoined["avoided_rebalance"] is True
        assert not [e for e in events if e["kind"] == "rebalance"]
        assert "static-member-rejoined" in history(broker, "static-g")
    finally:
        second.kill()
        second.wait(10)




def test_a_member_closing_with_a_reason(broker: BrokerProcess) -> None:
    member_closing_with_a_reason(broker)


def test_a_member_killed_with_sigkill_times_out(broker: BrokerProcess) -> None:
    member_killed_with_sigkill(broker)


def test_a_member_that_stops_polling_past_max_poll_interval(broker: BrokerProcess) -> None:
    member_stops_polling(broker)


def test_a_static_member_restarting_avoids_a_rebalance(broker: BrokerProcess) -> None:
    static_member_restarting(broker)


def test_a_partition_count_change(broker: BrokerProcess) -> None:
    partition_count_change(broker)


def test_any_kafka_client_reads_the_journal_and_the_doctor_speaks(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "churn-t", 2)
    for _ in range(3):  # the same client joining and leaving, over and over
        c = consumer(broker, "churn-g", "churn-t", **{"client.id": "flaky-worker"})
        wait_for(lambda c=c: len(c.held()) == 2, 20, "the member to get the topic")
        c.close()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "journal-reader",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.assign([TopicPartition("__kcoord_group_events", 0, 0)])
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len([e for e in seen if e["kind"] == "rebalance"]) < 3:
        msg = reader.poll(0.2)
        if msg is not None and msg.error() is None:
            assert json.loads(msg.key()) == {"version": 1, "group": json.loads(msg.value())["group"]}
            seen.append(json.loads(msg.value()))
    reader.close()
    assert len([e for e in seen if e["kind"] == "rebalance" and e["group"] == "churn-g"]) >= 3
    out = groups_command(broker, "--doctor", "--group", "churn-g")
    assert "[member-churn]" in out and "flaky-worker" in out and "group.instance.id" in out
