"""A transactional producer's partitions checked with, or added to, its transaction where its
coordinator is (KIP-890).

Part 1: a partition's owner takes the first transactional batch of a producer's transaction only
once the transaction coordinator has said the partition is in that transaction. When this node
coordinates the transactional id, the check is a lookup (``broker.handlers.produce``); when
another node does, the owner asks it with AddPartitionsToTxn v4, ``verify_only`` (as Kafka's
partition leaders ask their coordinator), and the Produce request waits for the answer.

Part 2 (transactions version 2: Produce v12 and up, TxnOffsetCommit v5 and up): the client no
longer adds partitions itself; the broker taking the batch (or the group's offsets) adds the
partition to the transaction first, with a write of the coordinator on this node or
AddPartitionsToTxn v5, not verify-only, to the node that coordinates it (``PartitionAdder``), and
the request waits for that.

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
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC

# (topic, partition, producer id, producer epoch) -> error code: is the partition in the
# producer's open transaction?
TxnVerifier = Callable[[str, int, int, int], int]
Proceed = Callable[[TxnVerifier | None], None]

ADD_PARTITIONS_VERIFY_VERSION = 4
ADD_PARTITIONS_BROKER_VERSION = 5
# The first Produce version whose client speaks transactions version 2 (Kafka's
# produceRequestVersionToTransactionSupportedOperation).
PRODUCE_TV2_VERSION = 12
# Each partition's answer to an add: (topic, partition) -> error code.
Added = Callable[[dict[tuple[str, int], int]], None]
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


class PartitionAdder:
    """Adds partitions to a producer's transaction for a client of transactions version 2, where
    the transactional id is coordinated: here (a write of the coordinator, answered once durable)
    or on another node of the cluster (AddPartitionsToTxn v5, not verify-only)."""

    def __init__(self, service: TransactionCoordinatorService, cluster: ClusterNode | None, peers: PeerClient | None) -> None:
        self.service = service
        self.cluster = cluster
        self.peers = peers

    def _coordinator(self, txn_id: str) -> int | None:
        """The node coordinating ``txn_id`` when it is another one (-1: nobody now); None: this one."""
        if self.cluster is None or self.peers is None:
            return None
        key = (TRANSACTION_STATE_TOPIC, self.service.partition_for(txn_id))
        if self.cluster.owns(key):
            return None
        owner = self.cluster.owner_of(key)
        return -1 if owner is None else owner[0]

    def add(self, txn_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]], then: Added) -> None:
        node = self._coordinator(txn_id)
        if node is None:
            code = self.service.error_for(txn_id)
            if code:
                then(dict.fromkeys(partitions, code))
                return

            def op(shard: Any, now: int) -> Any:
                return shard.add_partitions(txn_id, pid, epoch, partitions, now, tv2=True)

            def done(result: Any, ok: bool) -> None:
                then({tp: result.partition_errors.get(tp, result.error) if ok else ErrorCode.NOT_COORDINATOR
                      for tp in partitions})

            self.service.write(txn_id, op, done)
        elif node < 0:
            then(dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        else:
            assert self.peers is not None
            _ask_coordinator(self.peers, node, txn_id, [(t, i, pid, epoch) for t, i in partitions], then,
                            verify_only=False)


def _ask_coordinator(peers: PeerClient, node: int, txn_id: str, wanted: list[tuple[str, int, int, int]],
                    then: Added, *, verify_only: bool) -> None:
    """AddPartitionsToTxn to ``node`` for ``wanted`` (topic, partition, producer id, epoch): v4
    verify-only, v5 adding; ``then`` gets each partition's answer (one error for all when the
    request failed as a whole)."""
    by_producer: dict[tuple[int, int], dict[str, list[int]]] = {}
    for topic, partition, pid, epoch in wanted:
        by_producer.setdefault((pid, epoch), {}).setdefault(topic, []).append(partition)
    Txn = AddPartitionsToTxnRequest.Transaction
    request = AddPartitionsToTxnRequest(transactions=[
        Txn(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
            topics=[Txn.Topic(name=t, partitions=ps) for t, ps in topics.items()])
        for (pid, epoch), topics in by_producer.items()])
    asked = [(t, i) for t, i, _p, _e in wanted]

    def answered(response: AddPartitionsToTxnResponse | None) -> None:
        if response is None or response.error_code:
            then(dict.fromkeys(asked, ErrorCode.COORDINATOR_NOT_AVAILABLE if response is None else response.error_code))
            return
        codes = {(t.name, p.partition_index): p.partition_error_code
                 for r in response.results_by_transaction for t in r.topic_results for p in t.results_by_partition}
        then({tp: codes.get(tp, ErrorCode.NOT_COORDINATOR) for tp in asked})

    version = ADD_PARTITIONS_VERIFY_VERSION if verify_only else ADD_PARTITIONS_BROKER_VERSION
    peers.send(node, ApiKey.AddPartitionsToTxn, version, request, answered)


def _verifier(codes: dict[tuple[str, int], int]) -> TxnVerifier:
    """The check of a request's batches from the coordinator's answers; a partition not asked about
    (its batch came with a later request) is not this answer's to pass."""
    return lambda topic, partition, pid, epoch: codes.get((topic, partition), ErrorCode.NOT_COORDINATOR)


