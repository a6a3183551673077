"""StreamsGroupHeartbeat (KIP-1071): join, stay, reconcile and leave, as Kafka's
``GroupMetadataManager.streamsGroupHeartbeat`` does it:

1. create or update the member (its topology epoch, process, endpoint, tags); a joining member
   brings the topology, which the group takes when it has none or an older one; a member change
   that matters to the assignment, or a change in the topics the topology names, bumps the group
   epoch;
2. configure the topology against the topics: internal topics missing are to be created (the
   shell creates them), and while any topic is missing or partitioned wrongly the statuses say
   so and no tasks are assigned;
3. if the group epoch is ahead of the target assignment, run the assignor and write the members
   whose target changed, then the new assignment epoch;
4. move the member one step towards its target (``reconcile``: revoke before reassign).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.coordinators.group.core import streams_timers as timers
from broker.coordinators.group.core import streams_topology_description as topology_description
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.streams import records as rec
from broker.coordinators.group.core.streams.assignor import AssignorMember, assign
from broker.coordinators.group.core.streams.model import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    MemberState,
    MemberTaskOffsets,
    StreamsGroup,
    StreamsMember,
    StreamsState,
    TaskAssignment,
    Tasks,
)
from broker.coordinators.group.core.streams.reconcile import FencedMemberEpochError, reconcile, validate_epoch
from broker.coordinators.group.core.streams.topology import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    configure,
    metadata_hash,
)
from protocol.errors import ErrorCode
from protocol.group_events import FENCED, MEMBER_LEFT, NEW_MEMBER, STATIC_REJOINED
from protocol.messages.offsets_log_streams_groups import StreamsGroupTopologyValue
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from protocol.payloads.offsets_log_records import StreamsGroupMetadataRecord

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

_R = StreamsGroupHeartbeatResponse
_TopoValue = StreamsGroupTopologyValue
class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(code: int, message: str | None = None) -> Any:
    return _R(error_code=code, error_message=message, member_id="", member_epoch=0, heartbeat_interval_ms=0,
              acceptable_recovery_lag_legacy=0, task_offset_interval_ms=0, status=[],
              endpoint_information_epoch=0)


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.INVALID_REQUEST, message)


def validate(req: Any) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures, then
    throwIfStreamsGroupHeartbeatRequestIsInvalid."""
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        # Kafka 4.4 refuses them (KIP-1071 leaves them for later): so does kcoord.
        raise _invalid("Regular expressions for source topics are not supported yet.")
    if not req.member_id:  # Kafka checks the member id first
        raise _invalid("MemberId can't be empty.")
    if not req.group_id:
        raise _invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise _invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise _invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.active_tasks is None or req.active_tasks:
            raise _invalid("ActiveTasks must be empty when (re-)joining.")
        if req.standby_tasks is None or req.standby_tasks:
            raise _invalid("StandbyTasks must be empty when (re-)joining.")
        if req.warmup_tasks is None or req.warmup_tasks:
            raise _invalid("WarmupTasks must be empty when (re-)joining.")
        if req.topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        _validate_topology(req.topology)
    elif epoch == LEAVE_STATIC_EPOCH:
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_STATIC_EPOCH:
        raise _invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if epoch > 0 and req.topology is not None:
        pass  # a member may resend its topology; only joining members' topologies are taken


def _validate_topology(topology: Any) -> None:
    """What the client generates consistently, checked so that a broken topology is refused (as
    Kafka 4.4 does, INVALID_REQUEST) instead of mis-assigned."""
    seen: set[str] = set()
    repartition_sources: set[str] = set()
    sinks: set[str] = set()
    for sub in topology.subtopologies:
        if sub.subtopology_id in seen:
            raise _invalid(f"Subtopology {sub.subtopology_id} is defined more than once.")
        seen.add(sub.subtopology_id)
        repartition_sources.update(t.name for t in sub.repartition_source_topics)
        sinks.update(sub.repartition_sink_topics)
        for g in sub.copartition_groups:
            if any(not 0 <= i < len(sub.source_topics) for i in g.source_topics) or any(
                    not 0 <= i < len(sub.repartition_source_topics) for i in g.repartition_source_topics):
                raise _invalid(f"Copartition group of subtopology {sub.subtopology_id} refers to an unknown topic.")
    missing = sorted(sinks - repartition_sources)
    if missing:
        raise _invalid(f"Repartition sink topics {', '.join(missing)} are not read by any subtopology.")


