"""Topic changes, published to whatever in the broker must follow them.

In Kafka every broker learns of created, grown and deleted topics from the metadata log, and its
group coordinator is told on every shard (``onNewMetadataImage``, ``onPartitionsDeleted``). Here the
broker publishes each change once the topic catalog holds it; the group coordinator's shards
subscribe (``GroupCoordinatorService.on_topic_change``).

A listener may start work that finishes later (a write that must become durable): it takes a
hold on the change's ``Settlement`` and releases it when done. Whoever published the change learns
when every listener is done, which is how DeleteTopics answers only once the offsets of the
deleted topic are gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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


class Settlement:
    """Counts the work started for one or more changes; calls ``done`` once, when all of it has
    finished. The publisher holds it until it has published everything."""

    def __init__(self, done: Callable[[], None]) -> None:
        self._open = 1
        self._done: Callable[[], None] | None = done

    def hold(self) -> Callable[[], None]:
        """One more piece of work; the returned function (idempotent) says it has finished."""
        self._open += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._release()

        return release

    def _release(self) -> None:
        self._open -= 1
        if self._open == 0 and self._done is not None:
            done, self._done = self._done, None
            done()

    def close(self) -> None:
        """The publisher's own hold: everything has been published."""
        self._release()


TopicListener = Callable[[TopicChange, Settlement], None]


class TopicChanges:
    def __init__(self) -> None:
        self._listeners: list[TopicListener] = []

    def subscribe(self, listener: TopicListener) -> None:
        self._listeners.append(listener)

    def publish(self, change: TopicChange, settlement: Settlement | None = None) -> None:
        """Tells every listener, in the order they subscribed. Without a ``settlement`` nobody
        waits for what the listeners start."""
        own = settlement is None
        if settlement is None:
            settlement = Settlement(lambda: None)
        for listener in self._listeners:
            listener(change, settlement)
        if own:
            settlement.close()
