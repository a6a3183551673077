"""ConsumerGroupHeartbeat (KIP-848): join, stay, reconcile and leave, in one request.

Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` in three steps, all computed from the
group as it is, with the records collected and replayed at the end (so the group changes only
through its records):

1. create or update the member; a changed subscription (or a change in the subscribed topics:
   a new topic matching, a partition count grown) bumps the group epoch;
2. if the group epoch is ahead of the target assignment epoch, run the assignor and write the
   members whose target changed, then the new target assignment epoch and its time; as in Kafka
   4.3+ (KIP-1263), at most once per assignment interval (``consumer.assignment.interval.ms``,
   1 s by default): a change within it waits for a heartbeat after it, and the group stays
   Assigning meanwhile;
3. move the member one step towards its target (``reconcile``): it gets a partition only once its
   previous owner has revoked it.

The member's session timeout (``group.consumer.session.timeout.ms``) is re-armed on every
heartbeat; while it has partitions to revoke, its rebalance timeout runs too, and a member that
does not revoke in time is fenced. Errors are Kafka's: a member whose epoch is not what the
coordinator knows is FENCED_MEMBER_EPOCH and rejoins with epoch 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.coordinators.group.core import consumer_regex_refresh as regex_refresh
from broker.coordinators.group.core.base.assignment_interval import can_compute_target
from broker.coordinators.group.core.base.context import RequestContext, TopicView
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer import records as rec
from broker.coordinators.group.core.consumer.assignor_api import Assignment, TopicDescriber, TopicId
from broker.coordinators.group.core.consumer.assignors import ASSIGNORS, PartitionAssignorError
from broker.coordinators.group.core.consumer.group import ConsumerGroup, most_asked_for
from broker.coordinators.group.core.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinators.group.core.consumer.reconcile import (
    FencedMemberEpochError,
    reconcile,
    validate_member_epoch,
)
from broker.coordinators.group.core.consumer.subscriptions import (
    InvalidRegularExpression,
    compile_regex,
    member_topic_names,
    metadata_hash,
    resolve,
)
from broker.coordinators.group.core.consumer.target_assignment import build_target_assignment
from broker.coordinators.group.core.consumer_regex_refresh import RegexChange
from broker.coordinators.group.core.consumer_timers import (
    cancel_member_timers,
    set_rebalance_timeout,
    set_session_timeout,
)
from protocol.errors import ErrorCode
from protocol.group_events import FENCED, MEMBER_LEFT, NEW_MEMBER
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

_Assignment = ConsumerGroupHeartbeatResponse.Assignment
_TopicPartitions = ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Topics:
    """The assignor's view of the broker's topics (by id)."""

    def __init__(self, topics: TopicView) -> None:
        self.topics = topics

    def partition_count(self, topic: TopicId) -> int:
        name = self.topics.topic_name(topic)
        count = None if name is None else self.topics.partition_count(name)
        return -1 if count is None else count

    def racks_for_partition(self, topic: TopicId, partition: int) -> frozenset[str]:
        return frozenset()


def error_response(code: int, message: str | None = None) -> Any:
    """What a heartbeat that failed answers (Kafka's handleOperationException)."""
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message, member_id=None, member_epoch=0,
                                          heartbeat_interval_ms=0)


def describer(topics: TopicView) -> TopicDescriber:
    return _Topics(topics)


# ---- validation (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid) -----------------------

def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.INVALID_REQUEST, message)


def validate(req: Any, version: int, assignors: Collection[str]) -> None:
    if not req.group_id:
        raise _invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise _invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if version >= 1 and not req.member_id:
        raise _invalid("MemberId can't be empty.")
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not req.member_id:
            raise _invalid("MemberId can't be empty.")
    elif epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not req.member_id:
            raise _invalid("MemberId can't be empty.")
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    else:
        raise _invalid(f"MemberEpoch {epoch} is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not "
                             f"supported. Supported assignors: {', '.join(assignors)}.")
    if req.subscribed_topic_regex:
        try:
            compile_regex(req.subscribed_topic_regex)
        except InvalidRegularExpression as exc:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None