def _tasks(ids: list[Any] | None) -> Tasks | None:
    if ids is None:
        return None
    return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}


def _owned(req: Any) -> TaskAssignment | None:
    a, s, w = _tasks(req.active_tasks), _tasks(req.standby_tasks), _tasks(req.warmup_tasks)
    if a is None or s is None or w is None:
        return None
    return TaskAssignment(a, s, w)


def _offsets_by_task(reported: list[Any]) -> dict[str, dict[int, int]]:
    """A heartbeat's TaskOffsets (or TaskEndOffsets) by subtopology and partition; a task named
    twice is refused, as Kafka 4.4 refuses it."""
    out: dict[str, dict[int, int]] = {}
    for t in reported:
        by_partition = out.setdefault(t.subtopology_id, {})
        if t.partition in by_partition:
            raise _invalid(f"Task offsets contain a duplicate entry for subtopology {t.subtopology_id} and partition "
                           f"{t.partition}.")
        by_partition[t.partition] = t.offset
    return out


def reported_offsets(req: Any, last: MemberTaskOffsets) -> MemberTaskOffsets | None:
    """The member's task offsets after this heartbeat, or None when it reports neither list (a
    list left out keeps what was reported before, as in Kafka)."""
    if req.task_offsets is None and req.task_end_offsets is None:
        return None
    return MemberTaskOffsets(
        last.offsets if req.task_offsets is None else _offsets_by_task(req.task_offsets),
        last.end_offsets if req.task_end_offsets is None else _offsets_by_task(req.task_end_offsets))


def _check_tasks_exist(conf: ConfiguredTopology, req: Any) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks, once the topology is configured: every task a
    member says it owns is one of the topology's."""
    for owned in (req.active_tasks, req.standby_tasks, req.warmup_tasks):
        for t in owned or []:
            count = conf.tasks.get(t.subtopology_id)
            if count is None:
                raise _invalid(f"Subtopology {t.subtopology_id} does not exist in the topology.")
            for p in t.partitions:
                if not 0 <= p < count:
                    raise _invalid(f"Task {p} for subtopology {t.subtopology_id} is invalid. Number of tasks for "
                                   f"this subtopology: {count}")


def missing_client_tags(assignment_configs: Mapping[str, str], member: StreamsMember) -> list[str]:
    """The client tags the group's rack.aware.assignment.tags names that the member does not send."""
    value = assignment_configs.get("rack.aware.assignment.tags", "").strip()
    if not value:
        return []
    have = {k for k, _ in member.client_tags}
    return [tag for tag in (t.strip() for t in value.split(",")) if tag not in have]


def assignor_members(members: Mapping[str, StreamsMember],
                     offsets: Mapping[str, MemberTaskOffsets]) -> list[AssignorMember]:
    """What the assignor is given of each member, as Kafka gives it: the tasks it holds now, and
    the task offsets it last reported."""
    return [AssignorMember(mid, m.process_id, m.assigned,
                           offsets[mid].offsets if mid in offsets else {})
            for mid, m in members.items()]


def _response_tasks(tasks: Tasks) -> list[Any]:
    return [_R.TaskIds(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items()) if p]


def topology_value(topology: Any) -> Any:
    """The request's topology as the StreamsGroupTopology record stores it."""
    def info(t: Any) -> Any:
        return _TopoValue.Subtopology.TopicInfo(
            name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
            topic_configs=[_TopoValue.Subtopology.TopicInfo.TopicConfig(key=c.key, value=c.value)
                           for c in t.topic_configs])
    return _TopoValue(epoch=topology.epoch, subtopologies=[
        _TopoValue.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
            source_topic_regex=list(s.source_topic_regex),
            state_changelog_topics=[info(t) for t in s.state_changelog_topics],
            repartition_sink_topics=list(s.repartition_sink_topics),
            repartition_source_topics=[info(t) for t in s.repartition_source_topics],
            copartition_groups=[_TopoValue.Subtopology.CopartitionGroup(
                source_topics=list(g.source_topics), source_topic_regex=list(g.source_topic_regex),
                repartition_source_topics=list(g.repartition_source_topics)) for g in s.copartition_groups])
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id)])


