"""A streams group's records: built from the model, and replayed into it (Kafka's
``StreamsCoordinatorRecordHelpers`` and the replay half of its ``GroupMetadataManager``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from broker.coordinators.group.core.streams.model import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    TaskAssignment,
    Tasks,
)
from protocol.messages.offsets_log_streams_groups import (
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
)
from protocol.payloads.offsets_log_records import (
    StreamsGroupCurrentMemberAssignmentRecord,
    StreamsGroupMemberMetadataRecord,
    StreamsGroupMetadataRecord,
    StreamsGroupRecord,
    StreamsGroupTargetAssignmentMemberRecord,
    StreamsGroupTargetAssignmentMetadataRecord,
    StreamsGroupTopologyRecord,
)

_Current = StreamsGroupCurrentMemberAssignmentValue.TaskIds
_Target = StreamsGroupTargetAssignmentMemberValue.TaskIds
_Endpoint = StreamsGroupMemberMetadataValue.Endpoint
_KeyValue = StreamsGroupMemberMetadataValue.KeyValue
_Config = StreamsGroupMetadataValue.LastAssignmentConfig


def _task_ids(cls: Any, tasks: Tasks) -> list[Any]:
    return [cls(subtopology_id=s, partitions=sorted(p)) for s, p in sorted(tasks.items()) if p]


def _tasks(ids: list[Any]) -> Tasks:
    return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}


# ---- building ----------------------------------------------------------------------------------

def group_epoch(group: StreamsGroup, epoch: int, metadata_hash: int, validated: int,
                configs: Mapping[str, str] | None = None) -> StreamsGroupMetadataRecord:
    """``configs``: the assignment configs this epoch is assigned with (the group's last ones when None).
    The topology description epochs are the group's, carried over as Kafka carries them."""
    kept = group.last_assignment_configs if configs is None else configs
    return StreamsGroupMetadataRecord(group.group_id, StreamsGroupMetadataValue(
        epoch=epoch, metadata_hash=metadata_hash, validated_topology_epoch=validated,
        last_assignment_configs=[_Config(key=k, value=v) for k, v in sorted(kept.items())],
        stored_description_topology_epoch=group.stored_description_topology_epoch,
        failed_description_topology_epoch=group.failed_description_topology_epoch))


def description_epochs(group: StreamsGroup, stored: int, failed: int) -> StreamsGroupMetadataRecord:
    """The group's metadata as it is, with new topology description epochs (KIP-1331)."""
    record = group_epoch(group, group.group_epoch, group.metadata_hash, group.validated_topology_epoch)
    assert record.value is not None
    record.value.stored_description_topology_epoch = stored
    record.value.failed_description_topology_epoch = failed
    return record


def topology(group_id: str, value: Any) -> StreamsGroupTopologyRecord:
    return StreamsGroupTopologyRecord(group_id, value)


def member_metadata(group_id: str, m: StreamsMember) -> StreamsGroupMemberMetadataRecord:
    endpoint = None if m.user_endpoint is None else _Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1])
    return StreamsGroupMemberMetadataRecord(group_id, m.member_id, StreamsGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=endpoint, client_tags=[_KeyValue(key=k, value=v) for k, v in m.client_tags]))


def target_member(group_id: str, member_id: str, a: TaskAssignment) -> StreamsGroupTargetAssignmentMemberRecord:
    return StreamsGroupTargetAssignmentMemberRecord(group_id, member_id, StreamsGroupTargetAssignmentMemberValue(
        active_tasks=_task_ids(_Target, a.active), standby_tasks=_task_ids(_Target, a.standby),
        warmup_tasks=_task_ids(_Target, a.warmup)))


def target_epoch(group_id: str, epoch: int, now: int) -> StreamsGroupTargetAssignmentMetadataRecord:
    return StreamsGroupTargetAssignmentMetadataRecord(group_id, StreamsGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp=now))


def current_assignment(group_id: str, m: StreamsMember) -> StreamsGroupCurrentMemberAssignmentRecord:
    a, r = m.assigned, m.pending_revocation
    return StreamsGroupCurrentMemberAssignmentRecord(group_id, m.member_id, StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        active_tasks=_task_ids(_Current, a.active), standby_tasks=_task_ids(_Current, a.standby),
        warmup_tasks=_task_ids(_Current, a.warmup),
        active_tasks_pending_revocation=_task_ids(_Current, r.active),
        standby_tasks_pending_revocation=_task_ids(_Current, r.standby),
        warmup_tasks_pending_revocation=_task_ids(_Current, r.warmup)))