def _owned(req: Any) -> dict[TopicId, list[int]] | None:
    if req.topic_partitions is None:
        return None
    return {tp.topic_id: list(tp.partitions) for tp in req.topic_partitions}


def response_assignment(assignment: Mapping[TopicId, frozenset[int]]) -> Any:
    return _Assignment(topic_partitions=[_TopicPartitions(topic_id=t, partitions=sorted(p))
                                         for t, p in sorted(assignment.items()) if p])


# ---- the operation ---------------------------------------------------------------------------

class MemberOperation:
    """What every request that moves a consumer-group member shares (ConsumerGroupHeartbeat, and
    JoinGroup of a classic member inside a consumer group): the records it collects, the update of
    the member, the group epoch and target assignment that follow, and the reconciliation step."""

    def __init__(self, state: CoordinatorState, ctx: RequestContext, now: int) -> None:
        self.st = state
        self.ctx = ctx
        self.now = now
        self.config = state.config
        self.records: list[Any] = []
        self.out = Result()
        self.checked_topics_version: int | None = None
        # Set when the request turned a classic group into this consumer group (online upgrade).
        self.upgraded: Any = None
        # Set when removing a member turned this consumer group back into a classic group.
        self.downgraded = False
        # Set when the request asks for the group's regular expressions to be resolved.
        self.regex_refresh = False

    def finish(self, group_id: str, joined: str | None, default_reason: str) -> None:
        """Replays the records collected (only records change a group's state: computing it is a
        walk over the members, not for every steady heartbeat) and notes the group's transition."""
        if self.records:
            before = group_state(self.st, group_id)
            for record in self.records:
                self.st.emit(self.out, record)
            from broker.coordinators.group.core import consumer_migration as migration  # imports this module

            if self.upgraded is not None:
                migration.after_upgrade(self.st, self.out, self.upgraded, self.now)
            if self.downgraded:
                migration.after_downgrade(self.st, self.out, group_id, self.now)
                return
            reason = f"member {joined} joined" if joined is not None else default_reason
            if self.upgraded is not None:
                reason = f"upgraded from a classic group: {reason}"
            note_transition(self.st, self.out, group_id, before, reason)
        group = self.st.consumer_groups.get(group_id)
        if group is not None and self.checked_topics_version is not None:
            group.topics_version = self.checked_topics_version
        if group is not None and self.regex_refresh:
            regex_refresh.schedule(self.st, self.out, group_id, self.ctx.may_describe_topic, self.now)

    def advance(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                owned: Any) -> ConsumerGroupMember:
        """Records ``updated`` if it differs from ``member``, bumps the group epoch when the
        subscriptions changed, computes a new target assignment when the group epoch is ahead of it,
        and moves the member one step towards its target. Returns the member as it now stands."""
        gid, topics, member_id = group.group_id, self.st.topics, updated.member_id
        names_changed = False
        if updated is not member and updated != member:
            self.records.append(rec.member_metadata(gid, updated))
            names_changed = updated.subscribed_topic_names != member.subscribed_topic_names

        replaced = group.static_member_id(updated.instance_id)

        def members_after() -> dict[str, ConsumerGroupMember]:
            # The group's members as they will be: the updated one in, a static member it replaces out.
            members = dict(group.members)
            if replaced is not None and replaced != member_id:
                members.pop(replaced, None)
            members[member_id] = updated
            return members

        regex_change, resolved = self._update_regexes(group, member, updated, members_after())
        # The subscription changed (the member's assignment is made consistent with it at once);
        # the group epoch moves now unless it waits for a new expression to be resolved.
        subscription_changed = names_changed or regex_change is not RegexChange.NONE
        bump = names_changed or regex_change is RegexChange.UPDATED_AND_RESOLVED
        epoch = group.group_epoch
        if bump or replaced not in (None, member_id) or group.topics_version != topics.version:
            names = {n for m in members_after().values() for n in member_topic_names(m, resolved)}
            new_hash = metadata_hash(names, topics)
            if bump or new_hash != group.metadata_hash:
                epoch += 1
                self.records.append(rec.group_epoch(gid, epoch, new_hash))
            self.checked_topics_version = topics.version

        if epoch > group.assignment_epoch and can_compute_target(
                group.assignment_time, self.config.consumer_assignment_interval_for(gid), self.now):
            target = self._new_target(group, epoch, members_after(), updated, resolved)
            target_epoch = epoch
        else:
            # Up to date, or (KIP-1263) the group's last assignment is younger than its assignment
            # interval: the member moves towards the last target; a later heartbeat computes the next.
            target = group.member_target(member_id, updated.instance_id if replaced != member_id else None)
            target_epoch = group.assignment_epoch

        if subscription_changed or not updated.is_reconciled_to(target_epoch):
            subscribed = resolve(member_topic_names(updated, resolved), topics)
            try:
                reconciled = reconcile(updated, target_epoch, target, group.owner_epoch, owned,
                                       subscribed_topics=subscribed, subscription_changed=subscription_changed)
            except FencedMemberEpochError as exc:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
            if reconciled != updated:
                self.records.append(rec.current_assignment(gid, reconciled))
                # A classic member has join and sync timeouts instead of a rebalance timeout.
                if not reconciled.uses_classic_protocol:
                    if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                        set_rebalance_timeout(self.st, self.out, gid, member_id, reconciled.member_epoch,
                                              self.now + reconciled.rebalance_timeout_ms)
                    else:
                        cancel_member_timers(self.st, self.out, gid, member_id, session=False)
            updated = reconciled
        return updated

    def replace_static(self, group: ConsumerGroup, existing: ConsumerGroupMember,
                       member_id: str) -> ConsumerGroupMember:
        """A static member's instance comes back under a new member id and takes over its
        partitions: the old member's records go, the same member under the new id comes in."""
        replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        gid = group.group_id
        self.records.extend(rec.member_removal(gid, existing.member_id))
        self.records.append(rec.member_metadata(gid, replacement))
        self.records.append(rec.target_member(gid, member_id, group.member_target(existing.member_id)))
        self.records.append(rec.current_assignment(gid, replacement))
        cancel_member_timers(self.st, self.out, gid, existing.member_id)
        return replacement

    def _update_regexes(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                        members: Mapping[str, ConsumerGroupMember]) -> tuple[RegexChange, dict[str, frozenset[str]]]:
        """What the request did to the member's expression, and the group's resolutions as they
        stand after it (``members``: the members after it). An expression no member uses any more is
        deleted (a tombstone); resolving is left to the refresh this may ask for (regex_refresh.py).

        The refresh resolves every expression of the group and (Kafka 4.0, KAFKA-18813) leaves out
        the topics that the sender of the heartbeat that asked for it may not Describe: Kafka
        resolves the group's expressions as a whole, with the context of that heartbeat. Between
        refreshes the recorded resolution is what counts: a member that joins with an expression
        already resolved, a member removed by its session timeout, the group rebuilt on restart,
        all use the filter of the last member whose heartbeat refreshed, until the next refresh.
        That is Kafka's rule and the simplest faithful one: the resolution depends on one recorded
        fact, not on who happens to be in the group later. (A changed ACL alone does not refresh:
        it counts from the next refresh.)"""
        gid = group.group_id
        resolved = dict(group.resolved_regexes)
        in_use = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        old = member.subscribed_topic_regex
        if old and old not in in_use and old in resolved:
            self.records.append(rec.regular_expression_tombstone(gid, old))
            del resolved[old]
        if not in_use and not old and not updated.subscribed_topic_regex:
            return RegexChange.NONE, resolved  # no expression before or after: nothing to decide
        change, refresh = regex_refresh.on_member_update(self.st, group, member, updated, in_use, resolved, self.now)
        self.regex_refresh = self.regex_refresh or refresh
        return change, resolved

    def _new_target(self, group: ConsumerGroup, epoch: int, members: dict[str, ConsumerGroupMember],
                    updated: ConsumerGroupMember, resolved: Mapping[str, frozenset[str]]) -> Assignment:
        gid = group.group_id
        asked = Counter(m.server_assignor_name for m in members.values() if m.server_assignor_name is not None)
        assignor_name = most_asked_for(asked) or self.config.consumer_assignors[0]
        topics = self.st.topics
        subscriptions = {mid: resolve(member_topic_names(m, resolved), topics) for mid, m in members.items()}
        try:
            result = build_target_assignment(
                group_epoch=epoch, members=members, subscriptions=subscriptions, topics=describer(topics),
                current_target=group.target_assignment, static_members=group.static_members,
                assignor=ASSIGNORS[assignor_name])
        except PartitionAssignorError as exc:
            raise HeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Failed to compute a new target assignment for epoch {epoch}: {exc}.") from None
        for member_id, assignment in result.changed.items():
            self.records.append(rec.target_member(gid, member_id, assignment))
        self.records.append(rec.target_epoch(gid, epoch, self.now))
        self.st.note_assignment(gid, epoch, assignor_name, len(members))
        return result.members.get(updated.member_id, {})


