"""Online migration between classic and consumer groups (Kafka's ``group.consumer.migration.policy``).

**Upgrade.** A consumer-protocol member (ConsumerGroupHeartbeat) joining a classic group that has
members turns it into a consumer group at once: the classic group's record is deleted and every
classic member becomes a member of the consumer group that keeps speaking the classic protocol
(JoinGroup/SyncGroup/Heartbeat, ``classic_members.py``), with the partitions it was last given, at
the classic generation as its epoch. Nobody stops consuming: the new member gets partitions only
once their owners give them up, which classic members do by rejoining.

**Downgrade.** When the last consumer-protocol member leaves (or is fenced) and only classic members
remain, the consumer group's records are deleted and a classic group is written with the remaining
members and their target assignment; it then rebalances, as Kafka does.

Both are Kafka's ``convertToConsumerGroup`` / ``convertToClassicGroup``; the records are the same
and in the same order, so a restart replays the conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.coordinators.group.core import consumer_timers
from broker.coordinators.group.core.base.classic_group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
    Member,
)
from broker.coordinators.group.core.base.context import CoordinatorConfig, TopicView
from broker.coordinators.group.core.base.records import AnyRecord, GroupMetadataRecord, OffsetCommitRecord
from broker.coordinators.group.core.base.responses import join_response, sync_response
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer import records as rec
from broker.coordinators.group.core.consumer.assignor_api import Assignment
from broker.coordinators.group.core.consumer.group import ConsumerGroup, IllegalStateError
from broker.coordinators.group.core.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinators.group.core.share.group import SHARE_RECORDS
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment
from protocol.payloads.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from protocol.payloads.offsets_log_records import STREAMS_GROUP_RECORDS

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState


class MigrationError(Exception):
    """The group cannot be converted (Kafka answers GROUP_ID_NOT_FOUND and leaves it as it is)."""


# ---- assignments between the two protocols -------------------------------------------------------

def assignment_by_id(data: bytes, topics: TopicView, gid: str = "") -> Assignment:
    """A classic member's assignment blob as partitions by topic id (topics that no longer exist
    are left out, as Kafka's ``toTopicPartitionMap`` does). An empty blob (a member that has not
    synced yet) holds nothing; user data in it (a custom assignor's state, which the consumer
    protocol has no place for) refuses the upgrade, as Kafka's ``fromClassicGroup`` does."""
    if not data:
        return {}
    decoded = decode_assignment(data)
    if decoded.user_data:
        raise MigrationError(
            f"Cannot upgrade classic group {gid} to consumer group because an unsupported custom assignor is in "
            "use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.")
    out: dict[bytes, frozenset[int]] = {}
    for tp in decoded.assigned_partitions:
        topic_id = topics.topic_id(tp.topic)
        if topic_id is not None and tp.partitions:
            out[topic_id] = out.get(topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def assignment_blob(assignment: Mapping[bytes, frozenset[int]], topics: TopicView, subscription: bytes) -> bytes:
    """Partitions by topic id as the assignment blob a classic member reads, in the version of the
    subscription it sent (Kafka's ``prepareAssignment``)."""
    try:
        version = min(subscription_version(subscription), ConsumerProtocolAssignment.valid.high)
    except DecodeError:
        version = 0
    parts = []
    for topic_id, partitions in sorted(assignment.items()):
        name = topics.topic_name(topic_id)
        if name is not None and partitions:
            parts.append(ConsumerProtocolAssignment.TopicPartition(topic=name, partitions=sorted(partitions)))
    parts.sort(key=lambda tp: tp.topic)
    return encode_assignment(ConsumerProtocolAssignment(assigned_partitions=parts), version)


def owned_by_id(subscription: bytes, topics: TopicView) -> dict[bytes, list[int]] | None:
    """The partitions a classic member says it still owns (subscription v1+), by topic id; None
    when its subscription cannot be read."""
    try:
        sub = decode_subscription(subscription)
    except DecodeError:
        return None
    owned: dict[bytes, list[int]] = {}
    for tp in sub.owned_partitions:
        topic_id = topics.topic_id(tp.topic)
        if topic_id is not None:
            owned.setdefault(topic_id, []).extend(tp.partitions)
    return owned


# ---- upgrade: classic -> consumer ----------------------------------------------------------------

def upgrade_refusal(config: CoordinatorConfig, classic: ClassicGroup) -> str | None:
    """Why a classic group with members may not become a consumer group, or None if it may
    (Kafka's ``validateOnlineUpgrade``)."""
    gid = classic.group_id
    if not config.upgrade_enabled:
        return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
    if not classic.uses_consumer_protocol():
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                "consumer embedded protocol.")
    if len(classic.members) > config.consumer_max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                "consumer group maximum size.")
    return None


