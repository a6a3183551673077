"""Transactional producers and read_committed consumers of confluent-kafka."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.integration.helpers.cluster import metadata_leaders, wait_for


def consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed", **conf})


def txn_producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf})
    p.init_transactions(30)
    return p


def _ends(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """Each partition's end as a fresh client of ``isolation`` sees it (read_committed: the last
    stable offset; read_uncommitted: the high watermark). A client per call: librdkafka keeps a
    partition without a leader in its metadata cache as a lasting error, and in a cluster a node
    answers so while a partition changes hands. Raises KafkaException while the topic has a
    partition without an answer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        meta = c.list_topics(topic, timeout=5).topics[topic]
        if meta.error is not None or not meta.partitions:
            raise KafkaException(meta.error or KafkaError(KafkaError._UNKNOWN_PARTITION))
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)[1]
                for p in sorted(meta.partitions)}
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[bytes]:
    """Every value a read_committed consumer reads from ``topic``, once no transaction is open on
    it: waits until each partition's last stable offset has reached its high watermark (every
    transaction that wrote to it has its marker), then reads every partition from its start up to
    that offset. The reader is assigned the partitions: a read-back that waited for a group to
    form could end before it began to read."""
    deadline = time.monotonic() + timeout_s
    seen: dict[str, object] = {}
    stable: dict[int, int] = {}

    def settled() -> bool:
        nonlocal seen, stable
        try:
            stable, high = _ends(bootstrap, topic, "read_committed"), _ends(bootstrap, topic, "read_uncommitted")
        except KafkaException as exc:
            seen = {"error": exc, "metadata": metadata_leaders(bootstrap, topic)}
            return False
        seen = {"last stable offsets": stable, "high watermarks": high}
        return stable == high

    wait_for(settled, timeout_s, f"{topic} to settle (no transaction open)", step=0.2, seen=lambda: seen)
    c = consumer(bootstrap, f"reader-{uuid.uuid4()}", **{"enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in stable])
    values: list[bytes] = []
    # A partition is read once the consumer's position reaches its end, or librdkafka reports
    # the end at or past it (a position stays before a trailing transaction marker).
    reached: dict[int, int] = {}
    try:
        while True:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    reached[m.partition()] = max(reached.get(m.partition(), -1), m.offset())
            for tp in c.position([TopicPartition(topic, p) for p in stable]):
                reached[tp.partition] = max(reached.get(tp.partition, -1), tp.offset)
            if all(end == 0 or reached.get(p, -1) >= end for p, end in stable.items()):
                return values
            assert time.monotonic() < deadline, (
                f"read {len(values)} values of {topic} in {timeout_s:.0f} s; assignment "
                f"{sorted(tp.partition for tp in c.assignment())}, reached {reached}, ends {stable}")
    finally:
        c.close()


def produce_plain(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0


