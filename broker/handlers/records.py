"""DeleteRecords, OffsetForLeaderEpoch and DescribeProducers: what a partition's log says about
its start, its leader epochs and its producers, with Kafka 4.4's errors (KafkaApis,
ReplicaManager, Partition and LeaderEpochFileCache).

DeleteRecords moves a partition's log start forward and answers once the new start is on disk
(``LogManager.move_log_start``); in a cluster only the partition's owner does it, under its
fence. OffsetForLeaderEpoch answers from the partition's leader-epoch checkpoint; the epoch the
partition is led at is the one Metadata gives (0 on a single broker, the owner epoch in a
cluster). Nothing past the high watermark, the durable end, is shown.
"""

from __future__ import annotations

import trio

from broker.cluster.view import ClusterView
from broker.network.router import Request
from broker.observability import logs
from broker.topics.catalog import Topic, TopicCatalog, validate_topic_name
from broker.topics.partitions import PartitionState, TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC
from storage.errors import FencedError, OffsetOutOfRangeError
from storage.layout import OFFSETS_TOPIC
from storage.log_manager import LogStartMove
from storage.partition_log import PartitionLog

HIGH_WATERMARK = -1  # DeleteRecords: "up to the high watermark"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
# Kafka's Topic.isInternal: DeleteRecords refuses them (the rebalance journal is kcoord's own).
KAFKA_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, "__share_group_state"})
# ApiError(Errors.X).message: the error's default message.
_TOPIC_DENIED_MESSAGE = "Topic authorization failed."
_UNKNOWN_MESSAGE = "This server does not host this topic-partition."

DeleteResult = DeleteRecordsResponse.TopicResult.PartitionResult
EpochEndOffset = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset
PartitionProducers = DescribeProducersResponse.TopicResponse.PartitionResponse
ProducerState = PartitionProducers.ProducerState