def upgrade_records(classic: ClassicGroup, topics: TopicView) -> list[AnyRecord]:
    """The records that turn a classic group into a consumer group with the same members (Kafka's
    ``ConsumerGroup.fromClassicGroup`` and ``createConsumerGroupRecords``): the classic group's
    tombstone, then every member, the group epoch (the classic generation), every member's target
    assignment (what it was last given), the target epoch and every member's current assignment."""
    gid = classic.group_id
    epoch = classic.generation
    members: list[ConsumerGroupMember] = []
    for m in classic.members.values():
        try:
            assigned = assignment_by_id(m.assignment, topics, gid)
            metadata = m.metadata(classic.protocol_name)
            subscription = decode_subscription(metadata)
        except DecodeError:
            raise MigrationError(f"Cannot upgrade classic group {gid} to consumer group because the embedded "
                                 "consumer protocol is malformed.") from None
        # A cooperative member may still own partitions its last assignment took away (it revokes
        # them once it has read that assignment, then rejoins). Kafka counts only the assignment;
        # here what it said it owned when it joined is pending revocation, so nobody gets those
        # partitions before it has rejoined without them.
        owned = owned_by_id(metadata, topics) or {}
        pending = {t: frozenset(ps) - assigned.get(t, frozenset()) for t, ps in owned.items()}
        pending = {t: ps for t, ps in pending.items() if ps}
        members.append(ConsumerGroupMember(
            member_id=m.member_id,
            member_epoch=epoch,
            previous_member_epoch=epoch,
            state=MemberState.UNREVOKED_PARTITIONS if pending else MemberState.STABLE,
            partitions_pending_revocation=pending,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            assigned_partitions=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        ))
    records: list[AnyRecord] = [GroupMetadataRecord(gid, None)]
    records.extend(rec.member_metadata(gid, member) for member in members)
    records.append(rec.group_epoch(gid, epoch))
    records.extend(rec.target_member(gid, member.member_id, member.assigned_partitions) for member in members)
    records.append(rec.target_epoch(gid, epoch))
    records.extend(rec.current_assignment(gid, member) for member in members)
    try:
        replayed(gid, records)
    except IllegalStateError as exc:
        # Two members given the same partition: the group cannot be carried over as it is.
        raise MigrationError(f"Cannot upgrade the classic group {gid} to consumer group: {exc}.") from None
    return records


def replayed(group_id: str, records: list[AnyRecord]) -> ConsumerGroup:
    """The consumer group the records build, outside the shard (the request computes against it;
    the shard's own copy comes from replaying the same records once the request succeeds)."""
    groups: dict[str, ConsumerGroup] = {}
    for record in records:
        if not isinstance(record, (GroupMetadataRecord, OffsetCommitRecord, *STREAMS_GROUP_RECORDS, *SHARE_RECORDS)):
            rec.replay(groups, record)
    return groups[group_id]


def after_upgrade(state: CoordinatorState, out: Result, classic: ClassicGroup, now: int) -> None:
    """Once the conversion's records are replayed: answer whatever the classic group had parked
    (those members rejoin, now into the consumer group), drop its timers and give every carried-over
    member a session."""
    gid = classic.group_id
    for member in classic.members.values():
        if member.awaiting_join is not None:
            parked, member.awaiting_join = member.awaiting_join, None
            out.replies.append((parked.token, join_response(parked.api_version, error=ErrorCode.REBALANCE_IN_PROGRESS,
                                                            member_id=member.member_id)))
        if member.awaiting_sync is not None:
            parked, member.awaiting_sync = member.awaiting_sync, None
            out.replies.append((parked.token, sync_response(ErrorCode.REBALANCE_IN_PROGRESS)))
    _cancel_classic_timers(state, out, classic)
    group = state.consumer_groups.get(gid)
    if group is None:
        return
    for cmember in group.members.values():
        if cmember.classic is not None:
            consumer_timers.set_session_timeout(state, out, gid, cmember.member_id,
                                                now + cmember.classic.session_timeout_ms)


