"""Everything one shard knows, and ``replay``: the only way persisted state changes.

Persisted state is what the records say: committed offsets and, per group, its last
GroupMetadata value. Groups also carry soft state that Kafka never writes (members awaiting a
join, pending members, timers); operations change that in memory, exactly as Kafka does, and a
restart re-derives it as "Stable with the last persisted members".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.coordinators.group.core.base.classic_group import ClassicGroup, GroupState
from broker.coordinators.group.core.base.context import CoordinatorConfig, TopicView
from broker.coordinators.group.core.base.journal import Journal
from broker.coordinators.group.core.base.offsets import OffsetStore, stored_offset
from broker.coordinators.group.core.base.pending_offsets import PendingTxnOffsets
from broker.coordinators.group.core.base.records import AnyRecord, GroupMetadataRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import TimerBook
from broker.coordinators.group.core.consumer import records as consumer_records
from broker.coordinators.group.core.consumer.group import ConsumerGroup, IllegalStateError
from broker.coordinators.group.core.share import group as share_group
from broker.coordinators.group.core.streams import records as streams_records
from broker.coordinators.group.core.streams.model import StreamsState
from protocol.messages.offsets_log import GroupMetadataValue
from protocol.payloads.offsets_log_records import STREAMS_GROUP_RECORDS


class CoordinatorState:
    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig,
        topics: TopicView,
        new_member_id: Callable[[str], str],
    ) -> None:
        self.partition = partition
        self.config = config
        self.topics = topics
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer groups. A group id names either kind, never both.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # KIP-1071 streams groups (a group id names one kind of group only).
        self.streams = StreamsState()
        # KIP-932 share groups (broker/coordinators/group/core/share/).
        self.share_groups: dict[str, share_group.ShareGroup] = {}
        # Share groups whose new epoch waits for its target assignment (the assignment interval):
        # the cause and reason of the first change since the last one, the targets and epoch before
        # it, for the journal (soft state: after a restart the assignment is journaled without them).
        self.share_assignment_pending: dict[str, tuple[str, str, dict[str, share_group.Assignment], int]] = {}
        # (group, epoch, assignor, members) of each target assignment computed, for the shell's
        # metrics and logs; the shell empties it.
        self.assignments: list[tuple[str, int, str, int]] = []
        # Consumer-group records a log held that contradict the state before them (Kafka's loader
        # fails the partition on those): skipped, counted, and the last reason kept for the shell
        # to report once the shard has loaded.
        self.replay_anomalies = 0
        self.last_anomaly = ""
        # Classic groups built by a downgrade, waiting for their records to be replayed (migration.py).
        self.downgrades: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        # Offsets of transactions whose marker has not reached this partition yet.
        self.pending_txn = PendingTxnOffsets()
        self.persisted: dict[str, GroupMetadataValue] = {}  # group id -> the last one written
        self.timers = TimerBook()
        # Consumer groups whose regular expressions are to be resolved (their refresh timer armed),
        # with the Describe filter of the member whose heartbeat asked for it (None: no authorizer).
        # Soft: a refresh lost with a reload is asked for again by the next heartbeat.
        self.regex_refreshes: dict[str, Callable[[str], bool] | None] = {}
        # The version of the broker's topics when a topic was last created, as this shard was told
        # (Kafka's lastMetadataImageWithNewTopics): groups resolved before it refresh.
        self.topics_created_version = 0
        # Why groups rebalance: soft state, turned into journal events after each operation.
        self.journal = Journal(config.group_events_enable)
        # Until on_loaded, GroupMetadata records (re)build groups; afterwards the operation that
        # wrote a record has already shaped the in-memory group, so replay only notes it.
        self.loaded = False

    def emit(self, out: Result, record: AnyRecord) -> None:
        self.replay(record)
        out.records.append(record)

    def replay(self, record: AnyRecord) -> None:
        if isinstance(record, OffsetCommitRecord):
            self._replay_offset(record)
        elif isinstance(record, GroupMetadataRecord):
            self._replay_group(record)
        elif isinstance(record, STREAMS_GROUP_RECORDS):
            self._give_way(record.group, record.value)
            streams_records.replay(self.streams.groups, record)
        elif isinstance(record, share_group.SHARE_RECORDS):
            self._give_way(record.group, record.value)
            share_group.replay(self.share_groups, record)
        else:
            self._give_way(record.group, record.value)
            try:
                consumer_records.replay(self.consumer_groups, record)
            except IllegalStateError as exc:
                self.replay_anomalies += 1
                self.last_anomaly = str(exc)

    def _give_way(self, group: str, value: object) -> None:
        """A consumer, streams or share group's record replaces a simple group of the same id: one
        that replayed offset commits made up, with no metadata record of its own. After compaction
        has removed a migrated classic group's tombstone, its commits come before the new group's
        records in the log (KAFKA-20254)."""
        if self.loaded or value is None:
            return  # live operations delete a group of another type with records of their own
        simple = self.groups.get(group)
        if simple is not None and group not in self.persisted and not simple.members and not simple.protocol_type:
            del self.groups[group]

    def replay_txn_offset(self, record: OffsetCommitRecord, producer_id: int) -> None:
        """An OffsetCommit record of a transactional batch: pending until the producer's marker."""
        if record.value is None:
            self._replay_offset(record)
            return
        if (record.group not in self.groups and record.group not in self.consumer_groups
                and record.group not in self.streams.groups):
            self.groups[record.group] = ClassicGroup(
                record.group, state=GroupState.EMPTY, state_timestamp=record.value.commit_timestamp
            )
        self.pending_txn.add(producer_id, record)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT marker applies the producer's pending offsets; an ABORT marker drops them."""
        for record in self.pending_txn.complete(producer_id, commit):
            self._replay_offset(record, plain=False)

    def classic_group_deletion(self, group_id: str) -> list[AnyRecord]:
        """The records that delete an empty classic group (its offsets stay), as Kafka writes when
        a consumer-protocol member takes the group id over."""
        return [GroupMetadataRecord(group_id, None)]

    def note_assignment(self, group_id: str, epoch: int, assignor: str, members: int) -> None:
        self.assignments.append((group_id, epoch, assignor, members))

    def _replay_offset(self, record: OffsetCommitRecord, plain: bool = True) -> None:
        """Applies an OffsetCommit record: a plain one as it is replayed, a transactional one
        (``plain`` False) at its COMMIT marker."""
        value = record.value
        group = record.group
        if value is None:
            self.offsets.remove(group, record.topic, record.partition)
            self.pending_txn.remove_partition(group, record.topic, record.partition)
            return
        if plain and group in self.pending_txn.open_by_group:  # else no pending record is older
            self.pending_txn.note_applied(group, record.topic, record.partition)
        if group not in self.groups and group not in self.consumer_groups and group not in self.streams.groups:
            # Commits without group membership make a "simple" group: Empty, no protocol type.
            self.groups[group] = ClassicGroup(group, state=GroupState.EMPTY, state_timestamp=value.commit_timestamp)
        self.offsets.put(group, record.topic, record.partition, stored_offset(value))

    def _replay_group(self, record: GroupMetadataRecord) -> None:
        if record.value is None:
            self.persisted.pop(record.group, None)
            group = self.groups.pop(record.group, None)
            if group is not None:
                group.state = GroupState.DEAD
            return
        self.persisted[record.group] = record.value
        if not self.loaded or record.group not in self.groups:
            self.groups[record.group] = ClassicGroup.from_metadata_value(record.group, record.value)

    def snapshot(self) -> dict[str, Any]:
        """The persisted view: what a restart would rebuild from the records written so far."""
        return {
            "groups": {g: v.to_dict() for g, v in sorted(self.persisted.items())},
            "simple_groups": sorted(
                g for g, grp in self.groups.items() if g not in self.persisted and self.offsets.has_offsets(g)
            ),
            "offsets": self.offsets.snapshot(),
            "pending_txn_offsets": self.pending_txn.snapshot(),
        }
