"""SyncGroup: the leader's assignment is stored and every member collects its own share."""

from __future__ import annotations

from broker.coordinators.group.core import consumer_classic_members as classic_members
from broker.coordinators.group.core.base.classic_group import ClassicGroup, GroupState, Parked
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.records import GroupMetadataRecord
from broker.coordinators.group.core.base.responses import sync_response
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.rebalance import (
    complete_sync,
    remove_pending_sync_member,
    set_and_propagate_assignment,
)
from broker.coordinators.group.core.state import CoordinatorState
from protocol.errors import ErrorCode
from protocol.messages.sync_group import SyncGroupRequest


def _inconsistent(requested: str | None, actual: str | None) -> bool:
    return requested is not None and actual is not None and requested != actual


def _validate(group: ClassicGroup, req: SyncGroupRequest, instance_id: str | None) -> ErrorCode:
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    error = group.validate_member(req.member_id, instance_id)
    if error:
        return error
    if req.generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(req.protocol_name, group.protocol_name):
        return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    return ErrorCode.NONE


def sync_group(st: CoordinatorState, req: SyncGroupRequest, ctx: RequestContext, now: int) -> Result:
    out = Result()

    def reply(error: ErrorCode) -> Result:
        out.replies.append((ctx.token, sync_response(error)))
        return out

    if not req.group_id:
        return reply(ErrorCode.INVALID_GROUP_ID)
    consumer_group = st.consumer_groups.get(req.group_id)
    if consumer_group is not None:
        return classic_members.sync(st, consumer_group, req, ctx, now)
    group = st.groups.get(req.group_id)
    if group is None or group.state is GroupState.EMPTY:
        return reply(ErrorCode.UNKNOWN_MEMBER_ID)
    instance_id = req.group_instance_id if ctx.api_version >= 3 else None
    error = _validate(group, req, instance_id)
    if error:
        return reply(error)
    if group.state is GroupState.PREPARING_REBALANCE:
        return reply(ErrorCode.REBALANCE_IN_PROGRESS)

    member = group.members[req.member_id]
    if group.state is GroupState.COMPLETING_REBALANCE:
        # A repeated SyncGroup supersedes the parked one (which Kafka would never answer).
        complete_sync(member, out, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = Parked(ctx.token, ctx.api_version)
        remove_pending_sync_member(st, group, member.member_id, out)
        if member.member_id == group.leader_id:
            given = {a.member_id: a.assignment for a in req.assignments}
            assignment = {m: given.get(m, b"") for m in group.members}
            # The reply leaves only after this record is durable, which is when Kafka moves to
            # Stable and hands out the assignments.
            st.emit(out, GroupMetadataRecord(group.group_id, group.to_metadata_value(assignment)))
            set_and_propagate_assignment(st, group, assignment, out, now)
            group.transition_to(GroupState.STABLE, now, out, "assignment-stored")
        return out

    remove_pending_sync_member(st, group, member.member_id, out)
    out.replies.append(
        (
            ctx.token,
            sync_response(
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            ),
        )
    )
    return out
