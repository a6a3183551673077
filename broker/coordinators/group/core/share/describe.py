"""ShareGroupDescribe, and share groups in ListGroups and DeleteGroups."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core.base.context import TopicView
from broker.coordinators.group.core.base.records import AnyRecord
from broker.coordinators.group.core.share import assignor
from broker.coordinators.group.core.share.group import Assignment, ShareGroup
from protocol.errors import ErrorCode
from protocol.messages.list_groups import ListGroupsResponse
from protocol.messages.share_group_describe import ShareGroupDescribeResponse
from protocol.payloads.offsets_log_records import (
    ShareGroupMetadataRecord,
    ShareGroupStatePartitionMetadataRecord,
    ShareGroupTargetAssignmentMetadataRecord,
)

GROUP_TYPE = "share"
PROTOCOL_TYPE = "share"
_Described = ShareGroupDescribeResponse.DescribedGroup
_Member = ShareGroupDescribeResponse.DescribedGroup.Member
_Assignment = ShareGroupDescribeResponse.DescribedGroup.Member.Assignment
_TopicPartitions = _Assignment.TopicPartitions


def failed(group_id: str, code: int, message: str | None = None) -> Any:
    return _Described(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                      assignment_epoch=0, assignor_name="", members=[])


def _assignment(assignment: Assignment, topics: TopicView) -> Any:
    parts = []
    for topic_id, partitions in sorted(assignment.items()):
        name = topics.topic_name(topic_id)
        if name is not None and partitions:
            parts.append(_TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(partitions)))
    return _Assignment(topic_partitions=parts)


def describe(groups: dict[str, ShareGroup], group_id: str, topics: TopicView) -> Any:
    group = groups.get(group_id)
    if group is None:
        return failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    return _Described(
        error_code=0, error_message=None, group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=assignor.NAME,
        members=[_Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                         client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
                         assignment=_assignment(m.assigned, topics))
                 for m in group.members.values()])


def listed(groups: dict[str, ShareGroup], states: set[str] | None) -> list[Any]:
    out = []
    for group in groups.values():
        if states is None or group.state.lower() in states:
            out.append(ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type=PROTOCOL_TYPE,
                                                      group_state=group.state, group_type=GROUP_TYPE))
    return out


def deletion(group: ShareGroup) -> tuple[int, list[AnyRecord]]:
    """A share group with members cannot be deleted; an empty one leaves by tombstones."""
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, []
    gid = group.group_id
    return ErrorCode.NONE, [ShareGroupStatePartitionMetadataRecord(gid, None),
                            ShareGroupTargetAssignmentMetadataRecord(gid, None), ShareGroupMetadataRecord(gid, None)]
