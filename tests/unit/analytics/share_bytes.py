"""Share-group records of ``__consumer_offsets`` and share-state records of ``__share_group_state``,
one of every type, written by our codecs (``protocol.payloads.offsets_log_records`` and
``protocol.payloads.share_state_records``): the decoder's input, and what Kafka's own reader is given to
check them."""

from __future__ import annotations

from typing import Any

from protocol.messages.offsets_log_share_groups import (
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
)
from protocol.messages.share_state_log import ShareSnapshotValue, ShareUpdateValue
from protocol.payloads import share_state_records as ssr
from protocol.payloads.offsets_log_records import (
    ShareGroupCurrentMemberAssignmentRecord,
    ShareGroupMemberMetadataRecord,
    ShareGroupMetadataRecord,
    ShareGroupStatePartitionMetadataRecord,
    ShareGroupTargetAssignmentMemberRecord,
    ShareGroupTargetAssignmentMetadataRecord,
    encode_consumer_group_record,
)
from protocol.record_batch import build_simple_batch

T0 = 1_700_000_000_000
GROUP = "workers"
MEMBER = "m-1"
TOPIC_ID = bytes(range(16))
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"  # Kafka's Uuid.toString of TOPIC_ID
OTHER_ID = bytes(range(16, 32))
OTHER_ID_TEXT = "EBESExQVFhcYGRobHB0eHw"


def _tp(cls: Any, topic_id: bytes, partitions: list[int]) -> Any:
    return cls(topic_id=topic_id, partitions=partitions)


def share_group_records() -> list[tuple[bytes, bytes | None]]:
    """One group's life: a member joins, is assigned two partitions, the share state of its topic
    initializes, another topic is being deleted; then the member leaves."""
    meta = ShareGroupStatePartitionMetadataValue
    records: list[Any] = [
        ShareGroupMemberMetadataRecord(GROUP, MEMBER, ShareGroupMemberMetadataValue(
            rack_id="rack-a", client_id="worker-1", client_host="/10.0.0.7", subscribed_topic_names=["jobs"])),
        ShareGroupMetadataRecord(GROUP, ShareGroupMetadataValue(epoch=5, metadata_hash=-12345)),
        ShareGroupTargetAssignmentMemberRecord(GROUP, MEMBER, ShareGroupTargetAssignmentMemberValue(
            topic_partitions=[_tp(ShareGroupTargetAssignmentMemberValue.TopicPartition, TOPIC_ID, [0, 1])])),
        ShareGroupTargetAssignmentMetadataRecord(GROUP, ShareGroupTargetAssignmentMetadataValue(
            assignment_epoch=5, assignment_timestamp=T0)),
        ShareGroupCurrentMemberAssignmentRecord(GROUP, MEMBER, ShareGroupCurrentMemberAssignmentValue(
            member_epoch=5, previous_member_epoch=4, state=0, assigned_partitions=[
                _tp(ShareGroupCurrentMemberAssignmentValue.TopicPartitions, TOPIC_ID, [0, 1])])),
        ShareGroupStatePartitionMetadataRecord(GROUP, meta(
            initializing_topics=[meta.TopicPartitionsInfo(topic_id=TOPIC_ID, topic_name="jobs", partitions=[1])],
            initialized_topics=[meta.TopicPartitionsInfo(topic_id=TOPIC_ID, topic_name="jobs", partitions=[0])],
            deleting_topics=[meta.TopicInfo(topic_id=OTHER_ID, topic_name="old")])),
        ShareGroupCurrentMemberAssignmentRecord(GROUP, MEMBER, None),
        ShareGroupMemberMetadataRecord(GROUP, MEMBER, None),
    ]
    return [encode_consumer_group_record(r) for r in records]


def batches_of(cls: Any, *batches: tuple[int, int, int, int]) -> list[Any]:
    return [cls.StateBatch(first_offset=a, last_offset=b, delivery_state=s, delivery_count=n) for a, b, s, n in batches]


def share_state_records() -> list[tuple[bytes, bytes | None]]:
    """A share partition initialized at offset 0, then: offsets 0-1 acknowledged, 2 released and 3
    archived (one update); 2 released again on its second delivery (an update); a snapshot once
    2 was acknowledged on its third; and the state deleted."""
    snap, upd = ShareSnapshotValue, ShareUpdateValue
    records = [
        ssr.ShareStateRecord(ssr.SNAPSHOT, GROUP, TOPIC_ID, 0, snap(
            snapshot_epoch=0, state_epoch=1, leader_epoch=-1, start_offset=0, delivery_complete_count=-1,
            create_timestamp=T0, write_timestamp=T0, state_batches=[])),
        ssr.ShareStateRecord(ssr.UPDATE, GROUP, TOPIC_ID, 0, upd(
            snapshot_epoch=0, leader_epoch=3, start_offset=2, delivery_complete_count=-1,
            state_batches=batches_of(upd, (2, 2, 0, 1), (3, 3, 4, 1), (4, 5, 2, 1)))),
        ssr.ShareStateRecord(ssr.UPDATE, GROUP, TOPIC_ID, 0, upd(
            snapshot_epoch=0, leader_epoch=-1, start_offset=2, delivery_complete_count=-1,
            state_batches=batches_of(upd, (2, 2, 0, 2)))),
        ssr.ShareStateRecord(ssr.SNAPSHOT, GROUP, TOPIC_ID, 0, snap(
            snapshot_epoch=1, state_epoch=1, leader_epoch=3, start_offset=6, delivery_complete_count=0,
            create_timestamp=T0 + 3000, write_timestamp=T0 + 3000, state_batches=[])),
        ssr.ShareStateRecord(ssr.SNAPSHOT, GROUP, TOPIC_ID, 0, None),
    ]
    return [ssr.encode(r) for r in records]


def segment(records: list[tuple[bytes, bytes | None]], step_ms: int = 1000) -> bytes:
    """One record per batch, ``step_ms`` apart from T0."""
    return b"".join(build_simple_batch([(k, v, T0 + i * step_ms)], base_offset=i) for i, (k, v) in enumerate(records))
