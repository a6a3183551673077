"""Transactions with confluent-kafka (librdkafka): exactly-once read-process-write, aborts that
leave nothing behind, fencing of a zombie producer, and a broker killed in the middle of a
transaction."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.transactions import consumer, produce_plain, read_all, txn_producer

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3










def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = consumer(bootstrap, group)
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in parts}


def poll_batch(c: Consumer, want: int, timeout_s: float = 15.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m)
    return out


def move(p: Producer, c: Consumer, msgs: list[Any], out_topic: str, commit: bool = True) -> None:
    """One read-process-write transaction: the records to ``out_topic`` and the consumer's offsets."""
    p.begin_transaction()
    for m in msgs:
        p.produce(out_topic, key=m.key(), value=m.value())
    nxt: dict[tuple[str, int], int] = {}
    for m in msgs:
        nxt[(m.topic(), m.partition())] = m.offset() + 1
    p.send_offsets_to_transaction([TopicPartition(t, pa, o) for (t, pa), o in nxt.items()],
                                  c.consumer_group_metadata(), 30)
    if commit:
        p.commit_transaction(30)
    else:
        # abort_transaction drops what librdkafka has not sent yet: the records are sent first, so
        # that the log holds them, marked aborted.
        assert p.flush(30) == 0
        p.abort_transaction(30)


def test_read_process_write_moves_every_record_exactly_once_across_a_consumer_restart(broker: Any) -> None:
    bs = broker.bootstrap
    create_topic(bs, "rpw-in", PARTITIONS)
    create_topic(bs, "rpw-out", PARTITIONS)
    total = 300
    produce_plain(bs, "rpw-in", total)

    # First incarnation: two committed transactions, then a third left open when it dies.
    c1 = consumer(bs, "rpw")
    c1.subscribe(["rpw-in"])
    p1 = txn_producer(bs, "rpw-txn")
    moved = 0
    for _ in range(2):
        batch = poll_batch(c1, 50)
        assert batch
        move(p1, c1, batch, "rpw-out")
        moved += len(batch)
    open_batch = poll_batch(c1, 50)
    p1.begin_transaction()
    for m in open_batch:
        p1.produce("rpw-out", key=m.key(), value=m.value())
    p1.flush(10)
    c1.close()  # the consumer restarts; its producer never ends the open transaction

    # Second incarnation: the same transactional id fences the first and aborts what it left open;
    # the new consumer resumes from the transactionally committed offsets.
    p2 = txn_producer(bs, "rpw-txn")
    c2 = consumer(bs, "rpw")
    c2.subscribe(["rpw-in"])
    while moved < total:
        batch = poll_batch(c2, 100, timeout_s=10)
        if not batch:
            break
        move(p2, c2, batch, "rpw-out")
        moved += len(batch)
    c2.close()

    values = read_all(bs, "rpw-out")
    assert sorted(values) == sorted(b"v%d" % i for i in range(total))
    assert sum(committed(bs, "rpw", "rpw-in").values()) == total


def test_an_aborted_transaction_leaves_neither_output_nor_offsets(broker: Any) -> None:
    bs = broker.bootstrap
    create_topic(bs, "ab-in", PARTITIONS)
    create_topic(bs, "ab-out", PARTITIONS)
    produce_plain(bs, "ab-in", 30)
    c = consumer(bs, "ab")
    c.subscribe(["ab-in"])
    p = txn_producer(bs, "ab-txn")
    batch = poll_batch(c, 30)
    assert len(batch) == 30
    move(p, c, batch, "ab-out", commit=False)
    c.close()
    assert read_all(bs, "ab-out") == []
    assert all(o < 0 for o in committed(bs, "ab", "ab-in").values())
    # A read_uncommitted reader sees the aborted records: they are in the log, marked aborted.
    raw = consumer(bs, f"raw-{uuid.uuid4()}", **{"isolation.level": "read_uncommitted"})
    raw.subscribe(["ab-out"])
    assert len(poll_batch(raw, 30)) == 30
    raw.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker: Any) -> None:
    bs = broker.bootstrap
    create_topic(bs, "fence-out", 1)
    p1 = txn_producer(bs, "fence-txn")
    p1.begin_transaction()
    p1.produce("fence-out", value=b"zombie")
    p1.flush(10)
    p2 = txn_producer(bs, "fence-txn")
    with pytest.raises(KafkaException) as info:
        p1.produce("fence-out", value=b"zombie-2")
        p1.commit_transaction(15)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    p2.begin_transaction()
    p2.produce("fence-out", value=b"live")
    p2.commit_transaction(15)
    assert read_all(bs, "fence-out") == [b"live"]


