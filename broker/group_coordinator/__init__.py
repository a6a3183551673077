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
from broker.group_coordinator.result import Result
from broker.group_coordinator.shard import GroupCoordinatorShard

__all__ = [
    "CoordinatorConfig",
    "GroupCoordinatorShard",
    "GroupMetadataRecord",
    "OffsetCommitRecord",
    "Record",
    "RequestContext",
    "Result",
    "TopicView",
    "decode_record",
    "encode_record",
    "partition_for",
]