def epoch_end_offset(entries: list[tuple[int, int]], requested: int, log_start: int,
                     end: int) -> tuple[int, int]:
    """Kafka's ``LeaderEpochFileCache.endOffsetFor`` over ``entries`` ((epoch, start offset),
    oldest first) with the log start applied as Kafka's ``truncateFromStart`` does: (the largest
    epoch <= ``requested``, where the next epoch starts or ``end`` for the latest epoch). An epoch
    older than every entry ends where the first one starts, under its own number; the undefined
    epoch and one newer than every entry give (-1, -1)."""
    kept = [(e, o) for e, o in entries if o > log_start]
    below = [(e, o) for e, o in entries if o <= log_start]
    if below:
        kept.insert(0, (below[-1][0], log_start))
    if requested == UNDEFINED_EPOCH or not kept:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if kept[-1][0] == requested:
        return requested, end
    higher = next(((e, o) for e, o in kept if e > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    floor = [(e, o) for e, o in kept if e <= requested]
    if not floor:
        return requested, higher[1]
    return floor[-1][0], higher[1]


def _by_topic(parts: dict[str, list[DeleteResult]]) -> list[DeleteRecordsResponse.TopicResult]:
    return [DeleteRecordsResponse.TopicResult(name=name, partitions=results) for name, results in parts.items()]


class RecordApis:
    """DeleteRecords, OffsetForLeaderEpoch and DescribeProducers, over the topic logs."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog, view: ClusterView) -> None:
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.view = view

    # ---- DeleteRecords ---------------------------------------------------------------------------

    def delete_records(self, req: Request[DeleteRecordsRequest]) -> None:
        answers: dict[str, list[DeleteResult]] = {}
        moves: list[tuple[DeleteResult, PartitionState, int]] = []
        for t in req.body.topics:
            results = answers.setdefault(t.name, [])
            topic = self.catalog.get(t.name)
            for p in t.partitions:
                out = DeleteResult(partition_index=p.partition_index, low_watermark=-1, error_code=0)
                results.append(out)
                found = self._deletable(topic, p.partition_index)
                if isinstance(found, int):
                    out.error_code = found
                    continue
                target = found.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if target < 0 or target > found.high_watermark:
                    out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                moves.append((out, found, target))
        if not moves:
            req.reply.set(DeleteRecordsResponse(throttle_time_ms=0, topics=_by_topic(answers)))
            return
        for _out, state, _target in moves:
            state.start_moving = trio.Event()
        self.topic_logs.spawn(self._delete, req, answers, moves)

    def _deletable(self, topic: Topic | None, partition: int) -> PartitionState | int:
        if topic is None or not 0 <= partition < topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic.internal or topic.name in KAFKA_INTERNAL_TOPICS:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        state = self.topic_logs.get(topic.name, partition)
        if state is None:
            return self.topic_logs.not_served(topic, partition)
        if not state.log.config.delete:
            return ErrorCode.POLICY_VIOLATION
        return state

    async def _delete(self, req: Request[DeleteRecordsRequest], answers: dict[str, list[DeleteResult]],
                      moves: list[tuple[DeleteResult, PartitionState, int]]) -> None:
        manager = self.topic_logs.runtime.manager

        def move_all() -> None:
            results = manager.move_log_starts([LogStartMove(state.topic, state.partition, state.log, target)
                                               for _out, state, target in moves])
            for (out, state, _target), result in zip(moves, results, strict=True):
                if isinstance(result, int):
                    out.low_watermark = result
                    logs.event("log.records_deleted", topic=state.topic, partition=state.partition,
                               log_start_offset=result)
                elif isinstance(result, OffsetOutOfRangeError):
                    out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                elif isinstance(result, FencedError):
                    out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    logs.warn("log.delete_records_failed", topic=state.topic, partition=state.partition,
                              error=repr(result))
                    out.error_code = ErrorCode.KAFKA_STORAGE_ERROR

        try:
            await trio.to_thread.run_sync(move_all)
        finally:
            for _out, state, _target in moves:
                moving, state.start_moving = state.start_moving, None
                if moving is not None:
                    moving.set()
        req.reply.set(DeleteRecordsResponse(throttle_time_ms=0, topics=_by_topic(answers)))

    # ---- OffsetForLeaderEpoch ----------------------------------------------------------------------

    def offset_for_leader_epoch(self, req: Request[OffsetForLeaderEpochRequest]) -> None:
        Topic_ = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        topics = []
        for t in req.body.topics:
            topic = self.catalog.get(t.topic)
            parts = [self._epoch_end(topic, p.partition, p.current_leader_epoch, p.leader_epoch)
                     for p in t.partitions]
            topics.append(Topic_(topic=t.topic, partitions=parts))
        req.reply.set(OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics))

    def _epoch_end(self, topic: Topic | None, partition: int, current: int, requested: int) -> EpochEndOffset:
        out = EpochEndOffset(error_code=0, partition=partition, leader_epoch=-1, end_offset=-1)
        if topic is None or not 0 <= partition < topic.partitions:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        part = self.topic_logs.readable(topic, partition)
        if isinstance(part, int):
            out.error_code = (part if part == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                              else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return out
        _leader, epoch = self.view.leader(topic.name, partition)
        if current >= 0 and current != epoch:
            out.error_code = ErrorCode.FENCED_LEADER_EPOCH if current < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
            return out
        out.leader_epoch, out.end_offset = epoch_end_offset(
            self._epochs(part.log, epoch, part.high_watermark), requested, part.log.log_start_offset,
            part.high_watermark)
        return out

    @staticmethod
    def _epochs(log: PartitionLog, epoch: int, end: int) -> list[tuple[int, int]]:
        """The log's epoch entries up to its durable end. Kafka's leader records its epoch when it
        becomes leader, before any write; a log here records it with its first batch, so until
        then the leader's epoch starts at the end."""
        entries = [(e, min(o, end)) for e, o in log.epochs.entries]
        if not entries or entries[-1][0] < epoch:
            entries.append((epoch, end))
        return entries

    # ---- DescribeProducers ---------------------------------------------------------------------------

    def describe_producers(self, req: Request[DescribeProducersRequest]) -> None:
        Topic_ = DescribeProducersResponse.TopicResponse
        topics = []
        for t in req.body.topics:
            invalid = validate_topic_name(t.name)
            topic = self.catalog.get(t.name) if invalid is None else None
            parts = []
            for index in t.partition_indexes:
                if invalid is not None:
                    parts.append(PartitionProducers(partition_index=index, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                    error_message=f"Topic name {t.name!r} is illegal: {invalid}",
                                                    active_producers=[]))
                elif topic is None:
                    parts.append(PartitionProducers(partition_index=index,
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    error_message=_UNKNOWN_MESSAGE, active_producers=[]))
                else:
                    parts.append(self._producers(topic, index))
            topics.append(Topic_(name=t.name, partitions=parts))
        req.reply.set(DescribeProducersResponse(throttle_time_ms=0, topics=topics))

    def _producers(self, topic: Topic, partition: int) -> PartitionProducers:
        out = PartitionProducers(partition_index=partition, error_code=0, error_message=None, active_producers=[])
        if not 0 <= partition < topic.partitions:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        part = self.topic_logs.readable(topic, partition)
        if isinstance(part, int):
            out.error_code = (part if part == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                              else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return out
        state = self.topic_logs.states.get((topic.name, partition)) if not topic.internal else None
        if state is None:
            return out  # the coordinators' partitions: their producers are not tracked
        ongoing = state.txns.ongoing
        out.active_producers = [
            ProducerState(producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
                          last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                          current_txn_start_offset=ongoing.get(pid, -1))
            for pid, entry in sorted(state.producers.producers.items())]
        return out
