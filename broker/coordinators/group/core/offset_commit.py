"""OffsetCommit and OffsetDelete.

Partition checks happen in the order Kafka makes them: the topic/partition must exist (Kafka does
that in KafkaApis, before the coordinator, so partitions failing it never see a group error), then
the group decides for all remaining partitions, then each partition's metadata size.

Negative offsets are stored as given: Kafka's OffsetMetadataManager does not check the value.
OffsetCommit v1's explicit commit timestamp is kept when set (as brokers that accept v1 do);
v2-4's retention time turns into an explicit expire timestamp, written as value version 1.
"""

from __future__ import annotations

from broker.coordinators.group.core.base.classic_group import GroupState
from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.records import OffsetCommitRecord
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer.group import ConsumerGroup
from broker.coordinators.group.core.rebalance import reschedule_heartbeat
from broker.coordinators.group.core.state import CoordinatorState
from broker.coordinators.group.core.streams import offsets as streams_offsets
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offsets_log import OffsetCommitValue

# The generated classes themselves: calling the message tables (``OffsetCommitValue(...)``)
# forwards keywords through one more Python call, on every committed partition.
_Value = OffsetCommitValue.cls
_Response = OffsetCommitResponse.cls
_ResponseTopic = OffsetCommitResponse.Topic
_ResponsePartition = OffsetCommitResponse.Topic.Partition

GROUP_ID_NOT_FOUND_VERSION = 9
TOPIC_ID_VERSION = 10
DEFAULT_RETENTION = -1
DEFAULT_TIMESTAMP = -1