class RemoteVerification:
    """The checks of Produce requests' transactional batches, run in each connection's order:
    added to the transaction first for a client of transactions version 2 (``adder``), verified
    with another node's coordinator (a cluster) or here (``local``) for the others."""

    def __init__(self, service: TransactionCoordinatorService, cluster: ClusterNode | None, peers: PeerClient | None,
                 topic_logs: TopicLogs, local: Callable[[Any], TxnVerifier | None], *, verify: bool = True) -> None:
        """``verify``: the first protocol's batches are verified (with another node's coordinator
        where it is another's); the second's are added whatever it says."""
        self.verify = verify
        self.service = service
        self.cluster = cluster
        self.peers = peers
        self.topic_logs = topic_logs
        self.local = local
        self.adder = PartitionAdder(service, cluster, peers)
        # Connection id -> Produce requests waiting behind one whose check is out.
        self.queues: dict[int, deque[tuple[Any, int, Proceed]]] = {}

    def submit(self, conn_id: int, body: Any, proceed: Proceed, version: int = 0) -> None:
        """Runs ``proceed(verify)`` for the Produce request ``body`` (of ``version``): at once, or
        once the coordinator has answered, in the connection's order."""
        queue = self.queues.get(conn_id)
        if queue is not None:
            queue.append((body, version, proceed))
            return
        self._run(conn_id, body, version, proceed)

    def _run(self, conn_id: int, body: Any, version: int, proceed: Proceed) -> None:
        while True:
            if version >= PRODUCE_TV2_VERSION and (wanted := self._unstarted(body)):
                self.queues.setdefault(conn_id, deque())
                self._add(body.transactional_id, wanted, partial(self._resume, conn_id, proceed))
                return
            checks = self._remote_checks(body) if version < PRODUCE_TV2_VERSION else None
            if checks is None:
                proceed(self.local(body) if version < PRODUCE_TV2_VERSION else None)
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
            body, version, proceed = queue.popleft()

    def _resume(self, conn_id: int, proceed: Proceed, verify: TxnVerifier) -> None:
        proceed(verify)
        queue = self.queues.get(conn_id)
        if not queue:
            self.queues.pop(conn_id, None)
            return
        body, version, proceed = queue.popleft()
        self._run(conn_id, body, version, proceed)

    def _add(self, txn_id: str, wanted: list[tuple[str, int, int, int]], then: Callable[[TxnVerifier], None]) -> None:
        """Adds the partitions to the transaction (one producer id and epoch per request, as Kafka
        requires of a Produce request); the batches are then checked against the answers."""
        pid, epoch = wanted[0][2], wanted[0][3]
        if any((p, e) != (pid, epoch) for _t, _i, p, e in wanted):
            then(_answering(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
            return

        self.adder.add(txn_id, pid, epoch, [(t, i) for t, i, _p, _e in wanted], lambda codes: then(_verifier(codes)))

    def _unstarted(self, body: Any) -> list[tuple[str, int, int, int]]:
        """The partitions of ``body`` whose transactional batch begins its producer's transaction
        there (topic, partition, producer id, epoch)."""
        if not body.transactional_id:
            return []
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
        return wanted

    def _remote_checks(self, body: Any) -> tuple[int | None, list[tuple[str, int, int, int]]] | None:
        """What must be asked of another node (its id, None if nobody owns the transactional id's
        partition now), or None when nothing is (no transactional id, or coordinated here)."""
        txn_id = body.transactional_id
        if not txn_id or self.cluster is None or not self.verify:
            return None
        key = (TRANSACTION_STATE_TOPIC, self.service.partition_for(txn_id))
        if self.cluster.owns(key):
            return None
        wanted = self._unstarted(body)
        if not wanted:
            return None
        owner = self.cluster.owner_of(key)
        return (None if owner is None else owner[0]), wanted

    def _ask(self, node: int, txn_id: str, wanted: list[tuple[str, int, int, int]],
             then: Callable[[TxnVerifier], None]) -> None:
        assert self.peers is not None
        _ask_coordinator(self.peers, node, txn_id, wanted, lambda codes: then(_verifier(codes)), verify_only=True)
