"""Records of ``__consumer_offsets`` segments decoded into column lists.

Offset commits outnumber everything else by orders of magnitude, so they are decoded on a
fast path: keys repeat (one per group/topic/partition), so each distinct key's bytes are
decoded once and then found in a dict; the two value versions brokers write (1 and 3) are
unpacked with one ``struct`` call each, and every other version, newer ones included, is read
by ``protocol.payloads.offsets_log_records``, which defines every record (the fast path is tested against
it). Rows land in per-column lists, never in per-record objects. Group-metadata records and the
KIP-848 consumer-group, KIP-1071 streams-group and KIP-932 share-group records are rare and are
read by ``protocol.payloads.offsets_log_records`` every time; a consumer-group row names its record type and carries that type's fields (epochs, member,
assignments as topic-id/partition lists), the rest of its fields staying null.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from analytics.segments import SegmentHealth, iter_batches
from protocol.errors import DecodeError
from protocol.payloads.consumer_protocol import decode_assignment, decode_subscription
from protocol.payloads.offsets_log_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    GROUP_METADATA_KEY_VERSION,
    OFFSET_COMMIT_KEY_VERSIONS,
    RECORD_TYPES,
    SHARE_GROUP_RECORD_TYPES,
    STREAMS_GROUP_RECORD_TYPES,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_value,
    member_rebalance_timeout,
    value_message,
)
from protocol.record_batch import RecordBatch, control_type_of, decode_records
from storage.checkpoints import topic_id_to_str

OFFSET_COMMIT = "offset_commit"
GROUP_METADATA = "group_metadata"
CONSUMER_GROUP = "consumer_group"
STREAMS_GROUP = "streams_group"
SHARE_GROUP = "share_group"

_Q = struct.Struct(">q")
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_QQ = struct.Struct(">qq")
_SKIP = ("skip",)
_UNWANTED = ("-",)
KINDS = frozenset((OFFSET_COMMIT, GROUP_METADATA, CONSUMER_GROUP, STREAMS_GROUP, SHARE_GROUP))
_GROUPS_ONLY = frozenset((GROUP_METADATA,))


@dataclass
class CommitColumns:
    """Offset-commit rows (and their tombstones), one list per column."""

    log_offset: list[int] = field(default_factory=list)
    timestamp: list[int] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    offset: list[int | None] = field(default_factory=list)
    leader_epoch: list[int | None] = field(default_factory=list)
    metadata: list[str | None] = field(default_factory=list)
    commit_timestamp: list[int | None] = field(default_factory=list)
    expire_timestamp: list[int | None] = field(default_factory=list)
    tombstone: list[bool] = field(default_factory=list)
    # None for a plain commit; for one written by TxnOffsetCommit, how its transaction ended:
    # "committed", "aborted", or "open" (no marker in this segment).
    txn: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.log_offset)

    def extend(self, other: CommitColumns) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))


@dataclass
class GroupRow:
    log_offset: int
    timestamp: int
    group: str
    tombstone: bool
    protocol_type: str | None = None
    generation: int | None = None
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int | None = None
    members: list[dict[str, Any]] | None = None


@dataclass
class ConsumerGroupRow:
    """One KIP-848 consumer-group record: the fields of its type, None elsewhere. Topic ids are
    Kafka's text form; an assignment is ``[{"topic_id": ..., "partitions": [...]}]``."""

    log_offset: int
    timestamp: int
    group: str
    record_type: str  # Kafka's record name, e.g. "ConsumerGroupCurrentMemberAssignment"
    tombstone: bool
    member_id: str | None = None
    epoch: int | None = None  # group epoch (type 3), assignment epoch (6), member epoch (8)
    previous_member_epoch: int | None = None
    member_state: int | None = None  # Kafka's MemberState value
    metadata_hash: int | None = None
    assignment: list[dict[str, Any]] | None = None  # target (type 7) or current (8)
    pending_revocation: list[dict[str, Any]] | None = None
    consumer_member: dict[str, Any] | None = None  # type 5
    topics_metadata: list[dict[str, Any]] | None = None  # type 4
    regular_expression: str | None = None  # type 16
    resolved_topics: list[str] | None = None
    regex_version: int | None = None
    regex_resolved_at: int | None = None


