"""Synthetic ``__consumer_offsets`` logs in Kafka's byte layout, for benchmarks and trials.

Records carry exactly the key and value schemas a broker writes (offset commits as key v1 +
value v3, group metadata as key v2 + value v3, KIP-848 consumer groups as the records a Kafka 4.1
coordinator writes for a member joining and reconciling), encoded by
``protocol.payloads.offsets_log_records``; any other declared value version can be asked for. Batches are uncompressed magic-2 batches with
CRC-32C, as the coordinator writes them.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.messages.offsets_log import GroupMetadataValue, OffsetCommitValue
from protocol.messages.offsets_log_consumer_groups import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.payloads.consumer_protocol import encode_assignment, encode_subscription
from protocol.payloads.offsets_log_records import (
    GROUP_METADATA_VALUE_VERSION,
    OFFSET_COMMIT_VALUE_VERSION,
    ConsumerGroupCurrentMemberAssignmentRecord,
    ConsumerGroupMemberMetadataRecord,
    ConsumerGroupMetadataRecord,
    ConsumerGroupTargetAssignmentMemberRecord,
    ConsumerGroupTargetAssignmentMetadataRecord,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_record,
    encode_value,
)
from protocol.record_batch import build_simple_batch
from storage.layout import LOG, OFFSETS_TOPIC, partition_dir_name, segment_name

Record = tuple[bytes, bytes | None]


def commit_record(group: str, topic: str, partition: int, offset: int, commit_ts: int,
                  metadata: str = "", leader_epoch: int = -1, value_version: int = OFFSET_COMMIT_VALUE_VERSION,
                  expire_ts: int = -1) -> Record:
    value = encode_value(OffsetCommitValue, OffsetCommitValue(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata, commit_timestamp=commit_ts,
        expire_timestamp=expire_ts), value_version)
    return encode_offset_commit_key(group, topic, partition), value


def commit_tombstone(group: str, topic: str, partition: int) -> Record:
    return encode_offset_commit_key(group, topic, partition), None


@dataclass
class Member:
    member_id: str
    client_id: str = "client"
    client_host: str = "/127.0.0.1"
    group_instance_id: str | None = None
    topics: Sequence[str] = ()
    assigned: Sequence[tuple[str, int]] = ()
    session_timeout: int = 45000
    rebalance_timeout: int = 300000


def group_record(group: str, generation: int, members: Sequence[Member], protocol_type: str = "consumer",
                 protocol: str | None = "range", state_ts: int = -1,
                 value_version: int = GROUP_METADATA_VALUE_VERSION) -> Record:
    encoded = []
    for m in members:
        by_topic: dict[str, list[int]] = {}
        for t, p in m.assigned:
            by_topic.setdefault(t, []).append(p)
        assignment = ConsumerProtocolAssignment(assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()])
        encoded.append(GroupMetadataValue.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout, session_timeout=m.session_timeout,
            subscription=encode_subscription(ConsumerProtocolSubscription(topics=list(m.topics)), 0),
            assignment=encode_assignment(assignment, 0)))
    leader = members[0].member_id if members else None
    value = encode_value(GroupMetadataValue, GroupMetadataValue(
        protocol_type=protocol_type, generation=generation, protocol=protocol if members else None,
        leader=leader, current_state_timestamp=state_ts, members=encoded), value_version)
    return encode_group_metadata_key(group), value


def group_tombstone(group: str) -> Record:
    return encode_group_metadata_key(group), None


@dataclass
class ConsumerMember:
    """A KIP-848 member: what it subscribes to and the partitions it owns, by topic id."""

    member_id: str
    topics: Sequence[str] = ()
    assigned: Sequence[tuple[bytes, int]] = ()  # (topic id, partition)
    client_id: str = "client"
    client_host: str = "/127.0.0.1"
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = "uniform"


def _topic_partitions(cls: type, assigned: Sequence[tuple[bytes, int]]) -> list[Any]:
    by_topic: dict[bytes, list[int]] = {}
    for topic_id, p in assigned:
        by_topic.setdefault(topic_id, []).append(p)
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in by_topic.items()]


def consumer_group_records(group: str, epoch: int, members: Sequence[ConsumerMember],
                           metadata_hash: int = 0) -> list[Record]:
    """What a Kafka 4.1 coordinator writes when a consumer group reaches ``epoch`` with these
    members and every member has converged on its target: each member's subscription, the group
    epoch, the target assignment and its epoch, then each member's current assignment."""
    records: list[Record] = []
    for m in members:
        records.append(encode_record(ConsumerGroupMemberMetadataRecord(group, m.member_id, ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=sorted(m.topics), subscribed_topic_regex=None,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor))))
    records.append(encode_record(ConsumerGroupMetadataRecord(group, ConsumerGroupMetadataValue(
        epoch=epoch, metadata_hash=metadata_hash))))
    for m in members:
        records.append(encode_record(ConsumerGroupTargetAssignmentMemberRecord(
            group, m.member_id, ConsumerGroupTargetAssignmentMemberValue(topic_partitions=_topic_partitions(
                ConsumerGroupTargetAssignmentMemberValue.TopicPartition, m.assigned)))))
    records.append(encode_record(ConsumerGroupTargetAssignmentMetadataRecord(
        group, ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))))
    for m in members:
        records.append(encode_record(ConsumerGroupCurrentMemberAssignmentRecord(
            group, m.member_id, ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=epoch, previous_member_epoch=epoch - 1, state=1,  # MemberState.STABLE
                assigned_partitions=_topic_partitions(ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions,
                                                      m.assigned),
                partitions_pending_revocation=[]))))
    return records


