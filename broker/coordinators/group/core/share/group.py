"""A share group as its records describe it, and how each record changes it.

A share group's members consume the same partitions together: there is no revocation, so a
member's epoch goes straight to the target assignment's epoch and its assignment is its target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.payloads.offsets_log_records import (
    ShareGroupCurrentMemberAssignmentRecord,
    ShareGroupMemberMetadataRecord,
    ShareGroupMetadataRecord,
    ShareGroupRecord,
    ShareGroupStatePartitionMetadataRecord,
    ShareGroupTargetAssignmentMemberRecord,
    ShareGroupTargetAssignmentMetadataRecord,
)

TopicId = bytes
Assignment = Mapping[TopicId, frozenset[int]]

SHARE_RECORDS = (ShareGroupMemberMetadataRecord, ShareGroupMetadataRecord, ShareGroupTargetAssignmentMetadataRecord,
                 ShareGroupTargetAssignmentMemberRecord, ShareGroupCurrentMemberAssignmentRecord,
                 ShareGroupStatePartitionMetadataRecord)

EMPTY = "Empty"
STABLE = "Stable"
# A new group starts at 1, as in Kafka 4.4: its first member's first epoch is 2.
NEW_GROUP_EPOCH = 1


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = NEW_GROUP_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = 0
    # When the target assignment was computed (wall-clock ms; 0: unknown, or a group left empty):
    # the next one waits for the group's assignment interval (KIP-1263).
    assignment_time: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # The topic partitions whose share state is initialized, and those being initialized
    # (ShareGroupStatePartitionMetadata): only initialized partitions are assigned.
    initialized: dict[TopicId, tuple[str, frozenset[int]]] = field(default_factory=dict)
    initializing: dict[TopicId, tuple[str, frozenset[int]]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for member in self.members.values():
            out |= member.subscribed_topic_names
        return out


def _assignment(topics: list) -> dict[TopicId, frozenset[int]]:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topics if tp.partitions}


def replay(groups: dict[str, ShareGroup], record: ShareGroupRecord) -> None:
    """Applies one share-group record; a value creates the group, the metadata's tombstone
    removes it."""
    gid = record.group
    group = groups.get(gid)
    value = record.value
    if value is None and group is None:
        return
    if group is None:
        group = groups[gid] = ShareGroup(gid)
    if isinstance(record, ShareGroupMetadataRecord):
        if value is None:
            del groups[gid]
        else:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
    elif isinstance(record, ShareGroupMemberMetadataRecord):
        if value is None:
            group.members.pop(record.member_id, None)
        else:
            member = group.members.get(record.member_id)
            if member is None:
                member = group.members[record.member_id] = ShareMember(record.member_id)
            member.rack_id = value.rack_id
            member.client_id = value.client_id
            member.client_host = value.client_host
            member.subscribed_topic_names = frozenset(value.subscribed_topic_names)
    elif isinstance(record, ShareGroupTargetAssignmentMemberRecord):
        if value is None:
            group.target.pop(record.member_id, None)
        else:
            group.target[record.member_id] = _assignment(value.topic_partitions)
    elif isinstance(record, ShareGroupTargetAssignmentMetadataRecord):
        group.assignment_epoch = 0 if value is None else value.assignment_epoch
        group.assignment_time = 0 if value is None else value.assignment_timestamp
    elif isinstance(record, ShareGroupCurrentMemberAssignmentRecord):
        member = group.members.get(record.member_id)
        if member is None:
            if value is None:
                return
            member = group.members[record.member_id] = ShareMember(record.member_id)
        if value is None:
            member.member_epoch, member.previous_member_epoch, member.assigned = 0, -1, {}
        else:
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            member.assigned = _assignment(value.assigned_partitions)
    elif isinstance(record, ShareGroupStatePartitionMetadataRecord):
        group.initialized = {} if value is None else {
            t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.initialized_topics}
        group.initializing = {} if value is None else {
            t.topic_id: (t.topic_name, frozenset(t.partitions)) for t in value.initializing_topics}