@dataclass
class StreamsGroupRow:
    """One KIP-1071 streams-group record: the fields of its type, None elsewhere. Tasks are
    ``[{"subtopology_id": ..., "partitions": [...]}]``."""

    log_offset: int
    timestamp: int
    group: str
    record_type: str  # Kafka's record name, e.g. "StreamsGroupCurrentMemberAssignment"
    tombstone: bool
    member_id: str | None = None
    # group epoch (type 17), assignment epoch (20), member epoch (22), topology epoch (23)
    epoch: int | None = None
    previous_member_epoch: int | None = None
    member_state: int | None = None
    streams_member: dict[str, Any] | None = None  # type 19
    active_tasks: list[dict[str, Any]] | None = None  # target (21) or current (22)
    standby_tasks: list[dict[str, Any]] | None = None
    warmup_tasks: list[dict[str, Any]] | None = None
    subtopologies: list[str] | None = None  # type 23


@dataclass
class ShareGroupRow:
    """One KIP-932 share-group record: the fields of its type, None elsewhere. An assignment is
    ``[{"topic_id": ..., "partitions": [...]}]``; the share-state topics of a group (type 15) are
    ``[{"topic_id", "topic_name", "partitions", "status"}]`` with status "initializing",
    "initialized" or "deleting" (no partitions)."""

    log_offset: int
    timestamp: int
    group: str
    record_type: str  # Kafka's record name, e.g. "ShareGroupCurrentMemberAssignment"
    tombstone: bool
    member_id: str | None = None
    epoch: int | None = None  # group epoch (type 11), assignment epoch (12), member epoch (14)
    previous_member_epoch: int | None = None
    member_state: int | None = None
    metadata_hash: int | None = None
    assignment: list[dict[str, Any]] | None = None  # target (type 13) or current (14)
    share_member: dict[str, Any] | None = None  # type 10
    share_topics: list[dict[str, Any]] | None = None  # type 15


@dataclass
class Decoded:
    """One chunk of a segment: commit columns, group rows, and records left unread."""

    commits: CommitColumns = field(default_factory=CommitColumns)
    groups: list[GroupRow] = field(default_factory=list)
    consumer_groups: list[ConsumerGroupRow] = field(default_factory=list)
    streams_groups: list[StreamsGroupRow] = field(default_factory=list)
    share_groups: list[ShareGroupRow] = field(default_factory=list)
    skipped: int = 0
    undecodable: int = 0

    def __len__(self) -> int:
        return (len(self.commits) + len(self.groups) + len(self.consumer_groups) + len(self.streams_groups)
                + len(self.share_groups))


class _Keys:
    """Decoded keys by their raw bytes: ("c", group, topic, partition), ("g", group),
    ("k", record type, group, member id or regular expression), ("s" streams or "h" share,
    record type, group, member id) or _SKIP."""

    def __init__(self, kinds: frozenset[str] = KINDS) -> None:
        self.cache: dict[bytes, tuple[Any, ...]] = {}
        self.kinds = kinds

    def lookup(self, key: bytes) -> tuple[Any, ...]:
        hit = self.cache.get(key)
        if hit is None:
            hit = self._decode(key)
            if (hit[0] == "c" and OFFSET_COMMIT not in self.kinds) or (hit[0] == "g" and GROUP_METADATA not in self.kinds) \
                    or (hit[0] == "k" and CONSUMER_GROUP not in self.kinds) \
                    or (hit[0] == "s" and STREAMS_GROUP not in self.kinds) \
                    or (hit[0] == "h" and SHARE_GROUP not in self.kinds):
                hit = _UNWANTED
            self.cache[key] = hit
        return hit

    @staticmethod
    def _decode(key: bytes) -> tuple[Any, ...]:
        version, k = decode_key(key)
        if k is None:
            return _SKIP  # types no Kafka we know writes
        if version in SHARE_GROUP_RECORD_TYPES:
            return ("h", version, k.group_id, getattr(k, "member_id", None))
        if version in STREAMS_GROUP_RECORD_TYPES:
            return ("s", version, k.group_id, getattr(k, "member_id", None))
        if version in CONSUMER_GROUP_RECORD_TYPES:
            second = k.regular_expression if version == 16 else getattr(k, "member_id", None)
            return ("k", version, k.group_id, second)
        if version in OFFSET_COMMIT_KEY_VERSIONS:
            return ("c", k.group, k.topic, k.partition)
        return ("g", k.group)


