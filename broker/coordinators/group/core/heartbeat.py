"""Heartbeat: one timer re-arm per call, and the member learns whether a rebalance is on."""

from __future__ import annotations

from broker.coordinators.group.core import consumer_classic_members as classic_members
from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.rebalance import reschedule_heartbeat
from broker.coordinators.group.core.state import CoordinatorState
from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse


def heartbeat(st: CoordinatorState, req: HeartbeatRequest, ctx: RequestContext, now: int) -> Result:
    consumer_group = st.consumer_groups.get(req.group_id) if req.group_id else None
    if consumer_group is not None:
        return classic_members.heartbeat(st, consumer_group, req, ctx, now)
    out = Result()
    out.replies.append((ctx.token, HeartbeatResponse(error_code=int(_heartbeat(st, req, ctx, now, out)))))
    return out


def _heartbeat(st: CoordinatorState, req: HeartbeatRequest, ctx: RequestContext, now: int, out: Result) -> ErrorCode:
    if not req.group_id:
        return ErrorCode.INVALID_GROUP_ID
    group = st.groups.get(req.group_id)
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    instance_id = req.group_instance_id if ctx.api_version >= 3 else None
    error = group.validate_member(req.member_id, instance_id)
    if error:
        return error
    if req.generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    reschedule_heartbeat(st, group, group.members[req.member_id], out, now)
    if group.state is GroupState.PREPARING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE
