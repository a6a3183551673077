"""The rebalance barrier: preparing a rebalance, completing the join phase, the sync phase and
everything that removes members (session expiry, sync timeout, leaving).

Follows Kafka 4.x ``GroupMetadataManager``. Parked JoinGroup/SyncGroup requests are answered by
appending to ``out.replies``; timers are armed and cancelled by key through the shard's book, so
a join phase completes the moment its last expected member arrives, never on a poll.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinators.group.core.base.classic_group import ClassicGroup, GroupState, Member
from broker.coordinators.group.core.base.records import GroupMetadataRecord
from broker.coordinators.group.core.base.responses import join_response, sync_response
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import (
    TimerKind,
    TimerTarget,
    heartbeat_key,
    join_key,
    sync_key,
)
from broker.coordinators.group.core.state import CoordinatorState
from protocol import group_events
from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupResponse
from protocol.messages.sync_group import SyncGroupResponse

# Kafka's internal classic-group new-member join timeout.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


# ---- parked responses and timers ---------------------------------------------------------


def complete_join(
    group: ClassicGroup, member: Member, out: Result, build: Callable[[int], JoinGroupResponse]
) -> bool:
    """Answers ``member``'s parked JoinGroup with ``build(version it was sent with)``, if one is parked."""
    parked = member.awaiting_join
    if parked is None:
        return False
    group.set_awaiting_join(member, None)
    out.replies.append((parked.token, build(parked.api_version)))
    return True


def complete_sync(member: Member, out: Result, response: SyncGroupResponse) -> bool:
    parked = member.awaiting_sync
    if parked is None:
        return False
    member.awaiting_sync = None
    out.replies.append((parked.token, response))
    return True


def reschedule_heartbeat(
    st: CoordinatorState, group: ClassicGroup, member: Member, out: Result, now: int, timeout: int | None = None
) -> None:
    deadline = now + (member.session_timeout_ms if timeout is None else timeout)
    st.timers.set(
        out,
        heartbeat_key(group.group_id, member.member_id),
        deadline,
        TimerTarget(TimerKind.HEARTBEAT, group.group_id, member.member_id),
    )


def cancel_heartbeat(st: CoordinatorState, group: ClassicGroup, member_id: str, out: Result) -> None:
    st.timers.cancel(out, heartbeat_key(group.group_id, member_id))


def _arm_join_timer(
    st: CoordinatorState, group: ClassicGroup, out: Result, deadline: int, initial: tuple[int, int] | None
) -> None:
    group.initial_delay = initial
    st.timers.set(out, join_key(group.group_id), deadline, TimerTarget(TimerKind.JOIN, group.group_id))


def _cancel_join_timer(st: CoordinatorState, group: ClassicGroup, out: Result) -> None:
    group.initial_delay = None
    st.timers.cancel(out, join_key(group.group_id))


def unknown_member_join(version: int) -> JoinGroupResponse:
    return join_response(version, error=ErrorCode.UNKNOWN_MEMBER_ID, member_id="")


