"""Incremental fetch sessions (KIP-227), kept as Kafka's broker keeps them; no I/O, no clock.

A consumer that fetches many partitions sends them all once, in a full fetch of epoch 0; the
broker answers with a session id and remembers each partition's fetch offset and what it last told
about it (high watermark, log start offset). Each later fetch of the session (epoch 1, 2, ...)
names only the partitions whose fetch offset or limits changed, and those to forget; its answer
carries only the partitions with something new: records, a moved high watermark or log start
offset, or an error. A partition that returned records moves to the end of the session's order,
so that a budget-limited answer serves the others first next time.

Epoch -1 is a full fetch without a session (and closes the one it names); an incremental fetch
of an unknown session answers FETCH_SESSION_ID_NOT_FOUND, one of the wrong epoch (a lost or
duplicated request) INVALID_FETCH_SESSION_EPOCH, one whose version disagrees with the session on
topic ids (v13+ name topics by id) FETCH_SESSION_TOPIC_ID_ERROR; the client then starts over with
a full fetch.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. A new one takes
the slot of a session unused for two minutes, or else of a smaller session created more than
two minutes ago; otherwise the full fetch is answered with session id 0 and the client goes on
with full fetches.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchResponse

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
NO_SESSION = 0
# How long a session must have been unused, or have existed, before a new one may evict it.
EVICTION_MS = 120_000

PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
# A partition as a session names it: (topic name, partition) before v13, (topic id, partition) after.
Key = tuple[str | bytes, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 after the largest, -1 stays -1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class Wanted:
    """One partition a fetch reads, and how (from the request or the session)."""

    topic: str
    topic_id: bytes
    partition: int
    fetch_offset: int
    max_bytes: int

    def key(self, by_id: bool) -> Key:
        return (self.topic_id if by_id else self.topic, self.partition)


@dataclass(slots=True)
class CachedPartition:
    wanted: Wanted
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_answer(self, data: PartitionData, update: bool) -> bool:
        """Whether the answer must carry ``data`` (records, a change the client has not been told,
        an error); with ``update`` the partition remembers what the answer tells."""
        must = bool(data.records)
        if self.high_watermark != data.high_watermark:
            must = True
            if update:
                self.high_watermark = data.high_watermark
        if self.log_start_offset != data.log_start_offset:
            must = True
            if update:
                self.log_start_offset = data.log_start_offset
        if data.error_code != ErrorCode.NONE:
            # Told again once the error is gone.
            if update:
                self.high_watermark = -1
            must = True
        return must


class FetchSession:
    __slots__ = ("id", "by_id", "created_ms", "last_used_ms", "epoch", "partitions", "cached_size", "evictable")

    def __init__(self, session_id: int, by_id: bool, partitions: dict[Key, CachedPartition], now_ms: int) -> None:
        self.id = session_id
        self.by_id = by_id
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.partitions = partitions
        # As of the last touch: the size a new session is weighed against, and whether it had
        # existed long enough to be evicted for a larger one.
        self.cached_size = len(partitions)
        self.evictable = False


@dataclass(slots=True)
class FetchContext:
    """What one Fetch request reads and how its answer is made: ``error`` (the session was not
    found or not in step: answered at once, empty), else ``session`` for an incremental fetch,
    ``create`` for a full fetch that may open one, neither for a fetch without a session."""

    partitions: list[Wanted]
    by_id: bool
    error: int = ErrorCode.NONE
    session: FetchSession | None = None
    request_epoch: int = FINAL_EPOCH

    @property
    def create(self) -> bool:
        """A full fetch that opens a session (epoch 0)."""
        return self.session is None and self.request_epoch == INITIAL_EPOCH


@dataclass(slots=True)
class Answer:
    """The top-level fields of a Fetch answer and the partitions it carries, in order."""

    error: int
    session_id: int
    partitions: list[tuple[Wanted, PartitionData]]


def _nothing() -> None:
    pass


class FetchSessionCache:
    def __init__(self, max_slots: int, rng: random.Random | None = None,
                 on_evict: Callable[[], None] = _nothing) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._rng = rng or random.Random()
        self._on_evict = on_evict

    def families(self) -> list[tuple[str, str, list[str], list[tuple[list[str], float]]]]:
        """The scrape-time gauges of the cache (Kafka's NumIncrementalFetchSessions and
        NumIncrementalFetchPartitionsCached)."""
        return [
            ("kcoord_fetch_sessions", "Incremental fetch sessions (KIP-227) the node keeps.", [],
             [([], float(len(self.sessions)))]),
            ("kcoord_fetch_session_partitions", "Partitions the node's incremental fetch sessions hold.", [],
             [([], float(sum(s.cached_size for s in self.sessions.values())))]),
        ]

    def open(self, version: int, session_id: int, epoch: int, wanted: list[Wanted], forgotten: Iterable[Key],
             now_ms: int) -> FetchContext:
        """The context of a Fetch request of ``version`` naming ``session_id`` at ``epoch``."""
        by_id = version >= 13
        if version < 7:
            return FetchContext(wanted, by_id)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                # A full fetch closes the session it names.
                self._remove(session_id)
            return FetchContext(wanted, by_id, request_epoch=epoch)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], by_id, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext([], by_id, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.by_id != by_id:
            return FetchContext([], by_id, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for w in wanted:
            key = w.key(by_id)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = CachedPartition(w)
            else:
                cached.wanted.fetch_offset, cached.wanted.max_bytes = w.fetch_offset, w.max_bytes
        for key in forgotten:
            session.partitions.pop(key, None)
        if not session.partitions:
            # Nothing left to fetch: the session ends and this fetch is answered without one.
            self._remove(session.id)
            return FetchContext(wanted, by_id, request_epoch=FINAL_EPOCH)
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return FetchContext([c.wanted for c in session.partitions.values()], by_id, session=session,
                            request_epoch=epoch)

    def answer(self, context: FetchContext, read: list[tuple[Wanted, PartitionData]], now_ms: int) -> Answer:
        """The answer of ``context`` once its partitions were ``read``: the session's state is
        updated here, when the answer is final, not while a fetch waits for data."""
        if context.error:
            return Answer(context.error, NO_SESSION, [])
        session = context.session
        if session is None:
            session_id = self._create(context, read, now_ms) if context.create else NO_SESSION
            return Answer(ErrorCode.NONE, session_id, read)
        if session.epoch != next_epoch(context.request_epoch):
            # Another fetch of the session came in while this one waited.
            return Answer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
        kept = []
        for w, data in read:
            key = w.key(context.by_id)
            cached = session.partitions.get(key)
            if cached is None or not cached.must_answer(data, update=True):
                continue
            kept.append((w, data))
            if data.records:
                session.partitions[key] = session.partitions.pop(key)
        return Answer(ErrorCode.NONE, session.id, kept)

    def _create(self, context: FetchContext, read: list[tuple[Wanted, PartitionData]], now_ms: int) -> int:
        size = len({w.key(context.by_id) for w, _ in read})
        if len(self.sessions) >= self.max_slots and not self._evict_for(size, now_ms):
            return NO_SESSION
        partitions: dict[Key, CachedPartition] = {}
        for w, data in read:
            partitions[w.key(context.by_id)] = CachedPartition(w, data.high_watermark, data.log_start_offset)
        session_id = self._new_id()
        session = FetchSession(session_id, context.by_id, partitions, now_ms)
        self.sessions[session_id] = session
        self._touch(session, now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id

    def _evict_for(self, size: int, now_ms: int) -> bool:
        """Makes room for a session of ``size`` partitions, as Kafka does: the least recently used
        session if it is stale, else the smallest evictable one if it is smaller."""
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - oldest.last_used_ms > EVICTION_MS:
            victim = oldest
        else:
            evictable = [s for s in self.sessions.values() if s.evictable]
            if not evictable:
                return False
            victim = min(evictable, key=lambda s: (s.cached_size, s.id))
            if size <= victim.cached_size:
                return False
        self._remove(victim.id)
        self.evictions += 1
        self._on_evict()
        return True

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        session.evictable = now_ms - session.created_ms > EVICTION_MS

    def _remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
