"""Real clients served through the send worker (``socket.send.worker.min.round=1``: every answer of
a busy broker goes through it) form a group, consume and commit; when the worker is killed, the
broker closes its client connections, the clients reconnect, and everything goes on with the
broker writing its own answers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for
from tests.integration.helpers.metrics import scrape

pytestmark = pytest.mark.timeout(180)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % 6)
    assert producer.flush(30) == 0


def worker_pid(broker_pid: int) -> int:
    children = Path(f"/proc/{broker_pid}/task/{broker_pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_clients_are_served_through_the_worker_and_survive_its_death(broker_factory) -> None:
    broker = broker_factory({"socket.send.worker.min.round": "1"})
    assert broker.proc is not None
    create_topic(broker.bootstrap, "sent", 6)
    consumers = [ThreadedConsumer(broker.bootstrap, "through-worker", ["sent"]) for _ in range(3)]

    def values() -> set[int]:
        return {int(m[3] or b"-1") for c in consumers for m in list(c.messages)}

    try:
        wait_for(lambda: covers_exactly(consumers, "sent", 6), 60, "3 consumers to share 6 partitions")
        produce(broker.bootstrap, "sent", 0, 600)
        wait_for(lambda: values() >= set(range(600)), 60, "the first 600 records to be consumed")
        assert scrape(broker.metrics_port).count("kcoord_send_worker_answers_total") > 0, "the worker wrote none"

        os.kill(worker_pid(broker.proc.pid), signal.SIGKILL)
        wait_for(lambda: "send_worker.lost" in broker.log(), 30, "the broker to notice the worker's end")
        produce(broker.bootstrap, "sent", 600, 600)
        wait_for(lambda: values() >= set(range(1200)), 90, "the next 600 records to be consumed")
        wait_for(lambda: covers_exactly(consumers, "sent", 6), 60, "the group to hold every partition again")
        for c in consumers:
            held = sorted(c.held())
            if held:
                c.commit([TopicPartition(t, p, 200) for t, p in held])
    finally:
        for c in consumers:
            c.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("through-worker")])
    got = {(tp.partition, tp.offset) for tp in listed["through-worker"].result(20).topic_partitions}
    assert got == {(p, 200) for p in range(6)}