class Heartbeat(MemberOperation):
    """One ConsumerGroupHeartbeat against the shard's consumer groups."""

    def __init__(self, state: CoordinatorState, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now: int) -> None:
        super().__init__(state, ctx, now)
        self.req = req

    def run(self) -> Result:
        gid = self.req.group_id
        try:
            validate(self.req, self.ctx.api_version, self.config.consumer_assignors)
            if self.req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave()
            else:
                response = self._heartbeat()
        except HeartbeatError as exc:
            self.records.clear()
            self.out = Result()
            self.upgraded, self.downgraded, self.regex_refresh = None, False, False
            if exc.code == ErrorCode.FENCED_MEMBER_EPOCH:
                self.st.journal.note(gid, FENCED, self.req.member_id, client_id=self.ctx.client_id,
                                     why=exc.message, member_epoch=self.req.member_epoch)
            response = error_response(exc.code, exc.message)
        joined = (response.member_id if self.req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
                  and response.error_code == 0 else None)
        if self.records and (joined is not None or self.req.member_epoch < 0):
            self.st.journal.note(gid, NEW_MEMBER if joined is not None else MEMBER_LEFT,
                                 joined or self.req.member_id, client_id=self.ctx.client_id,
                                 member_epoch=self.req.member_epoch)
        self.finish(gid, joined, "member left" if self.req.member_epoch < 0 else "heartbeat")
        self.out.replies.append((self.ctx.token, response))
        return self.out

    # -- the group ---------------------------------------------------------------------------

    def _group(self, create: bool) -> ConsumerGroup:
        gid = self.req.group_id
        group: ConsumerGroup | None = self.st.consumer_groups.get(gid)
        if group is not None:
            return group
        classic = self.st.groups.get(gid)
        if classic is not None:
            if create and classic.is_empty:
                # Kafka deletes an empty classic group (offsets stay) and starts a consumer group.
                self.records.extend(self.st.classic_group_deletion(gid))
            elif create:
                from broker.coordinators.group.core import consumer_migration as migration

                # A consumer-protocol member joins a classic group that has members: the group
                # becomes a consumer group with them in it (online upgrade), if it may.
                error = migration.upgrade_refusal(self.config, classic)
                if error is not None:
                    raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, error)
                try:
                    records = migration.upgrade_records(classic, self.st.topics)
                except migration.MigrationError as exc:
                    raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, str(exc)) from None
                self.records.extend(records)
                self.upgraded = classic
                return migration.replayed(gid, records)
            else:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        elif not create:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        return ConsumerGroup(gid)  # comes into being when its first record is replayed

    # -- join, stay, reconcile ---------------------------------------------------------------

    def _heartbeat(self) -> Any:
        req, cfg = self.req, self.config
        gid = req.group_id
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(create=joining)
        member_id = req.member_id
        if len(group.members) >= cfg.consumer_max_size and (not member_id or group.member(member_id) is None):
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                 f"capacity of {cfg.consumer_max_size} members.")
        if not member_id:
            member_id = self.st.new_member_id("")[1:]  # v0: the coordinator names the member (a uuid)
        owned = _owned(req)
        member = (self._dynamic_member(group, member_id, owned) if req.instance_id is None
                  else self._static_member(group, member_id, owned))

        ctx = self.ctx
        if (req.instance_id is None and req.rack_id is None and req.subscribed_topic_names is None
                and req.subscribed_topic_regex is None and req.server_assignor is None
                and req.rebalance_timeout_ms == -1 and ctx.client_id == member.client_id
                and ctx.client_host == member.client_host):
            updated = member  # a steady heartbeat changes nothing about the member
        else:
            updated = replace(
                member,
                instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
                rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                client_id=ctx.client_id,
                client_host=ctx.client_host,
                subscribed_topic_names=(frozenset(req.subscribed_topic_names)
                                        if req.subscribed_topic_names is not None else member.subscribed_topic_names),
                subscribed_topic_regex=(member.subscribed_topic_regex if req.subscribed_topic_regex is None
                                        else (req.subscribed_topic_regex or None)),
                server_assignor_name=(req.server_assignor if req.server_assignor is not None
                                      else member.server_assignor_name),
                rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                      else member.rebalance_timeout_ms),
                # A member that speaks ConsumerGroupHeartbeat is a consumer-protocol member, even
                # if its instance id last joined with JoinGroup.
                classic=None,
            )
        updated = self.advance(group, member, updated, owned)
        set_session_timeout(self.st, self.out, gid, member_id, self.now + cfg.session_timeout_for(gid))

        response = ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
            member_epoch=updated.member_epoch, heartbeat_interval_ms=cfg.heartbeat_interval_for(gid))
        # The assignment goes out when the member sent a full request (joining, or after an error
        # it re-sends everything) or when what it may use changed.
        full = joining or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None
                           and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        if full or updated.assigned_partitions != member.assigned_partitions:
            response.assignment = response_assignment(updated.assigned_partitions)
        return response

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, owned: Any) -> ConsumerGroupMember:
        member = group.member(member_id)
        if member is None:
            if self.req.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, owned: Any) -> ConsumerGroupMember:
        instance_id = self.req.instance_id
        existing_id = group.static_member_id(instance_id)
        existing = None if existing_id is None else group.member(existing_id)
        if self.req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if existing is None:
                return group.member(member_id) or ConsumerGroupMember(member_id)
            if existing.member_id == member_id:
                return existing  # the same member rejoining after it was fenced
            # A classic static member does not leave when its instance stops: the instance coming
            # back on the consumer protocol replaces it without waiting (online upgrade).
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol:
                raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} cannot join the group because the instance id is owned by "
                                     f"{existing.member_id} member.")
            return self.replace_static(group, existing, member_id)
        if existing is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {existing.member_id}.")
        self._check_epoch(existing, owned)
        return existing

    def _check_epoch(self, member: ConsumerGroupMember, owned: Any) -> None:
        # A fenced member rejoins under its own id with epoch 0 (KIP-848; KAFKA-19233).
        if self.req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        try:
            validate_member_epoch(member, self.req.member_epoch, owned)
        except FencedMemberEpochError as exc:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None

    # -- leaving -----------------------------------------------------------------------------

    def _leave(self) -> Any:
        req = self.req
        group = self._group(create=False)
        gid, member_id = group.group_id, req.member_id
        if req.instance_id is None:
            member = group.member(member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {gid}.")
        else:
            existing_id = group.static_member_id(req.instance_id)
            member = None if existing_id is None else group.member(existing_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{req.instance_id} was fenced by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for now: its partitions wait for the instance to come back (or its session to end).
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                  partitions_pending_revocation={})
                self.records.append(rec.current_assignment(gid, leaving))
                return ConsumerGroupHeartbeatResponse(
                    error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, heartbeat_interval_ms=0)
        records, self.downgraded = fence_member(self.st, self.out, group, member.member_id, self.now)
        self.records.extend(records)
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
                                              member_epoch=req.member_epoch, heartbeat_interval_ms=0)


