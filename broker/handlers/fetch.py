"""Fetch: stored batches from the requested offsets, up to the high watermark.

Limits follow Kafka: ``max_bytes`` for the response and ``partition_max_bytes`` per partition,
except that the first partition with data returns at least one whole batch however large (so a
big batch can never wedge a consumer). When less than ``min_bytes`` is available the request
is parked until an append moves the high watermark of one of its partitions or ``max_wait_ms``
passes; nothing polls.

Fetch v0-3 come from clients that read only the old message formats: what they get is
down-converted (magic 0 for v0-1, magic 1 for v2-3) as Kafka brokers before 4.0 did it, see
``protocol.record_conversion``; a zstd batch, which those formats cannot carry, answers the
partition with UNSUPPORTED_COMPRESSION_TYPE.

Fetch sessions (v7+, KIP-227) are kept as Kafka keeps them (``broker.topics.fetch_sessions``):
a full fetch of epoch 0 opens one, later fetches name only what changed and are answered with only
the partitions that have something new. An answer a quota throttles is emptied after the session
noted what it told (``broker.quotas.enforcement``); the records it held are answered again (a
partition with records is always answered), only a moved high watermark or log start without
records to go with it stays untold until it moves again. ``__consumer_offsets`` is readable like any topic (its logs belong to
the same log runtime; the coordinator shards write them), as monitoring tools expect. Nothing past
a partition's high watermark, the end of what is durable, is ever returned.

``read_committed`` (isolation level 1) reads up to the last stable offset instead (below it every
transaction is decided) and gets the aborted transactions that overlap what it reads, so that the
client drops their records; ``read_uncommitted`` reads up to the high watermark. Both see the
last stable offset in ``last_stable_offset``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from broker.log_runtime.runtime import Partition
from broker.network.router import Request
from broker.security.acl_model import Operation, ResourceType
from broker.security.authorizer import Authorizer
from broker.topics.catalog import TopicCatalog
from broker.topics.fetch_sessions import Answer, FetchContext, FetchSessionCache, Key, Wanted
from broker.topics.partitions import TopicLogs
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.record import CorruptBatchError
from protocol.record_batch import MAGIC
from protocol.record_compression import CompressionUnavailableError
from protocol.record_conversion import UnconvertibleBatchError, down_convert, fetch_magic
from storage.errors import LogClosedError, OffsetOutOfRangeError

PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
TopicResponse = FetchResponse.FetchableTopicResponse
READ_COMMITTED = 1
ZERO_ID = bytes(16)


def below(data: bytes, high_watermark: int) -> bytes:
    """The whole batches of ``data`` that start below ``high_watermark`` (appends are whole
    batches, so the high watermark is always a batch boundary)."""
    pos = 0
    n = len(data)
    while pos + 12 <= n:
        if int.from_bytes(data[pos : pos + 8], "big", signed=True) >= high_watermark:
            break
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
    return data if pos >= n else data[:pos]


def next_offset(data: bytes) -> int:
    """The offset after the last whole batch of ``data`` (-1 when it holds none)."""
    pos, n, after = 0, len(data), -1
    while pos + 27 <= n:
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + length > n:
            break
        base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        after = base + int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True) + 1
        pos += 12 + length
    return after


def for_old_reader(data: bytes, magic: int, fetch_offset: int) -> bytes | int:
    """``data`` in message format ``magic``, or the partition's error code when it cannot be."""
    try:
        return down_convert(data, magic, fetch_offset)
    except (UnconvertibleBatchError, CompressionUnavailableError):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    except CorruptBatchError:
        return ErrorCode.CORRUPT_MESSAGE
    except DecodeError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class Plan:
    """One evaluation of a fetch: each partition's answer, their size, and what to wait on if it
    is short."""

    __slots__ = ("read", "size", "error", "states")

    def __init__(self) -> None:
        self.read: list[tuple[Wanted, PartitionData]] = []
        self.size = 0
        self.error = False
        self.states: list[Partition] = []


def wanted(body: FetchRequest, version: int) -> list[Wanted]:
    """The partitions a request names, in its order."""
    return [Wanted(t.topic if version < 13 else "", t.topic_id if version >= 13 else ZERO_ID, p.partition,
                   p.fetch_offset, p.partition_max_bytes)
            for t in body.topics for p in t.partitions]


def forgotten(body: FetchRequest, version: int) -> list[Key]:
    return [(t.topic_id if version >= 13 else t.topic, p) for t in body.forgotten_topics_data for p in t.partitions]


def response(answer: Answer, by_id: bool) -> FetchResponse:
    """The Fetch answer: partitions of one topic that follow each other share its entry, as in
    Kafka's answers."""
    topics: list[TopicResponse] = []
    last: str | bytes | None = None
    for w, data in answer.partitions:
        topic = w.topic_id if by_id else w.topic
        if not topics or topic != last:
            topics.append(TopicResponse(topic=w.topic, topic_id=w.topic_id, partitions=[]))
            last = topic
        topics[-1].partitions.append(data)
    return FetchResponse(throttle_time_ms=0, error_code=answer.error, session_id=answer.session_id,
                         responses=topics)


