"""Topic changes, published to whatever in the broker must follow them.

In Kafka every broker learns of created, grown and deleted topics from the metadata log, and its
group coordinator is told on every shard (``onNewMetadataImage``, ``onPartitionsDeleted``). Here the
broker publishes each change once the topic catalog holds it; the group coordinator's shards
subscribe (``GroupCoordinatorService.on_topic_change``).

A listener may start work that finishes later (a write that must become durable): it takes a
hold on the change's settlement (a ``Countdown`` its publisher starts once everything is published)
and calls it when done. Whoever published the change learns when every listener is done, which is how DeleteTopics answers only once the offsets of the
deleted topic are gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.runtime.countdown import Countdown


@dataclass(frozen=True)
class TopicCreated:
    topic: str
    topic_id: bytes
    partitions: int


@dataclass(frozen=True)
class PartitionsAdded:
    """The topic grew from ``old_count`` to ``new_count`` partitions (CreatePartitions)."""

    topic: str
    topic_id: bytes
    old_count: int
    new_count: int


@dataclass(frozen=True)
class TopicDeleted:
    """The topic and its ``partitions`` partitions (numbered from 0) are gone."""

    topic: str
    topic_id: bytes
    partitions: int


TopicChange = TopicCreated | PartitionsAdded | TopicDeleted


TopicListener = Callable[[TopicChange, Countdown], None]


class TopicChanges:
    def __init__(self) -> None:
        self._listeners: list[TopicListener] = []

    def subscribe(self, listener: TopicListener) -> None:
        self._listeners.append(listener)

    def publish(self, change: TopicChange, settlement: Countdown | None = None) -> None:
        """Tells every listener, in the order they subscribed. Without a ``settlement`` nobody
        waits for what the listeners start."""
        own = settlement is None
        if settlement is None:
            settlement = Countdown(0, _nobody_waits, started=False)
        for listener in self._listeners:
            listener(change, settlement)
        if own:
            settlement.start()


def _nobody_waits(_ok: bool) -> None:
    pass
