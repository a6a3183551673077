"""Transactional requests as the differential tests send them."""

from __future__ import annotations

import time

from kclient.wire_client import WireClient
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

# The versions the differential tests speak.
INIT_V, ADD_V, OFFSETS_V, TXN_COMMIT_V, END_V = 4, 3, 3, 3, 3


def init(c: WireClient, txn: str | None, timeout_ms: int = 60000, producer_id: int = -1,
         epoch: int = -1) -> InitProducerIdResponse:
    return c.call(22, INIT_V, InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=timeout_ms,
                                                    producer_id=producer_id, producer_epoch=epoch))


def add_partitions(c: WireClient, txn: str, pid: int, epoch: int,
                   topics: dict[str, list[int]]) -> AddPartitionsToTxnResponse:
    answer: AddPartitionsToTxnResponse = c.call(24, ADD_V, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.Topic(name=n, partitions=ps) for n, ps in topics.items()]))
    return answer


def end(c: WireClient, txn: str, pid: int, epoch: int, commit: bool) -> EndTxnResponse:
    return c.call(26, END_V, EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                          committed=commit))


def describe(c: WireClient, txn: str) -> DescribeTransactionsResponse:
    answer: DescribeTransactionsResponse = c.call(65, 0, DescribeTransactionsRequest(transactional_ids=[txn]))
    for state in answer.transaction_states:
        state.topics.sort(key=lambda t: t.topic)
        for topic in state.topics:
            topic.partitions.sort()  # a set in both brokers
    return answer


def completed(c: WireClient, txn: str) -> DescribeTransactionsResponse:
    """Waits until the transaction's markers are written (EndTxn answers before they are, on both
    brokers): setup for the reads that follow, not a comparison."""
    deadline = time.monotonic() + 60
    while True:
        answer = describe(c, txn)
        if answer.transaction_states[0].transaction_state in ("CompleteCommit", "CompleteAbort", "Empty"):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"transaction {txn} did not complete: {answer}")
        time.sleep(0.05)


