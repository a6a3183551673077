"""Writes the coordinator's rebalance-journal events to the internal topic ``__kcoord_group_events``.

In Kafka's on-disk format, owned by the one log runtime like every other log, with time retention
(``group.events.retention.ms``) and readable with Fetch by any Kafka client.

Partitions: a single broker keeps one partition (every group's events in partition 0). A cluster
keeps as many as ``__consumer_offsets`` has, and group G's events go to partition
``partition_for(G)``, the index of G's ``__consumer_offsets`` partition: one writer per partition,
the node that owns that ``__consumer_offsets`` partition. It opens the journal partition when it
gains the shard (``gain``, at the owner epoch, which every batch then carries) and closes it when
it hands the shard over (``release``: what is queued for it is written first) or loses it
(``lose``: nothing more is written). Every append goes through the log runtime, which refuses to
write once the node's lease may have passed to another node. The partition a group's events go to
is ``journal_partition`` over the topic's partition count, so a reader finds them the same way.

The encoding of the records and the partition of each group's events are the journal format's
(``protocol.group_events``).

The writes never hold a group operation: the shard hands them over and answers without waiting;
the event loop only queues the events, and every 0.2 s a worker thread encodes what was queued
(JSON, the record batch's entries) and the loop hands it to each partition's log as one batch. The
journal logs are *lazy* in the runtime (flushed every ``log.flush.interval.ms``, never inside a
group-commit pass), and a high watermark moves only once a flush made the events durable. A
clean shutdown writes and flushes what is queued; a crash of the process loses the events not yet
written (those of the last 0.2 s), a crash of the machine also those written since the last
periodic flush (up to ``log.flush.interval.ms``).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from collections.abc import Sequence

import trio

from broker.log_runtime.runtime import Entry, LogRuntime, Partition
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.topics.catalog import EVENTS_TOPIC, TopicCatalog
from doctor import RULES, diagnose
from protocol.group_events import GroupEvent, encode_event, journal_partition
from storage.config import LogConfig
from storage.errors import StorageError

# Segments roll daily so that time retention (which deletes whole closed segments) bites.
SEGMENT_MS = 86_400_000


# What the doctor's metrics look at: the latest events of the most recently active groups.
RECENT_GROUPS = 500
RECENT_EVENTS = 100
HAND_OVER_S = 0.2


def encode_events(events: Sequence[GroupEvent]) -> list[Entry]:
    """The log entries of ``events``: runs in a worker thread (events are immutable once written)."""
    return [encode_event(e) for e in events]


class JournalWriter:
    def __init__(self, runtime: LogRuntime, catalog: TopicCatalog, *, retention_ms: int, segment_bytes: int,
                 enabled: bool, partitions: int = 1, clustered: bool = False) -> None:
        """``partitions``: how many the topic has at least (1 on a single broker; as many as
        ``__consumer_offsets`` in a cluster). ``clustered``: partitions are opened as this node
        gains their shards (``gain``), not all at ``open``."""
        self.runtime = runtime
        self.enabled = enabled
        self.clustered = clustered
        self.config = LogConfig(segment_bytes=segment_bytes, segment_ms=min(SEGMENT_MS, max(retention_ms, 1)),
                                retention_ms=retention_ms, cleanup_policy="delete")
        if enabled:
            catalog.ensure_internal(EVENTS_TOPIC, partitions,
                                    {"cleanup.policy": "delete", "retention.ms": str(retention_ms)})
        self.topic = catalog.get(EVENTS_TOPIC)
        # The layout readers see: a single broker on a directory a cluster wrote keeps its layout.
        self.partitions = self.topic.partitions if self.topic is not None else 1
        # The open journal partitions, by index; and those this node may write (opened or opening).
        self.parts: dict[int, Partition] = {}
        self.owned: set[int] = set()
        # Rises with every change of a partition's ownership: an open that finishes after the
        # partition was lost (or lost and gained again) is thrown away.
        self.tenure: dict[int, int] = {}
        self.recent: OrderedDict[str, deque[GroupEvent]] = OrderedDict()
        # Queued by the loop, not yet encoded; and those a worker thread is encoding (by partition).
        self.pending: dict[int, list[GroupEvent]] = {}
        self.encoding: dict[int, list[GroupEvent]] = {}
        # One hand-over at a time: a release waits for the one under way, whose events it must see
        # written before the partition closes.
        self.handing_over = trio.Lock()
        self.closed = False
        self._findings: Counter[str] | None = None

    @property
    def part(self) -> Partition | None:
        """Partition 0 (the whole journal in the one-partition layout)."""
        return self.parts.get(0)

    def _open_partition(self, index: int, epoch: int | None) -> Partition:
        """Opens (recovering) one journal partition's log; blocking. ``epoch``: the owner epoch of
        a cluster node, carried by every batch it writes from now on."""
        assert self.topic is not None
        part = self.runtime.open(EVENTS_TOPIC, index, self.config, self.topic.topic_id, owner=self)
        if epoch is not None:
            part.log.begin_epoch(epoch)
        part.lazy = True
        return part

    def open(self) -> None:
        """A single broker opens (recovering) every journal partition. Blocking: runs before serving."""
        if not self.enabled or self.topic is None or self.clustered:
            return
        for index in range(self.partitions):
            self.owned.add(index)
            self.parts[index] = self.runtime.adopt(self._open_partition(index, None))

    # ---- ownership (cluster mode): follows the ``__consumer_offsets`` partition of the same index --

    def gain(self, index: int, epoch: int) -> None:
        """This node now owns shard ``index``: open its journal partition at ``epoch``. Events that
        arrive meanwhile (the shard's own load) wait in the queue."""
        if not self.enabled or self.topic is None or not 0 <= index < self.partitions or self.closed:
            return
        self.tenure[index] = self.tenure.get(index, 0) + 1
        self.owned.add(index)
        self.runtime.spawn(self._gain, index, epoch, self.tenure[index])

    async def _gain(self, index: int, epoch: int, tenure: int) -> None:
        try:
            part = await trio.to_thread.run_sync(self._open_partition, index, epoch)
        except (OSError, StorageError) as exc:
            # Its groups go on unjournaled until the shard is gained again.
            logs.warn("journal.open_failed", topic=EVENTS_TOPIC, partition=index, error=repr(exc))
            if self.tenure.get(index) == tenure:
                self.owned.discard(index)
                self.pending.pop(index, None)
            return
        if self.tenure.get(index) != tenure or index not in self.owned or self.closed:
            # Lost while opening: the partition is another node's now.
            part.log.close()
            self.runtime.manager.forget(EVENTS_TOPIC, index)
            return
        self.parts[index] = self.runtime.adopt(part)

    async def release(self, index: int) -> None:
        """Controlled hand-over of shard ``index``: write what is queued for its journal partition,
        let it become durable, then close it."""
        async with self.handing_over:
            part = self.parts.get(index)
            queued = self.pending.pop(index, [])
            if part is not None and queued and self._writable(part):
                entries = await trio.to_thread.run_sync(encode_events, queued)
                if self._writable(part) and self.parts.get(index) is part:
                    self.runtime.append_records(part, entries)
            if part is not None:
                await part.settle(5)
        self.lose(index)

    def lose(self, index: int) -> None:
        """Shard ``index`` is no longer this node's: its journal partition takes nothing more."""
        self.tenure[index] = self.tenure.get(index, 0) + 1
        self.owned.discard(index)
        self.pending.pop(index, None)
        part = self.parts.pop(index, None)
        if part is not None:
            self.runtime.close_partition(part)
        # The doctor's metrics speak of the groups this node coordinates.
        for group in [g for g in self.recent if journal_partition(g, self.partitions) == index]:
            del self.recent[group]
            self._findings = None

    # ---- writing ------------------------------------------------------------------------------

    @staticmethod
    def _writable(part: Partition) -> bool:
        return not part.failed and not part.closed

    def write(self, events: Sequence[GroupEvent]) -> None:
        if self.closed or not self.owned:
            return
        partitions = self.partitions
        for event in events:
            index = journal_partition(event.group, partitions)
            if index not in self.owned:
                continue
            part = self.parts.get(index)
            if part is not None and not self._writable(part):
                continue
            # State events are many and the doctor reads them only for a streams group entering or
            # leaving NotReady (``streams-not-ready``).
            if event.kind != "state" or "NotReady" in (event.state_before, event.state_after):
                self._remember(event.group, event)
            # Only queued here: a rebalance of N members is N events, and encoding them (JSON) and
            # a batch each would be N times that work on the event loop, inside the group operations.
            self.pending.setdefault(index, []).append(event)
            METRICS.group_events.inc()

    async def hand_over(self) -> None:
        """Encodes what was queued for the open partitions on a worker thread and hands it to
        each partition's log as one batch (a partition still opening keeps its events queued)."""
        if not self.pending or self.closed:
            return
        async with self.handing_over:
            taken: dict[int, list[GroupEvent]] = {}
            targets: dict[int, Partition] = {}
            for index in list(self.pending):
                part = self.parts.get(index)
                if part is not None and self._writable(part):
                    taken[index] = self.pending.pop(index)
                    targets[index] = part
            if not taken:
                return
            self.encoding = taken
            # Not abandoned on cancellation: the thread finishes and its entries are appended (or,
            # after close() wrote these events itself, dropped).
            encoded = await trio.to_thread.run_sync(_encode_by_partition, taken)
            self.encoding = {}
            if self.closed:
                return
            for index, entries in encoded.items():
                part = targets[index]
                # Not if the partition was lost meanwhile (and perhaps gained again: another
                # node may have written to it in between).
                if self.parts.get(index) is part and self._writable(part):
                    self.runtime.append_records(part, entries)

    async def run(self) -> None:
        while True:
            await trio.sleep(HAND_OVER_S)
            await self.hand_over()

    def _remember(self, group: str, event: GroupEvent) -> None:
        kept = self.recent.get(group)
        if kept is None:
            kept = self.recent[group] = deque(maxlen=RECENT_EVENTS)
            if len(self.recent) > RECENT_GROUPS:
                self.recent.popitem(last=False)
        else:
            self.recent.move_to_end(group)
        kept.append(event)
        self._findings = None

    def findings_by_rule(self) -> Counter[str]:
        """Groups with each of the doctor's findings, over the recent events (recomputed only when
        events arrived since the last call: a scrape)."""
        if self._findings is None:
            found = diagnose(e.to_json() for kept in self.recent.values() for e in kept)
            self._findings = Counter({rule: 0 for rule in RULES})
            self._findings.update(f.rule for f in found)
        return self._findings

    def on_write_failed(self, exc: Exception) -> None:
        """Forensics, not state: the journal partition stops (logged once by the runtime) and groups go on."""
        del exc
        logs.warn("journal.stopped", topic=EVENTS_TOPIC)

    def close(self) -> None:
        """Writes what is queued and not yet taken by a pass, so a clean shutdown loses nothing
        (in a cluster only while the lease certainly holds: otherwise the partitions may be
        another node's already)."""
        self.closed = True
        queued: dict[int, list[GroupEvent]] = {}
        for source in (self.encoding, self.pending):
            for index, events in source.items():
                queued.setdefault(index, []).extend(events)
        self.encoding, self.pending = {}, {}
        if not self.runtime.may_write():
            return
        for index, part in self.parts.items():
            events = queued.get(index, [])
            if not self._writable(part) or not (part.records or events):
                continue
            records, part.records = part.records + encode_events(events), []
            try:
                part.log.append(records)
                part.log.flush()
            except (OSError, StorageError) as exc:
                logs.warn("journal.close_failed", partition=index, error=repr(exc))


def _encode_by_partition(events: dict[int, list[GroupEvent]]) -> dict[int, list[Entry]]:
    return {index: encode_events(batch) for index, batch in events.items()}
