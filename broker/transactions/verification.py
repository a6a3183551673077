"""KIP-890 partition verification across the nodes of a cluster.

A partition's owner takes the first transactional batch of a producer's transaction only once the
transaction coordinator has said the partition is in that transaction. When this node coordinates
the transactional id, the check is a lookup (``broker.handlers.produce``); when another node does,
the owner asks it with AddPartitionsToTxn v4, ``verify_only`` (as Kafka's partition leaders ask
their coordinator), and the Produce request waits for the answer.

Requests of one connection are served in the order they came: while one waits for its check, the
connection's later Produce requests wait behind it (a producer's batches to a partition keep their
sequence order; librdkafka pipelines up to five requests per connection).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from broker.cluster.node import ClusterNode
from broker.cluster.peers import PeerClient
from broker.topics.partitions import TopicLogs
from broker.transactions.service import TransactionService
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.transaction_log_records import TRANSACTION_STATE_TOPIC

# (topic, partition, producer id, producer epoch) -> error code: is the partition in the
# producer's open transaction?
TxnVerifier = Callable[[str, int, int, int], int]
Proceed = Callable[[TxnVerifier | None], None]

ADD_PARTITIONS_VERIFY_VERSION = 4
_HEADER = struct.Struct(">bih")  # magic, crc, attributes (from byte 16 of a batch)
_PRODUCER = struct.Struct(">qh")  # producer id and epoch (from byte 43)
_TRANSACTIONAL = 0x10


def transactional_producer(raw: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional record batch, None for anything else."""
    if raw is None or len(raw) < 61:
        return None
    magic, _crc, attributes = _HEADER.unpack_from(raw, 16)
    if magic != 2 or not attributes & _TRANSACTIONAL:
        return None
    pid, epoch = _PRODUCER.unpack_from(raw, 43)
    return (pid, epoch) if pid >= 0 else None


def _answering(code: int) -> TxnVerifier:
    return lambda topic, partition, pid, epoch: code


class RemoteVerification:
    def __init__(self, service: TransactionService, cluster: ClusterNode, peers: PeerClient,
                 topic_logs: TopicLogs, local: Callable[[Any], TxnVerifier | None]) -> None:
        self.service = service
        self.cluster = cluster
        self.peers = peers
        self.topic_logs = topic_logs
        self.local = local
        # Connection id -> Produce requests waiting behind one whose check is out.
        self.queues: dict[int, deque[tuple[Any, Proceed]]] = {}

    def submit(self, conn_id: int, body: Any, proceed: Proceed) -> None:
        """Runs ``proceed(verify)`` for the Produce request ``body``: at once, or once the other
        node's coordinator has answered, in the connection's order."""
        queue = self.queues.get(conn_id)
        if queue is not None:
            queue.append((body, proceed))
            return
        self._run(conn_id, body, proceed)

    def _run(self, conn_id: int, body: Any, proceed: Proceed) -> None:
        while True:
            checks = self._remote_checks(body)
            if checks is None:
                proceed(self.local(body))
            else:
                node, wanted = checks
                if node is None:
                    proceed(_answering(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                else:
                    self.queues.setdefault(conn_id, deque())
                    self._ask(node, body.transactional_id, wanted, partial(self._resume, conn_id, proceed))
                    return
            queue = self.queues.get(conn_id)
            if not queue:
                self.queues.pop(conn_id, None)
                return
            body, proceed = queue.popleft()

    def _resume(self, conn_id: int, proceed: Proceed, verify: TxnVerifier) -> None:
        proceed(verify)
        queue = self.queues.get(conn_id)
        if not queue:
            self.queues.pop(conn_id, None)
            return
        body, proceed = queue.popleft()
        self._run(conn_id, body, proceed)

    def _remote_checks(self, body: Any) -> tuple[int | None, list[tuple[str, int, int, int]]] | None:
        """What must be asked of another node (its id, None if nobody owns the transactional id's
        partition now), or None when nothing is (no transactional id, or coordinated here)."""
        txn_id = body.transactional_id
        if not txn_id:
            return None
        key = (TRANSACTION_STATE_TOPIC, self.service.partition_for(txn_id))
        if self.cluster.owns(key):
            return None
        wanted: list[tuple[str, int, int, int]] = []
        catalog = self.topic_logs.catalog
        for td in body.topic_data:
            topic = catalog.get(td.name) if td.name else catalog.by_id.get(td.topic_id)
            if topic is None:
                continue
            for pd in td.partition_data:
                state = self.topic_logs.get(topic.name, pd.index)
                producer = transactional_producer(pd.records)
                if state is None or producer is None or producer[0] in state.txns.ongoing:
                    continue
                wanted.append((topic.name, pd.index, *producer))
        if not wanted:
            return None
        owner = self.cluster.owner_of(key)
        return (None if owner is None else owner[0]), wanted

    def _ask(self, node: int, txn_id: str, wanted: list[tuple[str, int, int, int]],
             then: Callable[[TxnVerifier], None]) -> None:
        by_producer: dict[tuple[int, int], dict[str, list[int]]] = {}
        for topic, partition, pid, epoch in wanted:
            by_producer.setdefault((pid, epoch), {}).setdefault(topic, []).append(partition)
        Txn = AddPartitionsToTxnRequest.Transaction
        request = AddPartitionsToTxnRequest(transactions=[
            Txn(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[Txn.Topic(name=t, partitions=ps) for t, ps in topics.items()])
            for (pid, epoch), topics in by_producer.items()])

        def answered(response: AddPartitionsToTxnResponse | None) -> None:
            if response is None:
                then(_answering(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                return
            if response.error_code:
                then(_answering(response.error_code))
                return
            codes: dict[tuple[str, int], int] = {}
            for result in response.results_by_transaction:
                for topic in result.topic_results:
                    for p in topic.results_by_partition:
                        codes[(topic.name, p.partition_index)] = p.partition_error_code

            def verify(topic: str, partition: int, pid: int, epoch: int) -> int:
                # A partition asked about after the check (its batch came with a later request).
                return codes.get((topic, partition), ErrorCode.NOT_COORDINATOR)

            then(verify)

        self.peers.send(node, ApiKey.AddPartitionsToTxn, ADD_PARTITIONS_VERIFY_VERSION, request, answered)
