"""A driver for one coordinator shard with a fake clock, playing the broker shell's part.

It makes every record round-trip through Kafka's bytes, applies timers by key, fires due timers
after each operation and on ``sleep``, checks that every request is answered at most once, and
can "restart" by replaying all records written so far into a fresh shard.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.coordinators.group.core import (
    CoordinatorConfig,
    GroupCoordinatorShard,
    Record,
    RequestContext,
    Result,
    decode_record,
    encode_record,
)
from broker.coordinators.group.core.base.pending_offsets import TxnOffsetBatch
from broker.coordinators.group.core.base.records import OffsetCommitRecord
from broker.runtime.timer_requests import CancelTimer, SetTimer
from protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.payloads.consumer_protocol import encode_subscription

NOT_ANSWERED = object()


def subscription(*topics: str) -> bytes:
    return encode_subscription(ConsumerProtocolSubscription(topics=list(topics)), 0)


class Topics:
    """The broker's topics as the coordinator sees them; ids are derived from names."""

    def __init__(self, topics: dict[str, int] | None = None) -> None:
        self.topics = dict(topics if topics is not None else {"t": 4, "u": 4, "v": 2})
        self.version = 1

    @staticmethod
    def id_of(name: str) -> bytes:
        return uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> bytes | None:
        return self.id_of(topic) if topic in self.topics else None

    def topic_name(self, topic_id: bytes) -> str | None:
        return next((n for n in self.topics if self.id_of(n) == topic_id), None)

    def topic_names(self) -> list[str]:
        return list(self.topics)

    def set(self, name: str, partitions: int) -> None:
        self.topics[name] = partitions
        self.version += 1