def group_state(state: CoordinatorState, group_id: str) -> str:
    group = state.consumer_groups.get(group_id)
    return "Dead" if group is None else str(group.state.value)


def note_transition(state: CoordinatorState, out: Result, group_id: str, before: str, reason: str) -> None:
    """Logs a consumer group's change of state the way classic groups' are (the shell counts a
    move to Assigning as a rebalance and times it until Stable)."""
    after = group_state(state, group_id)
    if after != before:
        group = state.consumer_groups.get(group_id)
        epoch = 0 if group is None else group.group_epoch
        members = 0 if group is None else len(group.members)
        out.transitions.append((group_id, before, after, epoch, members, reason))


def fence_member(state: CoordinatorState, out: Result, group: ConsumerGroup, member_id: str, now: int) -> tuple[list[Any], bool]:
    """Records removing a member (it left, its session expired, or it did not revoke in time), and
    whether they turn the group back into a classic group: when every member left is a classic
    member and the policy allows it, Kafka downgrades the group instead (the caller then calls
    ``migration.after_downgrade`` once the records are replayed)."""
    from broker.coordinators.group.core import consumer_migration as migration

    if migration.may_downgrade(state.config, group, member_id):
        for mid in group.members:
            cancel_member_timers(state, out, group.group_id, mid)
        return migration.downgrade_records(state, group, member_id, now), True
    return remove_members(state, out, group, [member_id]), False


