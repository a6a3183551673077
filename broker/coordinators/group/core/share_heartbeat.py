"""ShareGroupHeartbeat: joining, heartbeating and leaving a share group (Kafka 4.4's rules), the
session timeout that fences a silent member, and topic changes picked up without member action.

Every change is a record, emitted (and so replayed) here: a member's metadata, the group epoch
with its subscription metadata hash, the target assignment (per member and its epoch), a member's
current assignment, and the topic partitions whose share state the group uses.

The rebalance journal hears of each member joining, leaving, fenced or timed out, of each new
group epoch with what its target assignment gave and took from whom (``assignment`` events), and
of the group's passing between Empty and Stable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.coordinators.group.core.base.assignment_interval import can_compute_target
from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import TimerKind, TimerTarget
from broker.coordinators.group.core.consumer.subscriptions import metadata_hash
from broker.coordinators.group.core.share import assignor
from broker.coordinators.group.core.share.group import (
    NEW_GROUP_EPOCH,
    Assignment,
    ShareGroup,
    ShareMember,
    TopicId,
)
from protocol.errors import ErrorCode
from protocol.group_events import (
    FENCED,
    MEMBER_LEFT,
    METADATA_CHANGED,
    NEW_MEMBER,
    PARTITIONS_CHANGED,
    SESSION_TIMEOUT,
)
from protocol.messages.offsets_log_share_groups import (
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
)
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from protocol.payloads.offsets_log_records import (
    ShareGroupCurrentMemberAssignmentRecord,
    ShareGroupMemberMetadataRecord,
    ShareGroupMetadataRecord,
    ShareGroupStatePartitionMetadataRecord,
    ShareGroupTargetAssignmentMemberRecord,
    ShareGroupTargetAssignmentMetadataRecord,
)

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

SESSION = TimerKind.SHARE_SESSION
INITIALIZE = TimerKind.SHARE_INITIALIZE
LEAVE_EPOCH = -1
_Response = ShareGroupHeartbeatResponse
_TopicPartitions = ShareGroupHeartbeatResponse.Assignment.TopicPartitions
# How many partitions an ``assignment`` event names (gained and lost together); counts are whole.
JOURNAL_PARTITIONS = 200


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session:{group_id}:{member_id}"


def initialize_key(group_id: str) -> str:
    return f"share-initialize:{group_id}"


def set_session_timeout(st: CoordinatorState, out: Result, group_id: str, member_id: str, now_ms: int) -> None:
    st.timers.set(out, session_key(group_id, member_id), now_ms + st.config.share_session_timeout_for(group_id),
                  TimerTarget(SESSION, group_id, member_id))


def _error(code: int, message: str | None = None) -> Any:
    return _Response(error_code=code, error_message=message, member_id=None, member_epoch=0,
                     heartbeat_interval_ms=0, assignment=None)


def _wire(assignment: Assignment) -> list[Any]:
    return [_TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items()) if ps]


def _topic_partitions(st: CoordinatorState, names: set[str]) -> dict[str, tuple[TopicId, int]]:
    out = {}
    for name in names:
        topic_id = st.topics.topic_id(name)
        count = st.topics.partition_count(name)
        if topic_id is not None and count is not None:
            out[name] = (topic_id, count)
    return out


def _member_metadata(group_id: str, m: ShareMember) -> ShareGroupMemberMetadataRecord:
    return ShareGroupMemberMetadataRecord(group_id, m.member_id, ShareGroupMemberMetadataValue(
        rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=sorted(m.subscribed_topic_names)))


def _current(group_id: str, member_id: str, epoch: int, previous: int, assigned: Assignment) -> ShareGroupCurrentMemberAssignmentRecord:
    return ShareGroupCurrentMemberAssignmentRecord(group_id, member_id, ShareGroupCurrentMemberAssignmentValue(
        member_epoch=epoch, previous_member_epoch=previous, state=0,
        assigned_partitions=[ShareGroupCurrentMemberAssignmentValue.TopicPartitions(topic_id=t, partitions=sorted(ps))
                             for t, ps in sorted(assigned.items()) if ps]))


def partition_metadata(group_id: str, initializing: dict[TopicId, tuple[str, frozenset[int]]],
                        initialized: dict[TopicId, tuple[str, frozenset[int]]]) -> ShareGroupStatePartitionMetadataRecord:
    Info = ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo
    return ShareGroupStatePartitionMetadataRecord(group_id, ShareGroupStatePartitionMetadataValue(
        initializing_topics=[Info(topic_id=t, topic_name=n, partitions=sorted(ps))
                             for t, (n, ps) in sorted(initializing.items()) if ps],
        initialized_topics=[Info(topic_id=t, topic_name=n, partitions=sorted(ps))
                            for t, (n, ps) in sorted(initialized.items()) if ps],
        deleting_topics=[]))


def _assignable(st: CoordinatorState, group: ShareGroup) -> dict[str, tuple[TopicId, frozenset[int]]]:
    """The subscribed partitions that may be assigned: those whose share state is initialized."""
    out = {}
    for name, (topic_id, count) in _topic_partitions(st, group.subscribed_topics()).items():
        done = group.initialized.get(topic_id, ("", frozenset()))[1] & frozenset(range(count))
        if done:
            out[name] = (topic_id, done)
    return out


def initialized_assignment_pending(st: CoordinatorState, group: ShareGroup) -> bool:
    """Some initialized partition of a subscribed topic is in no member's target assignment: the
    group needs a new epoch (Kafka's ``initializedAssignmentPending``)."""
    assigned: dict[TopicId, set[int]] = {}
    for assignment in group.target.values():
        for topic_id, ps in assignment.items():
            assigned.setdefault(topic_id, set()).update(ps)
    return any(not ps <= assigned.get(topic_id, set()) for topic_id, ps in _assignable(st, group).values())


def maybe_initialize(st: CoordinatorState, out: Result, group: ShareGroup, now_ms: int) -> None:
    """Subscribed partitions whose share state is neither initialized nor being initialized are
    written as initializing; the initialization completes in the timer it arms (``on_initialize``)."""
    todo: dict[TopicId, tuple[str, frozenset[int]]] = {}
    for name, (topic_id, count) in _topic_partitions(st, group.subscribed_topics()).items():
        known = (group.initialized.get(topic_id, ("", frozenset()))[1]
                 | group.initializing.get(topic_id, ("", frozenset()))[1])
        missing = frozenset(range(count)) - known
        if missing:
            todo[topic_id] = (name, missing)
    if not todo:
        return
    initializing = dict(group.initializing)
    for topic_id, (name, ps) in todo.items():
        initializing[topic_id] = (name, initializing.get(topic_id, (name, frozenset()))[1] | ps)
    st.emit(out, partition_metadata(group.group_id, initializing, group.initialized))
    arm_initialize(st, out, group.group_id, now_ms)


def alter_offsets(st: CoordinatorState, group_id: str,
                  partitions: dict[TopicId, tuple[str, frozenset[int]]]) -> tuple[int, list[Any]]:
    """AlterShareGroupOffsets set the start of ``partitions`` (their share state is written): they
    are initialized partitions of the group from now on. As in Kafka, an id that names no group
    becomes an empty share group; a group with members is refused (NON_EMPTY_GROUP), and an id
    of another kind of group is not found."""
    classic = st.groups.get(group_id)
    if group_id in st.consumer_groups or group_id in st.streams.groups or (
            classic is not None and classic.state is not GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND, []
    group = st.share_groups.get(group_id)
    if group is not None and group.members:
        return ErrorCode.NON_EMPTY_GROUP, []
    out = Result()
    if group is None:
        st.emit(out, ShareGroupMetadataRecord(group_id, ShareGroupMetadataValue(epoch=NEW_GROUP_EPOCH, metadata_hash=0)))
        group = st.share_groups[group_id]
    initialized = dict(group.initialized)
    for topic_id, (name, ps) in partitions.items():
        initialized[topic_id] = (name, initialized.get(topic_id, (name, frozenset()))[1] | ps)
    if initialized != group.initialized:
        initializing = {t: (n, ps - initialized.get(t, (n, frozenset()))[1])
                        for t, (n, ps) in group.initializing.items()}
        st.emit(out, partition_metadata(group_id, initializing, initialized))
    return ErrorCode.NONE, out.records


def arm_initialize(st: CoordinatorState, out: Result, group_id: str, now_ms: int) -> None:
    st.timers.set(out, initialize_key(group_id), now_ms, TimerTarget(INITIALIZE, group_id))


def on_initialize(st: CoordinatorState, group_id: str) -> Result:
    """The share state of the initializing partitions exists (kcoord's share partitions start at
    their first fetch, at the partition's end): they become initialized, and the next heartbeat
    assigns them."""
    out = Result()
    group = st.share_groups.get(group_id)
    if group is None or not group.initializing:
        return out
    initialized = dict(group.initialized)
    for topic_id, (name, ps) in group.initializing.items():
        initialized[topic_id] = (name, initialized.get(topic_id, (name, frozenset()))[1] | ps)
    st.emit(out, partition_metadata(group_id, {}, initialized))
    return out


def bump_epoch(st: CoordinatorState, out: Result, group: ShareGroup, now_ms: int,
               cause: str = METADATA_CHANGED, reason: str = "",
               target_before: dict[str, Assignment] | None = None) -> None:
    """A new group epoch (membership, subscriptions, their topics or the initialized partitions
    changed): the epoch and the metadata hash, then the target assignment for it (``maybe_assign``:
    at once, or once the group's assignment interval has passed). The journal hears of the
    assignment with the ``cause`` and ``reason`` of the first change it answers (and what was
    assigned before: ``target_before`` when a removed member's target is already gone)."""
    gid = group.group_id
    st.share_assignment_pending.setdefault(
        gid, (cause, reason, dict(group.target) if target_before is None else target_before, group.group_epoch))
    st.emit(out, ShareGroupMetadataRecord(gid, ShareGroupMetadataValue(
        epoch=group.group_epoch + 1, metadata_hash=metadata_hash(group.subscribed_topics(), st.topics))))
    maybe_assign(st, out, group, now_ms)


def maybe_assign(st: CoordinatorState, out: Result, group: ShareGroup, now_ms: int) -> None:
    """The target assignment for the group epoch, over the initialized partitions, when it is behind
    and (Kafka 4.3+, KIP-1263) the group's last assignment is at least ``share.assignment.interval.ms``
    old; else a later heartbeat computes it. A group left without members has its assignment epoch
    follow at once, with the time 0 (as Kafka writes it), so that its next member is not held back."""
    gid = group.group_id
    if group.group_epoch <= group.assignment_epoch:
        st.share_assignment_pending.pop(gid, None)
        return
    empty = not group.members
    if not empty and not can_compute_target(group.assignment_time, st.config.share_assignment_interval_for(gid),
                                            now_ms):
        return
    cause, reason, target_before, epoch_before = st.share_assignment_pending.pop(
        gid, (METADATA_CHANGED, "", dict(group.target), group.assignment_epoch))
    target = assignor.assign({m.member_id: m.subscribed_topic_names for m in group.members.values()},
                             _assignable(st, group))
    for member_id, assignment in sorted(target.items()):
        if group.target.get(member_id) != assignment:
            st.emit(out, ShareGroupTargetAssignmentMemberRecord(gid, member_id, ShareGroupTargetAssignmentMemberValue(
                topic_partitions=[ShareGroupTargetAssignmentMemberValue.TopicPartition(topic_id=t, partitions=sorted(ps))
                                  for t, ps in sorted(assignment.items())])))
    st.emit(out, ShareGroupTargetAssignmentMetadataRecord(gid, ShareGroupTargetAssignmentMetadataValue(
        assignment_epoch=group.group_epoch, assignment_timestamp=0 if empty else now_ms)))
    if st.journal.enabled:
        st.journal.assignment(gid, cause, **assignment_change(st, group, epoch_before, target_before, reason))


def _named(st: CoordinatorState, assignment: Assignment) -> set[str]:
    out: set[str] = set()
    for topic_id, partitions in assignment.items():
        name = st.topics.topic_name(topic_id) or topic_id.hex()
        out.update(f"{name}-{p}" for p in partitions)
    return out


def assignment_change(st: CoordinatorState, group: ShareGroup, epoch_before: int,
                      target_before: dict[str, Assignment], reason: str) -> dict[str, Any]:
    """What an ``assignment`` event says of a new epoch: the partitions each member gained and
    lost (``topic-partition``), how many partitions are assigned and how many of them to more than
    one member (a share group's partitions may be consumed by several members at once)."""
    holders: dict[str, int] = {}
    gained: dict[str, list[str]] = {}
    lost: dict[str, list[str]] = {}
    named = 0
    for member_id in sorted(set(target_before) | set(group.target)):
        now_held = _named(st, group.target.get(member_id, {}))
        was_held = _named(st, target_before.get(member_id, {}))
        for tp in now_held:
            holders[tp] = holders.get(tp, 0) + 1
        for side, diff in ((gained, now_held - was_held), (lost, was_held - now_held)):
            if diff and named < JOURNAL_PARTITIONS:
                side[member_id] = sorted(diff)[:JOURNAL_PARTITIONS - named]
                named += len(side[member_id])
    return {"reason": reason or None, "epoch_before": epoch_before, "members": len(group.members),
            "partitions": len(holders), "shared_partitions": sum(1 for n in holders.values() if n > 1),
            "gained": gained, "lost": lost, "changed": bool(gained or lost)}


def _reconcile(st: CoordinatorState, out: Result, group: ShareGroup, member: ShareMember) -> bool:
    """Brings the member to the target assignment's epoch; True when its assignment changed (the
    answer then carries it; a new epoch alone does not, as in Kafka)."""
    target = group.target.get(member.member_id, {})
    if member.member_epoch == group.assignment_epoch and member.assigned == target:
        return False
    changed = member.assigned != target
    st.emit(out, _current(group.group_id, member.member_id, group.assignment_epoch, member.member_epoch, target))
    return changed


def remove_member(st: CoordinatorState, out: Result, group: ShareGroup, member_id: str, now_ms: int,
                  cause: str = MEMBER_LEFT) -> None:
    """The member leaves (or is fenced): its records are tombstoned and the others reassigned."""
    gid = group.group_id
    target_before = dict(group.target)
    st.emit(out, ShareGroupCurrentMemberAssignmentRecord(gid, member_id, None))
    if member_id in group.target:
        st.emit(out, ShareGroupTargetAssignmentMemberRecord(gid, member_id, None))
    st.emit(out, ShareGroupMemberMetadataRecord(gid, member_id, None))
    st.timers.cancel(out, session_key(gid, member_id))
    bump_epoch(st, out, group, now_ms, cause, f"member {member_id} removed", target_before)


def _validate(req: ShareGroupHeartbeatRequest) -> str | None:
    if not req.group_id:
        return "GroupId can't be empty."
    if not req.member_id:
        return "MemberId can't be empty."
    if req.member_epoch < LEAVE_EPOCH:
        return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -1."
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if req.rack_id is not None and not req.rack_id.strip():
        return "RackId can't be empty."
    return None


def group_state(st: CoordinatorState, group_id: str) -> str:
    group = st.share_groups.get(group_id)
    return "Dead" if group is None else group.state


def note_transition(st: CoordinatorState, out: Result, group_id: str, before: str, reason: str) -> None:
    """A share group's passing between Empty and Stable, reported as other groups' transitions are
    (the journal's ``state`` events and the broker's log)."""
    group = st.share_groups.get(group_id)
    after = group_state(st, group_id)
    if after != before and group is not None:
        out.transitions.append((group_id, before, after, group.group_epoch, len(group.members), reason))


def share_group_heartbeat(st: CoordinatorState, req: ShareGroupHeartbeatRequest, ctx: RequestContext,
                          now_ms: int) -> Result:
    before = group_state(st, req.group_id)
    out = _heartbeat(st, req, ctx, now_ms)
    joined = req.member_epoch == 0 and any(isinstance(r, ShareGroupMemberMetadataRecord) and r.value is not None
                                           for r in out.records)
    note_transition(st, out, req.group_id, before,
                    f"member {req.member_id} joined" if joined else
                    "member left" if req.member_epoch == LEAVE_EPOCH else "heartbeat")
    return out


def _heartbeat(st: CoordinatorState, req: ShareGroupHeartbeatRequest, ctx: RequestContext, now_ms: int) -> Result:
    out = Result()

    def answer(response: Any) -> Result:
        out.replies.append((ctx.token, response))
        return out

    invalid = _validate(req)
    if invalid is not None:
        return answer(_error(ErrorCode.INVALID_REQUEST, invalid))
    gid = req.group_id
    classic = st.groups.get(gid)
    if gid in st.consumer_groups or (classic is not None and classic.state is not GroupState.DEAD):
        return answer(_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."))
    group = st.share_groups.get(gid)
    if req.member_epoch == LEAVE_EPOCH:
        if group is None:
            return answer(_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
        if req.member_id not in group.members:
            return answer(_error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {gid}."))
        st.journal.note(gid, MEMBER_LEFT, req.member_id, client_id=ctx.client_id)
        remove_member(st, out, group, req.member_id, now_ms)
        return answer(_Response(error_code=0, member_id=req.member_id, member_epoch=LEAVE_EPOCH,
                                heartbeat_interval_ms=0, assignment=None))
    if group is None:
        if req.member_epoch != 0:
            return answer(_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
        group = ShareGroup(gid)
    member = group.members.get(req.member_id)
    if member is None:
        if req.member_epoch != 0:
            return answer(_error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {gid}."))
        if len(group.members) >= st.config.share_max_size:
            return answer(_error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The share group has reached its maximum capacity of {st.config.share_max_size} members."))
        member = ShareMember(req.member_id)
    elif req.member_epoch not in (0, member.member_epoch):
        st.journal.note(gid, FENCED, req.member_id, client_id=ctx.client_id, member_epoch=req.member_epoch,
                        why=f"stale member epoch {req.member_epoch}, the group has it at {member.member_epoch}")
        return answer(_error(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a different epoch ({req.member_epoch}) than the coordinator "
                             f"({member.member_epoch})."))
    joining = req.member_epoch == 0
    updated = ShareMember(
        member.member_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=ctx.client_id, client_host=ctx.client_host,
        subscribed_topic_names=(frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                else member.subscribed_topic_names),
    )
    new_member = req.member_id not in group.members
    if new_member:
        st.share_groups.setdefault(gid, group)
    bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names
    if (new_member or updated.rack_id != member.rack_id or updated.client_id != member.client_id
            or updated.client_host != member.client_host or bump):
        st.emit(out, _member_metadata(gid, updated))
    group = st.share_groups[gid]
    member = group.members[req.member_id]
    if new_member:
        st.journal.note(gid, NEW_MEMBER, req.member_id, client_id=ctx.client_id, client_host=ctx.client_host,
                        rack_id=updated.rack_id, subscribed_topics=sorted(updated.subscribed_topic_names),
                        session_timeout_ms=st.config.share_session_timeout_for(gid))
    if bump:
        bump_epoch(st, out, group, now_ms, NEW_MEMBER if new_member else METADATA_CHANGED,
                   f"member {req.member_id} joined" if new_member else f"member {req.member_id} changed its subscription")
    elif metadata_hash(group.subscribed_topics(), st.topics) != group.metadata_hash:
        bump_epoch(st, out, group, now_ms, PARTITIONS_CHANGED, "subscribed topics changed")
    elif group.assignment_epoch >= group.group_epoch and initialized_assignment_pending(st, group):
        bump_epoch(st, out, group, now_ms, PARTITIONS_CHANGED, "share partitions initialized")
    else:
        maybe_assign(st, out, group, now_ms)  # an assignment held back by the interval, now due
    changed = _reconcile(st, out, group, member)
    maybe_initialize(st, out, group, now_ms)
    set_session_timeout(st, out, gid, member.member_id, now_ms)
    assignment = (_Response.Assignment(topic_partitions=_wire(member.assigned))
                  if joining or changed else None)
    return answer(_Response(error_code=0, member_id=member.member_id, member_epoch=member.member_epoch,
                            heartbeat_interval_ms=st.config.share_heartbeat_interval_for(gid),
                            assignment=assignment))


def on_session_timeout(st: CoordinatorState, group_id: str, member_id: str, now_ms: int) -> Result:
    out = Result()
    group = st.share_groups.get(group_id)
    if group is not None and member_id in group.members:
        before = group.state
        timeout_ms = st.config.share_session_timeout_for(group_id)
        st.journal.note(group_id, SESSION_TIMEOUT, member_id, client_id=group.members[member_id].client_id,
                        session_timeout_ms=timeout_ms, last_heartbeat_age_ms=timeout_ms)
        remove_member(st, out, group, member_id, now_ms, SESSION_TIMEOUT)
        note_transition(st, out, group_id, before, f"member {member_id} fenced: session timeout")
    return out


def on_topics_changed(st: CoordinatorState, topics: set[str], now_ms: int) -> Result:
    """Topics were created, grew or were deleted: every share group subscribed to one gets a new
    epoch and assignment, which its members pick up on their next heartbeat."""
    out = Result()
    for group in list(st.share_groups.values()):
        if (group.members and group.subscribed_topics() & topics
                and metadata_hash(group.subscribed_topics(), st.topics) != group.metadata_hash):
            bump_epoch(st, out, group, now_ms, PARTITIONS_CHANGED, "subscribed topics changed")
    return out
