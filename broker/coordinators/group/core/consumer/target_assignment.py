"""Computing a group's new target assignment (Kafka's ``TargetAssignmentBuilder``).

The coordinator runs the assignor when the group epoch has moved past the target assignment
epoch. Every member is handed to the assignor with its part of the current target assignment (what
stickiness is measured against); a static member that replaces a departed one (same instance id,
new member id) is handed the departed member's part, so that it takes over its partitions. The
result is the whole new target; only the members whose part changed get a
ConsumerGroupTargetAssignmentMemberValue record, then the target assignment epoch is set to the
group epoch (ConsumerGroupTargetAssignmentMetadataValue).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    Assignor,
    GroupSpec,
    MemberSpec,
    TopicDescriber,
    TopicId,
)
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember, normalized


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    epoch: int  # the group epoch it was computed for, the new target assignment epoch
    members: dict[str, Assignment]  # the whole new target, by member id
    changed: dict[str, Assignment]  # the members to write a record for, in member order


def build_target_assignment(
    *,
    group_epoch: int,
    members: Mapping[str, ConsumerGroupMember],
    subscriptions: Mapping[str, frozenset[TopicId]],
    topics: TopicDescriber,
    current_target: Mapping[str, Assignment],
    static_members: Mapping[str, str],
    assignor: Assignor,
) -> TargetAssignment:
    """The new target assignment of a group.

    ``members`` are the group's members with the change being made applied (a joining or updated
    member present, a leaving or replaced one absent); ``subscriptions`` gives each member's
    subscription resolved to the ids of existing topics; ``current_target`` and
    ``static_members`` (instance id -> member id) are the group's as stored, before the change.
    """
    specs: dict[str, MemberSpec] = {}
    for member_id, member in members.items():
        current = current_target.get(member_id, {})
        if member.instance_id is not None:
            previous_id = static_members.get(member.instance_id)
            if previous_id is not None and previous_id != member_id:
                current = current_target.get(previous_id, {})
        specs[member_id] = MemberSpec(
            subscribed_topics=subscriptions.get(member_id, frozenset()),
            rack=member.rack_id,
            instance_id=member.instance_id,
            current=current,
        )

    computed = assignor.assign(GroupSpec(members=specs), topics)

    new_target: dict[str, Assignment] = {}
    changed: dict[str, Assignment] = {}
    for member_id in specs:
        assignment = normalized(computed.get(member_id, {}))
        new_target[member_id] = assignment
        # A member without a stored part gets a record even when its new part is empty.
        if current_target.get(member_id) != assignment:
            changed[member_id] = assignment
    return TargetAssignment(epoch=group_epoch, members=new_target, changed=changed)
