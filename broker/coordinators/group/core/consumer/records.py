"""A consumer group's records: built from the model, and replayed into it.

Kafka's ``GroupCoordinatorRecordHelpers`` for the KIP-848 records, and the replay half of its
``GroupMetadataManager``: each record value or tombstone is one call on :class:`ConsumerGroup`,
so the coordinator changes a group only by replaying the records it writes, and a restart that
replays the log rebuilds the same group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.coordinators.group.core.consumer.assignor_api import Assignment
from broker.coordinators.group.core.consumer.group import ConsumerGroup
from broker.coordinators.group.core.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberCurrentAssignment,
    MemberMetadata,
    MemberState,
)
from protocol.messages.offsets_log_consumer_groups import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.payloads.offsets_log_records import (
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerGroupRecord,
    ConsumerGroupRegularExpressionRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
)

_Current = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
_Target = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
_ClassicValue = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata


# ---- building ----------------------------------------------------------------------------------

def group_epoch(group_id: str, epoch: int, metadata_hash: int = 0) -> ConsumerGroupMetadataRecord:
    return ConsumerGroupMetadataRecord(group_id, ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def group_tombstone(group_id: str) -> ConsumerGroupMetadataRecord:
    return ConsumerGroupMetadataRecord(group_id, None)


def member_metadata(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupMemberMetadataRecord:
    return ConsumerGroupMemberMetadataRecord(group_id, member.member_id, ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor_name,
        classic_member_metadata=_classic_value(member.classic),
    ))


def _classic_value(classic: ClassicMemberMetadata | None) -> Any:
    if classic is None:
        return None
    return _ClassicValue(session_timeout_ms=classic.session_timeout_ms, supported_protocols=[
        _ClassicValue.ClassicProtocol(name=name, metadata=meta) for name, meta in classic.supported_protocols])


def _classic(value: Any) -> ClassicMemberMetadata | None:
    if value is None:
        return None
    return ClassicMemberMetadata(session_timeout_ms=value.session_timeout_ms, supported_protocols=tuple(
        (p.name, bytes(p.metadata)) for p in value.supported_protocols))


def member_metadata_tombstone(group_id: str, member_id: str) -> ConsumerGroupMemberMetadataRecord:
    return ConsumerGroupMemberMetadataRecord(group_id, member_id, None)


def _topic_partitions(assignment: Mapping[bytes, frozenset[int]], cls: type) -> list:
    # Kafka writes the map in its own order; sorted here so that the same state gives the same bytes.
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(assignment.items()) if p]


def target_member(group_id: str, member_id: str, assignment: Assignment) -> ConsumerGroupTargetAssignmentMemberRecord:
    return ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=_topic_partitions(assignment, _Target)))


def target_member_tombstone(group_id: str, member_id: str) -> ConsumerGroupTargetAssignmentMemberRecord:
    return ConsumerGroupTargetAssignmentMemberRecord(group_id, member_id, None)


def target_epoch(group_id: str, epoch: int, timestamp: int = 0) -> ConsumerGroupTargetAssignmentMetadataRecord:
    """The target assignment's epoch, and when it was computed (0: not by the assignor, as for a
    group left empty: the next assignment is not held back by the assignment interval)."""
    return ConsumerGroupTargetAssignmentMetadataRecord(group_id, ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp=timestamp))


def target_epoch_tombstone(group_id: str) -> ConsumerGroupTargetAssignmentMetadataRecord:
    return ConsumerGroupTargetAssignmentMetadataRecord(group_id, None)


def current_assignment(group_id: str, member: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignmentRecord:
    return ConsumerGroupCurrentMemberAssignmentRecord(group_id, member.member_id,
                                                      ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned_partitions=_topic_partitions(member.assigned_partitions, _Current),
        partitions_pending_revocation=_topic_partitions(member.partitions_pending_revocation, _Current),
    ))


def current_assignment_tombstone(group_id: str, member_id: str) -> ConsumerGroupCurrentMemberAssignmentRecord:
    return ConsumerGroupCurrentMemberAssignmentRecord(group_id, member_id, None)


def regular_expression(group_id: str, regex: str, topics: frozenset[str], version: int,
                       now_ms: int) -> ConsumerGroupRegularExpressionRecord:
    """What a subscription's expression matched, against which version of the topics and when."""
    return ConsumerGroupRegularExpressionRecord(group_id, regex, ConsumerGroupRegularExpressionValue(
        topics=sorted(topics), version=version, timestamp=now_ms))


def regular_expression_tombstone(group_id: str, regex: str) -> ConsumerGroupRegularExpressionRecord:
    return ConsumerGroupRegularExpressionRecord(group_id, regex, None)


def member_removal(group_id: str, member_id: str) -> list[ConsumerGroupRecord]:
    """Kafka's order: the current assignment first (it releases the partitions), then the target,
    then the member itself."""
    return [current_assignment_tombstone(group_id, member_id), target_member_tombstone(group_id, member_id),
            member_metadata_tombstone(group_id, member_id)]


# ---- replaying ---------------------------------------------------------------------------------

def _assignment(topics: list) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topics if tp.partitions}


def replay(groups: dict[str, ConsumerGroup], record: ConsumerGroupRecord) -> None:
    """Applies one consumer-group record. A value creates the group if it does not exist yet; a
    tombstone of the group's metadata removes it (Kafka checks it is empty first)."""
    gid = record.group
    group = groups.get(gid)
    if record.value is None and group is None:
        return
    if group is None:
        group = groups[gid] = ConsumerGroup(gid)
    value = record.value
    if isinstance(record, ConsumerGroupMetadataRecord):
        if value is None:
            group.check_deletable()
            del groups[gid]
        else:
            group.set_group_epoch(value.epoch, value.metadata_hash)
    elif isinstance(record, ConsumerGroupMemberMetadataRecord):
        if value is None:
            group.remove_member(record.member_id)
        else:
            group.update_member_metadata(record.member_id, MemberMetadata(
                instance_id=value.instance_id,
                rack_id=value.rack_id,
                client_id=value.client_id,
                client_host=value.client_host,
                subscribed_topic_names=frozenset(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor_name=value.server_assignor,
                classic=_classic(value.classic_member_metadata),
            ))
    elif isinstance(record, ConsumerGroupTargetAssignmentMemberRecord):
        if value is None:
            group.remove_target_assignment(record.member_id)
        else:
            group.update_target_assignment(record.member_id, _assignment(value.topic_partitions))
    elif isinstance(record, ConsumerGroupTargetAssignmentMetadataRecord):
        if value is None:
            group.clear_target_assignment_epoch()
        else:
            group.set_target_assignment_epoch(value.assignment_epoch, value.assignment_timestamp)
    elif isinstance(record, ConsumerGroupCurrentMemberAssignmentRecord):
        if value is None:
            group.clear_member_current_assignment(record.member_id)
        else:
            group.update_member_current_assignment(record.member_id, MemberCurrentAssignment(
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=MemberState.from_value(value.state),
                assigned_partitions=_assignment(value.assigned_partitions),
                partitions_pending_revocation=_assignment(value.partitions_pending_revocation),
            ))
    elif isinstance(record, ConsumerGroupRegularExpressionRecord):
        if value is None:
            group.remove_resolved_regex(record.regular_expression)
        else:
            group.set_resolved_regex(record.regular_expression, frozenset(value.topics), value.timestamp)
    elif isinstance(record, ConsumerGroupPartitionMetadataRecord):
        # Written by 3.7-4.0 brokers; 4.1 replaced it with the metadata hash. Nothing to keep.
        pass
