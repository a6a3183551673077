"""DescribeGroups, ListGroups and DeleteGroups for one shard."""

from __future__ import annotations

from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.records import AnyRecord, GroupMetadataRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.state import CoordinatorState
from protocol.errors import ErrorCode
from protocol.messages.describe_groups import DescribeGroupsResponse
from protocol.messages.list_groups import ListGroupsResponse

GROUP_TYPE = "classic"
GROUP_ID_NOT_FOUND_VERSION = 6


def describe_group(st: CoordinatorState, group_id: str, api_version: int) -> DescribeGroupsResponse.DescribedGroup:
    group = st.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        if api_version >= GROUP_ID_NOT_FOUND_VERSION:
            return DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found.",
                group_id=group_id,
                group_state=GroupState.DEAD.value,
            )
        return DescribeGroupsResponse.DescribedGroup(group_id=group_id, group_state=GroupState.DEAD.value)
    stable = group.state is GroupState.STABLE
    members = [
        DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            # Kafka shows subscriptions only once the group is Stable; assignments always.
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment,
        )
        for m in group.members.values()
    ]
    return DescribeGroupsResponse.DescribedGroup(
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def list_groups(
    st: CoordinatorState, states: set[str] | None, types: set[str] | None
) -> list[ListGroupsResponse.ListedGroup]:
    wanted_states = {s.strip().lower() for s in states} if states else None
    if types and GROUP_TYPE not in {t.strip().lower() for t in types}:
        return []
    return [
        ListGroupsResponse.ListedGroup(
            group_id=g.group_id,
            protocol_type=g.protocol_type or "",
            group_state=g.state.value,
            group_type=GROUP_TYPE,
        )
        for g in st.groups.values()
        if wanted_states is None or g.state.value.lower() in wanted_states
    ]


def delete_group(st: CoordinatorState, group_id: str, now: int) -> tuple[int, list[AnyRecord], Result]:
    del now
    out = Result()
    group = st.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        return ErrorCode.GROUP_ID_NOT_FOUND, [], out
    if group.state is not GroupState.EMPTY:
        return ErrorCode.NON_EMPTY_GROUP, [], out
    for topic, partition, _ in list(st.offsets.all_of(group_id)):
        st.emit(out, OffsetCommitRecord(group_id, topic, partition, None))
    out.transitions.append((group_id, group.state.value, GroupState.DEAD.value, group.generation, 0, "deleted"))
    st.emit(out, GroupMetadataRecord(group_id, None))
    return ErrorCode.NONE, out.records, out