def remove_members(state: CoordinatorState, out: Result, group: ConsumerGroup, member_ids: Collection[str]) -> list[Any]:
    """Records removing members: each one's three tombstones (and the tombstone of a subscribed
    expression no one else uses), then a bumped group epoch, so the others get their partitions.
    When no member is left the target assignment epoch follows (an empty group has both epochs
    equal; KAFKA-20442)."""
    gid = group.group_id
    records: list[Any] = []
    leaving_regexes: Counter[str] = Counter()
    for member_id in member_ids:
        records.extend(rec.member_removal(gid, member_id))
        leaving = group.member(member_id)
        if leaving is not None and leaving.subscribed_topic_regex:
            leaving_regexes[leaving.subscribed_topic_regex] += 1
        cancel_member_timers(state, out, gid, member_id)
    for regex, count in sorted(leaving_regexes.items()):
        if group.regex_subscribers(regex) <= count and regex in group.resolved_regexes:
            records.append(rec.regular_expression_tombstone(gid, regex))
    gone = set(member_ids)
    remaining = [m for mid, m in group.members.items() if mid not in gone]
    topics = state.topics
    # The recorded resolutions: no one sends a request here whose rights could filter a refresh.
    names = {n for m in remaining for n in member_topic_names(m, group.resolved_regexes)}
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch(gid, epoch, metadata_hash(names, topics)))
    if not remaining:
        records.append(rec.target_epoch(gid, epoch))
    return records


def consumer_group_heartbeat(state: CoordinatorState, req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now: int) -> Result:
    return Heartbeat(state, req, ctx, now).run()