class FetchApi:
    """Fetch, over the topic logs."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog, sessions: FetchSessionCache,
                 clock: Callable[[], int], authorizer: Authorizer | None = None) -> None:
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.sessions = sessions
        self.clock = clock
        # The topics a request names are authorized before it gets here (request_checks); those an
        # incremental fetch reads from its session are authorized again at each fetch, as Kafka does.
        self.authorizer = authorizer

    def evaluate(self, req: Request[FetchRequest], context: FetchContext) -> Plan:
        body = req.body
        plan = Plan()
        budget = body.max_bytes
        first = True
        committed = body.isolation_level == READ_COMMITTED
        magic = fetch_magic(req.version)
        missing = ErrorCode.UNKNOWN_TOPIC_ID if req.version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        authorizer = self.authorizer if context.session is not None else None
        readable: dict[str, bool] = {}
        for p in context.partitions:
            topic = self.catalog.by_id.get(p.topic_id) if req.version >= 13 else self.catalog.get(p.topic)
            pd = PartitionData(partition_index=p.partition, error_code=0, high_watermark=-1,
                               last_stable_offset=-1, log_start_offset=-1,
                               aborted_transactions=[] if committed else None, preferred_read_replica=-1,
                               records=b"")
            plan.read.append((p, pd))
            if topic is not None and authorizer is not None and not readable.setdefault(
                    topic.name, authorizer.authorize(req.principal, req.client_host, Operation.READ,
                                                     ResourceType.TOPIC, topic.name)):
                src: Partition | int = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                src = self.topic_logs.readable(topic, p.partition) if topic is not None else missing
            if isinstance(src, int):
                # Kafka builds an unknown partition's answer from the defaults: no aborted
                # transactions is an empty list there, whatever the isolation level.
                pd.error_code = src
                pd.aborted_transactions = []
                plan.error = True
                continue
            log, hw = src.log, src.high_watermark
            plan.states.append(src)
            start = log.log_start_offset
            txns = None
            if topic is not None and not topic.internal:
                data_state = self.topic_logs.states.get((topic.name, p.partition))
                txns = data_state.txns if data_state is not None else None
            # As Kafka: never below the log start (DeleteRecords may pass an open transaction).
            lso = hw if txns is None else max(txns.last_stable_offset(hw), min(start, hw))
            pd.high_watermark = hw
            pd.last_stable_offset = lso
            visible = lso if committed else hw
            pd.log_start_offset = start
            offset = p.fetch_offset
            if offset < start or offset > log.end_offset:
                # As Kafka: an out-of-range answer carries no offsets of the log.
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                pd.high_watermark = pd.last_stable_offset = pd.log_start_offset = -1
                plan.error = True
                continue
            if offset >= visible or (budget <= 0 and not first):
                continue
            limit = min(p.max_bytes, budget)
            try:
                data = below(log.read(offset, limit), visible)
            except OffsetOutOfRangeError:
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                plan.error = True
                continue
            except LogClosedError:
                pd.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                plan.error = True
                continue
            if len(data) > limit and not first:
                continue  # a whole batch does not fit what is left; a later self.fetch gets it first
            if magic < MAGIC and data:
                converted = for_old_reader(data, magic, offset)
                if isinstance(converted, int):
                    pd.error_code = converted
                    plan.error = True
                    continue
                data = converted
            if data and committed and txns is not None and txns.aborted:
                # The aborted transactions the records returned may hold, as Kafka bounds them:
                # none that begins after the last of them.
                upper = next_offset(data)
                pd.aborted_transactions = [
                    FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction(
                        producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in txns.aborted_between(offset, visible if upper < 0 else min(upper, visible))]
            if data:
                first = False
                budget -= len(data)
                plan.size += len(data)
                pd.records = data
        return plan

    async def park(self, req: Request[FetchRequest], context: FetchContext, deadline: float,
                   states: list[Partition]) -> None:
        while True:
            woken = trio.Event()
            for s in states:
                s.watchers.add(woken)
            with trio.move_on_at(deadline):
                await woken.wait()
            for s in states:
                s.watchers.discard(woken)
            plan = self.evaluate(req, context)
            if plan.size >= req.body.min_bytes or plan.error or trio.current_time() >= deadline:
                self._answer(req, context, plan)
                return
            states = plan.states

    def fetch(self, req: Request[FetchRequest]) -> None:
        body = req.body
        context = self.sessions.open(req.version, body.session_id, body.session_epoch, wanted(body, req.version),
                                     forgotten(body, req.version) if req.version >= 7 else [], self.clock())
        if context.error:
            self._answer(req, context, Plan())
            return
        plan = self.evaluate(req, context)
        if plan.size >= body.min_bytes or plan.error or body.max_wait_ms <= 0 or not context.partitions:
            self._answer(req, context, plan)
            return
        self.topic_logs.spawn(self.park, req, context, trio.current_time() + body.max_wait_ms / 1000, plan.states)

    def _answer(self, req: Request[FetchRequest], context: FetchContext, plan: Plan) -> None:
        answer = self.sessions.answer(context, plan.read, self.clock())
        req.reply.set(response(answer, context.by_id))
