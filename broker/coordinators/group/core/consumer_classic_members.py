"""Classic members inside a consumer group (online migration, Kafka 4).

A consumer still on the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) keeps working
in a consumer group: the coordinator computes its assignment like any member's and hands it out
through SyncGroup, and tells it to rejoin (REBALANCE_IN_PROGRESS) when it has partitions to give up
or to collect. Its member epoch is the generation it sees. Kafka's ``classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup``, ``classicGroupHeartbeatToConsumerGroup`` and
``classicGroupLeaveToConsumerGroup``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.coordinators.group.core import consumer_migration as migration
from broker.coordinators.group.core import consumer_timers
from broker.coordinators.group.core.base.classic_group import CONSUMER_PROTOCOL_TYPE
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.responses import join_response, sync_response
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer.group import ConsumerGroup
from broker.coordinators.group.core.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinators.group.core.consumer_heartbeat import (
    HeartbeatError,
    MemberOperation,
    group_state,
    note_transition,
    remove_members,
)
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.payloads.consumer_protocol import decode_subscription

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

# JoinGroup v4+ hands new dynamic members an id and asks them to come back with it (KIP-394).
_MEMBER_ID_REQUIRED_VERSION = 4


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's ``validateConsumerGroupMember``: the member by instance id (it must be this member)
    or by member id."""
    if instance_id is None:
        member = group.member(member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        return member
    static_id = group.static_member_id(instance_id)
    member = None if static_id is None else group.member(static_id)
    if member is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member with instance id {instance_id} is not a member of group {group.group_id}.")
    if member.member_id != member_id:
        raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                             f"{instance_id} was fenced by member {member.member_id}.")
    return member


def _require_classic(member: ConsumerGroupMember) -> ClassicMemberMetadata:
    if member.classic is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {member.member_id} does not use the classic protocol.")
    return member.classic


def _require_generation(member: ConsumerGroupMember, generation: int) -> None:
    if member.member_epoch != generation:
        raise HeartbeatError(ErrorCode.ILLEGAL_GENERATION, f"The request generation id {generation} is not equal "
                             f"to the member epoch {member.member_epoch} of member {member.member_id}.")


