"""JoinGroup: admitting members (dynamic, pending and static) and parking them at the barrier."""

from __future__ import annotations

from dataclasses import dataclass

from broker.coordinators.group.core import consumer_classic_members as classic_members
from broker.coordinators.group.core import streams_topology_description
from broker.coordinators.group.core.base.classic_group import (
    ClassicGroup,
    GroupState,
    Member,
    Parked,
    Protocols,
)
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.records import GroupMetadataRecord
from broker.coordinators.group.core.base.responses import join_response, sync_response
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import TimerKind, TimerTarget, heartbeat_key
from broker.coordinators.group.core.consumer import describe as consumer_describe
from broker.coordinators.group.core.rebalance import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    accept_joining_member,
    cancel_heartbeat,
    complete_join,
    complete_sync,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
)
from broker.coordinators.group.core.state import CoordinatorState
from broker.coordinators.group.core.streams import records as streams_records
from protocol import group_events
from protocol.errors import ErrorCode
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.offsets_log import GroupMetadataValue

# JoinGroup v4+ hands new dynamic members an id and asks them to come back with it (KIP-394).
MEMBER_ID_REQUIRED_VERSION = 4
# JoinGroup v9+ lets a replaced static leader learn it leads without reassigning (KIP-814).
SKIP_ASSIGNMENT_VERSION = 9


@dataclass(frozen=True)
class JoinSpec:
    """A JoinGroup request with the version rules applied."""

    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    version: int
    parked: Parked
    reason: str | None = None  # KIP-800: why the client (re)joins (v8+)

    @classmethod
    def of(cls, req: JoinGroupRequest, ctx: RequestContext) -> JoinSpec:
        version = ctx.api_version
        return cls(
            group_id=req.group_id,
            member_id=req.member_id,
            instance_id=req.group_instance_id if version >= 5 else None,
            protocol_type=req.protocol_type,
            protocols=[(p.name, p.metadata) for p in req.protocols],
            session_timeout_ms=req.session_timeout_ms,
            # v0 has no rebalance timeout; Kafka uses the session timeout in its place.
            rebalance_timeout_ms=req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms,
            version=version,
            parked=Parked(ctx.token, version),
            reason=req.reason if version >= 8 else None,
        )

    def names(self) -> set[str]:
        return {name for name, _ in self.protocols}