def _members(version: int, value: Any) -> list[dict[str, Any]]:
    out = []
    consumer = value.protocol_type == "consumer"
    for m in value.members:
        topics: list[str] = []
        assigned: list[dict[str, Any]] = []
        if consumer:
            try:
                topics = list(decode_subscription(m.subscription).topics) if m.subscription else []
                for tp in decode_assignment(m.assignment).assigned_partitions:
                    assigned.extend({"topic": tp.topic, "partition": p} for p in tp.partitions)
            except DecodeError:
                pass  # another embedded protocol under the "consumer" name: keep the member anyway
        out.append({
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "rebalance_timeout": member_rebalance_timeout(version, m),
            "session_timeout": m.session_timeout,
            "subscribed_topics": topics,
            "assigned_partitions": assigned,
        })
    return out


def _group_row(offset: int, ts: int, group: str, value: bytes | None) -> GroupRow:
    if value is None:
        return GroupRow(offset, ts, group, True)
    version, v = decode_group_metadata_value(value)
    state_ts = v.current_state_timestamp if v.current_state_timestamp >= 0 else None
    return GroupRow(offset, ts, group, False, v.protocol_type, v.generation, v.protocol, v.leader, state_ts,
                    _members(version, v))


def _partitions(topics: list[Any]) -> list[dict[str, Any]]:
    return [{"topic_id": topic_id_to_str(t.topic_id), "partitions": list(t.partitions)} for t in topics]


def _tasks(tasks: list[Any]) -> list[dict[str, Any]]:
    return [{"subtopology_id": t.subtopology_id, "partitions": list(t.partitions)} for t in tasks]


def _streams_group_row(offset: int, ts: int, kinfo: tuple[Any, ...], value: bytes | None) -> StreamsGroupRow:
    _, record_type, group, member_id = kinfo
    row = StreamsGroupRow(offset, ts, group, RECORD_TYPES[record_type], value is None, member_id)
    if value is None:
        return row
    message = value_message(record_type)
    assert message is not None
    v = decode_value(message, value)[1]
    if record_type == 17:
        row.epoch = v.epoch
    elif record_type == 19:
        row.streams_member = {
            "instance_id": v.instance_id, "rack_id": v.rack_id, "client_id": v.client_id,
            "client_host": v.client_host, "process_id": v.process_id, "topology_epoch": v.topology_epoch,
            "rebalance_timeout_ms": v.rebalance_timeout_ms,
        }
    elif record_type == 20:
        row.epoch = v.assignment_epoch
    elif record_type in (21, 22):
        row.active_tasks, row.standby_tasks = _tasks(v.active_tasks), _tasks(v.standby_tasks)
        row.warmup_tasks = _tasks(v.warmup_tasks)
        if record_type == 22:
            row.epoch, row.previous_member_epoch, row.member_state = v.member_epoch, v.previous_member_epoch, v.state
    elif record_type == 23:
        row.epoch = v.epoch
        row.subtopologies = [t.subtopology_id for t in v.subtopologies]
    return row


