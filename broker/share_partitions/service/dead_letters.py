"""Share groups' dead-letter queues (KIP-1191), written as Kafka 4.4's ``ShareGroupDLQStateManager``
writes them.

A share group with ``errors.deadletterqueue.topic.name`` sends there every record archived because
a member rejected it or because it reached the delivery count limit (``DeadLetter``, noted by the
share partition). For each, one record goes to partition ``source partition % partitions`` of the
queue, stamped with the time of writing, with Kafka's headers: ``__dlq.errors.topic``,
``__dlq.errors.partition``, ``__dlq.errors.offset``, ``__dlq.errors.group``,
``__dlq.errors.delivery.count`` and ``__dlq.errors.message`` (why), all UTF-8 text; the record's own
key and value only with ``errors.deadletterqueue.copy.record.enable`` (its headers and timestamp
never).

The queue must be usable as Kafka requires: a name not starting with ``__`` and, unless the
broker's ``errors.deadletterqueue.topic.name.prefix`` is empty, starting with it (``dlq.`` by
default); an existing topic must have ``errors.deadletterqueue.group.enable=true``; a missing one
is created (default partitions, that config and ``message.timestamp.type=CreateTime``) only with
``errors.deadletterqueue.auto.create.topics.enable``. A queue that is not usable, or a write that
still fails after five attempts (1 s, doubling, at most 30 s apart, for the errors Kafka retries),
is logged and counted, and the records stay archived: as in Kafka, a dead letter is never a reason
to deliver a record again.

The records are written once their ARCHIVING state is durable (``broker.share_partitions.service.manager``), and each
job's ``done`` is called when they are written or given up, so that they become ARCHIVED: a node
that stops between the phases leaves them ARCHIVING, and whoever loads the share partition next
writes them again (at least once, as in Kafka)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.share_partitions.core.partition import DeadLetter
from broker.share_partitions.core.settings import ShareGroupSettings
from broker.topics.catalog import TopicCatalog
from protocol.errors import ErrorCode
from protocol.record_batch import Record, build_batch

HEADERS = ("__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset", "__dlq.errors.group",
           "__dlq.errors.delivery.count", "__dlq.errors.message")
ENABLE_CONFIG = "errors.deadletterqueue.group.enable"
ATTEMPTS = 5
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# What a write is tried again after, as Kafka's manager retries it.
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
                       ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})

# (topic, partition, batch, done(error code)): appends a batch to a partition of the queue
# wherever it is led (this node, or another of the cluster).
Append = Callable[[str, int, bytes, Callable[[int], None]], None]
# (topic, partition, offset) -> (key, value) of the source record, or None when it cannot be read.
ReadRecord = Callable[[str, int, int], "tuple[bytes | None, bytes | None] | None"]
# (name, configs) -> creates the topic with the broker's default partitions; raises on refusal.
CreateTopic = Callable[[str, dict[str, str]], object]


@dataclass(frozen=True)
class Letters:
    group: str
    topic: str  # the source topic's name (its id in hex when it has none any more)
    partition: int
    letters: tuple[DeadLetter, ...]
    done: Callable[[], None] = lambda: None  # written or given up: the records become ARCHIVED


class DeadLetterQueues:
    def __init__(self, settings: Callable[[str], ShareGroupSettings], catalog: TopicCatalog, append: Append,
                 read_record: ReadRecord, create_topic: CreateTopic, *, auto_create: bool, prefix: str,
                 clock: Callable[[], int]) -> None:
        self.settings = settings
        self.catalog = catalog
        self.append = append
        self.read_record = read_record
        self.create_topic = create_topic
        self.auto_create = auto_create
        self.prefix = prefix
        self.clock = clock
        self._send, self._receive = trio.open_memory_channel[Letters](10_000)

    def send(self, group: str, topic: str, partition: int, letters: list[DeadLetter],
             done: Callable[[], None] = lambda: None) -> None:
        """Queues the dead letters of one share partition (from the loop; never blocks); ``done()``
        once they are written or given up."""
        if not letters:
            done()
            return
        try:
            self._send.send_nowait(Letters(group, topic, partition, tuple(letters), done))
        except trio.WouldBlock:
            METRICS.share_dead_letter_failures.labels(group).inc(len(letters))
            logs.warn("share.dead_letters_dropped", group=group, topic=topic, partition=partition,
                      records=len(letters), reason="too many dead letters waiting to be written")
            done()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for job in self._receive:
            try:
                await self._write(job)
            finally:
                job.done()

    def usable(self, name: str) -> str | None:
        """Why the group's queue cannot be written now (None: it can, perhaps once created)."""
        if not name or name.startswith("__"):
            return f"the dead-letter queue topic {name!r} is not a valid name"
        if self.prefix and not name.startswith(self.prefix):
            return (f"the dead-letter queue topic {name} does not start with {self.prefix} "
                    f"(errors.deadletterqueue.topic.name.prefix)")
        topic = self.catalog.get(name)
        if topic is None:
            return None if self.auto_create else (
                f"the dead-letter queue topic {name} does not exist and "
                "errors.deadletterqueue.auto.create.topics.enable is false")
        if str(topic.configs.get(ENABLE_CONFIG, "false")).lower() != "true":
            return f"the topic {name} does not have {ENABLE_CONFIG}=true"
        return None

    def batch(self, job: Letters, copy: bool) -> bytes:
        now = self.clock()
        records = []
        for i, letter in enumerate(job.letters):
            key = value = None
            if copy:
                found = self.read_record(job.topic, job.partition, letter.offset)
                if found is not None:
                    key, value = found
            headers: list[tuple[str, bytes | None]] = [(name, text.encode()) for name, text in zip(HEADERS, (
                job.topic, str(job.partition), str(letter.offset), job.group, str(letter.delivery_count),
                letter.reason))]
            records.append(Record(i, 0, key, value, headers))
        return build_batch(records, base_timestamp=now, max_timestamp=now)

    async def _write(self, job: Letters) -> None:
        settings = self.settings(job.group)
        name = settings.dead_letter_topic
        count = len(job.letters)
        backoff = FIRST_BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            why = self.usable(name)
            if why is not None:
                self._failed(job, name, why)
                return
            if self.catalog.get(name) is None:
                try:
                    self.create_topic(name, {ENABLE_CONFIG: "true", "message.timestamp.type": "CreateTime"})
                    logs.event("share.dead_letter_topic_created", group=job.group, topic=name)
                except Exception as exc:  # another writer made it meanwhile: the next attempt uses it
                    if self.catalog.get(name) is None:
                        self._failed(job, name, f"could not create the topic: {exc}")
                        return
            topic = self.catalog.get(name)
            if topic is None:
                self._failed(job, name, "the topic is gone")
                return
            partition = job.partition % topic.partitions
            raw = self.batch(job, settings.copy_dead_letters)
            answered = trio.Event()
            codes: list[int] = []

            def done(code: int, codes: list[int] = codes, answered: trio.Event = answered) -> None:
                codes.append(code)
                answered.set()

            self.append(name, partition, raw, done)
            await answered.wait()
            if codes[0] == ErrorCode.NONE:
                METRICS.share_dead_letters.labels(job.group).inc(count)
                logs.debug("share.dead_letters_written", group=job.group, topic=name, partition=partition,
                           records=count)
                return
            if codes[0] not in RETRIABLE or attempt == ATTEMPTS:
                self._failed(job, name, f"{_name(codes[0])} after {attempt} attempt(s)")
                return
            await trio.sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)

    def _failed(self, job: Letters, name: str, reason: str) -> None:
        METRICS.share_dead_letter_failures.labels(job.group).inc(len(job.letters))
        logs.warn("share.dead_letters_failed", group=job.group, dlq=name, topic=job.topic, partition=job.partition,
                  first_offset=job.letters[0].offset, records=len(job.letters), reason=reason,
                  note="the records stay archived")


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