def join_group(st: CoordinatorState, req: JoinGroupRequest, ctx: RequestContext, now: int) -> Result:
    out = Result()
    spec = JoinSpec.of(req, ctx)

    def reply(error: ErrorCode, member_id: str) -> Result:
        out.replies.append((ctx.token, join_response(spec.version, error=error, member_id=member_id)))
        return out

    if not spec.group_id:
        return reply(ErrorCode.INVALID_GROUP_ID, spec.member_id)
    cfg = st.config
    if not cfg.group_min_session_timeout_ms <= spec.session_timeout_ms <= cfg.group_max_session_timeout_ms:
        return reply(ErrorCode.INVALID_SESSION_TIMEOUT, spec.member_id)

    consumer_group = st.consumer_groups.get(spec.group_id)
    if consumer_group is not None:
        if consumer_group.members:
            # A classic member inside a consumer group (online migration).
            return classic_members.join(st, consumer_group, spec, ctx, now)
        # An empty consumer group gives its id up to a classic group (its offsets stay).
        for record in consumer_describe.group_deletion_records(consumer_group):
            st.emit(out, record)
    streams_group = st.streams.groups.get(spec.group_id)
    if streams_group is not None:
        if streams_group.members:
            # A streams group's members speak StreamsGroupHeartbeat only (Kafka 4.4 answers this).
            return reply(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, spec.member_id)
        # Offline migration (KIP-1071): an empty streams group gives its id up to a classic group;
        # its committed offsets stay (its topology description goes, KIP-1331).
        for record in [*streams_topology_description.before_deletion(st, streams_group, finalize=False),
                       *streams_records.group_deletion(streams_group)]:
            st.emit(out, record)
    group = st.groups.get(spec.group_id)
    is_new_group = group is None
    written_before = len(out.records)  # a consumer group's deletion, if any
    if group is None:
        if spec.member_id != "":
            return reply(ErrorCode.UNKNOWN_MEMBER_ID, spec.member_id)
        group = ClassicGroup(spec.group_id, state=GroupState.EMPTY, state_timestamp=now)
        st.groups[spec.group_id] = group

    if not accept_joining_member(st, group, spec.member_id):
        removed = group.members.get(spec.member_id)
        if removed is not None:
            complete_sync(removed, out, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
            cancel_heartbeat(st, group, spec.member_id, out)
        group.remove(spec.member_id)
        reply(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    elif spec.member_id == "":
        _join_new_member(st, group, spec, ctx, out, now)
    else:
        _join_existing_member(st, group, spec, ctx, out, now)

    if is_new_group and len(out.records) == written_before:
        # Kafka 4.x writes the new group at once so that it survives a coordinator failover.
        empty = GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=now if group.state_timestamp is None else group.state_timestamp,
            members=[],
        )
        st.emit(out, GroupMetadataRecord(group.group_id, empty))
    return out


def _join_new_member(
    st: CoordinatorState, group: ClassicGroup, spec: JoinSpec, ctx: RequestContext, out: Result, now: int
) -> None:
    if group.state is GroupState.DEAD:
        out.replies.append((ctx.token, join_response(spec.version, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)))
        return
    if not group.supports_protocols(spec.protocol_type, spec.names()):
        out.replies.append((ctx.token, join_response(spec.version, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)))
        return
    new_id = st.new_member_id(spec.instance_id if spec.instance_id is not None else ctx.client_id)
    if spec.instance_id is not None:
        existing = group.static_member_id(spec.instance_id)
        if existing is not None:
            _replace_static_member(st, group, spec, existing, new_id, out, now)
        else:
            _add_member(st, group, spec, ctx, new_id, out, now, "static-member-joined")
    elif spec.version >= MEMBER_ID_REQUIRED_VERSION:
        group.pending_members[new_id] = None
        st.timers.set(
            out,
            heartbeat_key(group.group_id, new_id),
            now + spec.session_timeout_ms,
            TimerTarget(TimerKind.HEARTBEAT, group.group_id, new_id),
        )
        out.replies.append(
            (ctx.token, join_response(spec.version, error=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
        )
    else:
        _add_member(st, group, spec, ctx, new_id, out, now, "member-joined")


def _join_existing_member(
    st: CoordinatorState, group: ClassicGroup, spec: JoinSpec, ctx: RequestContext, out: Result, now: int
) -> None:
    member_id = spec.member_id

    def reply(error: ErrorCode) -> None:
        out.replies.append((ctx.token, join_response(spec.version, error=error, member_id=member_id)))

    if group.state is GroupState.DEAD:
        return reply(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(spec.protocol_type, spec.names()):
        return reply(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if member_id in group.pending_members:
        if spec.instance_id is not None:
            # Pending ids are only ever handed to dynamic members; Kafka fails this as an
            # unexpected state.
            return reply(ErrorCode.UNKNOWN_SERVER_ERROR)
        _add_member(st, group, spec, ctx, member_id, out, now, "member-joined")
        return None
    error = group.validate_member(member_id, spec.instance_id)
    if error:
        return reply(error)
    member = group.members[member_id]
    if group.state is GroupState.PREPARING_REBALANCE:
        _update_member_and_rebalance(st, group, member, spec, out, now, "member-rejoined")
    elif group.state is GroupState.COMPLETING_REBALANCE:
        if member.matches(spec.protocols):
            # Probably a lost JoinGroup response: answer with the current generation again.
            _reply_current(group, member_id, spec, ctx, out, with_members=member_id == group.leader_id)
        else:
            _update_member_and_rebalance(st, group, member, spec, out, now, "metadata-changed")
    elif group.state is GroupState.STABLE:
        if member_id == group.leader_id:
            # A leader's JoinGroup always rebalances: it is how it reacts to metadata changes.
            _update_member_and_rebalance(st, group, member, spec, out, now, "leader-rejoined")
        elif not member.matches(spec.protocols):
            _update_member_and_rebalance(st, group, member, spec, out, now, "metadata-changed")
        else:
            _reply_current(group, member_id, spec, ctx, out, with_members=False)
    else:
        reply(ErrorCode.UNKNOWN_MEMBER_ID)
    return None


def _reply_current(
    group: ClassicGroup, member_id: str, spec: JoinSpec, ctx: RequestContext, out: Result, with_members: bool
) -> None:
    out.replies.append(
        (
            ctx.token,
            join_response(
                spec.version,
                member_id=member_id,
                generation=group.generation,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id,
                members=_member_list(group) if with_members else [],
            ),
        )
    )


def _member_list(group: ClassicGroup) -> list[JoinGroupResponse.Member]:
    return [
        JoinGroupResponse.Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata(group.protocol_name)
        )
        for m in group.members.values()
    ]


def _park_join(group: ClassicGroup, member: Member, spec: JoinSpec, out: Result) -> None:
    # A member re-sending JoinGroup while one is parked supersedes it; Kafka drops the old one
    # unanswered, we answer it so the connection it came on is not stuck behind it.
    complete_join(
        group, member, out, lambda v: join_response(v, error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id)
    )
    group.set_awaiting_join(member, spec.parked)


def _update_member_and_rebalance(
    st: CoordinatorState, group: ClassicGroup, member: Member, spec: JoinSpec, out: Result, now: int, reason: str
) -> None:
    group.update_member(member, spec.protocols, spec.rebalance_timeout_ms, spec.session_timeout_ms)
    _park_join(group, member, spec, out)
    st.journal.joined(group.group_id, member.member_id, now)
    if group.state is GroupState.STABLE:
        # This JoinGroup starts the rebalance: say why.
        cause = group_events.LEADER_REJOINED if reason == "leader-rejoined" else group_events.METADATA_CHANGED
        st.journal.rejoined(st, group, member, cause, spec.reason)
    maybe_prepare_rebalance_or_complete_join(st, group, out, now, reason)


def _add_member(
    st: CoordinatorState,
    group: ClassicGroup,
    spec: JoinSpec,
    ctx: RequestContext,
    member_id: str,
    out: Result,
    now: int,
    reason: str,
) -> None:
    member = Member(
        member_id=member_id,
        group_instance_id=spec.instance_id,
        client_id=ctx.client_id,
        client_host=ctx.client_host,
        rebalance_timeout_ms=spec.rebalance_timeout_ms,
        session_timeout_ms=spec.session_timeout_ms,
        protocol_type=spec.protocol_type,
        protocols=spec.protocols,
        is_new=True,
    )
    if group.state is GroupState.PREPARING_REBALANCE and group.previous_state is GroupState.EMPTY:
        group.new_member_added = True
    group.add(member, spec.parked)
    st.journal.joined(group.group_id, member_id, now)
    st.journal.note(group.group_id, group_events.NEW_MEMBER, member_id, client_id=ctx.client_id,
                    client_host=ctx.client_host, instance_id=spec.instance_id, client_reason=spec.reason,
                    session_timeout_ms=spec.session_timeout_ms, rebalance_timeout_ms=spec.rebalance_timeout_ms,
                    protocols=[name for name, _ in spec.protocols])
    # A new member cannot heartbeat while its JoinGroup is parked; bound it by the new-member
    # timeout so abandoned joins do not pile up in a long rebalance.
    reschedule_heartbeat(st, group, member, out, now, NEW_MEMBER_JOIN_TIMEOUT_MS)
    maybe_prepare_rebalance_or_complete_join(st, group, out, now, reason)


def _replace_static_member(
    st: CoordinatorState, group: ClassicGroup, spec: JoinSpec, old_id: str, new_id: str, out: Result, now: int
) -> None:
    assert spec.instance_id is not None
    leader_before = group.leader_id
    old, new = group.replace_static_member(spec.instance_id, old_id, new_id)
    # Whoever still waits under the old id is a stale duplicate of this instance: fence it.
    if old.awaiting_join is not None:
        parked, old.awaiting_join = old.awaiting_join, None
        out.replies.append(
            (parked.token, join_response(parked.api_version, error=ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        )
    complete_sync(old, out, sync_response(ErrorCode.FENCED_INSTANCE_ID))
    cancel_heartbeat(st, group, old_id, out)
    reschedule_heartbeat(st, group, new, out, now)
    group.update_member(new, spec.protocols, spec.rebalance_timeout_ms, spec.session_timeout_ms)
    group.set_awaiting_join(new, spec.parked)
    st.journal.joined(group.group_id, new_id, now)
    avoided = group.state is GroupState.STABLE and group.protocol_name == group.select_protocol()
    st.journal.note(group.group_id, group_events.STATIC_REJOINED, new_id, instance_id=spec.instance_id,
                    previous_member_id=old_id, avoided_rebalance=avoided, client_id=new.client_id,
                    client_reason=spec.reason)
    st.journal.note(group.group_id, group_events.FENCED, old_id, instance_id=spec.instance_id,
                    why="duplicate instance id: replaced by a new member id")

    if group.state is GroupState.STABLE:
        if avoided:
            # Same protocol: persist the new member id and let it continue without a rebalance.
            st.emit(out, GroupMetadataRecord(group.group_id, group.to_metadata_value()))
            if spec.version >= SKIP_ASSIGNMENT_VERSION:
                is_leader = new_id == group.leader_id
                members = _member_list(group) if is_leader else []
                leader = group.leader_id
            else:
                # Older clients would reassign if told they lead; show them the previous leader id.
                is_leader, members, leader = False, [], leader_before
            complete_join(
                group,
                new,
                out,
                lambda v: join_response(
                    v,
                    member_id=new_id,
                    generation=group.generation,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=leader,
                    skip_assignment=is_leader,
                    members=members,
                ),
            )
        else:
            maybe_prepare_rebalance_or_complete_join(st, group, out, now, "static-member-protocol-changed")
    elif group.state is GroupState.COMPLETING_REBALANCE:
        # The leader may already be assigning to the old member id: start over.
        prepare_rebalance(st, group, out, now, "static-member-replaced")
    else:
        maybe_complete_join_phase(st, group, out, now)