def test_a_broker_killed_mid_transaction_keeps_what_committed_and_aborts_the_rest(broker_factory: Any) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    bs = b.bootstrap
    create_topic(bs, "kill-in", PARTITIONS)
    create_topic(bs, "kill-out", PARTITIONS)
    produce_plain(bs, "kill-in", 60)
    c = consumer(bs, "kill")
    c.subscribe(["kill-in"])
    p = txn_producer(bs, "kill-txn", **{"transaction.timeout.ms": 3000})
    first = poll_batch(c, 30)
    move(p, c, first, "kill-out")
    done = dict(committed(bs, "kill", "kill-in"))
    second = poll_batch(c, 30)
    p.begin_transaction()
    for m in second:
        p.produce("kill-out", key=m.key(), value=m.value())
    p.send_offsets_to_transaction([TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in second],
                                  c.consumer_group_metadata(), 15)
    p.flush(10)
    b.kill()
    c.close()
    b.start()
    b.wait_loaded()
    # The open transaction times out and is aborted by the restarted coordinator (read_all waits
    # for its marker).
    assert sorted(read_all(bs, "kill-out")) == sorted(m.value() for m in first)
    assert committed(bs, "kill", "kill-in") == done


def test_a_consumer_protocol_member_commits_offsets_in_a_transaction(broker: Any) -> None:
    """KIP-848 members send their member id and epoch in TxnOffsetCommit (checked as Kafka does)."""
    bs = broker.bootstrap
    create_topic(bs, "kip848-in", PARTITIONS)
    create_topic(bs, "kip848-out", PARTITIONS)
    produce_plain(bs, "kip848-in", 40)
    c = consumer(bs, "kip848", **{"group.protocol": "consumer"})
    c.subscribe(["kip848-in"])
    p = txn_producer(bs, "kip848-txn")
    moved = 0
    while moved < 40:
        batch = poll_batch(c, 40 - moved, timeout_s=20)
        assert batch
        move(p, c, batch, "kip848-out")
        moved += len(batch)
    c.close()
    assert sorted(read_all(bs, "kip848-out")) == sorted(b"v%d" % i for i in range(40))
    assert sum(committed(bs, "kip848", "kip848-in").values()) == 40


def test_an_idle_transactional_id_is_forgotten_and_starts_afresh(broker_factory: Any) -> None:
    """After transactional.id.expiration.ms without a transaction the id is gone (DescribeTransactions
    answers TRANSACTIONAL_ID_NOT_FOUND, also after a restart), and the next producer with it
    gets a new producer id."""
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.describe_transactions import DescribeTransactionsRequest

    b = broker_factory({"transactional.id.expiration.ms": "1500",
                        "transactions.remove.expired.transaction.cleanup.interval.ms": "200"})
    create_topic(b.bootstrap, "expiring-out", 1)

    def described() -> tuple[int, int]:
        with WireClient("127.0.0.1", b.port) as c:
            [state] = c.call(ApiKey.DescribeTransactions, 0,
                             DescribeTransactionsRequest(transactional_ids=["expiring"])).transaction_states
            return int(state.error_code), int(state.producer_id)

    p = txn_producer(b.bootstrap, "expiring")
    p.begin_transaction()
    p.produce("expiring-out", value=b"once")
    p.commit_transaction(30)
    error, first_pid = described()
    assert error == 0
    wait_for(lambda: described()[0] != 0, 60, "the idle transactional id to be forgotten", step=0.2)
    assert described()[0] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    assert "transactions.ids_expired" in b.log()
    b.stop()
    b.start()
    b.wait_loaded()
    assert described()[0] == 105  # the tombstone is durable
    p = txn_producer(b.bootstrap, "expiring")
    error, second_pid = described()
    assert error == 0 and second_pid != first_pid
    assert read_all(b.bootstrap, "expiring-out") == [b"once"]
