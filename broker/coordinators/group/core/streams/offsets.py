"""Offsets of a streams group are committed and fetched like any group's; who may commit is
Kafka's ``StreamsGroup.validateOffsetCommit`` / ``validateOffsetFetch``."""

from __future__ import annotations

from broker.coordinators.group.core.streams.model import StreamsGroup
from protocol.errors import ErrorCode


def commit_error(group: StreamsGroup, member_id: str, epoch: int, transactional: bool) -> int:
    """An admin or a client outside the group (epoch -1) commits only while the group is empty;
    a member commits with its current epoch (a stale one is ILLEGAL_GENERATION in a transaction)."""
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def fetch_error(group: StreamsGroup, member_id: str | None, epoch: int) -> int:
    if member_id is None and epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE if member.member_epoch == epoch else ErrorCode.STALE_MEMBER_EPOCH


def subscribed_topics(group: StreamsGroup) -> frozenset[str]:
    """The topics whose offsets OffsetDelete refuses (GROUP_SUBSCRIBED_TO_TOPIC): those the
    topology reads, while the group has members (Kafka's StreamsGroup.isSubscribedToTopic)."""
    if not group.members or group.topology is None:
        return frozenset()
    return frozenset(t for s in group.topology.subtopologies
                     for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics)))