def remove_member(st: CoordinatorState, group: ClassicGroup, member: Member, out: Result) -> None:
    """Removes a member, answering whatever it had parked: its JoinGroup with UNKNOWN_MEMBER_ID as
    Kafka does, and (where Kafka would leave it hanging) its SyncGroup likewise, so no
    connection waits forever for an answer."""
    complete_join(group, member, out, unknown_member_join)
    complete_sync(member, out, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
    cancel_heartbeat(st, group, member.member_id, out)
    group.remove(member.member_id)


# ---- preparing and completing the join phase -----------------------------------------------


def maybe_prepare_rebalance_or_complete_join(
    st: CoordinatorState, group: ClassicGroup, out: Result, now: int, reason: str
) -> None:
    if group.can_rebalance():
        prepare_rebalance(st, group, out, now, reason)
    else:
        maybe_complete_join_phase(st, group, out, now)


def prepare_rebalance(st: CoordinatorState, group: ClassicGroup, out: Result, now: int, reason: str) -> None:
    if group.state is GroupState.COMPLETING_REBALANCE:
        reset_and_propagate_assignment_with_error(st, group, ErrorCode.REBALANCE_IN_PROGRESS, out, now)
    remove_sync_expiration(st, group, out)
    initial = group.state is GroupState.EMPTY
    if initial:
        # A new group waits a little so that members starting together land in one generation.
        delay = st.config.group_initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        group.new_member_added = False
        _arm_join_timer(st, group, out, now + delay, (delay, remaining))
    group.transition_to(GroupState.PREPARING_REBALANCE, now, out, reason)
    if not initial:
        maybe_complete_join_else_schedule(st, group, out, now)


def maybe_complete_join_else_schedule(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    if group.has_all_members_joined():
        complete_join_phase(st, group, out, now)
    else:
        _arm_join_timer(st, group, out, now + group.rebalance_timeout_ms(), None)


def maybe_complete_join_phase(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    if group.state is not GroupState.PREPARING_REBALANCE:
        return
    if group.previous_state is GroupState.EMPTY:
        return  # the initial rebalance waits for its delay timer
    if group.has_all_members_joined():
        complete_join_phase(st, group, out, now)


def on_join_timer(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    if group.initial_delay is None:
        complete_join_phase(st, group, out, now)
        return
    delay, remaining = group.initial_delay
    if group.new_member_added and remaining != 0:
        # Members are still arriving: wait another delay, never beyond the rebalance timeout.
        group.new_member_added = False
        new_delay = min(st.config.group_initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)
        _arm_join_timer(st, group, out, now + new_delay, (new_delay, new_remaining))
    else:
        complete_join_phase(st, group, out, now)


def complete_join_phase(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    _cancel_join_timer(st, group, out)
    for member in [m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
        st.journal.note(group.group_id, group_events.REBALANCE_TIMEOUT, member.member_id, client_id=member.client_id,
                        rebalance_timeout_ms=member.rebalance_timeout_ms,
                        why="did not rejoin within its rebalance timeout (max.poll.interval.ms)")
        cancel_heartbeat(st, group, member.member_id, out)
        group.remove(member.member_id)
    if group.state is GroupState.DEAD:
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined yet (only static members remain): wait another rebalance timeout.
        _arm_join_timer(st, group, out, now + group.rebalance_timeout_ms(), None)
        return
    group.init_next_generation(now, out, "join-complete")
    if group.state is GroupState.EMPTY:
        st.emit(out, GroupMetadataRecord(group.group_id, group.to_metadata_value({})))
        return
    leader_members = [
        JoinGroupResponse.Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=m.metadata(group.protocol_name),
        )
        for m in group.members.values()
    ]
    for member in group.members.values():
        is_leader = member.member_id == group.leader_id

        def build(version: int, member: Member = member, is_leader: bool = is_leader) -> JoinGroupResponse:
            return join_response(
                version,
                member_id=member.member_id,
                generation=group.generation,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                members=leader_members if is_leader else [],
            )

        complete_join(group, member, out, build)
        reschedule_heartbeat(st, group, member, out, now)
        member.is_new = False
        group.pending_sync[member.member_id] = None
    schedule_pending_sync(st, group, out, now)


# ---- the sync phase ------------------------------------------------------------------------


def schedule_pending_sync(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    group.sync_generation = group.generation
    st.timers.set(out, sync_key(group.group_id), now + group.rebalance_timeout_ms(), TimerTarget(TimerKind.SYNC, group.group_id))


def remove_sync_expiration(st: CoordinatorState, group: ClassicGroup, out: Result) -> None:
    group.pending_sync.clear()
    st.timers.cancel(out, sync_key(group.group_id))


def remove_pending_sync_member(st: CoordinatorState, group: ClassicGroup, member_id: str, out: Result) -> None:
    group.pending_sync.pop(member_id, None)
    if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        if not group.pending_sync:
            st.timers.cancel(out, sync_key(group.group_id))
    else:
        st.timers.cancel(out, sync_key(group.group_id))


def on_sync_timer(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> None:
    if group.sync_generation != group.generation:
        return
    if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync:
        return
    for member_id in list(group.pending_sync):
        member = group.members.get(member_id)
        if member is not None:
            st.journal.note(group.group_id, group_events.SYNC_TIMEOUT, member_id, client_id=member.client_id,
                            why="did not send SyncGroup within the rebalance timeout")
            remove_member(st, group, member, out)
        group.pending_sync.pop(member_id, None)
    prepare_rebalance(st, group, out, now, "sync-timeout")


def propagate_assignment(st: CoordinatorState, group: ClassicGroup, error: ErrorCode, out: Result, now: int) -> None:
    ok = error is ErrorCode.NONE
    for member in group.members.values():
        response = sync_response(
            error,
            protocol_type=group.protocol_type if ok else None,
            protocol_name=group.protocol_name if ok else None,
            assignment=member.assignment,
        )
        if complete_sync(member, out, response):
            # A session that lapsed while the member was parked was ignored; start it afresh.
            reschedule_heartbeat(st, group, member, out, now)


def reset_and_propagate_assignment_with_error(
    st: CoordinatorState, group: ClassicGroup, error: ErrorCode, out: Result, now: int
) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(st, group, error, out, now)


def set_and_propagate_assignment(
    st: CoordinatorState, group: ClassicGroup, assignment: dict[str, bytes], out: Result, now: int
) -> None:
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
    propagate_assignment(st, group, ErrorCode.NONE, out, now)


# ---- members going away --------------------------------------------------------------------


def on_heartbeat_timer(st: CoordinatorState, group: ClassicGroup, member_id: str, out: Result, now: int) -> None:
    if group.state is GroupState.DEAD:
        return
    if member_id in group.pending_members:
        group.remove(member_id)
        if group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
            complete_join_phase(st, group, out, now)
        return
    member = group.members.get(member_id)
    if member is None or member.has_satisfied_heartbeat():
        return
    # The timer is re-armed at every heartbeat, so it fires a session timeout after the last one.
    timeout = NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms
    st.journal.note(group.group_id, group_events.SESSION_TIMEOUT, member_id, client_id=member.client_id,
                    last_heartbeat_age_ms=timeout, session_timeout_ms=member.session_timeout_ms)
    remove_member_and_update_group(st, group, member, out, now, "session-timeout")


def remove_member_and_update_group(
    st: CoordinatorState, group: ClassicGroup, member: Member, out: Result, now: int, reason: str
) -> None:
    remove_member(st, group, member, out)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(st, group, out, now, reason)
    elif group.state is GroupState.PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join_phase(st, group, out, now)


def accept_joining_member(st: CoordinatorState, group: ClassicGroup, member_id: str) -> bool:
    max_size = st.config.group_max_size
    if group.state in (GroupState.EMPTY, GroupState.DEAD):
        return True
    if group.state is GroupState.PREPARING_REBALANCE:
        member = group.members.get(member_id)
        # Counting members awaiting join (not the group size) lets the last rejoiners be turned
        # away when the limit was lowered.
        return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join < max_size
    return member_id in group.members or len(group.members) < max_size