def _share_group_row(offset: int, ts: int, kinfo: tuple[Any, ...], value: bytes | None) -> ShareGroupRow:
    _, record_type, group, member_id = kinfo
    row = ShareGroupRow(offset, ts, group, RECORD_TYPES[record_type], value is None, member_id)
    if value is None:
        return row
    message = value_message(record_type)
    assert message is not None
    v = decode_value(message, value)[1]
    if record_type == 10:
        row.share_member = {"rack_id": v.rack_id, "client_id": v.client_id, "client_host": v.client_host,
                            "subscribed_topic_names": list(v.subscribed_topic_names)}
    elif record_type == 11:
        row.epoch, row.metadata_hash = v.epoch, v.metadata_hash
    elif record_type == 12:
        row.epoch = v.assignment_epoch
    elif record_type == 13:
        row.assignment = _partitions(v.topic_partitions)
    elif record_type == 14:
        row.epoch, row.previous_member_epoch, row.member_state = v.member_epoch, v.previous_member_epoch, v.state
        row.assignment = _partitions(v.assigned_partitions)
    else:
        row.share_topics = [
            *({"topic_id": topic_id_to_str(t.topic_id), "topic_name": t.topic_name,
               "partitions": list(t.partitions), "status": status}
              for status, topics in (("initializing", v.initializing_topics), ("initialized", v.initialized_topics))
              for t in topics),
            *({"topic_id": topic_id_to_str(t.topic_id), "topic_name": t.topic_name, "partitions": None,
               "status": "deleting"} for t in v.deleting_topics)]
    return row


def _consumer_group_row(offset: int, ts: int, kinfo: tuple[Any, ...], value: bytes | None) -> ConsumerGroupRow:
    _, record_type, group, second = kinfo
    row = ConsumerGroupRow(offset, ts, group, RECORD_TYPES[record_type], value is None)
    if record_type == 16:
        row.regular_expression = second
    else:
        row.member_id = second
    if value is None:
        return row
    message = value_message(record_type)
    assert message is not None
    v = decode_value(message, value)[1]
    if record_type == 3:
        row.epoch, row.metadata_hash = v.epoch, v.metadata_hash
    elif record_type == 4:
        row.topics_metadata = [{"topic_id": topic_id_to_str(t.topic_id), "topic_name": t.topic_name,
                                "num_partitions": t.num_partitions} for t in v.topics]
    elif record_type == 5:
        classic = v.classic_member_metadata
        row.consumer_member = {
            "instance_id": v.instance_id, "rack_id": v.rack_id, "client_id": v.client_id,
            "client_host": v.client_host, "subscribed_topic_names": list(v.subscribed_topic_names),
            "subscribed_topic_regex": v.subscribed_topic_regex, "rebalance_timeout_ms": v.rebalance_timeout_ms,
            "server_assignor": v.server_assignor,
            "classic_session_timeout_ms": None if classic is None else classic.session_timeout_ms,
            "classic_protocols": None if classic is None else [p.name for p in classic.supported_protocols],
        }
    elif record_type == 6:
        row.epoch = v.assignment_epoch
    elif record_type == 7:
        row.assignment = _partitions(v.topic_partitions)
    elif record_type == 8:
        row.epoch, row.previous_member_epoch, row.member_state = v.member_epoch, v.previous_member_epoch, v.state
        row.assignment = _partitions(v.assigned_partitions)
        row.pending_revocation = _partitions(v.partitions_pending_revocation)
    else:
        row.resolved_topics, row.regex_version, row.regex_resolved_at = list(v.topics), v.version, v.timestamp
    return row


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise DecodeError("record", -1, "varint longer than 10 bytes", None)


