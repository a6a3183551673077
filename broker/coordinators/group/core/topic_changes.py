"""What the coordinator does when topics change: offsets of deleted partitions are tombstoned,
and groups are told which topics changed.

Kafka's broker calls the coordinator on every shard for both (``onPartitionsDeleted``, and
``onNewMetadataImage`` with the changed topics). Deletion tombstones the committed offset of every
deleted partition in every group of the shard, written through the shard like any other record, so
that a restart (which replays them) agrees with the state before it. Kafka does not delete or
rebalance the groups themselves: a classic group learns of the change from its members, whose
leader sees the metadata change and rejoins.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.coordinators.group.core import consumer_regex_refresh as regex_refresh
from broker.coordinators.group.core.base.records import OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.state import CoordinatorState


def on_partitions_deleted(st: CoordinatorState, partitions: Iterable[tuple[str, int]]) -> Result:
    """Tombstones for every committed offset of ``partitions``, in every group of the shard."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    out = Result()
    doomed: list[tuple[str, str, int]] = []
    for group_id in st.offsets.groups():
        for topic, committed in st.offsets.topics_of(group_id).items():
            deleted = by_topic.get(topic)
            if deleted is None:
                continue
            doomed.extend((group_id, topic, p) for p in sorted(committed) if p in deleted)
    # Emitted after the walk: each tombstone is replayed at once and changes the store walked above.
    for group_id, topic, partition in doomed:
        st.emit(out, OffsetCommitRecord(group_id, topic, partition, None))
    return out


def on_topics_changed(st: CoordinatorState, topics: set[str], now_ms: int) -> Result:
    """Topics were created, grew partitions or were deleted.

    KIP-848 (``consumer``) groups see a changed topic through the version of the topics at their
    next heartbeat, which recomputes the group's metadata hash (Kafka's
    ``ModernGroup.requestMetadataRefresh``). A topic that exists after the change (created, or
    grown) also makes every group resolve its regular expressions again at its next heartbeat, as
    Kafka does for a metadata image with new topics. Classic groups need nothing: Kafka's
    coordinator leaves them alone, and their leader rejoins once its own Metadata shows the change.
    """
    del now_ms
    if any(st.topics.partition_count(name) is not None for name in topics):
        regex_refresh.on_topics_created(st)
    return Result()
