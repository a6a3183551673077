"""The group coordinator: a deterministic state machine per ``__consumer_offsets`` partition."""

from broker.coordinators.group.core.base.context import CoordinatorConfig, RequestContext, TopicView
from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.group.core.base.records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    Record,
    decode_record,
    encode_record,
)
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.shard import GroupCoordinatorShard

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
