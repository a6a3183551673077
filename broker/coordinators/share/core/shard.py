"""One ``__share_group_state`` partition's share coordinator (Kafka's ShareCoordinatorShard), pure.

It holds, per key (group, topic id, partition), a ``ShareGroupOffset``. Every change is a record:
InitializeShareGroupState writes a ShareSnapshot (a new state epoch and start offset, no
batches); WriteShareGroupState writes a ShareUpdate with the batches it carries, or, once
``updates_per_snapshot`` updates follow the last snapshot
(``share.coordinator.snapshot.update.records.per.snapshot``), a ShareSnapshot of the whole state
merged with them; ReadShareGroupState with a newer leader epoch writes that epoch;
DeleteShareGroupState writes a tombstone. A timer snapshots, every ``cold_snapshot_interval_ms``
(``share.coordinator.cold.partition.snapshot.interval.ms``), each key whose last record is an
update, so that the log can be compacted down to snapshots. The state changes only when records
are replayed (``replay``): an operation replays its own records before it returns, and loading a
partition replays its log, so both paths build the same state.

Errors as Kafka's shard answers them: INVALID_REQUEST for a key never initialized (write, read)
or a malformed partition; FENCED_STATE_EPOCH for an older state epoch; FENCED_LEADER_EPOCH for an
older leader epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.coordinators.share.core.state import ShareGroupOffset, StateBatch, combine
from broker.runtime.timer_requests import CancelTimer, SetTimer
from protocol.errors import ErrorCode
from protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from protocol.messages.share_state_log import ShareSnapshotValue, ShareUpdateValue
from protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from protocol.payloads.share_state_records import SNAPSHOT, UPDATE, ShareStateRecord

Key = tuple[str, bytes, int]  # group, topic id, partition
COLD_SNAPSHOT_KEY = "share-cold-snapshot"
NULL_UUID = bytes(16)

_WritePart = WriteShareGroupStateResponse.WriteStateResult.PartitionResult
_ReadPart = ReadShareGroupStateResponse.ReadStateResult.PartitionResult
_InitPart = InitializeShareGroupStateResponse.InitializeStateResult.PartitionResult
_DeletePart = DeleteShareGroupStateResponse.DeleteStateResult.PartitionResult
_SummaryPart = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult


@dataclass
class ShareResult:
    """An operation's replies (by request token), its records (durable before any reply leaves)
    and its timers."""

    replies: list[tuple[int, object]] = field(default_factory=list)
    records: list[ShareStateRecord] = field(default_factory=list)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)


def _batches(wire: Sequence[object]) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)  # type: ignore[attr-defined]
            for b in wire]


def _wire(message: type, batches: Sequence[StateBatch]) -> list[Any]:
    """The batches as ``message``'s own StateBatch class (each message declares its own)."""
    cls = message.StateBatch  # type: ignore[attr-defined]
    return [cls(first_offset=b.first, last_offset=b.last, delivery_state=b.state, delivery_count=b.deliveries)
            for b in batches]


def _malformed(topic_id: bytes, partition: int) -> str | None:
    if topic_id == NULL_UUID:
        return "Request topic id is null."
    if partition < 0:
        return "Request partition id is negative."
    return None


