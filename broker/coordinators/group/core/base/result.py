"""What a coordinator operation asks the broker shell to do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from broker.coordinators.group.core.base.pending_offsets import TxnMarkerWrite, TxnOffsetBatch
from broker.coordinators.group.core.base.records import AnyRecord
from broker.runtime.timer_requests import CancelTimer, SetTimer
from protocol.group_events import GroupEvent
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from protocol.messages.delete_groups import DeleteGroupsResponse
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.join_group import JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupResponse
from protocol.messages.offset_commit import OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateResponse,
)
from protocol.messages.sync_group import SyncGroupResponse
from protocol.messages.txn_offset_commit import TxnOffsetCommitResponse

# (group, from_state, to_state, generation, member count, reason)
Transition = tuple[str, str, str, int, int, str]

# What a coordinator operation answers with. A string: at run time the messages are tables, which
# do not combine with ``|``.
CoordinatorResponse: TypeAlias = (
    "JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse"
    " | OffsetCommitResponse | OffsetDeleteResponse | DeleteGroupsResponse.DeletableGroupResult"
    " | ConsumerGroupHeartbeatResponse | TxnOffsetCommitResponse | ShareGroupHeartbeatResponse"
    " | AlterShareGroupOffsetsResponse | StreamsGroupTopologyDescriptionUpdateResponse"
)


@dataclass
class Result:
    """Replies to send, records to make durable first, timers to (re)arm and state transitions to log.

    ``replies`` holds ``(reply token, response)``: the current request's token unless it was
    parked, plus any parked requests of other members this operation completed. Every record has
    already been replayed into the shard; none of the replies may leave before the records are
    durable.
    """

    replies: list[tuple[int, CoordinatorResponse]] = field(default_factory=list)
    records: list[AnyRecord] = field(default_factory=list)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    # Transactional offset batches and transaction markers, written after ``records`` and in
    # this order; their effect on the shard (pending or applied offsets) is already replayed.
    txn_writes: list[TxnOffsetBatch | TxnMarkerWrite] = field(default_factory=list)
    # Rebalance-journal events (``journal.Journal.collect``): forensics the shell writes without
    # holding any reply for them.
    events: list[GroupEvent] = field(default_factory=list)