def member_removal(group_id: str, member_id: str) -> list[StreamsGroupRecord]:
    """Kafka's order: current assignment, target assignment, then metadata tombstones."""
    return [StreamsGroupCurrentMemberAssignmentRecord(group_id, member_id, None),
            StreamsGroupTargetAssignmentMemberRecord(group_id, member_id, None),
            StreamsGroupMemberMetadataRecord(group_id, member_id, None)]


def group_deletion(group: StreamsGroup) -> list[StreamsGroupRecord]:
    """What deleting an empty group writes: Kafka's createGroupTombstoneRecords for streams."""
    gid = group.group_id
    out: list[StreamsGroupRecord] = []
    for mid in group.members:
        out.extend(member_removal(gid, mid))
    out += [StreamsGroupTargetAssignmentMetadataRecord(gid, None), StreamsGroupTopologyRecord(gid, None),
            StreamsGroupMetadataRecord(gid, None)]
    return out


# ---- replay ------------------------------------------------------------------------------------

def replay(groups: dict[str, StreamsGroup], record: StreamsGroupRecord) -> None:
    gid = record.group
    group = groups.get(gid)
    value = record.value
    if value is None and group is None:
        return
    if group is None:
        group = groups[gid] = StreamsGroup(gid)
    if isinstance(record, StreamsGroupMetadataRecord):
        if value is None:
            del groups[gid]
        else:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
            group.validated_topology_epoch = value.validated_topology_epoch
            group.last_assignment_configs = {c.key: c.value for c in value.last_assignment_configs or []}
            group.stored_description_topology_epoch = value.stored_description_topology_epoch
            group.failed_description_topology_epoch = value.failed_description_topology_epoch
    elif isinstance(record, StreamsGroupTopologyRecord):
        group.topology = value
        group.topics_version = -1  # configure again
    elif isinstance(record, StreamsGroupMemberMetadataRecord):
        if value is None:
            group.members.pop(record.member_id, None)
            group.task_offsets.pop(record.member_id, None)  # reported offsets go with the member
        else:
            old = group.members.get(record.member_id) or StreamsMember(record.member_id)
            endpoint = None if value.user_endpoint is None else (value.user_endpoint.host, value.user_endpoint.port)
            group.members[record.member_id] = replace(
                old, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
                topology_epoch=value.topology_epoch, process_id=value.process_id, user_endpoint=endpoint,
                client_tags=tuple((kv.key, kv.value) for kv in value.client_tags))
    elif isinstance(record, StreamsGroupTargetAssignmentMemberRecord):
        if value is None:
            group.targets.pop(record.member_id, None)
        else:
            group.targets[record.member_id] = TaskAssignment(
                _tasks(value.active_tasks), _tasks(value.standby_tasks), _tasks(value.warmup_tasks))
    elif isinstance(record, StreamsGroupTargetAssignmentMetadataRecord):
        group.assignment_epoch = -1 if value is None else value.assignment_epoch
        group.assignment_time = 0 if value is None else value.assignment_timestamp
    elif isinstance(record, StreamsGroupCurrentMemberAssignmentRecord):
        member = group.members.get(record.member_id)
        if value is None:
            if member is not None:
                group.members[record.member_id] = replace(member, assigned=TaskAssignment(),
                                                          pending_revocation=TaskAssignment())
            return
        member = member or StreamsMember(record.member_id)
        before = member.assigned
        group.members[record.member_id] = replace(
            member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
            state=MemberState(value.state),
            assigned=TaskAssignment(_tasks(value.active_tasks), _tasks(value.standby_tasks),
                                    _tasks(value.warmup_tasks)),
            pending_revocation=TaskAssignment(_tasks(value.active_tasks_pending_revocation),
                                              _tasks(value.standby_tasks_pending_revocation),
                                              _tasks(value.warmup_tasks_pending_revocation)))
        if group.members[record.member_id].assigned != before and member.user_endpoint is not None:
            group.endpoint_epoch += 1  # the endpoint-to-partitions map changed


def owners_of_active(group: StreamsGroup) -> Mapping[tuple[str, int], str]:
    """Which member holds (or still revokes) each active task."""
    owners: dict[tuple[str, int], str] = {}
    for m in group.members.values():
        for tasks in (m.assigned.active, m.pending_revocation.active):
            for s, parts in tasks.items():
                for p in parts:
                    owners[(s, p)] = m.member_id
    return owners
