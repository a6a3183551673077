"""The state of one KIP-848 consumer group (Kafka's ``ConsumerGroup`` and ``ModernGroup``).

Every mutating method is the replay of one record kind (value or tombstone), so writing records and
replaying them are the same code path and replaying a log rebuilds the group exactly:

====================================================  ===============================================
record                                                method
====================================================  ===============================================
ConsumerGroupMetadataValue / tombstone                ``set_group_epoch`` / ``check_deletable``
ConsumerGroupMemberMetadataValue / tombstone          ``update_member_metadata`` / ``remove_member``
ConsumerGroupTargetAssignmentMemberValue / tombstone  ``update_target_assignment`` /
                                                      ``remove_target_assignment``
ConsumerGroupTargetAssignmentMetadataValue / tomb.    ``set_target_assignment_epoch`` /
                                                      ``clear_target_assignment_epoch``
ConsumerGroupCurrentMemberAssignmentValue / tomb.     ``update_member_current_assignment`` /
                                                      ``clear_member_current_assignment``
ConsumerGroupRegularExpressionValue / tombstone       ``set_resolved_regex`` / ``remove_resolved_regex``
====================================================  ===============================================

Removing a member is three tombstones, in this order: its current assignment (which releases its
partitions), its target assignment, its metadata. The checks Kafka makes while replaying are made
here too and raise :class:`IllegalStateError`; a failing method leaves the group unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum
from types import MappingProxyType

from broker.coordinators.group.core.consumer.assignor_api import Assignment, TopicId
from broker.coordinators.group.core.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberCurrentAssignment,
    MemberMetadata,
    MemberState,
    normalized,
)

_EMPTY: Assignment = {}
_NONE: frozenset[int] = frozenset()


class IllegalStateError(Exception):
    """A record contradicts the state it is replayed onto (Kafka's IllegalStateException)."""


class ConsumerGroupState(Enum):
    """The group state as ConsumerGroupDescribe and ListGroups spell it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Bumped on every change of membership, subscription or subscribed topics' metadata. A new
        # group starts at 1, as in Kafka 4.4 (its first member's first epoch is then 2).
        self.group_epoch = 1
        # Hash of the subscribed topics' metadata (KIP-1101): a change means a new assignment.
        self.metadata_hash = 0
        # The group epoch the target assignment was computed for; below the group epoch means
        # a new target assignment is due. -1 once its record has been deleted.
        self.assignment_epoch = 0
        # When the target assignment was computed (wall-clock ms; 0: unknown, or not by the
        # assignor): the next one waits for the group's assignment interval (KIP-1263).
        self.assignment_time = 0
        self._members: dict[str, ConsumerGroupMember] = {}
        self._target: dict[str, Assignment] = {}
        # topic -> partition -> epoch of the member owning it (assigned or pending revocation).
        self._owner_epoch: dict[TopicId, dict[int, int]] = {}
        self._static_members: dict[str, str] = {}  # instance id -> member id
        self._topic_subscribers: dict[str, int] = {}  # topic name -> members naming it
        self._regex_subscribers: dict[str, int] = {}  # regex -> members subscribing with it
        self._resolved_regexes: dict[str, frozenset[str]] = {}  # regex -> topic names it matched
        # regex -> when it was last resolved (its record's timestamp): a refresh resolves them all
        # at once, so any one of them says when the group last refreshed (Kafka reads the first).
        self._regex_resolved_at: dict[str, int] = {}
        self._server_assignors: dict[str, int] = {}  # assignor name -> members asking for it
        # Members that joined with JoinGroup (online migration), and how many of them support each
        # classic protocol name: a new classic member must share one with all of them.
        self._classic_members = 0
        self._classic_protocols: dict[str, int] = {}
        # Soft state, never written: the version of the broker's topics the metadata hash was last
        # checked against. A steady heartbeat then costs no pass over the members' subscriptions.
        self.topics_version = -1
        # Soft state: the version of the broker's topics the group's expressions were last
        # resolved against by this process (-1 after a load, so a load is followed by one refresh,
        # as Kafka's coordinator refreshes after a failover).
        self.regex_topics_version = -1

    # ----------------------------------------------------------------- replay: group records

    def set_group_epoch(self, epoch: int, metadata_hash: int = 0) -> None:
        self.group_epoch = epoch
        self.metadata_hash = metadata_hash

    def check_deletable(self) -> None:
        """What a ConsumerGroupMetadata tombstone requires before the group goes away: every
        member, target assignment and the target assignment epoch deleted first."""
        if self._members:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the group still "
                f"has {len(self._members)} members."
            )
        if self._target:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the target "
                f"assignment still has {len(self._target)} members."
            )
        if self.assignment_epoch != -1:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but did not receive "
                "ConsumerGroupTargetAssignmentMetadataValue tombstone."
            )

    def set_target_assignment_epoch(self, epoch: int, timestamp: int = 0) -> None:
        self.assignment_epoch = epoch
        self.assignment_time = timestamp

    def clear_target_assignment_epoch(self) -> None:
        if self._target:
            raise IllegalStateError(
                f"Received a tombstone record to delete target assignment of {self.group_id} but the "
                f"assignment still has {len(self._target)} members."
            )
        self.assignment_epoch = -1

    def set_resolved_regex(self, regex: str, topics: frozenset[str], timestamp: int = 0) -> None:
        self._resolved_regexes[regex] = topics
        self._regex_resolved_at[regex] = timestamp

    def remove_resolved_regex(self, regex: str) -> None:
        self._resolved_regexes.pop(regex, None)
        self._regex_resolved_at.pop(regex, None)

    def last_regex_refresh_ms(self) -> int | None:
        """When the group's expressions were last resolved, None when none is."""
        return max(self._regex_resolved_at.values(), default=None)

    # ---------------------------------------------------------------- replay: member records

    def update_member_metadata(self, member_id: str, metadata: MemberMetadata) -> None:
        old = self._members.get(member_id)
        base = old if old is not None else ConsumerGroupMember(member_id)
        self._put_member(old, base.with_metadata(metadata))

    def remove_member(self, member_id: str) -> None:
        """The member metadata tombstone; the member's other two records must be deleted first."""
        old = self._members.get(member_id)
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            raise IllegalStateError(
                f"Received a tombstone record to delete member {member_id} but did not receive "
                "ConsumerGroupCurrentMemberAssignmentValue tombstone."
            )
        if member_id in self._target:
            raise IllegalStateError(
                f"Received a tombstone record to delete member {member_id} but did not receive "
                "ConsumerGroupTargetAssignmentMetadataValue tombstone."
            )
        self._check_release(old)
        self._release(old)
        del self._members[member_id]
        self._count_subscription(old, -1)
        # Only the member the instance id points to gives it up: a static member replacing this
        # one may already hold it.
        if old.instance_id is not None and self._static_members.get(old.instance_id) == member_id:
            del self._static_members[old.instance_id]

    def update_member_current_assignment(self, member_id: str, current: MemberCurrentAssignment) -> None:
        old = self._members.get(member_id)
        base = old if old is not None else ConsumerGroupMember(member_id)
        self._put_member(old, base.with_current_assignment(current))

    def clear_member_current_assignment(self, member_id: str) -> None:
        """The current assignment tombstone: the member leaves its epoch and owns nothing."""
        old = self._members.get(member_id)
        if old is None:
            return
        self._put_member(
            old,
            old.with_current_assignment(
                MemberCurrentAssignment(
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    state=old.state,
                    assigned_partitions={},
                    partitions_pending_revocation={},
                )
            ),
        )

    def update_target_assignment(self, member_id: str, partitions: Mapping[TopicId, frozenset[int]]) -> None:
        self._target[member_id] = normalized(partitions)

    def remove_target_assignment(self, member_id: str) -> None:
        self._target.pop(member_id, None)

    # ------------------------------------------------------------------------------ reads

    @property
    def members(self) -> Mapping[str, ConsumerGroupMember]:
        return MappingProxyType(self._members)

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self._members.get(member_id)

    @property
    def target_assignment(self) -> Mapping[str, Assignment]:
        return MappingProxyType(self._target)

    def member_target(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's part of the target assignment; a static member joining under a new member
        id takes the part of the member its instance id was held by."""
        if instance_id is not None:
            previous = self._static_members.get(instance_id)
            return self._target.get(previous, _EMPTY) if previous is not None else _EMPTY
        return self._target.get(member_id, _EMPTY)

    def owner_epoch(self, topic: TopicId, partition: int) -> int:
        """The epoch of the member owning the partition, -1 when no member owns it."""
        partitions = self._owner_epoch.get(topic)
        return -1 if partitions is None else partitions.get(partition, -1)

    def owned_partitions(self) -> Iterator[tuple[TopicId, int, int]]:
        for topic, partitions in self._owner_epoch.items():
            for partition, epoch in partitions.items():
                yield topic, partition, epoch

    def partitions_pending_revocation(self) -> dict[str, Assignment]:
        """What each member still has to give up, for the members that have anything."""
        return {m.member_id: m.partitions_pending_revocation for m in self._members.values() if m.partitions_pending_revocation}

    @property
    def static_members(self) -> Mapping[str, str]:
        return MappingProxyType(self._static_members)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self._static_members.get(instance_id)

    @property
    def resolved_regexes(self) -> Mapping[str, frozenset[str]]:
        return MappingProxyType(self._resolved_regexes)

    def subscribed_topic_names(self) -> dict[str, int]:
        """Subscribed topic names with the number of members subscribed to each, by name or
        through a resolved regular expression."""
        counts = dict(self._topic_subscribers)
        for regex, subscribers in self._regex_subscribers.items():
            for topic in self._resolved_regexes.get(regex, ()):
                counts[topic] = counts.get(topic, 0) + subscribers
        return counts

    def subscribed_regexes(self) -> frozenset[str]:
        """The expressions at least one member subscribes with."""
        return frozenset(self._regex_subscribers)  # an expression no member uses has no entry

    def regex_subscribers(self, regex: str) -> int:
        """Members subscribing with this expression."""
        return self._regex_subscribers.get(regex, 0)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if topic in self._topic_subscribers:
            return True
        return any(topic in self._resolved_regexes.get(regex, ()) for regex in self._regex_subscribers)

    def preferred_server_assignor(self) -> str | None:
        """The assignor most members ask for (ties: the first name in order), None if none asks."""
        return most_asked_for(self._server_assignors)

    @property
    def classic_member_count(self) -> int:
        return self._classic_members

    def supports_classic_protocols(self, protocol_type: str, names: frozenset[str]) -> bool:
        """Whether a member joining with JoinGroup can be served: it must speak the consumer
        embedded protocol and share a protocol name with every classic member already in."""
        if protocol_type != "consumer":
            return False
        if not self._members:
            return bool(names)
        return any(self._classic_protocols.get(name, 0) == self._classic_members for name in names)

    def all_members_use_classic_except(self, member_id: str) -> bool:
        """Whether ``member_id`` is the only member on the consumer protocol (the group may then go
        back to classic when it leaves)."""
        member = self._members.get(member_id)
        return (member is not None and not member.uses_classic_protocol
                and self._classic_members == len(self._members) - 1)

    @property
    def state(self) -> ConsumerGroupState:
        if not self._members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self._members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether an UNRELEASED_PARTITIONS member is still waiting for a partition another
        member owns (no point in fencing it for its own slowness)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic, partitions in self._target.get(member.member_id, _EMPTY).items():
            mine = member.assigned_partitions.get(topic, _NONE)
            for partition in partitions - mine:
                if self.owner_epoch(topic, partition) != -1:
                    return True
        return False

    # --------------------------------------------------------------------------- internals

    def _put_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        if old is not None:
            self._check_release(old)
            released = self._release(old)
            try:
                self._check_claim(new)
            except IllegalStateError:
                self._restore(released)
                raise
        else:
            self._check_claim(new)
        self._claim(new)
        self._members[new.member_id] = new
        self._count_subscription(old, -1)
        self._count_subscription(new, +1)
        if new.instance_id is not None:
            self._static_members[new.instance_id] = new.member_id

    @staticmethod
    def _held(member: ConsumerGroupMember) -> Iterator[tuple[TopicId, frozenset[int]]]:
        yield from member.assigned_partitions.items()
        yield from member.partitions_pending_revocation.items()

    def _check_release(self, member: ConsumerGroupMember) -> None:
        for topic, partitions in self._held(member):
            epochs = self._owner_epoch.get(topic)
            if epochs is None:
                raise IllegalStateError(
                    f"Cannot remove the epoch {member.member_epoch} from {topic.hex()} because it does "
                    "not have any epoch"
                )
            for partition in partitions:
                if epochs.get(partition) != member.member_epoch:
                    raise IllegalStateError(
                        f"Cannot remove the epoch {member.member_epoch} from {topic.hex()}-{partition} "
                        f"because the partition is still owned at a different epoch {epochs.get(partition)}"
                    )

    def _check_claim(self, member: ConsumerGroupMember) -> None:
        seen: dict[TopicId, frozenset[int]] = {}
        for topic, partitions in self._held(member):
            epochs = self._owner_epoch.get(topic, {})
            both = seen.get(topic, _NONE) & partitions
            for partition in sorted(partitions):
                if partition in epochs or partition in both:
                    raise IllegalStateError(
                        f"Cannot set the epoch of {topic.hex()}-{partition} to {member.member_epoch} "
                        f"because the partition is still owned at epoch "
                        f"{epochs.get(partition, member.member_epoch)}"
                    )
            seen[topic] = seen.get(topic, _NONE) | partitions

    def _release(self, member: ConsumerGroupMember) -> list[tuple[TopicId, int, int]]:
        released = []
        for topic, partitions in self._held(member):
            epochs = self._owner_epoch.get(topic)
            if epochs is None:
                continue
            for partition in partitions:
                epoch = epochs.pop(partition, None)
                if epoch is not None:
                    released.append((topic, partition, epoch))
            if not epochs:
                del self._owner_epoch[topic]
        return released

    def _restore(self, released: list[tuple[TopicId, int, int]]) -> None:
        for topic, partition, epoch in released:
            self._owner_epoch.setdefault(topic, {})[partition] = epoch

    def _claim(self, member: ConsumerGroupMember) -> None:
        for topic, partitions in self._held(member):
            epochs = self._owner_epoch.setdefault(topic, {})
            for partition in partitions:
                epochs[partition] = member.member_epoch

    def _count_subscription(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        for topic in member.subscribed_topic_names:
            _add(self._topic_subscribers, topic, delta)
        if member.subscribed_topic_regex:
            _add(self._regex_subscribers, member.subscribed_topic_regex, delta)
        if member.server_assignor_name is not None:
            _add(self._server_assignors, member.server_assignor_name, delta)
        if member.classic is not None:
            self._classic_members += delta
            for name in member.classic.names():
                _add(self._classic_protocols, name, delta)


def most_asked_for(counts: Mapping[str, int]) -> str | None:
    """The assignor most members ask for (ties: the first name in order), None if none asks."""
    asked = {name: n for name, n in counts.items() if n > 0}
    if not asked:
        return None
    return min(asked.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _add(counts: dict[str, int], key: str, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value > 0:
        counts[key] = value
    else:
        counts.pop(key, None)
