"""ConsumerGroupDescribe, and consumer groups in ListGroups and DeleteGroups (Kafka 4's rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.coordinators.group.core.base.context import TopicView
from broker.coordinators.group.core.base.records import AnyRecord, OffsetCommitRecord
from broker.coordinators.group.core.consumer import records as rec
from broker.coordinators.group.core.consumer.group import ConsumerGroup, ConsumerGroupState
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from protocol.messages.list_groups import ListGroupsResponse

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = "consumer"  # what ListGroups shows as a consumer group's protocol type
_Described = ConsumerGroupDescribeResponse.DescribedGroup
_Member = ConsumerGroupDescribeResponse.DescribedGroup.Member
_Assignment = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment
_TopicPartitions = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment.TopicPartitions
# v1 (KIP-1099): 0 for a classic member (JoinGroup, online migration), 1 for a consumer-protocol one.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


def _assignment(assignment: Mapping[bytes, frozenset[int]], topics: TopicView) -> Any:
    parts = []
    for topic_id, partitions in sorted(assignment.items()):
        name = topics.topic_name(topic_id)
        if name is None or not partitions:
            continue  # a deleted topic: Kafka leaves it out of the description
        parts.append(_TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(partitions)))
    return _Assignment(topic_partitions=parts)


def _holding(member: ConsumerGroupMember) -> Mapping[bytes, frozenset[int]]:
    if not member.partitions_pending_revocation:
        return member.assigned_partitions
    held = dict(member.assigned_partitions)
    for topic_id, partitions in member.partitions_pending_revocation.items():
        held[topic_id] = held.get(topic_id, frozenset()) | partitions
    return held


def _member(member: ConsumerGroupMember, target: Mapping[bytes, frozenset[int]], topics: TopicView) -> Any:
    return _Member(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        # Kafka keeps "" for a member without a regular expression, and describes it so.
        subscribed_topic_regex=member.subscribed_topic_regex or "",
        # What the member holds: Kafka 4.4 describes the partitions it has yet to revoke with them.
        assignment=_assignment(_holding(member), topics),
        target_assignment=_assignment(target, topics),
        member_type=MEMBER_TYPE_CLASSIC if member.uses_classic_protocol else MEMBER_TYPE_CONSUMER,
    )


def describe(groups: Mapping[str, ConsumerGroup], classic: Mapping[str, Any], group_id: str, topics: TopicView,
             default_assignor: str) -> Any:
    group = groups.get(group_id)
    if group is None:
        message = (f"Group {group_id} is not a consumer group." if group_id in classic
                   else f"Group {group_id} not found.")
        return _Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id,
                          group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=[])
    return _Described(
        error_code=ErrorCode.NONE,
        error_message=None,
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_server_assignor() or default_assignor,
        members=[_member(m, group.target_assignment.get(mid, {}), topics) for mid, m in sorted(group.members.items())],
    )


def listed(groups: Mapping[str, ConsumerGroup], states: set[str] | None) -> list[Any]:
    return [
        ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=PROTOCOL_TYPE, group_state=g.state.value,
                                       group_type=GROUP_TYPE)
        for g in groups.values()
        if states is None or g.state.value.lower() in states
    ]


def deletion(group: ConsumerGroup, offsets: list[tuple[str, int]]) -> tuple[int, list[AnyRecord]]:
    """DeleteGroups of a consumer group: only an empty one; its offsets, then its target
    assignment epoch and metadata go (Kafka's createGroupTombstoneRecords)."""
    if group.state is not ConsumerGroupState.EMPTY:
        return ErrorCode.NON_EMPTY_GROUP, []
    gid = group.group_id
    records: list[AnyRecord] = [OffsetCommitRecord(gid, topic, partition, None) for topic, partition in offsets]
    records.extend(group_deletion_records(group))
    return ErrorCode.NONE, records


def group_deletion_records(group: ConsumerGroup) -> list[AnyRecord]:
    """The tombstones that delete an empty consumer group: what its expressions matched, its target
    assignment epoch and its metadata."""
    gid = group.group_id
    records: list[AnyRecord] = [rec.regular_expression_tombstone(gid, r) for r in sorted(group.resolved_regexes)]
    records.append(rec.target_epoch_tombstone(gid))
    records.append(rec.group_tombstone(gid))
    return records
