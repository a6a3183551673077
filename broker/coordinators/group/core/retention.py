"""The offset-expiration sweep (KIP-211, KIP-496), run every offsets.retention.check.interval.ms.

Which offsets may expire depends on the group:
* an offset with an explicit expire timestamp (value v1) expires at that time;
* a group with a protocol type that is Empty: R after the group became Empty (or after the commit
  when that moment is unknown), all offsets together;
* a Stable "consumer" group with known subscriptions: only offsets of topics it no longer
  subscribes to, R after their commit;
* a simple group (no protocol type): each offset R after its commit;
* any other group: none.
A group left Empty with no offsets is deleted with a GroupMetadata tombstone.
"""

from __future__ import annotations

from broker.coordinators.group.core.base.classic_group import ClassicGroup, GroupState
from broker.coordinators.group.core.base.offsets import CommittedOffset
from broker.coordinators.group.core.base.records import GroupMetadataRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import OFFSETS_EXPIRY_KEY, TimerKind, TimerTarget
from broker.coordinators.group.core.state import CoordinatorState


def _base_timestamp(group: ClassicGroup) -> str | None:
    """Which timestamp retention counts from: "state" (group became Empty), "commit", or None."""
    if group.protocol_type:
        if group.state is GroupState.EMPTY:
            return "state"
        if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.state is GroupState.STABLE:
            return "commit"
        return None
    return "commit"


def _expired(group: ClassicGroup, base: str, offset: CommittedOffset, now: int, retention_ms: int) -> bool:
    if offset.expire_timestamp is not None:
        return now >= offset.expire_timestamp
    if base == "state" and group.state_timestamp is not None:
        start = group.state_timestamp
    else:
        start = offset.commit_timestamp
    return now - start >= retention_ms


def schedule_sweep(st: CoordinatorState, out: Result, now: int) -> None:
    st.timers.set(
        out, OFFSETS_EXPIRY_KEY, now + st.config.offsets_retention_check_interval_ms, TimerTarget(TimerKind.OFFSETS_EXPIRY)
    )


def _cleanup_group(st: CoordinatorState, group: ClassicGroup, out: Result, now: int) -> bool:
    """Tombstones the group's expired offsets; True when none are left."""
    pending = st.pending_txn
    if not st.offsets.has_offsets(group.group_id):
        return not pending.has_group(group.group_id)
    base = _base_timestamp(group)
    if base is None:
        return False
    all_expired = True
    expired: list[tuple[str, int]] = []
    for topic, partition, offset in st.offsets.all_of(group.group_id):
        # An offset with a pending transactional offset waits for the transaction's end (Kafka).
        if (not group.is_subscribed_to_topic(topic) and not pending.is_pending(group.group_id, topic, partition)
                and _expired(group, base, offset, now, st.config.offsets_retention_ms)):
            expired.append((topic, partition))
        else:
            all_expired = False
    for topic, partition in expired:
        st.emit(out, OffsetCommitRecord(group.group_id, topic, partition, None))
    return all_expired and not pending.has_group(group.group_id)


def sweep(st: CoordinatorState, now: int) -> Result:
    out = Result()
    for group in list(st.groups.values()):
        if _cleanup_group(st, group, out, now) and group.state is GroupState.EMPTY:
            out.transitions.append(
                (group.group_id, group.state.value, GroupState.DEAD.value, group.generation, 0, "offsets-expired")
            )
            st.emit(out, GroupMetadataRecord(group.group_id, None))
    schedule_sweep(st, out, now)
    return out