def must_rejoin(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a classic member has to rejoin to move on: the group has a newer epoch, it has
    partitions to give up, or partitions it waited for are free now."""
    return (member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member)))


# ---- JoinGroup -----------------------------------------------------------------------------------

class ClassicJoin(MemberOperation):
    """A JoinGroup into a consumer group that has members."""

    def __init__(self, state: CoordinatorState, spec: Any, ctx: RequestContext, now: int) -> None:
        super().__init__(state, ctx, now)
        self.spec = spec
        self.new_member = False
        self.replaced: str | None = None  # the member id a static member took over from

    def run(self, group: ConsumerGroup) -> Result:
        spec = self.spec
        try:
            response, member_id = self._join(group)
        except HeartbeatError as exc:
            self.records.clear()
            self.out = Result()
            self.out.replies.append((spec.parked.token, join_response(spec.version, error=exc.code,
                                                                      member_id=spec.member_id)))
            return self.out
        if response.error_code != 0:
            self.out.replies.append((spec.parked.token, response))
            return self.out
        gid = group.group_id
        self.finish(gid, member_id if spec.member_id == "" or self.new_member else None, "classic member rejoined")
        live = self.st.consumer_groups.get(gid)
        if live is not None and self.replaced is not None and self._may_downgrade_after_replacement(live):
            # The instance that replaced the last consumer-protocol member is a classic one: the
            # group goes back to classic with it in (Kafka's validateOnlineDowngradeWithReplacedMemberId).
            for record in migration.downgrade_records(self.st, live, "", self.now):
                self.st.emit(self.out, record)
            migration.after_downgrade(self.st, self.out, gid, self.now, rebalance=False)
            self.out.replies.append((spec.parked.token, response))
            return self.out
        consumer_timers.cancel_join_timeout(self.st, self.out, gid, member_id)
        consumer_timers.set_session_timeout(self.st, self.out, gid, member_id, self.now + spec.session_timeout_ms)
        consumer_timers.set_sync_timeout(self.st, self.out, gid, member_id, self.now + spec.rebalance_timeout_ms)
        self.out.replies.append((spec.parked.token, response))
        return self.out

    def _may_downgrade_after_replacement(self, group: ConsumerGroup) -> bool:
        return (self.config.downgrade_enabled and bool(group.members)
                and group.classic_member_count == len(group.members)
                and len(group.members) <= self.config.group_max_size)

    def _join(self, group: ConsumerGroup) -> tuple[Any, str]:
        spec, ctx = self.spec, self.ctx
        unknown = spec.member_id == ""
        member_id = self.st.new_member_id("")[1:] if unknown else spec.member_id
        self.new_member = group.member(member_id) is None
        if group.member(member_id) is None and len(group.members) >= self.config.consumer_max_size:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                 f"capacity of {self.config.consumer_max_size} members.")
        if not group.supports_classic_protocols(spec.protocol_type, frozenset(spec.names())):
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Member {member_id}'s protocols are not supported.")
        if unknown and spec.instance_id is None and spec.version >= _MEMBER_ID_REQUIRED_VERSION:
            # The member comes back with this id; nothing is kept until it does.
            return join_response(spec.version, error=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id), member_id

        if spec.instance_id is None:
            member = group.member(member_id) or ConsumerGroupMember(member_id)
        else:
            member = self._static_member(group, member_id, unknown)

        try:
            subscription = decode_subscription(spec.protocols[0][1]) if spec.protocols else None
        except DecodeError:
            subscription = None
        if subscription is None:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Member {member_id}'s consumer protocol subscription cannot be read.")
        updated = replace(
            member,
            instance_id=spec.instance_id if spec.instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(spec.rebalance_timeout_ms if spec.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            subscribed_topic_names=frozenset(subscription.topics),
            subscribed_topic_regex=None,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            classic=ClassicMemberMetadata(spec.session_timeout_ms, tuple(spec.protocols)),
        )
        owned = migration.owned_by_id(spec.protocols[0][1], self.st.topics)
        updated = self.advance(group, member, updated, owned)
        assert updated.classic is not None
        response = join_response(spec.version, member_id=member_id, generation=updated.member_epoch,
                                 protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=updated.classic.protocol_name,
                                 leader="")
        return response, member_id

    def _static_member(self, group: ConsumerGroup, member_id: str, unknown: bool) -> ConsumerGroupMember:
        instance_id = self.spec.instance_id
        existing_id = group.static_member_id(instance_id)
        existing = None if existing_id is None else group.member(existing_id)
        if unknown:
            if existing is None:
                return group.member(member_id) or ConsumerGroupMember(member_id)
            # The instance rejoins under a new member id and takes over the old one's partitions,
            # whichever protocol the old one used.
            self.replaced = existing.member_id
            return self.replace_static(group, existing, member_id)
        if existing is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {existing.member_id}.")
        return existing


def join(state: CoordinatorState, group: ConsumerGroup, spec: Any, ctx: RequestContext, now: int) -> Result:
    return ClassicJoin(state, spec, ctx, now).run(group)


# ---- SyncGroup -----------------------------------------------------------------------------------

def sync(state: CoordinatorState, group: ConsumerGroup, req: Any, ctx: RequestContext, now: int) -> Result:
    out = Result()
    instance_id = req.group_instance_id if ctx.api_version >= 3 else None
    try:
        if not group.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group.group_id} is empty.")
        member = _member(group, req.member_id, instance_id)
        classic = _require_classic(member)
        _require_generation(member, req.generation_id)
        if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Protocol type mismatch.")
        if req.protocol_name is not None and req.protocol_name != classic.protocol_name:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "Protocol name mismatch.")
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # A newer rebalance started: rejoin to catch up (bounded by the join timeout).
            consumer_timers.set_join_timeout_if_absent(state, out, group.group_id, member.member_id,
                                                       now + member.rebalance_timeout_ms)
            raise HeartbeatError(ErrorCode.REBALANCE_IN_PROGRESS, "A new rebalance is in progress.")
    except HeartbeatError as exc:
        out.replies.append((ctx.token, sync_response(exc.code)))
        return out
    gid = group.group_id
    consumer_timers.cancel_sync_timeout(state, out, gid, member.member_id)
    consumer_timers.set_session_timeout(state, out, gid, member.member_id, now + classic.session_timeout_ms)
    first_metadata = classic.supported_protocols[0][1] if classic.supported_protocols else b""
    blob = migration.assignment_blob(member.assigned_partitions, state.topics, first_metadata)
    out.replies.append((ctx.token, sync_response(protocol_type=CONSUMER_PROTOCOL_TYPE,
                                                 protocol_name=classic.protocol_name, assignment=blob)))
    return out


# ---- Heartbeat -----------------------------------------------------------------------------------

def heartbeat(state: CoordinatorState, group: ConsumerGroup, req: Any, ctx: RequestContext, now: int) -> Result:
    out = Result()
    instance_id = req.group_instance_id if ctx.api_version >= 3 else None
    try:
        member = _member(group, req.member_id, instance_id)
        classic = _require_classic(member)
        _require_generation(member, req.generation_id)
    except HeartbeatError as exc:
        out.replies.append((ctx.token, HeartbeatResponse(error_code=exc.code)))
        return out
    gid = group.group_id
    consumer_timers.set_session_timeout(state, out, gid, member.member_id, now + classic.session_timeout_ms)
    error = ErrorCode.NONE
    if must_rejoin(group, member):
        error = ErrorCode.REBALANCE_IN_PROGRESS
        consumer_timers.set_join_timeout_if_absent(state, out, gid, member.member_id, now + member.rebalance_timeout_ms)
    out.replies.append((ctx.token, HeartbeatResponse(error_code=int(error))))
    return out


# ---- LeaveGroup ----------------------------------------------------------------------------------

def leave(state: CoordinatorState, group: ConsumerGroup, leaving: list[tuple[str, str | None]], out: Result,
          now: int) -> list[tuple[str, str | None, ErrorCode]]:
    """Removes classic members (by member id, or by instance id as admin tools do) and bumps the
    group epoch once for all of them."""
    results: list[tuple[str, str | None, ErrorCode]] = []
    removed: list[str] = []
    for member_id, instance_id in leaving:
        try:
            if instance_id is None:
                member = group.member(member_id)
                if member is None:
                    raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is unknown.")
            else:
                static_id = group.static_member_id(instance_id)
                member = None if static_id is None else group.member(static_id)
                if member is None:
                    raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if member_id and member.member_id != member_id:
                    raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, "Fenced instance id.")
            _require_classic(member)
        except HeartbeatError as exc:
            results.append((member_id, instance_id, ErrorCode(exc.code)))
            continue
        if member.member_id not in removed:
            removed.append(member.member_id)
        results.append((member.member_id, instance_id, ErrorCode.NONE))
    if removed:
        gid = group.group_id
        before = group_state(state, gid)
        for record in remove_members(state, out, group, removed):
            state.emit(out, record)
        note_transition(state, out, gid, before, f"classic member{'s' if len(removed) > 1 else ''} "
                        f"{', '.join(removed)} left")
    return results
