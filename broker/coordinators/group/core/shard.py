"""One ``__consumer_offsets`` partition's group coordinator: a pure state machine.

The broker shell calls these methods serially for a shard, makes each Result's records durable,
then sends its replies and applies its timers; a fired timer comes back through ``on_timer``.
Request validation that Kafka's service layer does (empty group id -> INVALID_GROUP_ID for the
membership APIs and OffsetDelete, the JoinGroup session-timeout range) happens here too; whether
this node owns or has loaded the shard is the shell's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.coordinators.group.core import consumer_migration as migration
from broker.coordinators.group.core import consumer_regex_refresh as regex_refresh
from broker.coordinators.group.core import consumer_regex_resolution as regex_resolution
from broker.coordinators.group.core import (
    consumer_timers,
    describe,
    heartbeat,
    join_group,
    leave_group,
    offset_commit,
    retention,
    share_heartbeat,
    streams_describe,
    streams_timers,
    streams_topology_description,
    sync_group,
    topic_changes,
    txn_offsets,
)
from broker.coordinators.group.core.base import journal
from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import CoordinatorConfig, RequestContext, TopicView
from broker.coordinators.group.core.base.offsets import FetchedOffset, fetch_offsets
from broker.coordinators.group.core.base.records import AnyRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.responses import join_response, sync_response
from broker.coordinators.group.core.base.result import CoordinatorResponse, Result
from broker.coordinators.group.core.base.timers import TimerKind
from broker.coordinators.group.core.consumer import describe as consumer_describe
from broker.coordinators.group.core.consumer.member import MemberState
from broker.coordinators.group.core.consumer_heartbeat import (
    consumer_group_heartbeat,
    fence_member,
    group_state,
    note_transition,
)
from broker.coordinators.group.core.consumer_heartbeat import (
    error_response as consumer_error_response,
)
from broker.coordinators.group.core.rebalance import (
    on_heartbeat_timer,
    on_join_timer,
    on_sync_timer,
    prepare_rebalance,
    reschedule_heartbeat,
)
from broker.coordinators.group.core.share import describe as share_describe
from broker.coordinators.group.core.state import CoordinatorState
from broker.coordinators.group.core.streams.offsets import fetch_error as streams_fetch_error
from broker.coordinators.group.core.streams_heartbeat import streams_group_heartbeat
from broker.runtime.timer_requests import SetTimer
from protocol import group_events
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.describe_groups import DescribeGroupsResponse
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsResponse
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.share_group_describe import ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
)
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

_FENCED_BECAUSE = {
    consumer_timers.SESSION: "session timeout",
    consumer_timers.REBALANCE: "rebalance timeout",
    consumer_timers.CLASSIC_JOIN: "the classic member failed to join within the rebalance timeout",
    consumer_timers.CLASSIC_SYNC: "the classic member failed to sync within the rebalance timeout",
}


class GroupCoordinatorShard:
    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig,
        topics: TopicView,
        new_member_id: Callable[[str], str],
    ) -> None:
        """``new_member_id(prefix)`` returns a fresh member id for a client id or group instance
        id, Kafka's form being ``f"{prefix}-{uuid4()}"``."""
        self.partition = partition
        self.state = CoordinatorState(partition, config, topics, new_member_id)

    # ---- loading --------------------------------------------------------------------------

    def replay(self, record: AnyRecord, offset: int | None = None) -> None:
        del offset
        self.state.replay(record)

    def replay_txn_offset(self, record: OffsetCommitRecord, producer_id: int) -> None:
        """An offset commit of a transactional batch (pending until its marker)."""
        self.state.replay_txn_offset(record, producer_id)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.state.replay_marker(producer_id, commit)

    def on_loaded(self, now_ms: int) -> list[SetTimer]:
        st = self.state
        st.loaded = True
        out = Result()
        for group in list(st.groups.values()):
            if group.members:
                st.journal.note(group.group_id, group_events.SHARD_LOADED, members=len(group.members),
                                generation=group.generation)
            for member in group.members.values():
                reschedule_heartbeat(st, group, member, out, now_ms)
            if len(group.members) > st.config.group_max_size:
                prepare_rebalance(st, group, out, now_ms, "over-capacity")
        # Consumer-protocol members get a fresh session (Kafka does the same on load); one still
        # revoking gets its rebalance timeout again.
        for cgroup in st.consumer_groups.values():
            if cgroup.members:
                st.journal.note(cgroup.group_id, group_events.SHARD_LOADED, members=len(cgroup.members),
                                group_epoch=cgroup.group_epoch)
            for cmember in cgroup.members.values():
                session_ms = (st.config.session_timeout_for(cgroup.group_id) if cmember.classic is None
                              else cmember.classic.session_timeout_ms)
                consumer_timers.set_session_timeout(st, out, cgroup.group_id, cmember.member_id, now_ms + session_ms)
                if cmember.state is MemberState.UNREVOKED_PARTITIONS:
                    consumer_timers.set_rebalance_timeout(st, out, cgroup.group_id, cmember.member_id,
                                                          cmember.member_epoch, now_ms + cmember.rebalance_timeout_ms)
        streams_describe.on_loaded(st, out, now_ms)
        for sgroup in st.share_groups.values():
            if sgroup.members:
                st.journal.note(sgroup.group_id, group_events.SHARD_LOADED, members=len(sgroup.members),
                                group_epoch=sgroup.group_epoch)
            for member_id in sgroup.members:
                share_heartbeat.set_session_timeout(st, out, sgroup.group_id, member_id, now_ms)
            if sgroup.initializing:
                share_heartbeat.arm_initialize(st, out, sgroup.group_id, now_ms)
        retention.schedule_sweep(st, out, now_ms)
        return [t for t in out.timers if isinstance(t, SetTimer)]

    def unload(self) -> list[tuple[int, CoordinatorResponse]]:
        """Answers every parked request NOT_COORDINATOR and forgets all groups."""
        replies: list[tuple[int, CoordinatorResponse]] = []
        for group in self.state.groups.values():
            for member in group.members.values():
                if member.awaiting_join is not None:
                    parked, member.awaiting_join = member.awaiting_join, None
                    response = join_response(
                        parked.api_version, error=ErrorCode.NOT_COORDINATOR, member_id=member.member_id
                    )
                    replies.append((parked.token, response))
                if member.awaiting_sync is not None:
                    parked, member.awaiting_sync = member.awaiting_sync, None
                    replies.append((parked.token, sync_response(ErrorCode.NOT_COORDINATOR)))
            group.state = GroupState.DEAD
        self.state.groups.clear()
        self.state.streams.groups.clear()
        self.state.timers.clear()
        self.state.regex_refreshes.clear()
        return replies

    # ---- membership -----------------------------------------------------------------------

    def join_group(self, req: JoinGroupRequest, ctx: RequestContext, now_ms: int) -> Result:
        if req.group_id in self.state.share_groups:
            # A share group's id: Kafka answers a classic member so.
            return Result(replies=[(ctx.token, join_response(ctx.api_version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                                             member_id=req.member_id))])
        return join_group.join_group(self.state, req, ctx, now_ms)

    def sync_group(self, req: SyncGroupRequest, ctx: RequestContext, now_ms: int) -> Result:
        return sync_group.sync_group(self.state, req, ctx, now_ms)

    def heartbeat(self, req: HeartbeatRequest, ctx: RequestContext, now_ms: int) -> Result:
        return heartbeat.heartbeat(self.state, req, ctx, now_ms)

    def leave_group(self, req: LeaveGroupRequest, ctx: RequestContext, now_ms: int) -> Result:
        return leave_group.leave_group(self.state, req, ctx, now_ms)

    def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now_ms: int) -> Result:
        if req.group_id in self.state.share_groups:
            return Result(replies=[(ctx.token, consumer_error_response(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."))])
        return consumer_group_heartbeat(self.state, req, ctx, now_ms)

    def streams_group_heartbeat(self, req: StreamsGroupHeartbeatRequest, ctx: RequestContext, now_ms: int) -> Result:
        return streams_group_heartbeat(self.state, self.state.streams, req, ctx, now_ms)

    def streams_group_topology_description_update(self, req: StreamsGroupTopologyDescriptionUpdateRequest,
                                                  ctx: RequestContext, now_ms: int) -> Result:
        return streams_topology_description.update(self.state, req, ctx, now_ms)
    def share_group_heartbeat(self, req: ShareGroupHeartbeatRequest, ctx: RequestContext, now_ms: int) -> Result:
        return share_heartbeat.share_group_heartbeat(self.state, req, ctx, now_ms)

    # ---- offsets --------------------------------------------------------------------------

    def offset_commit(self, req: OffsetCommitRequest, ctx: RequestContext, now_ms: int) -> Result:
        return offset_commit.offset_commit(self.state, req, ctx, now_ms)

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, ctx: RequestContext, now_ms: int) -> Result:
        return txn_offsets.txn_offset_commit(self.state, req, ctx, now_ms)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> Result:
        """A transaction marker from the transaction coordinator for this partition."""
        return txn_offsets.write_marker(self.state, producer_id, producer_epoch, commit, coordinator_epoch)

    def offset_fetch_group(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[int, list[FetchedOffset]]:
        """Committed offsets of a group. With ``require_stable`` (KIP-447) a partition with a
        pending transactional offset answers UNSTABLE_OFFSET_COMMIT (offset -1), which the client
        retries until the transaction ends. A consumer group checks the member that asks, as
        Kafka's ``ConsumerGroup.validateOffsetFetch`` does (OffsetFetch v9+)."""
        sgroup = self.state.streams.groups.get(group_id)
        if sgroup is not None and (error := streams_fetch_error(sgroup, member_id, member_epoch)):
            return error, []
        cgroup = self.state.consumer_groups.get(group_id)
        if cgroup is not None and not (member_id is None and member_epoch < 0):
            member = cgroup.member(member_id or "")
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, []
            if member.member_epoch != member_epoch:
                stale = ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
                return stale, []
        group = self.state.groups.get(group_id)
        known = ((group is not None and group.state is not GroupState.DEAD) or group_id in self.state.consumer_groups
                 or sgroup is not None)
        rows = fetch_offsets(self.state.offsets, group_id, known, topics)
        pending = self.state.pending_txn
        if require_stable and pending.has_group(group_id):
            if topics is None:
                listed = {(t, p) for t, p, *_ in rows}
                rows += [(t, p, -1, -1, "", ErrorCode.NONE) for t, p in sorted(set(pending.partitions_of(group_id)))
                         if (t, p) not in listed]
            rows = [(t, p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT) if pending.is_pending(group_id, t, p)
                    else (t, p, o, e, m, err) for t, p, o, e, m, err in rows]
        return ErrorCode.NONE, rows

    def offset_delete(self, req: OffsetDeleteRequest, ctx: RequestContext, now_ms: int) -> Result:
        return offset_commit.offset_delete(self.state, req, ctx, now_ms)

    # ---- admin ----------------------------------------------------------------------------

    def describe_group(self, group_id: str, api_version: int) -> DescribeGroupsResponse.DescribedGroup:
        return describe.describe_group(self.state, group_id, api_version)

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescribeResponse.DescribedGroup:
        st = self.state
        return consumer_describe.describe(st.consumer_groups, st.groups, group_id, st.topics,
                                          st.config.consumer_assignors[0])

    def streams_group_describe(self, group_id: str,
                               with_description: bool = False) -> StreamsGroupDescribeResponse.DescribedGroup:
        return streams_describe.describe(self.state, group_id, with_description)
    def share_group_describe(self, group_id: str) -> ShareGroupDescribeResponse.DescribedGroup:
        if group_id in self.state.consumer_groups or group_id in self.state.groups:
            return share_describe.failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return share_describe.describe(self.state.share_groups, group_id, self.state.topics)

    def has_group(self, group_id: str) -> bool:
        """The id names a group of some kind (a classic group that is not dead, a consumer, streams
        or share group)."""
        st = self.state
        classic = st.groups.get(group_id)
        return (group_id in st.consumer_groups or group_id in st.streams.groups or group_id in st.share_groups
                or (classic is not None and classic.state is not GroupState.DEAD))

    def share_group_view(self, group_id: str) -> tuple[int, dict[bytes, frozenset[int]]] | None:
        """(members, initialized partitions by topic id) of a share group; None when the id names
        no share group."""
        group = self.state.share_groups.get(group_id)
        if group is None:
            return None
        return len(group.members), {t: ps for t, (_, ps) in group.initialized.items()}

    def share_group_alter_offsets(self, group_id: str,
                                  partitions: dict[bytes, tuple[str, frozenset[int]]]) -> tuple[int, list[AnyRecord]]:
        """AlterShareGroupOffsets wrote the share state of ``partitions`` (topic id: name and
        indexes): the group has them initialized, and a group id that named no group is now an
        empty share group."""
        return share_heartbeat.alter_offsets(self.state, group_id, partitions)

    def share_partitions(self, group_id: str | None = None,
                         topic_id: bytes | None = None) -> list[tuple[str, bytes, int]]:
        """(group, topic id, partition) of every share partition the share groups of this shard
        have initialized or are initializing (of ``group_id``, of ``topic_id``): whose share state
        may exist, wherever it is coordinated. Kafka's group coordinator deletes exactly these
        through its persister when a share group or a topic is deleted."""
        out: list[tuple[str, bytes, int]] = []
        groups = self.state.share_groups
        for group in (groups.values() if group_id is None else [g for g in [groups.get(group_id)] if g]):
            for known in (group.initialized, group.initializing):
                for t, (_, ps) in known.items():
                    if topic_id is None or t == topic_id:
                        out += [(group.group_id, t, p) for p in sorted(ps)]
        return list(dict.fromkeys(out))

    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list[ListGroupsResponse.ListedGroup]:
        listed = describe.list_groups(self.state, states, types)
        wanted_types = {t.strip().lower() for t in types} if types else None
        if wanted_types is None or consumer_describe.GROUP_TYPE in wanted_types:
            wanted_states = {s.strip().lower() for s in states} if states else None
            listed += consumer_describe.listed(self.state.consumer_groups, wanted_states)
        if wanted_types is None or streams_describe.GROUP_TYPE in wanted_types:
            listed += streams_describe.listed(self.state, {s.strip().lower() for s in states} if states else None)
        if wanted_types is None or share_describe.GROUP_TYPE in wanted_types:
            wanted_states = {s.strip().lower() for s in states} if states else None
            listed += share_describe.listed(self.state.share_groups, wanted_states)
        return listed

    def delete_group(self, group_id: str, now_ms: int) -> tuple[int, list[AnyRecord]]:
        st = self.state
        if group_id in st.groups or group_id in st.consumer_groups:
            st.journal.note(group_id, group_events.ADMIN, action="group deleted")
        sgroup = st.streams.groups.get(group_id)
        if sgroup is not None:
            error, records = streams_describe.deletion(
                sgroup, [(topic, partition) for topic, partition, _ in st.offsets.all_of(group_id)])
            out = Result()
            if not error:
                records = [*streams_topology_description.before_deletion(st, sgroup, finalize=True), *records]
            for record in records:
                st.emit(out, record)
            return error, out.records
        share = st.share_groups.get(group_id)
        if share is not None:
            error, records = share_describe.deletion(share)
            if not error:
                # Named here: once its records are replayed, the journal no longer knows the group's type.
                st.journal.note(group_id, group_events.ADMIN, action="group deleted", group_type="share")
            out = Result()
            for record in records:
                st.emit(out, record)
            return error, out.records
        cgroup = st.consumer_groups.get(group_id)
        if cgroup is not None:
            offsets = [(topic, partition) for topic, partition, _ in st.offsets.all_of(group_id)]
            error, records = consumer_describe.deletion(cgroup, offsets)
            out = Result()
            for record in records:
                st.emit(out, record)
            return error, out.records
        error, classic_records, _ = describe.delete_group(st, group_id, now_ms)
        records = list(classic_records)
        if not error:
            # Kafka's deleteAllOffsets: pending transactional offsets go too (a tombstone each,
            # unless the committed offset's tombstone already covers the partition).
            out = Result()
            for topic, partition in sorted(set(st.pending_txn.partitions_of(group_id))):
                if st.offsets.get(group_id, topic, partition) is None:
                    st.emit(out, OffsetCommitRecord(group_id, topic, partition, None))
            records += out.records
        return error, records

    # ---- topic changes --------------------------------------------------------------------

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> Result:
        """Tombstones the committed offsets of deleted partitions in every group."""
        return topic_changes.on_partitions_deleted(self.state, partitions)

    def on_topics_changed(self, topics: set[str], now_ms: int) -> Result:
        """Topics were created, grew or were deleted (see ``topic_changes.on_topics_changed``)."""
        out = topic_changes.on_topics_changed(self.state, topics, now_ms)
        shared = share_heartbeat.on_topics_changed(self.state, topics, now_ms)
        out.records += shared.records
        out.timers += shared.timers
        return out

    # ---- time -----------------------------------------------------------------------------

    def on_timer(self, key: str, now_ms: int) -> Result:
        st = self.state
        target = st.timers.fire(key)
        if target is None:
            return Result()
        if target.kind is TimerKind.OFFSETS_EXPIRY:
            return retention.sweep(st, now_ms)
        if target.kind == regex_refresh.REFRESH:
            return regex_resolution.on_timer(st, target.group_id, now_ms)
        if target.kind in streams_timers.FENCING:
            return streams_describe.on_timer(st, target.kind, target.group_id, target.member_id, target.epoch, now_ms)
        if target.kind == share_heartbeat.SESSION:
            return share_heartbeat.on_session_timeout(st, target.group_id, target.member_id, now_ms)
        if target.kind == share_heartbeat.INITIALIZE:
            return share_heartbeat.on_initialize(st, target.group_id)
        out = Result()
        if target.kind in consumer_timers.FENCING:
            cgroup = st.consumer_groups.get(target.group_id)
            member = None if cgroup is None else cgroup.member(target.member_id)
            if cgroup is None or member is None:
                return out
            if target.kind == consumer_timers.REBALANCE and member.member_epoch != target.epoch:
                return out  # it left that epoch in time
            before = group_state(st, cgroup.group_id)
            records, downgraded = fence_member(st, out, cgroup, member.member_id, now_ms)
            for record in records:
                st.emit(out, record)
            why = _FENCED_BECAUSE[target.kind]
            st.journal.note(cgroup.group_id, journal.cause_of_reason(why), member.member_id,
                            client_id=member.client_id)
            if downgraded:
                migration.after_downgrade(st, out, cgroup.group_id, now_ms)
                return out
            note_transition(st, out, cgroup.group_id, before, f"member {member.member_id} fenced: {why}")
            return out
        group = st.groups.get(target.group_id)
        if group is None:
            return out
        if target.kind is TimerKind.HEARTBEAT:
            on_heartbeat_timer(st, group, target.member_id, out, now_ms)
        elif target.kind is TimerKind.JOIN:
            if group.state is GroupState.PREPARING_REBALANCE:
                on_join_timer(st, group, out, now_ms)
        elif target.kind is TimerKind.SYNC:
            on_sync_timer(st, group, out, now_ms)
        return out

    # ---- inspection -----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The persisted view (offsets and each group's last GroupMetadata); a fresh shard that
        replays this shard's records has the same snapshot."""
        return self.state.snapshot()