def _decode_records(batch: RecordBatch, keys: _Keys, out: Decoded) -> None:
    """Appends the batch's records to ``out``; a record that does not decode is counted, not fatal."""
    buf = batch.records_data()
    pos = 0
    end = len(buf)
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    c = out.commits
    c_off, c_ts, c_group, c_topic, c_part = c.log_offset, c.timestamp, c.group, c.topic, c.partition
    c_offset, c_epoch, c_meta, c_cts, c_ets, c_tomb = (
        c.offset, c.leader_epoch, c.metadata, c.commit_timestamp, c.expire_timestamp, c.tombstone)
    lookup = keys.lookup
    for _ in range(batch.records_count):
        if pos >= end:
            out.undecodable += 1
            return
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = _zigzag(buf, pos)
        rec_end = pos + length
        if length <= 0 or rec_end > end:
            out.undecodable += 1
            return
        try:
            p = pos + 1  # attributes: unused
            b = buf[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = _zigzag(buf, p)
            b = buf[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = _zigzag(buf, p)
            b = buf[p]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                klen, p = _zigzag(buf, p)
            if klen < 0:
                raise DecodeError("record", -1, "null key", None)
            key = buf[p:p + klen]
            p += klen
            b = buf[p]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                vlen, p = _zigzag(buf, p)
            kinfo = lookup(key)
            if kinfo[0] == "c":
                c_off.append(base_offset + off_delta)
                c_ts.append(base_ts + ts_delta)
                c_group.append(kinfo[1])
                c_topic.append(kinfo[2])
                c_part.append(kinfo[3])
                if vlen < 0:
                    c_offset.append(None)
                    c_epoch.append(None)
                    c_meta.append(None)
                    c_cts.append(None)
                    c_ets.append(None)
                    c_tomb.append(True)
                else:
                    version = buf[p] << 8 | buf[p + 1]
                    if version == 3:
                        _, off, epoch, mlen = _V3_HEAD.unpack_from(buf, p)
                        q = p + 16
                        meta = buf[q:q + mlen].decode() if mlen > 0 else ""
                        (cts,) = _Q.unpack_from(buf, q + mlen)
                        ets = None
                    elif version == 1:
                        _, off, mlen = _V1_HEAD.unpack_from(buf, p)
                        q = p + 12
                        meta = buf[q:q + mlen].decode() if mlen > 0 else ""
                        cts, ets = _QQ.unpack_from(buf, q + mlen)
                        epoch = -1
                    else:
                        v = decode_offset_commit_value(buf[p:p + vlen])[1]
                        off, epoch, meta, cts, ets = (
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
                    c_offset.append(off)
                    c_epoch.append(epoch if epoch >= 0 else None)
                    c_meta.append(meta)
                    c_cts.append(cts)
                    c_ets.append(ets if ets is not None and ets >= 0 else None)
                    c_tomb.append(False)
            elif kinfo[0] == "g":
                value = None if vlen < 0 else buf[p:p + vlen]
                out.groups.append(_group_row(base_offset + off_delta, base_ts + ts_delta, kinfo[1], value))
            elif kinfo[0] == "k":
                value = None if vlen < 0 else buf[p:p + vlen]
                out.consumer_groups.append(_consumer_group_row(base_offset + off_delta, base_ts + ts_delta, kinfo,
                                                               value))
            elif kinfo[0] == "s":
                value = None if vlen < 0 else buf[p:p + vlen]
                out.streams_groups.append(_streams_group_row(base_offset + off_delta, base_ts + ts_delta, kinfo,
                                                             value))
            elif kinfo[0] == "h":
                value = None if vlen < 0 else buf[p:p + vlen]
                out.share_groups.append(_share_group_row(base_offset + off_delta, base_ts + ts_delta, kinfo, value))
            elif kinfo is _SKIP:
                out.skipped += 1
        except (DecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError):
            # Roll back a half-appended commit row so every column keeps the same length.
            n = min(len(col) for col in (c_off, c_tomb, c_offset))
            for col in (c_off, c_ts, c_group, c_topic, c_part, c_offset, c_epoch, c_meta, c_cts, c_ets, c_tomb):
                del col[n:]
            out.undecodable += 1
        pos = rec_end


def _scan_group_records(batch: RecordBatch, keys: _Keys, out: Decoded) -> None:
    """Group-metadata records only: other records are stepped over by their length after a
    glance at their key's version, without decoding anything else."""
    buf = batch.records_data()
    pos = 0
    end = len(buf)
    for _ in range(batch.records_count):
        try:
            length, p = _zigzag(buf, pos)
        except (DecodeError, IndexError):
            out.undecodable += 1
            return
        rec_end = p + length
        if length <= 0 or rec_end > end:
            out.undecodable += 1
            return
        try:
            q = p + 1
            while buf[q] & 0x80:  # timestamp delta
                q += 1
            q += 1
            while buf[q] & 0x80:  # offset delta
                q += 1
            q += 1
            klen, q = _zigzag(buf, q)
            if klen >= 2 and (buf[q] << 8 | buf[q + 1]) == GROUP_METADATA_KEY_VERSION:
                ts_delta, p = _zigzag(buf, p + 1)
                off_delta, p = _zigzag(buf, p)
                klen, p = _zigzag(buf, p)
                key = buf[p:p + klen]
                vlen, p = _zigzag(buf, p + klen)
                value = None if vlen < 0 else buf[p:p + vlen]
                out.groups.append(_group_row(batch.base_offset + off_delta, batch.base_timestamp + ts_delta,
                                             keys.lookup(key)[1], value))
        except (DecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError):
            out.undecodable += 1
        pos = rec_end


def _control_type(batch: RecordBatch) -> int:
    """COMMIT (1) or ABORT (0) marker of a control batch; -1 for anything else."""
    records = decode_records(batch)
    return control_type_of(records[0]) if records else -1


def decode_segment(data: bytes, health: SegmentHealth | None = None, chunk_rows: int = 65536,
                   verify_crc: bool = True, kinds: frozenset[str] = KINDS) -> Iterator[Decoded]:
    """Decodes one segment's bytes into chunks of about ``chunk_rows`` rows.

    Transactional offset commits are held back until their producer's marker and emitted with
    ``txn`` "committed" or "aborted" (an aborted one never took effect: the tables count it but
    keep it out of the offsets), in the marker's place in the log, as a broker replaying the log
    applies them. Those still open at the end of the segment are emitted as "open": their marker
    lies in a later segment or has yet to be written.
    """
    health = health if health is not None else SegmentHealth()
    keys = _Keys(kinds)
    out = Decoded()
    pending: dict[int, Decoded] = {}
    undecodable = 0
    for batch in iter_batches(data, health, verify_crc):
        try:
            if batch.is_control:
                held = pending.pop(batch.producer_id, None)
                kind = _control_type(batch) if held is not None else -1
                if held is not None and kind in (0, 1):
                    _mark(held, "committed" if kind == 1 else "aborted")
                    _merge(out, held)
                continue
            if batch.is_transactional:
                _decode_records(batch, keys, pending.setdefault(batch.producer_id, Decoded()))
                continue
            if kinds == _GROUPS_ONLY:
                _scan_group_records(batch, keys, out)
            else:
                _decode_records(batch, keys, out)
                _mark(out, None)
        except (ValueError, DecodeError, OSError) as exc:
            health.problems.append(f"batch at offset {batch.base_offset} (position {batch.position}): {exc}")
            continue
        if len(out) >= chunk_rows:
            undecodable += out.undecodable
            yield out
            out = Decoded()
    for held in pending.values():
        _mark(held, "open")
        _merge(out, held)
    undecodable += out.undecodable
    if undecodable:
        health.problems.append(f"{undecodable} records could not be decoded and were skipped")
    yield out


def _mark(chunk: Decoded, txn: str | None) -> None:
    """Gives the commits decoded since the last mark their transaction outcome."""
    c = chunk.commits
    c.txn.extend([txn] * (len(c.log_offset) - len(c.txn)))


def _merge(out: Decoded, other: Decoded) -> None:
    out.commits.extend(other.commits)
    out.groups.extend(other.groups)
    out.consumer_groups.extend(other.consumer_groups)
    out.streams_groups.extend(other.streams_groups)
    out.share_groups.extend(other.share_groups)
    out.skipped += other.skipped
    out.undecodable += other.undecodable