class Harness:
    def __init__(self, config: CoordinatorConfig | None = None, topics: dict[str, int] | None = None,
                 now: int = 1_000_000) -> None:
        self.config = config or CoordinatorConfig()
        self.topics = Topics(topics)
        self.now = now
        self.timers: dict[str, int] = {}
        self.log: list[tuple[bytes, bytes | None]] = []  # everything "written", as bytes
        # Transactional offset records and markers: (position in ``log`` they precede, producer id,
        # the record's key and value or None for a marker, the marker's commit flag).
        self.txn_log: list[tuple[int, int, tuple[bytes, bytes | None] | None, bool | None]] = []
        self.responses: dict[int, Any] = {}
        self.transitions: list[tuple[str, str, str, int, int, str]] = []
        self.last: Result = Result()
        self.events: list[Any] = []  # rebalance-journal events, in order
        self._token = 0
        self._ids = 0
        self.shard = self._new_shard()
        self._apply_timers(self.shard.on_loaded(self.now))

    # ---- plumbing -------------------------------------------------------------------------

    def _new_member_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{uuid.UUID(int=self._ids)}"

    def _new_shard(self) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(0, self.config, self.topics, self._new_member_id)

    def ctx(self, version: int, client_id: str = "client") -> RequestContext:
        self._token += 1
        return RequestContext(self._token, version, client_id, "/127.0.0.1")

    def _apply_timers(self, timers: list[Any]) -> None:
        for t in timers:
            if isinstance(t, SetTimer):
                self.timers[t.key] = t.deadline_ms
            else:
                assert isinstance(t, CancelTimer)
                self.timers.pop(t.key, None)

    def _write(self, records: list[Record]) -> None:
        for r in records:
            key, value = encode_record(r)
            assert decode_record(key, value) == r, f"record does not round-trip: {r}"
            self.log.append((key, value))

    def apply(self, result: Result) -> Result:
        # As the shell does after every operation: the journal turns it into events.
        self.shard.state.journal.collect(self.shard.state, result, self.now)
        self.events.extend(result.events)
        self.last = result
        self._write(result.records)
        for write in result.txn_writes:
            if isinstance(write, TxnOffsetBatch):
                for r in write.records:
                    self.txn_log.append((len(self.log), write.producer_id, encode_record(r), None))
            else:
                self.txn_log.append((len(self.log), write.producer_id, None, write.commit))
        for token, response in result.replies:
            assert token not in self.responses, f"request {token} answered twice"
            self.responses[token] = response
        self._apply_timers(result.timers)
        self.transitions.extend(result.transitions)
        return result

    def run_due(self) -> None:
        while True:
            due = [(d, k) for k, d in self.timers.items() if d <= self.now]
            if not due:
                return
            _, key = min(due)
            del self.timers[key]
            self.apply(self.shard.on_timer(key, self.now))

    def op(self, result: Result) -> Result:
        self.apply(result)
        last = self.last
        self.run_due()
        self.last = last
        return result

    def sleep(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = [(d, k) for k, d in self.timers.items() if d <= target]
            if not due:
                break
            deadline, key = min(due)
            self.now = max(self.now, deadline)
            del self.timers[key]
            self.apply(self.shard.on_timer(key, self.now))
        self.now = target

    def response(self, token: int) -> Any:
        assert token in self.responses, f"request {token} has not been answered"
        return self.responses[token]

    def answered(self, token: int) -> bool:
        return token in self.responses

    def records(self) -> list[Record]:
        decoded = [decode_record(k, v) for k, v in self.log]
        return [r for r in decoded if r is not None]

    def restart(self) -> None:
        """Loses the in-memory state and rebuilds it from the records written so far."""
        for token, response in self.shard.unload():
            assert token not in self.responses
            self.responses[token] = response
        self.shard = self._new_shard()
        txn = list(self.txn_log)
        for i, (key, value) in enumerate(self.log):
            while txn and txn[0][0] <= i:
                self._replay_txn(txn.pop(0))
            record = decode_record(key, value)
            if record is not None:
                self.shard.replay(record, i)
        for entry in txn:
            self._replay_txn(entry)
        self.timers = {}
        self._apply_timers(self.shard.on_loaded(self.now))

    def _replay_txn(self, entry: tuple[int, int, tuple[bytes, bytes | None] | None, bool | None]) -> None:
        _, producer_id, kv, commit = entry
        if kv is None:
            self.shard.replay_marker(producer_id, bool(commit))
        else:
            record = decode_record(*kv)
            assert isinstance(record, OffsetCommitRecord)
            self.shard.replay_txn_offset(record, producer_id)

    # ---- requests ---------------------------------------------------------------------------

    def join(self, group: str, member_id: str = "", *, client_id: str = "client", instance_id: str | None = None,
             topics: tuple[str, ...] = ("t",), protocols: list[tuple[str, bytes]] | None = None,
             protocol_type: str = "consumer", session: int = 10_000, rebalance: int = 30_000,
             version: int = 9) -> int:
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        req = JoinGroupRequest(
            group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
            group_instance_id=instance_id, protocol_type=protocol_type,
            protocols=[JoinGroupRequest.Protocol(name=n, metadata=m) for n, m in protocols],
        )
        ctx = self.ctx(version, client_id)
        self.op(self.shard.join_group(req, ctx, self.now))
        return ctx.token

    def join_new(self, group: str, **kw: Any) -> tuple[str, int]:
        """A v4+ dynamic member's two-step join; returns (member id, token of the second join)."""
        first = self.response(self.join(group, **kw))
        assert first.error_code == 79, first
        return first.member_id, self.join(group, first.member_id, **kw)

    def sync(self, group: str, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
             instance_id: str | None = None, version: int = 5, protocol_type: str | None = None,
             protocol_name: str | None = None) -> int:
        req = SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
            protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[SyncGroupRequest.Assignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        )
        ctx = self.ctx(version)
        self.op(self.shard.sync_group(req, ctx, self.now))
        return ctx.token

    def heartbeat(self, group: str, member_id: str, generation: int, *, instance_id: str | None = None,
                  version: int = 4) -> int:
        req = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)
        ctx = self.ctx(version)
        self.op(self.shard.heartbeat(req, ctx, self.now))
        return int(self.response(ctx.token).error_code)

    def leave(self, group: str, members: list[tuple[str, str | None]], *, version: int = 5) -> Any:
        if version >= 3:
            req = LeaveGroupRequest(group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i) for m, i in members])
        else:
            req = LeaveGroupRequest(group_id=group, member_id=members[0][0])
        ctx = self.ctx(version)
        self.op(self.shard.leave_group(req, ctx, self.now))
        return self.response(ctx.token)

    def commit(self, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1,
               member_id: str = "", instance_id: str | None = None, version: int = 8,
               metadata: str | None = "", leader_epoch: int = -1, retention: int = -1) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(OffsetCommitRequest.Topic.Partition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=leader_epoch,
                committed_metadata=metadata))
        req = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=instance_id, retention_time_ms=retention,
            topics=[OffsetCommitRequest.Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        ctx = self.ctx(version)
        self.op(self.shard.offset_commit(req, ctx, self.now))
        resp = self.response(ctx.token)
        return {(t.name, p.partition_index): int(p.error_code) for t in resp.topics for p in t.partitions}

    def fetch(self, group: str, topics: list[tuple[str, list[int]]] | None = None) -> dict[tuple[str, int], tuple]:
        error, rows = self.shard.offset_fetch_group(group, topics, True)
        assert error == 0
        return {(t, p): (o, e, m, err) for t, p, o, e, m, err in rows}

    def delete_offsets(self, group: str, topics: dict[str, list[int]]) -> Any:
        req = OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequest.Topic(name=t, partitions=[OffsetDeleteRequest.Topic.Partition(partition_index=p)
                                                          for p in ps])
            for t, ps in topics.items()])
        ctx = self.ctx(0)
        self.op(self.shard.offset_delete(req, ctx, self.now))
        return self.response(ctx.token)

    def delete_group(self, group: str) -> int:
        error, records = self.shard.delete_group(group, self.now)
        self._write(records)
        return error

    # ---- views ------------------------------------------------------------------------------

    def group(self, group_id: str) -> Any:
        return self.shard.state.groups[group_id]

    def state(self, group_id: str) -> str:
        return self.shard.describe_group(group_id, 5).group_state

    def stable(self, group: str = "g", n: int = 1, **kw: Any) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns their ids (leader first) and the generation.
        Each member is assigned its own id's bytes."""
        tokens = [self.join_new(group, **kw) for _ in range(n)]
        self.sleep(self.config.group_initial_rebalance_delay_ms * (n + 1))
        responses = [self.response(t) for _, t in tokens]
        gen = responses[0].generation_id
        leader = responses[0].leader
        ids = [leader] + [m for m, _ in tokens if m != leader]
        self.sync(group, leader, gen, {m: m.encode() for m in ids})
        for m in ids[1:]:
            self.sync(group, m, gen)
        assert self.state(group) == "Stable"
        return ids, gen
