"""Writes the coordinator's rebalance-journal events to the internal topic ``__kcoord_group_events``.

One partition, in Kafka's on-disk format, owned by the one log runtime like every other log, with
time retention (``group.events.retention.ms``) and readable with Fetch by any Kafka client.

Encoding (version 1): the record key is the JSON ``{"version": 1, "group": <group id>}``, the
value one JSON object (``GroupEvent.to_json``: ``version``, ``kind``, ``group``, ``group_type``,
``generation``, ``state_before``, ``state_after``, ``timestamp``, ``cause`` and the kind's own
fields), the record timestamp the event's. JSON because every client and tool (kcat, the console
consumer, Spark's JSON functions) reads it without a schema; ``version`` in key and value lets a
later encoding change without breaking readers that check it.

The writes never hold a group operation: the shard hands them over and answers without waiting;
the event loop only queues the events, and every 0.2 s a worker thread encodes what was queued
(JSON, the record batch's entries) and the loop hands it to the log as one batch. The journal log is *lazy* in the runtime (flushed every ``log.flush.interval.ms``, never inside a
group-commit pass), and its high watermark moves only once a flush made the events durable. A
clean shutdown writes and flushes what is queued; a crash of the process loses the events not yet
written (those of the last 0.2 s), a crash of the machine also those written since the last
periodic flush (up to ``log.flush.interval.ms``).
"""

from __future__ import annotations

import functools
import json
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence

import trio

from broker.coordinator.journal import ENCODING_VERSION, GroupEvent
from broker.log_runtime.runtime import Entry, LogRuntime, Partition
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.topics.catalog import EVENTS_TOPIC, TopicCatalog
from protocol.group_doctor import RULES, diagnose
from storage.config import LogConfig
from storage.errors import StorageError

# Segments roll daily so that time retention (which deletes whole closed segments) bites.
SEGMENT_MS = 86_400_000


# What the doctor's metrics look at: the latest events of the most recently active groups.
RECENT_GROUPS = 500
RECENT_EVENTS = 100
HAND_OVER_S = 0.2


# One encoder for every event: json.dumps with options builds a new one per call.
_VALUE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


@functools.lru_cache(maxsize=4096)
def _key(group: str) -> bytes:
    return json.dumps({"version": ENCODING_VERSION, "group": group}, separators=(",", ":")).encode()


def encode_event(event: GroupEvent) -> Entry:
    return _key(event.group), _VALUE_ENCODER.encode(event.to_json()).encode(), event.timestamp


def encode_events(events: Sequence[GroupEvent]) -> list[Entry]:
    """The log entries of ``events``: runs in a worker thread (events are immutable once written)."""
    return [encode_event(e) for e in events]


class JournalWriter:
    def __init__(self, runtime: LogRuntime, catalog: TopicCatalog, *, retention_ms: int, segment_bytes: int,
                 enabled: bool) -> None:
        self.runtime = runtime
        self.enabled = enabled
        self.part: Partition | None = None
        self.config = LogConfig(segment_bytes=segment_bytes, segment_ms=min(SEGMENT_MS, max(retention_ms, 1)),
                                retention_ms=retention_ms, cleanup_policy="delete")
        if enabled:
            catalog.ensure_internal(EVENTS_TOPIC, 1, {"cleanup.policy": "delete", "retention.ms": str(retention_ms)})
        self.topic = catalog.get(EVENTS_TOPIC)
        self.recent: OrderedDict[str, deque[GroupEvent]] = OrderedDict()
        # Queued by the loop, not yet encoded; and those a worker thread is encoding.
        self.pending: list[GroupEvent] = []
        self.encoding: list[GroupEvent] = []
        self.closed = False
        self._findings: Counter[str] | None = None

    def open(self) -> None:
        """Opens (recovering) the journal's log. Blocking: runs before serving."""
        if not self.enabled or self.topic is None:
            return
        part = self.runtime.open(EVENTS_TOPIC, 0, self.config, self.topic.topic_id, owner=self)
        part.lazy = True
        self.part = self.runtime.adopt(part)

    def write(self, events: Sequence[GroupEvent]) -> None:
        part = self.part
        if part is None or part.failed or part.closed:
            return
        for event in events:
            if event.kind != "state":
                self._remember(event.group, event)
        # Only queued here: a rebalance of N members is N events, and encoding them (JSON) and a
        # batch each would be N times that work on the event loop, inside the group operations.
        self.pending.extend(events)
        METRICS.group_events.inc(len(events))

    async def hand_over(self) -> None:
        """Encodes what was queued on a worker thread and hands it to the log as one batch."""
        part = self.part
        if not self.pending or part is None or part.failed or part.closed or self.closed:
            return
        self.encoding, self.pending = self.pending, []
        # Not abandoned on cancellation: the thread finishes and its entries are appended (or,
        # after close() wrote these events itself, dropped).
        entries = await trio.to_thread.run_sync(encode_events, self.encoding)
        self.encoding = []
        if not self.closed and not part.failed and not part.closed:
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
        """Forensics, not state: the journal stops (logged once by the runtime) and groups go on."""
        del exc
        logs.warn("journal.stopped", topic=EVENTS_TOPIC)

    def close(self) -> None:
        """Writes what is queued and not yet taken by a pass, so a clean shutdown loses nothing."""
        part = self.part
        self.closed = True
        queued, self.encoding, self.pending = self.encoding + self.pending, [], []
        if part is None or part.failed or part.closed or not (part.records or queued):
            return
        records, part.records = part.records + encode_events(queued), []
        try:
            part.log.append(records)
            part.log.flush()
        except (OSError, StorageError) as exc:
            logs.warn("journal.close_failed", error=repr(exc))
