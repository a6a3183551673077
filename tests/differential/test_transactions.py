"""Transactions (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) and
what a read_committed consumer sees, against Apache Kafka and kcoord, in the versions a
transaction-version-1 client sends (kcoord serves transactions v1: EndTxn below v5,
AddPartitionsToTxn up to v3, Produce below v12)."""

from __future__ import annotations

import pytest

from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.differential.data_ops import fetch, produce
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import batch, create_topic
from tests.differential.txn_ops import (
    OFFSETS_V,
    TXN_COMMIT_V,
    add_partitions,
    completed,
    describe,
    end,
    init,
)

pytestmark = pytest.mark.differential













def test_init_producer_id(pair: Pair) -> None:
    txn = unique("txn-init")

    def scenario(t: Target) -> object:
        c = t.client()
        first = init(c, txn)
        again = init(c, txn)
        return [init(c, None), first, again, init(c, txn, timeout_ms=900001), init(c, txn, timeout_ms=0),
                init(c, txn, producer_id=again.producer_id, epoch=again.producer_epoch),
                init(c, txn, producer_id=again.producer_id, epoch=0),
                init(c, txn, producer_id=again.producer_id + 1000, epoch=0),
                init(c, "", 60000), describe(c, txn)]

    answers = pair.compare(scenario)
    assert answers[3]["error_code"] == 50  # type: ignore[index]


def test_add_partitions_errors(pair: Pair) -> None:
    txn, topic, missing = unique("txn-add"), unique("txn-add-t"), unique("txn-add-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        ids = init(c, txn)
        pid, epoch = ids.producer_id, ids.producer_epoch
        return [
            add_partitions(c, txn, pid, epoch + 1, {topic: [0]}),
            add_partitions(c, txn, pid + 1000, epoch, {topic: [0]}),
            add_partitions(c, unique("txn-unknown"), pid, epoch, {topic: [0]}),
            add_partitions(c, txn, pid, epoch, {topic: [0, 7], missing: [0]}),
            add_partitions(c, txn, pid, epoch, {topic: [0, 1]}),
            add_partitions(c, txn, pid, epoch, {topic: [1]}),
            describe(c, txn),
        ]

    pair.compare(scenario)


def test_end_txn_errors(pair: Pair) -> None:
    txn, topic = unique("txn-end"), unique("txn-end-t")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        ids = init(c, txn)
        pid, epoch = ids.producer_id, ids.producer_epoch
        return [
            end(c, txn, pid, epoch, True),
            end(c, txn, pid, epoch, False),
            end(c, txn, pid, epoch + 1, True),
            end(c, txn, pid + 1000, epoch, True),
            end(c, unique("txn-unknown"), pid, epoch, True),
            describe(c, txn),
        ]

    pair.compare(scenario)


def test_fenced_producer(pair: Pair) -> None:
    txn, topic = unique("txn-fenced"), unique("txn-fenced-t")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        old = init(c, txn)
        add_partitions(c, txn, old.producer_id, old.producer_epoch, {topic: [0]})
        produced = produce(c, topic, 0, batch(b"pending", producer_id=old.producer_id,
                                              producer_epoch=old.producer_epoch, base_sequence=0,
                                              transactional=True), transactional_id=txn)
        new = init(c, txn)  # aborts the open transaction and fences the old epoch
        completed(c, txn)
        return {"old": old, "produced": produced, "new": new,
                "old_add": add_partitions(c, txn, old.producer_id, old.producer_epoch, {topic: [0]}),
                "old_end": end(c, txn, old.producer_id, old.producer_epoch, True),
                "old_produce": produce(c, topic, 0, batch(b"late", producer_id=old.producer_id,
                                                          producer_epoch=old.producer_epoch, base_sequence=1,
                                                          transactional=True), transactional_id=txn),
                "read_committed": fetch(c, topic, [0], isolation=1),
                "read_uncommitted": fetch(c, topic, [0])}

    pair.compare(scenario)


def transactional_batch(ids: InitProducerIdResponse, *values: bytes, sequence: int = 0) -> bytes:
    return batch(*values, producer_id=ids.producer_id, producer_epoch=ids.producer_epoch, base_sequence=sequence,
                 transactional=True)


@pytest.mark.parametrize("commit", [True, False])
def test_transaction_with_offsets_and_read_committed(pair: Pair, commit: bool) -> None:
    txn, topic, group = unique("txn-flow"), unique("txn-flow-t"), unique("txn-flow-g")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        plain = produce(c, topic, 1, batch(b"plain"))
        ids = init(c, txn)
        pid, epoch = ids.producer_id, ids.producer_epoch
        added = add_partitions(c, txn, pid, epoch, {topic: [0, 1]})
        first = produce(c, topic, 0, transactional_batch(ids, b"one", b"two"), transactional_id=txn)
        second = produce(c, topic, 1, transactional_batch(ids, b"three"), transactional_id=txn)
        unadded = produce(c, topic, 0, transactional_batch(ids, b"x", sequence=5), transactional_id=txn)
        offsets = c.call(25, OFFSETS_V, AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid,
                                                               producer_epoch=epoch, group_id=group))
        txn_commit = c.call(28, TXN_COMMIT_V, TxnOffsetCommitRequest(
            transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id_or_member_epoch=-1,
            member_id="", topics=[TxnOffsetCommitRequest.Topic(name=topic, partitions=[
                TxnOffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=2,
                                                       committed_metadata="txn")])]))
        wrong_epoch_commit = c.call(28, TXN_COMMIT_V, TxnOffsetCommitRequest(
            transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch + 1, generation_id_or_member_epoch=-1,
            member_id="", topics=[TxnOffsetCommitRequest.Topic(name=topic, partitions=[
                TxnOffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=2)])]))
        def latest(isolation: int) -> object:
            return c.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
                ListOffsetsRequest.Topic(name=topic, partitions=[
                    ListOffsetsRequest.Topic.Partition(partition_index=p, timestamp=-1) for p in (0, 1)])]))

        during = {
            "latest_committed": latest(1), "latest_uncommitted": latest(0),
            "describe": describe(c, txn),
            "read_committed": fetch(c, topic, [0, 1], isolation=1),
            "read_uncommitted": fetch(c, topic, [0, 1]),
            "stable_offsets": c.call(9, 7, OffsetFetchRequest(group_id=group, require_stable=True, topics=[
                OffsetFetchRequest.Topic(name=topic, partition_indexes=[0])])),
            "offsets": c.call(9, 7, OffsetFetchRequest(group_id=group, topics=[
                OffsetFetchRequest.Topic(name=topic, partition_indexes=[0])])),
        }
        ended = end(c, txn, pid, epoch, commit)
        done = completed(c, txn)
        after = {
            "latest_committed": latest(1), "latest_uncommitted": latest(0),
            "read_committed": fetch(c, topic, [0, 1], isolation=1),
            "read_uncommitted": fetch(c, topic, [0, 1]),
            "offsets": c.call(9, 7, OffsetFetchRequest(group_id=group, require_stable=True, topics=[
                OffsetFetchRequest.Topic(name=topic, partition_indexes=[0])])),
            "end_again": end(c, txn, pid, epoch, not commit),
        }
        return {"plain": plain, "ids": ids, "added": added, "first": first, "second": second,
                "unadded": unadded, "add_offsets": offsets, "txn_commit": txn_commit,
                "wrong_epoch_commit": wrong_epoch_commit, "during": during, "ended": ended,
                "completed": done, "after": after}

    pair.compare(scenario)