def _standby(assignment_configs: Mapping[str, str]) -> int:
    return int(assignment_configs.get("num.standby.replicas", "0"))


def configured(st: CoordinatorState, group: StreamsGroup) -> ConfiguredTopology | None:
    """The group's topology configured against the topics as they are now (cached per topics
    version)."""
    if group.topology is None:
        return None
    if group.configured is None or group.topics_version != st.topics.version:
        group.configured = configure(group.topology, st.topics)
        group.topics_version = st.topics.version
    return group.configured


class Heartbeat:
    def __init__(self, st: CoordinatorState, streams: StreamsState, req: StreamsGroupHeartbeatRequest,
                 ctx: RequestContext, now: int) -> None:
        self.st, self.streams, self.req, self.ctx, self.now = st, streams, req, ctx, now
        self.cfg = st.config
        self.out = Result()
        self.records: list[Any] = []
        self.replaced: str | None = None  # the static member a rejoining instance took over
        self.task_offsets: MemberTaskOffsets | None = None  # what this heartbeat reports, kept once it is answered
        self.keep_offsets = False

    def run(self) -> Result:
        req = self.req
        before = group_state(self.streams, req.group_id)
        try:
            validate(req)
            if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                response = self._leave()
            else:
                response = self._heartbeat()
        except HeartbeatError as exc:
            self.records.clear()
            self.out = Result()
            if exc.code == ErrorCode.FENCED_MEMBER_EPOCH:
                self.st.journal.note(req.group_id, FENCED, req.member_id, client_id=self.ctx.client_id,
                                     why=exc.message, member_epoch=req.member_epoch)
            response = error_response(exc.code, exc.message)
        joined = req.member_epoch == JOIN_EPOCH and response.error_code == 0 and bool(self.records)
        if joined and self.replaced is not None:
            self.st.journal.note(req.group_id, STATIC_REJOINED, req.member_id, instance_id=req.instance_id,
                                 replaced=self.replaced, client_id=self.ctx.client_id,
                                 avoided_rebalance=not any(isinstance(r, StreamsGroupMetadataRecord)
                                                           for r in self.records))
        elif joined or (req.member_epoch < 0 and self.records):
            self.st.journal.note(req.group_id, NEW_MEMBER if joined else MEMBER_LEFT, req.member_id,
                                 client_id=self.ctx.client_id, member_epoch=req.member_epoch,
                                 instance_id=req.instance_id, process_id=req.process_id)
        for record in self.records:
            self.st.emit(self.out, record)
        group = self.streams.groups.get(req.group_id)
        if group is not None:
            # The group's state (NotReady while its topology cannot run) reads the configured
            # topology: a group created by this heartbeat has none cached yet.
            configured(self.st, group)
        if self.task_offsets is not None and self.keep_offsets and group is not None and req.member_id in group.members:
            group.task_offsets[req.member_id] = self.task_offsets
        topology_description.maybe_require(self.st, self.streams.groups.get(req.group_id), self.ctx,
                                           req.member_epoch, response, self.now)
        note_transition(self.st, self.out, req.group_id, before,
                        f"member {req.member_id} joined" if joined else "member left" if req.member_epoch < 0
                        else "heartbeat")
        self.out.replies.append((self.ctx.token, response))
        return self.out

    def _group(self, create: bool) -> StreamsGroup:
        gid = self.req.group_id
        group = self.streams.groups.get(gid)
        if group is not None:
            return group
        classic = self.st.groups.get(gid)
        if gid in self.st.consumer_groups or (classic is not None and not classic.is_empty):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
        if not create:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
        if classic is not None:
            self.records.extend(self.st.classic_group_deletion(gid))  # an empty classic group gives way
        return StreamsGroup(gid)

    def _heartbeat(self) -> Any:
        req, cfg, ctx = self.req, self.cfg, self.ctx
        gid, member_id = req.group_id, req.member_id
        joining = req.member_epoch == JOIN_EPOCH
        group = self._group(create=joining)
        if not group.members:
            group.shutdown_requested_by = None  # an application that shut down starts again
        owned = _owned(req)
        # A static member (instance id) that left with epoch -2 and comes back under a new member
        # id takes over its old member: its tasks, target and metadata (Kafka 4.4).
        replaced: str | None = None
        static = None if req.instance_id is None else group.members.get(group.static_member_id(req.instance_id) or "")
        if static is not None and joining and static.member_id != member_id:
            if static.member_epoch != LEAVE_STATIC_EPOCH:
                raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{req.instance_id} cannot join the group because the instance id is owned by "
                                     f"{static.member_id} member.")
            replaced = self.replaced = static.member_id
            self.records.extend(rec.member_removal(gid, replaced))
            timers.cancel_member_timers(self.st, self.out, gid, replaced)
            member = replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                             state=MemberState.STABLE, pending_revocation=TaskAssignment())
        else:
            if req.instance_id is not None and not joining:
                self._check_static(group, static)
            member = self._member(group, owned, joining)

        # 1. the topology and the member
        topology_changed = False
        group_topology_epoch = -1 if group.topology is None else group.topology.epoch
        if req.topology is not None:
            # Kafka 4.4's maybeUpdateTopology: a group without a topology takes the member's; an
            # older one than the group's is the member's to catch up with (STALE_TOPOLOGY); any
            # other topology than the group's is refused, as Kafka 4.4 cannot update a topology yet.
            sent = topology_value(req.topology)
            if group.topology is None:
                self.records.append(rec.topology(gid, sent))
                topology_changed = True
                group_topology_epoch = req.topology.epoch
            elif req.topology.epoch >= group_topology_epoch and sent != group.topology:
                raise _invalid("Topology updates are not supported yet.")
        endpoint = None if req.user_endpoint is None else (req.user_endpoint.host, req.user_endpoint.port)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=ctx.client_id, client_host=ctx.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            user_endpoint=endpoint if req.user_endpoint is not None else member.user_endpoint,
            client_tags=(tuple((kv.key, kv.value) for kv in req.client_tags) if req.client_tags is not None
                         else member.client_tags),
        )
        bump = False
        if updated != member or member_id not in group.members:
            self.records.append(rec.member_metadata(gid, updated))
            bump = ((member_id not in group.members and replaced is None) or updated.process_id != member.process_id
                    or updated.topology_epoch != member.topology_epoch or updated.client_tags != member.client_tags
                    or updated.user_endpoint != member.user_endpoint or updated.rack_id != member.rack_id)

        # 2. the topology against the topics
        topo = topology_value(req.topology) if topology_changed else group.topology
        conf = None
        new_hash = group.metadata_hash
        if topo is not None:
            # A steady heartbeat with the topics unchanged reuses what the last one computed.
            seen = not topology_changed and group.configured is not None and group.topics_version == self.st.topics.version
            conf = configure(topo, self.st.topics) if topology_changed else configured(self.st, group)
            if not seen:
                new_hash = metadata_hash(topo, self.st.topics)
        epoch = group.group_epoch
        # The group's assignment configs changed since its last epoch (its streams.num.standby.replicas
        # set, say): Kafka assigns again with the new ones.
        assignment_configs = cfg.streams_assignment_configs_for(gid)
        if bump or topology_changed or new_hash != group.metadata_hash or (
                assignment_configs != group.last_assignment_configs):
            epoch += 1
            self.records.append(rec.group_epoch(group, epoch, new_hash, group_topology_epoch
                                                if conf is not None and not conf.statuses else -1, assignment_configs))
        if conf is not None and not conf.statuses:
            _check_tasks_exist(conf, req)
        self.task_offsets = reported_offsets(req, group.task_offsets.get(member_id, MemberTaskOffsets()))
        # As in Kafka 4.4, what the heartbeat creating the group reports is not kept: Kafka keeps it on
        # the group object that the replay of the new group's records replaces.
        self.keep_offsets = gid in self.streams.groups
        if conf is not None and conf.to_create:
            self.streams.to_create.extend(conf.to_create)

        # 3. the target assignment; a new group's first one waits for more members to join
        members_after = dict(group.members)
        members_after.pop(replaced or "", None)
        members_after[member_id] = updated
        delays = self.streams.assignment_delayed_until
        new_group = gid not in self.streams.groups
        initial_delay = cfg.streams_initial_rebalance_delay_for(gid)
        # As Kafka 4.4: the delay starts whenever a member joins a group without members (a new
        # one, or one whose members all left), unless it is already running.
        if (new_group or not group.members) and initial_delay > 0 and delays.get(gid, 0) <= self.now:
            delays[gid] = self.now + initial_delay
        delayed = delays.get(gid, 0) > self.now
        if not delayed:
            delays.pop(gid, None)
        # Kafka 4.4 computes a group's target assignment at most once per assignment interval.
        waits = (not delayed and epoch > group.assignment_epoch
                 and self.now < group.assignment_time + cfg.streams_assignment_interval_for(gid))
        if new_group and delayed:
            # An empty target at the first epoch, and the group epoch one ahead of it: the real
            # assignment is computed once the delay is over.
            target, target_epoch = TaskAssignment(), epoch
            self.records.append(rec.target_member(gid, member_id, target))
            self.records.append(rec.target_epoch(gid, epoch, self.now))
            epoch += 1
            self.records.append(rec.group_epoch(group, epoch, new_hash, -1, assignment_configs))
        elif epoch > group.assignment_epoch and not delayed and not waits:
            targets = self._new_target(group, epoch, members_after, conf, _standby(assignment_configs))
            target = targets.get(member_id, TaskAssignment())
            target_epoch = epoch
        else:
            target = group.targets.get(member_id) or group.targets.get(replaced or "", TaskAssignment())
            target_epoch = group.assignment_epoch
        if replaced is not None:
            self.records.append(rec.target_member(gid, member_id, target))

        # 4. one step towards it
        owners = rec.owners_of_active(group)
        if replaced is not None:  # the old member's tasks are the new one's
            owners = {task: member_id if owner == replaced else owner for task, owner in owners.items()}
        reconciled = reconcile(updated, target_epoch, target, owners, owned)
        if reconciled != updated or member_id not in group.members:
            self.records.append(rec.current_assignment(gid, reconciled))
            if reconciled.state is MemberState.UNREVOKED_TASKS:
                timers.set_rebalance_timeout(self.st, self.out, gid, member_id, reconciled.member_epoch,
                                             self.now + max(reconciled.rebalance_timeout_ms, 0))
            else:
                timers.cancel_rebalance_timeout(self.st, self.out, gid, member_id)
        timers.set_session_timeout(self.st, self.out, gid, member_id, self.now + cfg.streams_session_timeout_for(gid))

        # In Kafka 4.4's order: a stale topology (a joining member's too), a delayed assignment, the
        # topology's configuration, a shutdown asked for.
        statuses: list[tuple[int, str]] = []
        if updated.topology_epoch < group_topology_epoch:
            statuses.append((STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is behind the "
                             f"group's topology epoch {group_topology_epoch}."))
        statuses += [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")
                     ] if delayed else [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment "
                                         "interval.")] if waits else []
        statuses += [] if conf is None else [(c, d) for c, d in conf.statuses]
        if req.shutdown_application and group.shutdown_requested_by is None:
            group.shutdown_requested_by = member_id
        if group.shutdown_requested_by is not None:
            statuses.append((SHUTDOWN_APPLICATION, _shutdown_detail(group.shutdown_requested_by)))
        # Version 0 clients do not know the status (Kafka tells it from version 1 only).
        missing = missing_client_tags(assignment_configs, updated) if ctx.api_version >= 1 else []
        if missing:
            statuses.append((MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware standby assignment: "
                             f"[{', '.join(missing)}]. Configure them via 'client.tag.<tagKey>' in your Streams "
                             "config."))
        response = _R(
            error_code=ErrorCode.NONE, error_message=None, member_id=member_id,
            member_epoch=reconciled.member_epoch, heartbeat_interval_ms=cfg.streams_heartbeat_interval_for(gid),
            # How often members send their task offsets, and the lag under which a task counts as
            # caught up: the group's configs over Kafka's defaults (this assignor moves no warm-up
            # tasks, so neither changes an assignment). Kafka 4.4 leaves the version 0 field at 0.
            acceptable_recovery_lag_legacy=0, task_offset_interval_ms=cfg.streams_task_offset_interval_for(gid),
            acceptable_recovery_lag=cfg.streams_acceptable_recovery_lag_for(gid),
            status=[_R.Status(status_code=c, status_detail=d) for c, d in statuses],
            endpoint_information_epoch=group.endpoint_epoch + (
                1 if reconciled.assigned != member.assigned and reconciled.user_endpoint is not None else 0))
        if joining or reconciled.assigned != member.assigned:
            response.active_tasks = _response_tasks(reconciled.assigned.active)
            response.standby_tasks = _response_tasks(reconciled.assigned.standby)
            response.warmup_tasks = _response_tasks(reconciled.assigned.warmup)
        if req.endpoint_information_epoch < response.endpoint_information_epoch:
            response.partitions_by_user_endpoint = self._endpoints(group, members_after, reconciled, conf)
        return response

    def _member(self, group: StreamsGroup, owned: TaskAssignment | None, joining: bool) -> StreamsMember:
        req, cfg = self.req, self.cfg
        member = group.members.get(req.member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= cfg.streams_max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The streams group has reached its maximum "
                                     f"capacity of {cfg.streams_max_size} members.")
            return StreamsMember(req.member_id)
        if not joining:
            try:
                validate_epoch(member, req.member_epoch, owned)
            except FencedMemberEpochError as exc:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
        return member

    def _check_static(self, group: StreamsGroup, static: StreamsMember | None) -> None:
        """Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced."""
        req = self.req
        if static is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if static.member_id != req.member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                 f"{req.instance_id} was fenced by member {static.member_id}.")

    def _new_target(self, group: StreamsGroup, epoch: int, members: dict[str, StreamsMember],
                    conf: ConfiguredTopology | None, num_standby: int) -> dict[str, TaskAssignment]:
        counts = {} if conf is None or conf.statuses_block_assignment else conf.tasks
        offsets = dict(group.task_offsets)
        if self.task_offsets is not None:
            offsets[self.req.member_id] = self.task_offsets
        offsets.pop(self.replaced or "", None)
        inputs = assignor_members(members, offsets)
        targets = assign(inputs, counts, num_standby, () if conf is None else conf.stateful)
        gid = group.group_id
        for mid, target in sorted(targets.items()):
            if group.targets.get(mid) != target or mid not in group.targets:
                self.records.append(rec.target_member(gid, mid, target))
        self.records.append(rec.target_epoch(gid, epoch, self.now))
        self.st.note_assignment(gid, epoch, "sticky", len(members))
        return targets

    def _endpoints(self, group: StreamsGroup, members: dict[str, StreamsMember], me: StreamsMember,
                   conf: ConfiguredTopology | None) -> list[Any]:
        """Which partitions each member with an endpoint serves, for interactive queries."""
        out = []
        sources = {} if conf is None else conf.source_topics

        def partitions(tasks: Tasks) -> list[Any]:
            by_topic: dict[str, set[int]] = {}
            for sid, parts in tasks.items():
                for topic in sources.get(sid, []):
                    by_topic.setdefault(topic, set()).update(parts)
            return [_R.EndpointToPartitions.TopicPartition(topic=t, partitions=sorted(p))
                    for t, p in sorted(by_topic.items())]

        for mid, m in sorted(members.items()):
            m = me if mid == me.member_id else m
            if m.user_endpoint is None:
                continue
            standby = {**m.assigned.standby}
            for s, p in m.assigned.warmup.items():
                standby[s] = standby.get(s, frozenset()) | p
            out.append(_R.EndpointToPartitions(
                user_endpoint=_R.EndpointToPartitions.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                active_partitions=partitions(m.assigned.active), standby_partitions=partitions(standby)))
        return out

    def _leave(self) -> Any:
        req = self.req
        group = self._group(create=False)
        if req.shutdown_application and group.shutdown_requested_by is None:
            group.shutdown_requested_by = req.member_id
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
        else:
            member = group.members.get(group.static_member_id(req.instance_id) or "")
            self._check_static(group, member)
            assert member is not None
            if req.member_epoch == LEAVE_STATIC_EPOCH:
                # Gone for now: its tasks wait for the instance to come back (or its session to end).
                self.records.append(rec.current_assignment(group.group_id, replace(
                    member, member_epoch=LEAVE_STATIC_EPOCH, pending_revocation=TaskAssignment())))
                return _R(error_code=ErrorCode.NONE, error_message=None, member_id=req.member_id,
                          member_epoch=LEAVE_STATIC_EPOCH, heartbeat_interval_ms=0, acceptable_recovery_lag_legacy=0,
                          task_offset_interval_ms=0, status=[], endpoint_information_epoch=0)
        self.records.extend(remove_members(self.st, self.out, group, [req.member_id], self.now))
        return _R(error_code=ErrorCode.NONE, error_message=None, member_id=req.member_id,
                  member_epoch=req.member_epoch, heartbeat_interval_ms=0, acceptable_recovery_lag_legacy=0,
                  task_offset_interval_ms=0, status=[], endpoint_information_epoch=0)


