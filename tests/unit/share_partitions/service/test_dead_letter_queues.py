"""Which dead-letter queue topics a share group may write, as Kafka 4.4's ShareGroupDLQStateManager
decides (a name not starting with ``__``, the broker's prefix, ``errors.deadletterqueue.group.enable``
on an existing topic, creation only when allowed), and the records it writes: one per archived
record, with Kafka's headers and, only when copying, the record's key and value."""

from __future__ import annotations

from pathlib import Path

from broker.share_partitions.core.partition import CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, DeadLetter
from broker.share_partitions.core.settings import ShareGroupSettings
from broker.share_partitions.service.dead_letters import HEADERS, DeadLetterQueues, Letters
from broker.topics.catalog import TopicCatalog
from protocol.record_batch import decode_records, iter_batches


def queues(tmp_path: Path, *, auto_create: bool = False, prefix: str = "dlq.") -> tuple[DeadLetterQueues, TopicCatalog]:
    catalog = TopicCatalog(tmp_path, 1)
    catalog.create("dlq.on", 2, {"errors.deadletterqueue.group.enable": "true"})
    catalog.create("dlq.off", 2, {})
    catalog.create("elsewhere", 2, {"errors.deadletterqueue.group.enable": "true"})
    q = DeadLetterQueues(lambda group: ShareGroupSettings(), catalog, lambda *a: None,
                         lambda topic, partition, offset: (b"k%d" % offset, b"v%d" % offset),
                         lambda name, configs: None, auto_create=auto_create, prefix=prefix, clock=lambda: 1234)
    return q, catalog


def test_the_queue_topic_must_be_one_kafka_writes(tmp_path: Path) -> None:
    q, _ = queues(tmp_path)
    assert q.usable("dlq.on") is None
    assert "errors.deadletterqueue.group.enable" in (q.usable("dlq.off") or "")
    assert "does not start with dlq." in (q.usable("elsewhere") or "")
    assert "not a valid name" in (q.usable("__dlq") or "")
    assert "auto.create.topics.enable is false" in (q.usable("dlq.missing") or "")
    q2, _ = queues(tmp_path / "b", auto_create=True, prefix="")
    assert q2.usable("dlq.missing") is None and q2.usable("elsewhere") is None


def test_one_record_per_letter_with_kafkas_headers_and_the_record_only_when_copied(tmp_path: Path) -> None:
    q, _ = queues(tmp_path)
    job = Letters("grp", "src", 3, (DeadLetter(7, 1, CLIENT_REJECT), DeadLetter(9, 5, DELIVERY_COUNT_EXCEEDED)))
    for copy in (True, False):
        [batch] = list(iter_batches(q.batch(job, copy)))
        records = decode_records(batch)
        assert batch.base_timestamp == 1234 and batch.producer_id == -1
        assert [(r.key, r.value) for r in records] == (
            [(b"k7", b"v7"), (b"k9", b"v9")] if copy else [(None, None), (None, None)])
        assert [dict(r.headers) for r in records] == [
            dict(zip(HEADERS, (b"src", b"3", b"7", b"grp", b"1", CLIENT_REJECT.encode()))),
            dict(zip(HEADERS, (b"src", b"3", b"9", b"grp", b"5", DELIVERY_COUNT_EXCEEDED.encode())))]
