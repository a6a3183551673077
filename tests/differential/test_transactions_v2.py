"""Transactions version 2 (KIP-890 part 2) against Apache Kafka and kcoord, in the versions a
transaction-version-2 client sends: no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12 and
TxnOffsetCommit v5 add the partition and the group's offsets partition themselves), EndTxn v5
ending each transaction one epoch up and naming it, its retries, an abort with nothing added, the
old epoch fenced, and what read_committed consumers and the group's offsets show."""

from __future__ import annotations

import uuid

import pytest

from kclient.wire_client import WireClient
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.differential.data_ops import fetch, produce
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import batch, create_topic
from tests.differential.txn_ops import completed, describe, init

pytestmark = pytest.mark.differential

PRODUCE_V, TXN_COMMIT_V, END_V = 12, 5, 5


def end(c: WireClient, txn: str, pid: int, epoch: int, commit: bool) -> EndTxnResponse:
    return c.call(26, END_V, EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                          committed=commit))


def txn_batch(pid: int, epoch: int, *values: bytes, sequence: int = 0) -> bytes:
    return batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True)


def commit_offset(c: WireClient, txn: str, group: str, pid: int, epoch: int, topic: str, offset: int) -> object:
    return c.call(28, TXN_COMMIT_V, TxnOffsetCommitRequest(
        transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id_or_member_epoch=-1,
        member_id="", topics=[TxnOffsetCommitRequest.Topic(name=topic, partitions=[
            TxnOffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=offset,
                                                   committed_metadata="v2")])]))


def offsets(c: WireClient, group: str, topic: str) -> object:
    return c.call(9, 7, OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        OffsetFetchRequest.Topic(name=topic, partition_indexes=[0])]))


def test_each_transaction_ends_one_epoch_up_with_partitions_and_offsets_added_by_the_broker(pair: Pair) -> None:
    txn, topic, group = unique("txn2"), unique("txn2-t"), unique("txn2-g")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        ids: InitProducerIdResponse = init(c, txn)
        pid, epoch = ids.producer_id, ids.producer_epoch
        first = produce(c, topic, 0, txn_batch(pid, epoch, b"one", b"two"), transactional_id=txn, version=PRODUCE_V)
        second = produce(c, topic, 1, txn_batch(pid, epoch, b"three"), transactional_id=txn, version=PRODUCE_V)
        committed_offsets = commit_offset(c, txn, group, pid, epoch, topic, 2)
        during = describe(c, txn)
        ended = end(c, txn, pid, epoch, True)
        done = completed(c, txn)
        retried = end(c, txn, pid, epoch, True)  # the same EndTxn again: a retry, answered alike
        retried_other = end(c, txn, pid, epoch, False)
        stale = produce(c, topic, 0, txn_batch(pid, epoch, b"late", sequence=2), transactional_id=txn,
                        version=PRODUCE_V)
        bumped = ended.producer_epoch
        # The next transaction: the bumped epoch, sequences from 0 again; aborted.
        next_produce = produce(c, topic, 0, txn_batch(pid, bumped, b"four"), transactional_id=txn, version=PRODUCE_V)
        aborted = end(c, txn, pid, bumped, False)
        completed(c, txn)
        # Nothing added: a commit is refused, an abort moves the epoch all the same.
        empty_commit = end(c, txn, pid, aborted.producer_epoch, True)
        empty_abort = end(c, txn, pid, aborted.producer_epoch, False)
        completed(c, txn)
        return {"ids": ids, "first": first, "second": second, "committed_offsets": committed_offsets,
                "during": during, "ended": ended, "completed": done, "retried": retried,
                "retried_other": retried_other, "stale": stale, "next_produce": next_produce, "aborted": aborted,
                "empty_commit": empty_commit, "empty_abort": empty_abort, "after": describe(c, txn),
                "read_committed": fetch(c, topic, [0, 1], isolation=1), "offsets": offsets(c, group, topic)}

    answers = pair.compare(scenario)
    assert isinstance(answers, dict)
    assert answers["ended"]["producer_epoch"] == answers["ids"]["producer_epoch"] + 1  # type: ignore[index]


def test_a_fenced_producers_epoch_and_a_new_incarnation_under_transactions_v2(pair: Pair) -> None:
    txn, topic, group = unique("txn2-fence"), unique("txn2-fence-t"), unique("txn2-fence-g")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        old = init(c, txn)
        pid, epoch = old.producer_id, old.producer_epoch
        produced = produce(c, topic, 0, txn_batch(pid, epoch, b"pending"), transactional_id=txn, version=PRODUCE_V)
        new = init(c, txn)  # aborts the open transaction, fencing the old epoch
        done = completed(c, txn)
        return {"old": old, "produced": produced, "new": new, "completed": done,
                "old_end": end(c, txn, pid, epoch, True),
                "old_abort": end(c, txn, pid, epoch, False),
                "old_offsets": commit_offset(c, txn, group, pid, epoch, topic, 1),
                "old_produce": produce(c, topic, 0, txn_batch(pid, epoch, b"late", sequence=1), transactional_id=txn,
                                       version=PRODUCE_V),
                "read_committed": fetch(c, topic, [0], isolation=1), "read_uncommitted": fetch(c, topic, [0])}

    pair.compare(scenario)


def test_txn_offset_commit_v6_names_topics_by_id(pair: Pair) -> None:
    """TxnOffsetCommit v6 (KIP-1319): topics by id, an id no topic has answered UNKNOWN_TOPIC_ID, a
    partition the topic lacks UNKNOWN_TOPIC_OR_PARTITION, a generation given for a group that does
    not exist GROUP_ID_NOT_FOUND; the offsets committed with the transaction read back by name."""
    txn, topic, group, ghost = unique("txn6"), unique("txn6-t"), unique("txn6-g"), unique("txn6-none")
    absent = uuid.uuid4().bytes

    def scenario(t: Target) -> object:
        c = t.client()
        topic_id = create_topic(c, topic, 2).topics[0].topic_id
        labels = {topic_id: "the topic", absent: "an id nobody knows"}
        ids = init(c, txn)
        pid, epoch = ids.producer_id, ids.producer_epoch
        T, P = TxnOffsetCommitRequest.Topic, TxnOffsetCommitRequest.Topic.Partition

        def commit(group_id: str, generation: int, topics: list[TxnOffsetCommitRequest.Topic]) -> object:
            answer = c.call(28, 6, TxnOffsetCommitRequest(
                transactional_id=txn, group_id=group_id, producer_id=pid, producer_epoch=epoch,
                generation_id_or_member_epoch=generation, member_id="", topics=topics))
            for topic_answer in answer.topics:
                topic_answer.name, topic_answer.topic_id = labels.get(topic_answer.topic_id, "?"), bytes(16)
            return answer

        by_id = commit(group, -1, [T(topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=3,
                                                                      committed_metadata="by id"),
                                                                    P(partition_index=5, committed_offset=1,
                                                                      committed_metadata="")]),
                                   T(topic_id=absent, partitions=[P(partition_index=0, committed_offset=1,
                                                                    committed_metadata="")])])
        no_group = commit(ghost, 5, [T(topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=1,
                                                                        committed_metadata="")])])
        ended = end(c, txn, pid, epoch, True)
        completed(c, txn)
        return {"by_id": by_id, "no_group": no_group, "ended": ended, "offsets": offsets(c, group, topic)}

    answers = pair.compare(scenario)
    assert isinstance(answers, dict)
    assert answers["no_group"]["topics"][0]["partitions"][0]["error_code"] == 69  # type: ignore[index]
