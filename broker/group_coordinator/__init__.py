"""The group coordinator: a deterministic state machine per ``__consumer_offsets`` partition."""

from broker.group_coordinator.context import CoordinatorConfig, RequestContext, TopicView
from broker.group_coordinator.partitioning import partition_for
from broker.group_coordinator.records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    Record,
    decode_record,
    encode_record,
)
from broker.group_coordinator.result import CancelTimer, Result, SetTimer
from broker.group_coordinator.shard import GroupCoordinatorShard

__all__ = [
    "CancelTimer",
    "CoordinatorConfig",
    "GroupCoordinatorShard",
    "GroupMetadataRecord",
    "OffsetCommitRecord",
    "Record",
    "RequestContext",
    "Result",
    "SetTimer",
    "TopicView",
    "decode_record",
    "encode_record",
    "partition_for",
]
