"""A streams group and its members, as the records say: the group epoch and topology, each
member's metadata, target tasks and current tasks. Replay is the only way they change."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.coordinators.group.core.streams.topology import InternalTopic

# subtopology id -> task partitions
Tasks = dict[str, frozenset[int]]
EMPTY: Tasks = {}

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's StreamsGroupMember.MemberState, as the CurrentMemberAssignment record stores it."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 3


@dataclass(frozen=True)
class TaskAssignment:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (any(self.active.values()) or any(self.standby.values()) or any(self.warmup.values()))


@dataclass(frozen=True)
class MemberTaskOffsets:
    """The task offsets a member last reported (KIP-1071: the sums of each task's changelog offsets,
    and of their end offsets), subtopology -> partition -> offset. Soft state, as in Kafka: never
    written, gone with the member or a restart, and sent again by the member every
    task.offset.interval.ms."""

    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TaskAssignment = field(default_factory=TaskAssignment)
    pending_revocation: TaskAssignment = field(default_factory=TaskAssignment)


@dataclass(frozen=True)
class Node:
    """A node of a topology description (KIP-1331) as the store keeps it: Kafka's converter keeps,
    per type, its own fields, each list without repeats."""

    name: str
    node_type: int
    source_topics: tuple[str, ...] = ()
    sink_topic: str | None = None
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Description:
    """A member's topology description (KIP-1331): the subtopologies' nodes, and the global stores."""

    subtopologies: tuple[tuple[str, tuple[Node, ...]], ...]
    global_stores: tuple[tuple[Node, Node], ...]  # (source, processor)


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    topology: Any = None  # StreamsGroupTopologyValue, None until the first member sends one
    assignment_epoch: int = 0
    assignment_time: int = 0  # when the target assignment was computed
    # The assignment configs the last group epoch was assigned with (Kafka's LastAssignmentConfigs).
    last_assignment_configs: dict[str, str] = field(default_factory=dict)
    # KIP-1331, as the metadata record keeps them: the topology epoch whose description the store
    # holds (-1 none, -2 uncertain: a store operation may not have completed), and the epoch whose
    # description the store refused for good (-1 none).
    stored_description_topology_epoch: int = -1
    failed_description_topology_epoch: int = -1
    members: dict[str, StreamsMember] = field(default_factory=dict)
    targets: dict[str, TaskAssignment] = field(default_factory=dict)
    # Soft state: the topics version the configured topology was computed at, and its result.
    topics_version: int = -1
    configured: Any = None
    # Bumped whenever any member's tasks change: members re-read the endpoint map after it.
    endpoint_epoch: int = 0
    # Soft state, as Kafka keeps it: the first member that asked the whole application to shut
    # down (SHUTDOWN_APPLICATION), told to every member until the group is empty.
    shutdown_requested_by: str | None = None
    # Soft state, as Kafka's in-memory topology description plugin keeps it (gone after a restart
    # or a move): the stored description with its topology epoch; and the back-off of asking members for it:
    # (topology epoch, attempts, not before this time).
    description: tuple[int, Description] | None = None
    description_backoff: tuple[int, int, int] | None = None
    # Soft state: each member's last reported task offsets (member id -> offsets).
    task_offsets: dict[str, MemberTaskOffsets] = field(default_factory=dict)

    def state_name(self) -> str:
        """Kafka's StreamsGroup.StreamsGroupState as describe and list show it."""
        if not self.members:
            return "Empty"
        if self.configured is not None and self.configured.statuses_block_assignment:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m.member_id
        return None


@dataclass
class StreamsState:
    """The shard's streams groups, and the internal topics its last operations asked for (the
    shell takes them and creates the topics)."""

    groups: dict[str, StreamsGroup] = field(default_factory=dict)
    to_create: list[InternalTopic] = field(default_factory=list)
    # Soft state: until when a new group's first assignment waits (group.streams.initial.rebalance.delay.ms).
    assignment_delayed_until: dict[str, int] = field(default_factory=dict)
