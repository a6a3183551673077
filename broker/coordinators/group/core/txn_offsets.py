"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447) and transaction markers on the
group coordinator's side.

A transactional commit is written as OffsetCommit records in a batch that carries the producer's
id and epoch and the transactional bit. Until the transaction's marker reaches the partition the
offsets are *pending*: held per producer id, invisible to OffsetFetch, and they make OffsetFetch
with ``require_stable`` answer UNSTABLE_OFFSET_COMMIT for their partitions. A COMMIT marker moves
them into the committed offsets, each unless a newer record's offset has been applied since (the
newest record wins, as in Kafka); an ABORT marker drops them. A restart replays the batches and
markers in log order, so what was still pending at the end of the log is pending again.

``PendingTxnOffsets`` is the whole of that state: producer id -> (group, topic, partition) -> the
OffsetCommit record written, in the order written.
"""

from __future__ import annotations

from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.pending_offsets import TxnMarkerWrite, TxnOffsetBatch
from broker.coordinators.group.core.base.records import OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.offset_commit import java_length
from broker.coordinators.group.core.state import CoordinatorState
from broker.coordinators.group.core.streams import offsets as streams_offsets
from protocol.errors import ErrorCode
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

# TxnOffsetCommit v6 (KIP-1319): topics by id, and a stale member epoch or an unknown group told
# as OffsetCommit v9+ tells them.
TOPIC_ID_VERSION = 6


def _group_error(st: CoordinatorState, req: TxnOffsetCommitRequest, version: int) -> int:
    member_id = req.member_id if version >= 3 else ""
    generation = req.generation_id_or_member_epoch if version >= 3 else -1
    instance_id = req.group_instance_id if version >= 3 else None
    sgroup = st.streams.groups.get(req.group_id)
    if sgroup is not None:
        return streams_offsets.commit_error(sgroup, member_id, generation, transactional=True)
    cgroup = st.consumer_groups.get(req.group_id)
    if cgroup is not None:
        # Kafka's ConsumerGroup.validateOffsetCommit with isTransactional: a commit naming no member
        # (no member id, generation or instance id) is taken whatever the group holds; a member's
        # epoch other than its own is stale (told STALE_MEMBER_EPOCH from v6, ILLEGAL_GENERATION
        # before, and always to a member of the classic protocol).
        if generation < 0 and not cgroup.members:
            return ErrorCode.NONE
        if generation == -1 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = cgroup.member(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.member_epoch == generation:
            return ErrorCode.NONE
        stale = version >= TOPIC_ID_VERSION and not member.uses_classic_protocol
        return ErrorCode.STALE_MEMBER_EPOCH if stale else ErrorCode.ILLEGAL_GENERATION
    group = st.groups.get(req.group_id)
    if group is None or group.state is GroupState.DEAD:
        # A simple group comes into being with its first offset; a member of no group is refused.
        if generation < 0:
            return ErrorCode.NONE
        return ErrorCode.GROUP_ID_NOT_FOUND if version >= TOPIC_ID_VERSION else ErrorCode.ILLEGAL_GENERATION
    return group.validate_offset_commit(member_id, instance_id, generation, transactional=True)


def txn_offset_commit(st: CoordinatorState, req: TxnOffsetCommitRequest, ctx: RequestContext, now: int) -> Result:
    out = Result()
    version = ctx.api_version
    topics = []
    valid: list[tuple[TxnOffsetCommitResponse.Topic.Partition, str, TxnOffsetCommitRequest.Topic.Partition]] = []
    for topic in req.topics:
        name: str | None = topic.name
        if version >= TOPIC_ID_VERSION:
            resolve = getattr(st.topics, "topic_name", None)
            name = resolve(topic.topic_id) if resolve is not None else None
        count = st.topics.partition_count(name) if name is not None else None
        parts = []
        for p in topic.partitions:
            rp = TxnOffsetCommitResponse.Topic.Partition(partition_index=p.partition_index, error_code=0)
            parts.append(rp)
            if name is None:
                rp.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            elif count is None or not 0 <= p.partition_index < count:
                rp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid.append((rp, name, p))
        topics.append(TxnOffsetCommitResponse.Topic(name=topic.name, topic_id=topic.topic_id, partitions=parts))
    out.replies.append((ctx.token, TxnOffsetCommitResponse(topics=topics)))
    if not valid:
        return out
    error = _group_error(st, req, version)
    if error:
        for rp, _, _ in valid:
            rp.error_code = error
        return out
    records = []
    max_len = st.config.offset_metadata_max_bytes
    for rp, name, p in valid:
        metadata = p.committed_metadata or ""
        if 2 * len(metadata) > max_len and java_length(metadata) > max_len:
            rp.error_code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        value = OffsetCommitValue(offset=p.committed_offset,
                                  leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                                  metadata=metadata, commit_timestamp=now, expire_timestamp=-1)
        record = OffsetCommitRecord(req.group_id, name, p.partition_index, value)
        st.replay_txn_offset(record, req.producer_id)
        records.append(record)
    if records:
        out.txn_writes.append(TxnOffsetBatch(req.producer_id, req.producer_epoch, tuple(records)))
    return out


def write_marker(st: CoordinatorState, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> Result:
    """The transaction coordinator's marker for this partition: pending offsets of ``producer_id``
    are applied (COMMIT) or dropped (ABORT), and the marker is written."""
    out = Result()
    groups = st.pending_txn.groups_of(producer_id)
    st.replay_marker(producer_id, commit)
    out.txn_writes.append(TxnMarkerWrite(producer_id, producer_epoch, commit, coordinator_epoch, groups))
    return out
