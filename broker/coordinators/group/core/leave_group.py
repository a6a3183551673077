"""LeaveGroup: v0-2 remove the sender, v3+ remove a batch of members (incl. by instance id)."""

from __future__ import annotations

from broker.coordinators.group.core import consumer_classic_members as classic_members
from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.rebalance import (
    cancel_heartbeat,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    remove_member,
)
from broker.coordinators.group.core.state import CoordinatorState
from protocol import group_events
from protocol.errors import ErrorCode
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse

BATCH_VERSION = 3
REASON_VERSION = 5  # KIP-800: members say why they leave


def leave_group(st: CoordinatorState, req: LeaveGroupRequest, ctx: RequestContext, now: int) -> Result:
    out = Result()
    version = ctx.api_version
    reasons: dict[tuple[str, str | None], str] = {}
    if version >= BATCH_VERSION:
        leaving: list[tuple[str, str | None]] = [(m.member_id, m.group_instance_id) for m in req.members]
        if version >= REASON_VERSION:
            reasons = {(m.member_id, m.group_instance_id): m.reason for m in req.members if m.reason}
    else:
        leaving = [(req.member_id, None)]
    top, results = _leave(st, req.group_id, leaving, out, now, reasons)
    if version >= BATCH_VERSION:
        members = [
            LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e))
            for m, i, e in results
        ]
        response = LeaveGroupResponse(error_code=int(top), members=members)
    else:
        # Kafka folds the single member's outcome into the top-level error before v3.
        folded = top if top else next((e for _, _, e in results if e), ErrorCode.NONE)
        response = LeaveGroupResponse(error_code=int(folded))
    out.replies.append((ctx.token, response))
    return out


def _leave(
    st: CoordinatorState, group_id: str, leaving: list[tuple[str, str | None]], out: Result, now: int,
    reasons: dict[tuple[str, str | None], str],
) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, []
    consumer_group = st.consumer_groups.get(group_id)
    if consumer_group is not None:
        return ErrorCode.NONE, classic_members.leave(st, consumer_group, leaving, out, now)
    group = st.groups.get(group_id)
    if group is None:
        return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    results: list[tuple[str, str | None, ErrorCode]] = []
    removed_any = False
    for member_id, instance_id in leaving:
        if member_id == "":
            # Admin tools remove static members by instance id alone.
            current = group.static_member_id(instance_id) if instance_id is not None else None
            if current is None:
                results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            member = group.members[current]
            st.journal.note(group_id, group_events.ADMIN, current, instance_id=instance_id, client_id=member.client_id,
                            client_reason=reasons.get((member_id, instance_id)))
            remove_member(st, group, member, out)
        elif member_id in group.pending_members:
            group.remove(member_id)
            cancel_heartbeat(st, group, member_id, out)
        else:
            error = group.validate_member(member_id, instance_id)
            if error:
                results.append((member_id, instance_id, error))
                continue
            member = group.members[member_id]
            st.journal.note(group_id, group_events.MEMBER_LEFT, member_id, instance_id=instance_id,
                            client_id=member.client_id, client_reason=reasons.get((member_id, instance_id)))
            remove_member(st, group, member, out)
        removed_any = True
        results.append((member_id, instance_id, ErrorCode.NONE))
    if removed_any:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(st, group, out, now, "member-left")
        elif group.state is GroupState.PREPARING_REBALANCE:
            maybe_complete_join_phase(st, group, out, now)
    return ErrorCode.NONE, results
