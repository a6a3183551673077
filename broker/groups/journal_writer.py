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
they reach the log every 0.2 s as one batch. The journal log is *lazy* in the runtime (flushed every ``log.flush.interval.ms``, never inside a
group-commit pass), and its high watermark moves only once a flush made the events durable. A
clean shutdown writes and flushes what is queued; a crash of the process loses the events not yet
written (those of the last 0.2 s), a crash of the machine also those written since the last
periodic flush (up to ``log.flush.interval.ms``).
"""

from __future__ import annotations

import json
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from typing import Any

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


def encode_event(event: GroupEvent, doc: dict[str, Any] | None = None) -> Entry:
    key = json.dumps({"version": ENCODING_VERSION, "group": event.group}, separators=(",", ":")).encode()
    value = json.dumps(doc or event.to_json(), separators=(",", ":"), default=str).encode()
    return key, value, event.timestamp


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
        self.recent: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self.pending: list[Entry] = []
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
        entries = []
        for event in events:
            doc = event.to_json()
            entries.append(encode_event(event, doc))
            if event.kind != "state":
                self._remember(event.group, doc)
        # Handed to the log every HAND_OVER_S as one batch, not in every group-commit pass: a
        # rebalance of N members is N events, and a batch each would be N appends on the event loop.
        self.pending.extend(entries)
        METRICS.group_events.inc(len(events))

    def hand_over(self) -> None:
        part = self.part
        if self.pending and part is not None and not part.failed and not part.closed:
            entries, self.pending = self.pending, []
            self.runtime.append_records(part, entries)

    async def run(self) -> None:
        while True:
            await trio.sleep(HAND_OVER_S)
            self.hand_over()

    def _remember(self, group: str, doc: dict[str, Any]) -> None:
        kept = self.recent.get(group)
        if kept is None:
            kept = self.recent[group] = deque(maxlen=RECENT_EVENTS)
            if len(self.recent) > RECENT_GROUPS:
                self.recent.popitem(last=False)
        else:
            self.recent.move_to_end(group)
        kept.append(doc)
        self._findings = None

    def findings_by_rule(self) -> Counter[str]:
        """Groups with each of the doctor's findings, over the recent events (recomputed only when
        events arrived since the last call: a scrape)."""
        if self._findings is None:
            found = diagnose(e for kept in self.recent.values() for e in kept)
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
        if part is None or part.failed or part.closed or not (part.records or self.pending):
            return
        records, part.records, self.pending = part.records + self.pending, [], []
        try:
            part.log.append(records)
            part.log.flush()
        except (OSError, StorageError) as exc:
            logs.warn("journal.close_failed", error=repr(exc))
