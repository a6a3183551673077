"""A classic (JoinGroup/SyncGroup) group: its members, state, generation and protocol choice.

Mirrors Kafka's ``ClassicGroup``: the in-memory view that operations mutate directly for soft
state (who is awaiting a join, pending members, timers) and that ``GroupMetadata`` records persist.
Members keep insertion order, which makes leader succession and protocol selection deterministic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from broker.coordinators.group.core.base.result import Result
from protocol.codec import codec_for
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from protocol.messages.offsets_log import GroupMetadataValue

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class Parked(NamedTuple):
    """A request whose response waits for the group: its reply token and API version."""

    token: int
    api_version: int


Protocols = list[tuple[str, bytes]]


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    # A member added by JoinGroup stays "new" until its first join phase completes; it is bounded
    # by the new-member timeout instead of counting as alive while parked.
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    previous_state: GroupState = GroupState.DEAD
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet (dict: ordered set).
    pending_members: dict[str, None] = field(default_factory=dict)
    pending_sync: dict[str, None] = field(default_factory=dict)
    subscribed_topics: set[str] | None = None
    supported_protocols: Counter[str] = field(default_factory=Counter)
    num_awaiting_join: int = 0
    new_member_added: bool = False
    # (delay, remaining) while the join timer is the initial-rebalance delay; None for a plain one.
    initial_delay: tuple[int, int] | None = None
    sync_generation: int = -1

    # ---- membership ---------------------------------------------------------------------

    def add(self, member: Member, parked: Parked | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.names())
        member.awaiting_join = None
        self.set_awaiting_join(member, parked)
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._forget_protocols(member)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> tuple[Member, Member]:
        """Moves a static member to a new member id; returns (old, new). The caller fences the old
        member's parked requests."""
        old = self.members.pop(old_id)
        if old.awaiting_join is not None:
            self.num_awaiting_join -= 1
        new = Member(
            member_id=new_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return old, new

    def set_awaiting_join(self, member: Member, parked: Parked | None) -> None:
        if parked is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif parked is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = parked

    def update_member(
        self, member: Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int
    ) -> None:
        self._forget_protocols(member)
        member.protocols = protocols
        self.supported_protocols.update(member.names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def _forget_protocols(self, member: Member) -> None:
        for name in member.names():
            left = self.supported_protocols[name] - 1
            if left > 0:
                self.supported_protocols[name] = left
            else:
                del self.supported_protocols[name]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def is_empty(self) -> bool:
        """Kafka's ``ClassicGroup.isEmpty``: the group is in the Empty state."""
        return self.state is GroupState.EMPTY

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # ---- state --------------------------------------------------------------------------

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int, out: Result, reason: str) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}")
        out.transitions.append(
            (self.group_id, self.state.value, target.value, self.generation, len(self.members), reason)
        )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms

    def init_next_generation(self, now_ms: int, out: Result, reason: str) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms, out, reason)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms, out, reason)
        self.pending_sync.clear()

    # ---- protocols ----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size and size > 0}

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return protocol_type != "" and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(n, 0) == size for n in names
        )

    def select_protocol(self) -> str:
        """The protocol with most votes. Kafka leaves ties to hash-map order; we break them by the
        leader's preference order, then by name."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        tied = {name for name, n in votes.items() if n == best}
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None:
            for name, _ in leader.protocols:
                if name in tied:
                    return name
        return min(tied)

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        if not self.protocol_type or self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        # Like Kafka, read only the v0 prefix, which every later subscription version extends.
        codec = codec_for(ConsumerProtocolSubscription, 0)
        try:
            for member in self.members.values():
                data = member.metadata(self.protocol_name)
                if len(data) < 2 or int.from_bytes(data[:2], "big", signed=True) < 0:
                    return None
                sub, _ = codec.decode_from(data, 2)
                topics.update(sub.topics)
        except DecodeError:
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    # ---- offsets ------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               transactional: bool = False) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit; a transactional commit (TxnOffsetCommit) may
        come from outside the group while it is not empty, and during a rebalance."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if generation >= 0 or member_id != "" or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error:
                return error
            if generation != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and self.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ---- persistence --------------------------------------------------------------------

    def to_metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue that persists this group (assignments default to the members')."""
        members = [
            GroupMetadataValue.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=(assignments.get(m.member_id, b"") if assignments is not None else m.assignment),
            )
            for m in self.members.values()
        ]
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp is None else self.state_timestamp,
            members=members,
        )

    @classmethod
    def from_metadata_value(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded from its last GroupMetadata record: Stable with members, else Empty."""
        group = cls(
            group_id=group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            state_timestamp=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        protocol = value.protocol if value.protocol is not None else ""
        for m in value.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                # v0 records have none; decoding put the session timeout there, as Kafka's loader does.
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(protocol, m.subscription)],
                assignment=m.assignment,
            )
            group.add(member, None)
        if group.leader_id is not None and group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