def _shutdown_detail(member_id: str) -> str:
    return (f"Streams group member {member_id} encountered a fatal error and requested a shutdown for the entire "
            "application.")


def group_state(streams: StreamsState, group_id: str) -> str:
    group = streams.groups.get(group_id)
    return "Dead" if group is None else group.state_name()


def note_transition(st: CoordinatorState, out: Result, group_id: str, before: str, reason: str) -> None:
    """A streams group's change of state, reported as consumer groups' are (the journal and the
    rebalance metrics follow them)."""
    after = group_state(st.streams, group_id)
    if after != before:
        group = st.streams.groups.get(group_id)
        out.transitions.append((group_id, before, after, 0 if group is None else group.group_epoch,
                                0 if group is None else len(group.members), reason))


def remove_members(st: CoordinatorState, out: Result, group: StreamsGroup, member_ids: list[str],
                   now: int) -> list[Any]:
    """A member left, or its session or rebalance timeout expired: its records go and the group
    epoch rises so that the others take over its tasks. Kafka computes the new target assignment
    at once, without waiting for a heartbeat."""
    gid = group.group_id
    records: list[Any] = []
    for mid in member_ids:
        records.extend(rec.member_removal(gid, mid))
        timers.cancel_member_timers(st, out, gid, mid)
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch(group, epoch, group.metadata_hash, group.validated_topology_epoch))
    remaining = {mid: m for mid, m in group.members.items() if mid not in member_ids}
    conf = configured(st, group)
    counts = {} if conf is None or conf.statuses_block_assignment else conf.tasks
    inputs = assignor_members(remaining, group.task_offsets)
    # Assigned with the configs of the group's last epoch, as Kafka's fencing keeps them.
    num_standby = _standby(group.last_assignment_configs or st.config.streams_assignment_configs_for(gid))
    targets = assign(inputs, counts, num_standby, () if conf is None else conf.stateful)
    for mid, target in sorted(targets.items()):
        if group.targets.get(mid) != target:
            records.append(rec.target_member(gid, mid, target))
    records.append(rec.target_epoch(gid, epoch, now))
    return records


def streams_group_heartbeat(st: CoordinatorState, streams: StreamsState, req: StreamsGroupHeartbeatRequest,
                            ctx: RequestContext, now: int) -> Result:
    return Heartbeat(st, streams, req, ctx, now).run()