class ShareCoordinatorShard:
    def __init__(self, index: int, updates_per_snapshot: int = 500, cold_snapshot_interval_ms: int = 300_000) -> None:
        self.index = index
        self.updates_per_snapshot = updates_per_snapshot
        self.cold_snapshot_interval_ms = cold_snapshot_interval_ms
        self.states: dict[Key, ShareGroupOffset] = {}
        # Updates written since each key's last snapshot.
        self.update_counts: dict[Key, int] = {}

    # ---- replay -------------------------------------------------------------------------------

    def replay(self, rec: ShareStateRecord) -> None:
        key = (rec.group, rec.topic_id, rec.partition)
        value = rec.value
        if value is None:
            self.states.pop(key, None)
            self.update_counts.pop(key, None)
            return
        if rec.record_type == SNAPSHOT:
            assert isinstance(value, ShareSnapshotValue)
            self.states[key] = ShareGroupOffset(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
                value.delivery_complete_count, value.create_timestamp, value.write_timestamp,
                combine((), _batches(value.state_batches), value.start_offset))
            self.update_counts[key] = 0
            return
        current = self.states.get(key)
        if current is None:
            return  # an update of a key deleted since (compaction keeps updates beside tombstones)
        assert isinstance(value, ShareUpdateValue)
        start = max(current.start_offset, value.start_offset)
        self.states[key] = ShareGroupOffset(
            current.snapshot_epoch, current.state_epoch,
            value.leader_epoch if value.leader_epoch >= 0 else current.leader_epoch, start,
            value.delivery_complete_count if value.start_offset >= 0 else current.delivery_complete_count,
            current.create_timestamp, current.write_timestamp,
            combine(current.batches, _batches(value.state_batches), start))
        self.update_counts[key] = self.update_counts.get(key, 0) + 1

    def _emit(self, result: ShareResult, rec: ShareStateRecord) -> None:
        """A record of the operation: applied to the state now (as its replay would) and returned."""
        self.replay(rec)
        result.records.append(rec)

    def on_loaded(self, now_ms: int) -> list[SetTimer]:
        return [SetTimer(COLD_SNAPSHOT_KEY, now_ms + self.cold_snapshot_interval_ms)]

    # ---- state written under another partition ------------------------------------------------

    def adopt(self, key: Key, state: ShareGroupOffset) -> ShareResult:
        """Takes over the state of a share partition that an earlier kcoord (which hashed the
        topic id in hex) wrote to another partition: a snapshot of it here. Nothing when this
        shard has the key already."""
        result = ShareResult()
        if key not in self.states:
            self._emit(result, self._snapshot(key, state))
        return result

    def forget(self, key: Key) -> ShareResult:
        """The key's state leaves this shard (a tombstone): another shard has adopted it."""
        result = ShareResult()
        if key in self.states:
            self._emit(result, ShareStateRecord(SNAPSHOT, key[0], key[1], key[2], None))
        return result

    # ---- records ------------------------------------------------------------------------------

    def _snapshot(self, key: Key, state: ShareGroupOffset) -> ShareStateRecord:
        value = ShareSnapshotValue(
            snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count,
            create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
            state_batches=_wire(ShareSnapshotValue, state.batches))
        return ShareStateRecord(SNAPSHOT, key[0], key[1], key[2], value)

    def _change(self, key: Key, current: ShareGroupOffset, leader_epoch: int, start_offset: int,
                delivery_complete_count: int, batches: Sequence[StateBatch], now: int) -> ShareStateRecord:
        """A write's record: an update, or a snapshot of everything once enough updates follow the
        last one. The start offset never moves back."""
        leader = leader_epoch if leader_epoch >= 0 else current.leader_epoch
        start = max(start_offset, current.start_offset)
        if start_offset < 0 or start_offset == current.start_offset:
            complete = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            complete = current.delivery_complete_count
        else:
            complete = delivery_complete_count
        if self.update_counts.get(key, 0) >= self.updates_per_snapshot:
            return self._snapshot(key, ShareGroupOffset(
                current.snapshot_epoch + 1, current.state_epoch, leader, start, complete, now, now,
                combine(current.batches, batches, start)))
        value = ShareUpdateValue(
            snapshot_epoch=current.snapshot_epoch, leader_epoch=leader, start_offset=start,
            delivery_complete_count=complete, state_batches=_wire(ShareUpdateValue, combine((), batches, start)))
        return ShareStateRecord(UPDATE, key[0], key[1], key[2], value)

    # ---- operations ---------------------------------------------------------------------------

    def write_state(self, token: int, request: WriteShareGroupStateRequest, now: int) -> ShareResult:
        result = ShareResult()
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                key = (request.group_id, t.topic_id, p.partition)
                current = self.states.get(key)
                error, message = self._write_error(t.topic_id, p, current)
                if error == ErrorCode.NONE and current is not None:
                    self._emit(result, self._change(key, current, p.leader_epoch, p.start_offset,
                                                    p.delivery_complete_count, _batches(p.state_batches), now))
                parts.append(_WritePart(partition=p.partition, error_code=error, error_message=message))
            topics.append(WriteShareGroupStateResponse.WriteStateResult(topic_id=t.topic_id, partitions=parts))
        result.replies.append((token, WriteShareGroupStateResponse(results=topics)))
        return result

    @staticmethod
    def _write_error(topic_id: bytes, p: WriteShareGroupStateRequest.WriteStateData.PartitionData,
                     current: ShareGroupOffset | None) -> tuple[int, str | None]:
        malformed = _malformed(topic_id, p.partition)
        if malformed is not None:
            return ErrorCode.INVALID_REQUEST, malformed
        if p.leader_epoch < -1:
            return ErrorCode.INVALID_REQUEST, "Request leader epoch is negative."
        if p.state_epoch < -1:
            return ErrorCode.INVALID_REQUEST, "Request state epoch is negative."
        if current is None:
            return ErrorCode.INVALID_REQUEST, "Write on uninitialized share partition."
        if p.leader_epoch != -1 and p.leader_epoch < current.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the current one."
        if p.state_epoch != -1 and p.state_epoch < current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the current one."
        return ErrorCode.NONE, None

    def read_state(self, token: int, request: ReadShareGroupStateRequest, now: int) -> ShareResult:
        """The state of each partition; a newer leader epoch than the one held is written."""
        result = ShareResult()
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                key = (request.group_id, t.topic_id, p.partition)
                current = self.states.get(key)
                malformed = _malformed(t.topic_id, p.partition)
                if malformed is None and p.leader_epoch < -1:
                    malformed = "Request leader epoch is negative."
                if malformed is None and current is None:
                    malformed = "Read on uninitialized share partition."
                if malformed is not None or current is None:
                    parts.append(_ReadPart(partition=p.partition, error_code=ErrorCode.INVALID_REQUEST,
                                           error_message=malformed, state_epoch=0, start_offset=-1, state_batches=[]))
                    continue
                if p.leader_epoch != -1 and p.leader_epoch < current.leader_epoch:
                    parts.append(_ReadPart(partition=p.partition, error_code=ErrorCode.FENCED_LEADER_EPOCH,
                                           error_message="The leader epoch is older than the current one.",
                                           state_epoch=0, start_offset=-1, state_batches=[]))
                    continue
                if p.leader_epoch > current.leader_epoch:
                    self._emit(result, self._change(key, current, p.leader_epoch, -1, -1, (), now))
                parts.append(_ReadPart(partition=p.partition, error_code=ErrorCode.NONE, state_epoch=current.state_epoch,
                                       start_offset=current.start_offset,
                                       state_batches=_wire(_ReadPart, current.batches)))
            topics.append(ReadShareGroupStateResponse.ReadStateResult(topic_id=t.topic_id, partitions=parts))
        result.replies.append((token, ReadShareGroupStateResponse(results=topics)))
        return result

    def read_state_summary(self, token: int, request: ReadShareGroupStateSummaryRequest, now: int) -> ShareResult:
        """State epoch, leader epoch and start offset without the batches; a partition never
        initialized reads as start offset -1. Writes nothing."""
        del now
        result = ShareResult()
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                current = self.states.get((request.group_id, t.topic_id, p.partition))
                malformed = _malformed(t.topic_id, p.partition)
                if malformed is not None:
                    parts.append(_SummaryPart(partition=p.partition, error_code=ErrorCode.INVALID_REQUEST,
                                              error_message=malformed, state_epoch=0, leader_epoch=-1, start_offset=-1))
                elif current is None:
                    parts.append(_SummaryPart(partition=p.partition, error_code=ErrorCode.NONE, state_epoch=0,
                                              leader_epoch=-1, start_offset=-1))
                else:
                    parts.append(_SummaryPart(partition=p.partition, error_code=ErrorCode.NONE,
                                              state_epoch=current.state_epoch, leader_epoch=current.leader_epoch,
                                              start_offset=current.start_offset,
                                              delivery_complete_count=current.delivery_complete_count))
            topics.append(ReadShareGroupStateSummaryResponse.ReadStateSummaryResult(topic_id=t.topic_id,
                                                                                    partitions=parts))
        result.replies.append((token, ReadShareGroupStateSummaryResponse(results=topics)))
        return result

    def initialize_state(self, token: int, request: InitializeShareGroupStateRequest, now: int) -> ShareResult:
        """A fresh state at the request's state epoch and start offset: a snapshot with no batches
        (an older state epoch than the one held is fenced)."""
        result = ShareResult()
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                key = (request.group_id, t.topic_id, p.partition)
                current = self.states.get(key)
                error: int = ErrorCode.NONE
                message = _malformed(t.topic_id, p.partition)
                if message is None and p.state_epoch < 0:
                    message = "Request state epoch is negative."
                if message is not None:
                    error = ErrorCode.INVALID_REQUEST
                elif current is not None and p.state_epoch < current.state_epoch:
                    error, message = ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the current one."
                else:
                    self._emit(result, self._snapshot(key, ShareGroupOffset(
                        0 if current is None else current.snapshot_epoch + 1, p.state_epoch,
                        -1 if current is None else current.leader_epoch, p.start_offset, -1, now, now)))
                parts.append(_InitPart(partition=p.partition, error_code=error, error_message=message))
            topics.append(InitializeShareGroupStateResponse.InitializeStateResult(topic_id=t.topic_id,
                                                                                  partitions=parts))
        result.replies.append((token, InitializeShareGroupStateResponse(results=topics)))
        return result

    def delete_state(self, token: int, request: DeleteShareGroupStateRequest, now: int) -> ShareResult:
        """Tombstones: the state is gone (deleting a key never written is no error)."""
        del now
        result = ShareResult()
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                key = (request.group_id, t.topic_id, p.partition)
                message = _malformed(t.topic_id, p.partition)
                if message is None and key in self.states:
                    self._emit(result, ShareStateRecord(SNAPSHOT, key[0], key[1], key[2], None))
                parts.append(_DeletePart(partition=p.partition,
                                         error_code=ErrorCode.INVALID_REQUEST if message else ErrorCode.NONE,
                                         error_message=message))
            topics.append(DeleteShareGroupStateResponse.DeleteStateResult(topic_id=t.topic_id, partitions=parts))
        result.replies.append((token, DeleteShareGroupStateResponse(results=topics)))
        return result

    # ---- timers -------------------------------------------------------------------------------

    def on_timer(self, key: str, now: int) -> ShareResult:
        """The cold-partition snapshot: each key whose last record is an update gets a snapshot."""
        result = ShareResult()
        if key != COLD_SNAPSHOT_KEY:
            return result
        for k, count in list(self.update_counts.items()):
            current = self.states.get(k)
            if count > 0 and current is not None:
                self._emit(result, self._snapshot(k, ShareGroupOffset(
                    current.snapshot_epoch + 1, current.state_epoch, current.leader_epoch, current.start_offset,
                    current.delivery_complete_count, current.create_timestamp, now, current.batches)))
        result.timers.append(SetTimer(COLD_SNAPSHOT_KEY, now + self.cold_snapshot_interval_ms))
        return result
