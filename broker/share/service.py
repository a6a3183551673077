"""Share partitions on this node: their state in memory, made durable in ``__share_group_state``.

Every share partition (group, topic id, partition) is a pure ``SharePartition``. A change that
must survive a crash (an acknowledgement, a release, the start offset set by a first fetch) is
written to the ``__share_group_state`` partition its key hashes to, as Kafka's share coordinator
writes it: a ShareUpdate of what changed since the last write, and a ShareSnapshot of the whole
share partition first and after every ``share.coordinator.snapshot.update.records.per.snapshot``
updates. The request that made the change is answered only once that record is durable. At start
the service replays those partitions (snapshots, then the updates after them). Acquisitions are
written only with the next change: after a restart an acquired record is available again.

The state log is owned here for now; it runs on the same log runtime as every other partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from broker.log_runtime.runtime import Entry, LogRuntime, Partition
from broker.observability import logs
from broker.share_partition import records as state_records
from broker.share_partition.partition import Limits, SharePartition
from broker.share_partition.settings import ShareGroupSettings
from broker.topics.changes import Settlement, TopicChange, TopicDeleted
from protocol import share_state_records
from protocol.errors import DecodeError
from protocol.partitioning import partition_for
from protocol.record_batch import decode_records
from protocol.share_state_records import SNAPSHOT, UPDATE, ShareStateRecord
from storage.config import LogConfig

STATE_TOPIC = "__share_group_state"
Key = tuple[str, bytes, int]  # group, topic id, partition


@dataclass
class ShareSession:
    epoch: int
    partitions: set[tuple[bytes, int]]
    last_used_ms: int = 0
    # The connection that opened it: the session ends when that connection closes (Kafka 4.4's
    # share session cache does the same); -1 when not known.
    conn_id: int = -1


class ShareService:
    def __init__(self, runtime: LogRuntime, settings: Callable[[str], ShareGroupSettings], num_partitions: int,
                 log_config: LogConfig, clock: Callable[[], int], max_sessions: int = 2000,
                 session_idle_ms: int = 45000, updates_per_snapshot: int = 500) -> None:
        """``settings`` gives a group's effective share settings (its group configs over the
        broker's ``group.share.*``), looked up at each use so that a change applies at once."""
        self.max_sessions = max_sessions
        # A session unused this long belongs to a consumer that is gone (one that polls fetches
        # far more often): it is closed and what its member holds is released.
        self.session_idle_ms = session_idle_ms
        self.runtime = runtime
        self.settings = settings
        self.num_partitions = num_partitions
        self.log_config = log_config
        self.clock = clock
        self.partitions: dict[Key, SharePartition] = {}
        self.created: dict[Key, int] = {}
        self.snapshot_epochs: dict[Key, int] = {}
        # ShareUpdates written since each share partition's last snapshot; at
        # ``updates_per_snapshot`` the next write is a snapshot again (0: every write is one).
        self.updates_per_snapshot = updates_per_snapshot
        self.updates_since_snapshot: dict[Key, int] = {}
        # Share partitions whose next write must be a snapshot (their state was replaced whole).
        self.snapshot_due: set[Key] = set()
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.parts: dict[int, Partition] = {}

    # ---- loading ----------------------------------------------------------------------------

    def _open_and_replay(self) -> list[Partition]:
        opened = []
        for topic, index in self.runtime.manager.existing_partitions():
            if topic != STATE_TOPIC:
                continue
            part = self.runtime.open(topic, index, self.log_config, owner=None)
            for batch in part.log.batches():
                if batch.is_control:
                    continue
                for record in decode_records(batch):
                    if record.key is None:
                        continue
                    try:
                        rec = share_state_records.decode(record.key, record.value)
                    except DecodeError as exc:
                        logs.warn("share.unreadable_record", partition=index, error=str(exc))
                        continue
                    if rec is not None:
                        self._replay(rec)
            opened.append(part)
        return opened

    def _replay(self, rec: ShareStateRecord) -> None:
        key = (rec.group, rec.topic_id, rec.partition)
        if rec.value is None:
            self.partitions.pop(key, None)
            self.snapshot_epochs.pop(key, None)
            self.updates_since_snapshot.pop(key, None)
        elif rec.record_type == SNAPSHOT:
            self.partitions[key] = state_records.load(rec.value)
            self.created[key] = rec.value.create_timestamp
            self.snapshot_epochs[key] = rec.value.snapshot_epoch
            self.updates_since_snapshot[key] = 0
        elif key in self.partitions:
            state_records.apply_update(self.partitions[key], rec.value)
            self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    async def load(self) -> None:
        started = time.perf_counter()
        for part in await trio.to_thread.run_sync(self._open_and_replay):
            self.parts[part.index] = self.runtime.adopt(part)
        logs.event("share.loaded", share_partitions=len(self.partitions),
                   seconds=round(time.perf_counter() - started, 3))

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.load()
        task_status.started()
        while True:
            await trio.sleep(0.1)
            now = self.clock()
            self.expire_locks(now)
            self.close_idle_sessions(now)

    # ---- state --------------------------------------------------------------------------------

    def limits(self, group: str) -> Limits:
        return self.settings(group).limits

    def get(self, key: Key) -> SharePartition:
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition()
        return sp

    def expire_locks(self, now_ms: int) -> None:
        for key, sp in self.partitions.items():
            deadline = sp.next_deadline()
            if deadline is not None and deadline <= now_ms:
                sp.expire(now_ms, self.limits(key[0]))

    def close_idle_sessions(self, now_ms: int) -> None:
        idle = [key for key, session in self.sessions.items() if now_ms - session.last_used_ms > self.session_idle_ms]
        for group, member in idle:
            del self.sessions[(group, member)]
            self.release_member(group, member)

    def close_sessions_of(self, conn_id: int) -> None:
        """A client connection closed: the share sessions it opened end, and what their members
        hold is available again at once (written like any release)."""
        ended = [key for key, session in self.sessions.items() if session.conn_id == conn_id]
        changed: list[Key] = []
        for group, member in ended:
            del self.sessions[(group, member)]
            changed += self.release_member(group, member)
        if changed:
            self.persist(changed, lambda ok: None)

    def release_member(self, group: str, member: str) -> list[Key]:
        """The member's session ended: whatever it holds in the group's share partitions goes back."""
        limits = self.limits(group)
        return [key for key, sp in self.partitions.items() if key[0] == group and sp.release_member(member, limits)]

    # ---- durability ---------------------------------------------------------------------------

    def _part(self, index: int) -> Partition:
        part = self.parts.get(index)
        if part is None:
            part = self.parts[index] = self.runtime.adopt(
                self.runtime.open(STATE_TOPIC, index, self.log_config, owner=None))
        return part

    def persist(self, keys: list[Key], done: Callable[[bool], None]) -> None:
        """Writes what changed in each share partition (a ShareUpdate, or a ShareSnapshot when one
        is due); ``done(ok)`` once all are durable."""
        if not keys:
            done(True)
            return
        now = self.clock()
        by_part: dict[int, list[Entry]] = {}
        for key in dict.fromkeys(keys):
            sp = self.partitions.get(key)
            if sp is None:
                continue
            updates = self.updates_since_snapshot.get(key, 0)
            if key not in self.snapshot_epochs or key in self.snapshot_due or updates >= self.updates_per_snapshot:
                epoch = self.snapshot_epochs[key] = self.snapshot_epochs.get(key, -1) + 1
                created = self.created.setdefault(key, now)
                record = ShareStateRecord(SNAPSHOT, key[0], key[1], key[2],
                                          state_records.snapshot(sp, 0, epoch, now, created))
                self.updates_since_snapshot[key] = 0
                self.snapshot_due.discard(key)
            else:
                record = ShareStateRecord(UPDATE, key[0], key[1], key[2],
                                          state_records.update(sp, self.snapshot_epochs[key]))
                self.updates_since_snapshot[key] = updates + 1
            sp.changed.clear()
            k, v = share_state_records.encode(record)
            by_part.setdefault(self._index(key), []).append((k, v, now))
        self._write(by_part, done)

    # ---- administration -----------------------------------------------------------------------

    def of_group(self, group: str) -> dict[tuple[bytes, int], SharePartition]:
        return {(k[1], k[2]): sp for k, sp in self.partitions.items() if k[0] == group}

    def reset(self, key: Key, offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts again at ``offset``, nothing in flight."""
        sp = self.partitions[key] = SharePartition()
        sp.initialize(offset)
        self.snapshot_due.add(key)

    def forget(self, keys: list[Key], done: Callable[[bool], None]) -> None:
        """DeleteShareGroupOffsets, DeleteGroups: the share partitions' state goes (tombstones)."""
        now = self.clock()
        by_part: dict[int, list[Entry]] = {}
        for key in keys:
            self.partitions.pop(key, None)
            self.snapshot_epochs.pop(key, None)
            self.created.pop(key, None)
            self.updates_since_snapshot.pop(key, None)
            self.snapshot_due.discard(key)
            k, v = share_state_records.encode(ShareStateRecord(SNAPSHOT, key[0], key[1], key[2], None))
            by_part.setdefault(self._index(key), []).append((k, v, now))
        self._write(by_part, done)

    def on_topic_change(self, change: TopicChange, settlement: Settlement) -> None:
        """Subscribed to the broker's topic changes: a deleted topic's share partitions are
        forgotten (tombstoned in __share_group_state); DeleteTopics settles once that is durable."""
        if not isinstance(change, TopicDeleted):
            return
        release = settlement.hold()
        self.forget([key for key in self.partitions if key[1] == change.topic_id], lambda ok: release())

    def forget_group(self, group: str) -> None:
        """DeleteGroups deleted the group: its share partitions' state goes too."""
        self.forget([key for key in self.partitions if key[0] == group], lambda ok: None)

    def _index(self, key: Key) -> int:
        return partition_for(f"{key[0]}:{key[1].hex()}:{key[2]}", self.num_partitions)

    def _write(self, by_part: dict[int, list[Entry]], done: Callable[[bool], None]) -> None:
        if not by_part:
            done(True)
            return
        remaining = [len(by_part)]

        def one(ok: bool) -> None:
            if remaining[0] <= 0:
                return
            if not ok:
                remaining[0] = 0
                done(False)
                return
            remaining[0] -= 1
            if remaining[0] == 0:
                done(True)

        for index, entries in by_part.items():
            part = self._part(index)
            self.runtime.append_records(part, entries)
            part.when_durable(one)
