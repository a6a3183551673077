"""A member of a KIP-848 consumer group as the coordinator holds it.

A member is persisted as two records: ``ConsumerGroupMemberMetadataValue`` (who it is and what it
subscribes to, :class:`MemberMetadata`) and ``ConsumerGroupCurrentMemberAssignmentValue`` (where it
stands in the reconciliation, :class:`MemberCurrentAssignment`). :class:`ConsumerGroupMember` is
the two put together; it is immutable, every change makes a new member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from broker.coordinators.group.core.consumer.assignor_api import Assignment, TopicId

# Member epochs with a meaning in ConsumerGroupHeartbeat (Kafka's ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Where a member is in its reconciliation; the value is the ``State`` byte of
    ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0  # owns exactly what it was given at its epoch; nothing to revoke, nothing awaited
    UNREVOKED_PARTITIONS = 1  # must stop owning some partitions before it moves to a newer epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for partitions other members still own
    UNKNOWN = 127  # a state written by a newer coordinator that this one does not know

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            # A downgraded coordinator reads a state it does not know: the member is fenced
            # by the reconciliation (see reconcile.py) rather than the load failing.
            return cls.UNKNOWN


def normalized(partitions: Mapping[TopicId, Iterable[int]]) -> Assignment:
    """An assignment with frozen partition sets and no topic left without partitions, so that
    two assignments holding the same partitions compare equal."""
    out: Assignment = {}
    for topic, parts in partitions.items():
        frozen = parts if isinstance(parts, frozenset) else frozenset(parts)
        if frozen:
            out[topic] = frozen
    return out


def partition_count(assignment: Mapping[TopicId, frozenset[int]]) -> int:
    return sum(len(parts) for parts in assignment.values())


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that joined with JoinGroup (a classic member inside a consumer group) told
    the coordinator: its session timeout and the (name, metadata) protocols it supports, in its
    order of preference (``ClassicMemberMetadata`` of ConsumerGroupMemberMetadataValue)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol the coordinator answers it with: its first choice, as Kafka does."""
        return self.supported_protocols[0][0] if self.supported_protocols else ""

    def names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.supported_protocols)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """The value of ConsumerGroupMemberMetadataValue."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor_name: str | None = None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class MemberCurrentAssignment:
    """The value of ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """A consumer-protocol member. Defaults are those of a member that has just been created
    (Kafka's ``ConsumerGroupMember.Builder``): epoch 0, previous epoch -1, STABLE, owning nothing.

    Assignments are values: never mutate the dicts or sets of a member, build a new member.
    """

    member_id: str
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    rebalance_timeout_ms: int = -1
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    # Set for a member that joined with JoinGroup (online migration): it speaks the classic
    # protocol and the coordinator computes its assignment for it.
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """Whether the member has converged on the target assignment of that epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    @property
    def metadata(self) -> MemberMetadata:
        return MemberMetadata(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor_name=self.server_assignor_name,
            classic=self.classic,
        )

    @property
    def current_assignment(self) -> MemberCurrentAssignment:
        return MemberCurrentAssignment(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state,
            assigned_partitions=self.assigned_partitions,
            partitions_pending_revocation=self.partitions_pending_revocation,
        )

    def with_metadata(self, metadata: MemberMetadata) -> ConsumerGroupMember:
        return replace(
            self,
            instance_id=metadata.instance_id,
            rack_id=metadata.rack_id,
            client_id=metadata.client_id,
            client_host=metadata.client_host,
            subscribed_topic_names=metadata.subscribed_topic_names,
            subscribed_topic_regex=metadata.subscribed_topic_regex,
            rebalance_timeout_ms=metadata.rebalance_timeout_ms,
            server_assignor_name=metadata.server_assignor_name,
            classic=metadata.classic,
        )

    def with_current_assignment(self, current: MemberCurrentAssignment) -> ConsumerGroupMember:
        return replace(
            self,
            member_epoch=current.member_epoch,
            previous_member_epoch=current.previous_member_epoch,
            state=current.state,
            assigned_partitions=normalized(current.assigned_partitions),
            partitions_pending_revocation=normalized(current.partitions_pending_revocation),
        )
