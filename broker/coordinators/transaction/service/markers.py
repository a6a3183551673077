"""Writes transaction markers, each by the owner of its partition: to data partitions through the
data plane (which moves their last stable offset once a marker is durable), to ``__consumer_offsets``
partitions through their group coordinator shard (which applies or drops the transaction's pending
offsets). Kafka's TransactionMarkerChannelManager: a partition this node owns is written here, one
owned by another node of a cluster gets a WriteTxnMarkers request sent to that node (one request
per node and transaction), which writes it the same way (``broker.handlers.write_txn_markers``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from broker.cluster.assignment import owning_partition
from broker.cluster.node import ClusterNode
from broker.cluster.peers import PeerClient
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.coordinators.transaction.core.coordinator import MarkerJob
from broker.coordinators.transaction.core.metadata import TopicPartition
from broker.observability import logs
from broker.topics.catalog import OFFSETS_TOPIC
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

# A single node is the only coordinator there has been: its epoch is 0. In a cluster it is the
# owner epoch of the transactional id's __transaction_state partition.
COORDINATOR_EPOCH = 0
# v2 (KIP-1228) carries the marker's transaction version, which the partition's owner checks the
# marker's epoch by; every kcoord node serves it.
WRITE_TXN_MARKERS_VERSION = 2

# What a partition answers when it has no marker to write and never will: the transaction is
# done with it (Kafka's coordinator drops such a partition from the pending ones).
_GONE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# What a partition answers when the producer has moved past this marker's epoch there (Kafka's
# coordinator stops sending the transaction's markers: a newer epoch's coordinator or producer
# has ended it); sending it again would be refused again.
_SUPERSEDED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})

Written = Callable[[TopicPartition, bool], None]


def _marker_op(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
               shard: GroupCoordinatorShard, now: int) -> Result:
    del now
    return shard.write_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)


def _settled(job: MarkerJob, tp: TopicPartition, written: Written, code: int) -> None:
    """``written(tp, done)`` for a partition's answer: done unless it is worth sending again."""
    if code in _SUPERSEDED:
        logs.warn("transactions.marker_superseded", transactional_id=job.transactional_id, topic=tp[0],
                  partition=tp[1], producer_id=job.producer_id, producer_epoch=job.producer_epoch,
                  error=ErrorCode(code).name)
    written(tp, code == ErrorCode.NONE or code in _GONE or code in _SUPERSEDED)


class MarkerWriter:
    def __init__(self, topic_logs: TopicLogs, shards: GroupCoordinatorService, cluster: ClusterNode | None = None,
                 peers: PeerClient | None = None) -> None:
        self.topic_logs = topic_logs
        self.catalog = topic_logs.catalog
        self.shards = shards
        self.cluster = cluster
        self.peers = peers

    # ---- this node's partitions ---------------------------------------------------------------

    def exists(self, tp: TopicPartition) -> bool:
        topic, partition = tp
        if topic == OFFSETS_TOPIC:
            return 0 <= partition < len(self.shards.runtimes)
        known = self.catalog.get(topic)
        return known is not None and not known.internal and 0 <= partition < known.partitions

    def owned_here(self, tp: TopicPartition) -> bool:
        return self.cluster is None or self.cluster.owns(owning_partition(*tp))

    def write_local(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    transaction_version: int, tp: TopicPartition, done: Callable[[int], None]) -> None:
        """Writes the marker to ``tp``, a partition this node owns; ``done(error_code)``: NONE once
        it is durable, INVALID_PRODUCER_EPOCH when a data partition's producer state refuses its
        epoch by ``transaction_version``'s rule, KAFKA_STORAGE_ERROR when it could not be written
        now. A partition that no longer exists (its topic was deleted) needs no marker: NONE at
        once. One not loaded yet (just claimed) answers KAFKA_STORAGE_ERROR."""
        topic, partition = tp
        if not self.exists(tp):
            done(ErrorCode.NONE)
            return
        if topic == OFFSETS_TOPIC:
            self.shards.runtimes[partition].run_after_load(
                partial(_marker_op, producer_id, producer_epoch, commit, coordinator_epoch),
                lambda ok: done(ErrorCode.NONE if ok else ErrorCode.KAFKA_STORAGE_ERROR))
            return
        state = self.topic_logs.get(topic, partition)
        if state is None or state.deleted:
            done(ErrorCode.NONE if self.cluster is None else ErrorCode.KAFKA_STORAGE_ERROR)
            return
        self.topic_logs.write_marker(state, producer_id, producer_epoch, commit, coordinator_epoch,
                                     transaction_version, done)

    # ---- every partition of a transaction ------------------------------------------------------

    def write(self, job: MarkerJob, tp: TopicPartition, done: Callable[[bool], None],
              coordinator_epoch: int = COORDINATOR_EPOCH) -> None:
        self.write_all(job, [tp], lambda _tp, ok: done(ok), coordinator_epoch)

    def write_all(self, job: MarkerJob, partitions: Iterable[TopicPartition], written: Written,
                  coordinator_epoch: int = COORDINATOR_EPOCH) -> None:
        """Writes ``job``'s marker to each of ``partitions``; ``written(tp, ok)`` for each, once its
        marker is durable (ok) or could not be written now (the caller retries)."""
        remote: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            if not self.exists(tp):
                written(tp, True)
            elif self.owned_here(tp):
                self.write_local(job.producer_id, job.producer_epoch, job.commit, coordinator_epoch,
                                 job.transaction_version, tp, partial(_settled, job, tp, written))
            else:
                assert self.cluster is not None
                owner = self.cluster.owner_of(owning_partition(*tp))
                if owner is None or self.peers is None:
                    written(tp, False)  # between owners: try again shortly
                else:
                    remote.setdefault(owner[0], []).append(tp)
        for node, tps in remote.items():
            self._send(node, job, tps, written, coordinator_epoch)

    def _send(self, node: int, job: MarkerJob, tps: list[TopicPartition], written: Written,
              coordinator_epoch: int) -> None:
        assert self.peers is not None
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[Marker(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch, transaction_result=job.commit,
            topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            coordinator_epoch=coordinator_epoch & 0x7FFFFFFF, transaction_version=job.transaction_version)])

        def answered(response: WriteTxnMarkersResponse | None) -> None:
            codes: dict[TopicPartition, int] = {}
            if response is not None:
                for marker in response.markers:
                    for topic in marker.topics:
                        for p in topic.partitions:
                            codes[(topic.name, p.partition_index)] = p.error_code
            for tp in tps:
                _settled(job, tp, written, codes.get(tp, ErrorCode.REQUEST_TIMED_OUT))

        self.peers.send(node, ApiKey.WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION, request, answered)