def _cancel_classic_timers(state: CoordinatorState, out: Result, classic: ClassicGroup) -> None:
    from broker.coordinators.group.core.base.timers import heartbeat_key, join_key, sync_key

    gid = classic.group_id
    for member_id in list(classic.members) + list(classic.pending_members):
        state.timers.cancel(out, heartbeat_key(gid, member_id))
    state.timers.cancel(out, join_key(gid))
    state.timers.cancel(out, sync_key(gid))


# ---- downgrade: consumer -> classic --------------------------------------------------------------

def may_downgrade(config: CoordinatorConfig, group: ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's ``validateOnlineDowngradeWithFencedMember``: the leaving member is the last one on
    the consumer protocol, someone remains, the policy allows it and the classic size limit holds."""
    return (group.all_members_use_classic_except(leaving_member_id)
            and len(group.members) > 1
            and config.downgrade_enabled
            and len(group.members) - 1 <= config.group_max_size)


def downgrade_records(state: CoordinatorState, group: ConsumerGroup, leaving_member_id: str, now: int) -> list[AnyRecord]:
    """The consumer group's tombstones, then the classic group that replaces it (Kafka's
    ``createGroupTombstoneRecords`` and ``ClassicGroup.fromConsumerGroup``). The classic group is
    kept aside for ``after_downgrade``: the record holds only each member's chosen protocol, the
    group in memory keeps all it supports."""
    gid = group.group_id
    classic = classic_group(group, leaving_member_id, state.topics, now)
    state.downgrades[gid] = classic
    records: list[AnyRecord] = [rec.current_assignment_tombstone(gid, mid) for mid in group.members]
    records.extend(rec.target_member_tombstone(gid, mid) for mid in group.members)
    records.append(rec.target_epoch_tombstone(gid))
    records.extend(rec.member_metadata_tombstone(gid, mid) for mid in group.members)
    records.extend(rec.regular_expression_tombstone(gid, regex) for regex in sorted(group.resolved_regexes))
    records.append(rec.group_tombstone(gid))
    records.append(GroupMetadataRecord(gid, classic.to_metadata_value()))
    return records


def classic_group(group: ConsumerGroup, leaving_member_id: str, topics: TopicView, now: int) -> ClassicGroup:
    """The classic group a consumer group of classic members becomes: Stable at the group epoch,
    each member holding its target assignment."""
    classic = ClassicGroup(group.group_id, state=GroupState.STABLE, state_timestamp=now, generation=group.group_epoch,
                           protocol_type=CONSUMER_PROTOCOL_TYPE)
    for member_id, member in group.members.items():
        if member_id == leaving_member_id or member.classic is None:
            continue
        classic.add(Member(
            member_id=member_id,
            group_instance_id=member.instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            session_timeout_ms=member.classic.session_timeout_ms,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=list(member.classic.supported_protocols),
        ), None)
    classic.protocol_name = classic.select_protocol()
    for member_id, cmember in classic.members.items():
        cmember.assignment = assignment_blob(group.target_assignment.get(member_id, {}), topics,
                                             cmember.metadata(classic.protocol_name))
    classic.subscribed_topics = classic.compute_subscribed_topics()
    return classic


def after_downgrade(state: CoordinatorState, out: Result, group_id: str, now: int, rebalance: bool = True) -> None:
    """Once the downgrade's records are replayed: the classic group with every protocol its members
    support replaces the one replayed from the record; it gets heartbeat timers and rebalances, so
    that its members learn the (classic) generation and collect their assignments again."""
    from broker.coordinators.group.core.rebalance import prepare_rebalance, reschedule_heartbeat

    classic = state.downgrades.pop(group_id, None)
    if classic is None:
        return
    state.groups[group_id] = classic
    out.transitions.append((group_id, "Dead", "Stable", classic.generation, len(classic.members),
                            "downgraded from a consumer group"))
    for member in classic.members.values():
        reschedule_heartbeat(state, classic, member, out, now)
    if not rebalance:
        return  # a static member replaced the last consumer-protocol member: it carries on as it was
    prepare_rebalance(state, classic, out, now, f"Downgrade group {group_id} from consumer to classic.")