def encode_batch(base_offset: int, records: Sequence[Record], timestamp: int, leader_epoch: int = 0,
                 timestamps: Sequence[int] | None = None) -> bytes:
    """One uncompressed batch; ``timestamps`` gives each record its own time."""
    stamps = timestamps or [timestamp] * len(records)
    return build_simple_batch([(k, v, ts) for (k, v), ts in zip(records, stamps)], base_offset,
                              partition_leader_epoch=leader_epoch)


def write_segment(path: str | os.PathLike[str], batches: Iterable[bytes]) -> int:
    size = 0
    with open(path, "wb") as fh:
        for b in batches:
            fh.write(b)
            size += len(b)
    return size


def write_synthetic_log(data_dir: str | os.PathLike[str], commits: int, groups: int = 20, topics: int = 5,
                        partitions: int = 12, log_partitions: int = 8, per_batch: int = 50,
                        start_ms: int = 1_700_000_000_000, interval_ms: int = 5000,
                        rebalance_every: int = 20000, seed: int = 7,
                        consumer_groups: int = 0) -> dict[str, int]:
    """A data dir of ``commits`` offset commits from ``groups`` groups, with a rebalance now and then.

    The first ``consumer_groups`` of the groups use the KIP-848 protocol: their rebalances are
    consumer-group records (``consumer_group_records``) rather than a GroupMetadata record.

    Each group commits all its partitions every ``interval_ms`` (as auto-commit does), its
    offsets advancing by a random amount; the group's partition in the offsets topic is
    ``hash % log_partitions``, so a group's records never span log partitions.
    """
    rng = random.Random(seed)
    names = [f"group-{g:03d}" for g in range(groups)]
    topic_names = [f"topic-{t}" for t in range(topics)]
    tps = [(t, p) for t in topic_names for p in range(partitions)]
    per_group = max(1, commits // groups)
    stats = {"commits": 0, "group_records": 0, "consumer_group_records": 0, "segments": 0}
    topic_ids = {t: rng.randbytes(16) for t in topic_names}
    for lp in range(log_partitions):
        mine = [g for i, g in enumerate(names) if i % log_partitions == lp]
        if not mine:
            continue
        pdir = os.path.join(os.fspath(data_dir), partition_dir_name(OFFSETS_TOPIC, lp))
        os.makedirs(pdir, exist_ok=True)
        out = bytearray()
        next_offset = 0
        for g in mine:
            offsets = dict.fromkeys(tps, 0)
            now = start_ms + rng.randrange(interval_ms)
            generation = 0
            written = 0
            next_rebalance = 0
            while written < per_group:
                if written >= next_rebalance:
                    next_rebalance += rebalance_every
                    generation += 1
                    count = rng.randrange(1, 4)
                    if names.index(g) < consumer_groups:
                        consumers = [ConsumerMember(f"consumer-{g}-{generation}-{i}", client_id=f"consumer-{i}",
                                                    topics=topic_names,
                                                    assigned=[(topic_ids[t], p) for t, p in tps[i::count]])
                                     for i in range(count)]
                        batch = consumer_group_records(g, generation, consumers)
                        stats["consumer_group_records"] += len(batch)
                    else:
                        members = [Member(f"consumer-{g}-{generation}-{i}", client_id=f"consumer-{i}",
                                          topics=topic_names, assigned=tps[i::count]) for i in range(count)]
                        batch = [group_record(g, generation, members, state_ts=now)]
                        stats["group_records"] += 1
                    out += encode_batch(next_offset, batch, now)
                    next_offset += len(batch)
                pending: list[Record] = []
                for tp in tps:
                    offsets[tp] += rng.randrange(0, 200)
                    pending.append(commit_record(g, tp[0], tp[1], offsets[tp], now))
                    written += 1
                    if written >= per_group:
                        break
                for i in range(0, len(pending), per_batch):
                    chunk = pending[i:i + per_batch]
                    out += encode_batch(next_offset, chunk, now)
                    next_offset += len(chunk)
                stats["commits"] += len(pending)
                now += interval_ms
        write_segment(os.path.join(pdir, segment_name(0) + LOG), [bytes(out)])
        stats["segments"] += 1
    return stats