def java_length(text: str) -> int:
    """String.length() in Java counts UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _topic_name(st: CoordinatorState, topic: OffsetCommitRequest.Topic, version: int) -> str | None:
    if version < TOPIC_ID_VERSION:
        return topic.name
    resolve = getattr(st.topics, "topic_name", None)
    return resolve(topic.topic_id) if resolve is not None else None


def _group_error(st: CoordinatorState, req: OffsetCommitRequest, version: int) -> ErrorCode:
    generation = req.generation_id_or_member_epoch
    instance_id = req.group_instance_id if version >= 7 else None
    streams_group = st.streams.groups.get(req.group_id)
    if streams_group is not None:
        return ErrorCode(streams_offsets.commit_error(streams_group, req.member_id, generation, transactional=False))
    if req.group_id in st.share_groups:
        return ErrorCode.GROUP_ID_NOT_FOUND  # a share group keeps no committed offsets
    consumer_group = st.consumer_groups.get(req.group_id)
    if consumer_group is not None:
        return _consumer_group_error(consumer_group, req.member_id, generation, version)
    group = st.groups.get(req.group_id)
    if group is None:
        if generation < 0:
            return ErrorCode.NONE  # a simple group comes into being when its first offset is replayed
        return ErrorCode.GROUP_ID_NOT_FOUND if version >= GROUP_ID_NOT_FOUND_VERSION else ErrorCode.ILLEGAL_GENERATION
    return group.validate_offset_commit(req.member_id, instance_id, generation)


def _consumer_group_error(group: ConsumerGroup, member_id: str, epoch: int, version: int) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit: an admin or a consumer outside group management
    (epoch -1) may commit only while the group is empty; a member commits with its current epoch,
    from OffsetCommit v9 on."""
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.member(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.uses_classic_protocol:
        # A classic member inside a consumer group commits with its generation (its member epoch).
        return ErrorCode.NONE if epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
    if version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if epoch != member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def offset_commit(st: CoordinatorState, req: OffsetCommitRequest, ctx: RequestContext, now: int) -> Result:
    out = Result()
    version = ctx.api_version
    response_topics: list[OffsetCommitResponse.Topic] = []
    # (response partition, topic name, request partition, response topic)
    valid: list[
        tuple[OffsetCommitResponse.Topic.Partition, str, OffsetCommitRequest.Topic.Partition, OffsetCommitResponse.Topic]
    ] = []
    for topic in req.topics:
        resp_topic = _ResponseTopic(name=topic.name, topic_id=topic.topic_id, partitions=[])
        response_topics.append(resp_topic)
        name = _topic_name(st, topic, version)
        count = st.topics.partition_count(name) if name is not None else None
        for p in topic.partitions:
            rp = _ResponsePartition(partition_index=p.partition_index, error_code=0)
            resp_topic.partitions.append(rp)
            if name is None:
                rp.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            elif count is None or not 0 <= p.partition_index < count:
                rp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid.append((rp, name, p, resp_topic))
    response = _Response(topics=response_topics)
    out.replies.append((ctx.token, response))
    if not valid:
        return out

    # Unlike the membership APIs, an empty group id is a valid group here (Kafka keeps it for
    # backwards compatibility).
    error = _group_error(st, req, version)
    if error:
        for rp, *_ in valid:
            rp.error_code = error
        return out

    group = st.groups.get(req.group_id)
    if group is not None and group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        member = group.members.get(req.member_id)
        if member is not None:
            reschedule_heartbeat(st, group, member, out, now)

    retention = req.retention_time_ms if 2 <= version <= 4 else DEFAULT_RETENTION
    expire = DEFAULT_TIMESTAMP if retention == DEFAULT_RETENTION else now + retention
    max_len = st.config.offset_metadata_max_bytes
    for rp, name, p, _ in valid:
        metadata = p.committed_metadata
        # A Java length is at most twice the Python one: count code units only near the limit.
        if metadata is not None and 2 * len(metadata) > max_len and java_length(metadata) > max_len:
            rp.error_code = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != DEFAULT_TIMESTAMP else now
        value = _Value(
            offset=p.committed_offset,
            leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
            metadata=metadata or "",
            commit_timestamp=commit_ts,
            expire_timestamp=expire,
        )
        st.emit(out, OffsetCommitRecord(req.group_id, name, p.partition_index, value))
    return out


def offset_delete(st: CoordinatorState, req: OffsetDeleteRequest, ctx: RequestContext, now: int) -> Result:
    del now
    out = Result()

    def reply(error: ErrorCode) -> Result:
        out.replies.append((ctx.token, OffsetDeleteResponse(error_code=int(error))))
        return out

    if not req.group_id:
        return reply(ErrorCode.INVALID_GROUP_ID)
    streams_group = st.streams.groups.get(req.group_id)
    group = st.groups.get(req.group_id)
    if streams_group is not None:
        subscribed = streams_offsets.subscribed_topics(streams_group)
    elif group is None or group.state is GroupState.DEAD:
        return reply(ErrorCode.GROUP_ID_NOT_FOUND)
    elif group.state is not GroupState.EMPTY and not group.uses_consumer_protocol():
        return reply(ErrorCode.NON_EMPTY_GROUP)
    topics = []
    for topic in req.topics:
        partitions = []
        # Kafka answers partitions of topics it does not know before asking the group coordinator
        # (and drops them when the group itself is refused, as above).
        count = st.topics.partition_count(topic.name)
        for p in topic.partitions:
            error = ErrorCode.NONE
            if count is None or not 0 <= p.partition_index < count:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif (topic.name in subscribed if streams_group is not None
                  else group is not None and group.is_subscribed_to_topic(topic.name)):
                error = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif (st.offsets.get(req.group_id, topic.name, p.partition_index) is not None
                  or st.pending_txn.is_pending(req.group_id, topic.name, p.partition_index)):
                st.emit(out, OffsetCommitRecord(req.group_id, topic.name, p.partition_index, None))
            partitions.append(OffsetDeleteResponse.Topic.Partition(partition_index=p.partition_index, error_code=int(error)))
        topics.append(OffsetDeleteResponse.Topic(name=topic.name, partitions=partitions))
    out.replies.append((ctx.token, OffsetDeleteResponse(error_code=0, topics=topics)))
    return out
