"""Share groups' dead-letter queues (KIP-1191) against Apache Kafka 4.4 and kcoord: a share consumer
(confluent-kafka's, explicit acknowledgements) rejects one record and releases another until the
group's delivery count limit archives it; each broker writes both to the group's queue topic
(``errors.deadletterqueue.topic.name``, a ``dlq.`` topic with ``errors.deadletterqueue.group.enable``),
on the partition ``source partition % queue partitions``, with the same headers, and with the
record's key and value only where ``errors.deadletterqueue.copy.record.enable`` says so. A queue
topic that is not enabled for it gets nothing on either. Topic names are the same on both brokers;
timestamps (the time of writing) are left out."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.differential.harness import Pair, Target, unique
from tests.integration.helpers.clients import set_group_configs

pytestmark = pytest.mark.differential
ck = pytest.importorskip("confluent_kafka")


def admin(t: Target) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": f"127.0.0.1:{t.port}"})


def setup(t: Target, source: str, queue: str, group: str, copy: bool, enabled: bool = True) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(t)
    topics = [NewTopic(source, 3, 1), NewTopic(queue, 2, 1, config={
        "errors.deadletterqueue.group.enable": "true" if enabled else "false"})]
    for future in client.create_topics(topics).values():
        future.result(30)
    configs = {"errors.deadletterqueue.topic.name": queue, "share.auto.offset.reset": "earliest",
               "errors.deadletterqueue.copy.record.enable": "true" if copy else "false",
               "share.delivery.count.limit": "2"}
    set_group_configs(f"127.0.0.1:{t.port}", group, configs)
    producer = ck.Producer({"bootstrap.servers": f"127.0.0.1:{t.port}"})
    for i in range(3):
        producer.produce(source, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=2,
                         headers=[("h", b"own")])
    assert producer.flush(30) == 0


KINDS = {"accept": ck.AcknowledgeType.ACCEPT, "reject": ck.AcknowledgeType.REJECT,
         "release": ck.AcknowledgeType.RELEASE}


def consume(t: Target, source: str, group: str) -> list[str]:
    """Accepts v0, rejects v1, releases v2 on each delivery (two, the limit); what it did."""
    consumer = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{t.port}", "group.id": group,
                                 "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([source])
    done: list[str] = []
    releases = 0
    deadline = time.monotonic() + 90
    try:
        while releases < 2 or len([d for d in done if not d.startswith("release")]) < 2:
            assert time.monotonic() < deadline, f"{t.name}: the share consumer got only {done}"
            for m in consumer.poll(1.0):
                if m.error() is not None:
                    continue
                value = m.value().decode()
                name = {"v0": "accept", "v1": "reject"}.get(value, "release")
                consumer.acknowledge(m, KINDS[name])
                releases += name == "release"
                done.append(f"{name} {value}")
            consumer.commit_sync()
    finally:
        consumer.close()
    return sorted(set(done))


def dead_letters(t: Target, queue: str, expect: int) -> list[dict[str, object]]:
    """Every record of the queue topic, waiting (a deadline a loaded machine meets) for ``expect``."""
    reader = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{t.port}", "group.id": unique("dlq-reader"),
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.subscribe([queue])
    got: list[dict[str, object]] = []
    deadline = time.monotonic() + (60 if expect else 10)
    try:
        while time.monotonic() < deadline and len(got) < max(expect, 1):
            m = reader.poll(0.5)
            if m is None or m.error() is not None:
                continue
            got.append({"partition": m.partition(), "key": m.key(), "value": m.value(),
                        "headers": [(k, v.decode() if v is not None else None) for k, v in m.headers() or []]})
    finally:
        reader.close()
    return sorted(got, key=lambda r: str(r["headers"]))


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "headers only"])
def test_rejected_and_exhausted_records_reach_the_queue_as_on_kafka(pair: Pair, copy: bool) -> None:
    source, group = unique("dlq-src"), unique("dlq-group")
    queue = "dlq." + source

    def scenario(t: Target) -> object:
        setup(t, source, queue, group, copy)
        return {"acknowledged": consume(t, source, group), "queue": dead_letters(t, queue, 2)}

    theirs, ours = scenario(pair.kafka), scenario(pair.kcoord)
    assert ours == theirs
    assert isinstance(theirs, dict) and len(theirs["queue"]) == 2
    rejected = next(r for r in theirs["queue"] if ("__dlq.errors.offset", "1") in r["headers"])
    assert rejected["partition"] == 0  # source partition 2 % 2
    assert ("__dlq.errors.message", "Offset rejected by client.") in rejected["headers"]
    assert (rejected["key"], rejected["value"]) == ((b"k1", b"v1") if copy else (None, None))


def test_a_queue_topic_not_enabled_for_it_gets_nothing(pair: Pair) -> None:
    source, group = unique("dlq-src"), unique("dlq-group")
    queue = "dlq." + source

    def scenario(t: Target) -> object:
        setup(t, source, queue, group, copy=True, enabled=False)
        return {"acknowledged": consume(t, source, group), "queue": dead_letters(t, queue, 0)}

    theirs, ours = scenario(pair.kafka), scenario(pair.kcoord)
    assert ours == theirs
    assert isinstance(theirs, dict) and theirs["queue"] == []
