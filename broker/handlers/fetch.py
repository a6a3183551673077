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

Fetch sessions (v7+) are not kept: every answer carries session id 0, which tells clients to
keep sending full fetches. ``__consumer_offsets`` is readable like any topic (its logs belong to
the same log runtime; the coordinator shards write them), as monitoring tools expect. Nothing past
a partition's high watermark, the end of what is durable, is ever returned.

``read_committed`` (isolation level 1) reads up to the last stable offset instead (below it every
transaction is decided) and gets the aborted transactions that overlap what it reads, so that the
client drops their records; ``read_uncommitted`` reads up to the high watermark. Both see the
last stable offset in ``last_stable_offset``.
"""

from __future__ import annotations

import trio

from broker.log_runtime.runtime import Partition
from broker.network.router import Request
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.record import CorruptBatchError
from protocol.record_batch import MAGIC
from protocol.record_compression import CompressionUnavailableError
from protocol.record_conversion import UnconvertibleBatchError, down_convert, fetch_magic
from storage.errors import LogClosedError, OffsetOutOfRangeError

PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
# What a plan answers until it is evaluated (never sent: evaluation replaces it).
_EMPTY = FetchResponse(responses=[])
READ_COMMITTED = 1


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
    """One evaluation of a fetch: the response, its size, and what to wait on if it is short."""

    __slots__ = ("response", "size", "error", "states")

    def __init__(self) -> None:
        self.response = _EMPTY
        self.size = 0
        self.error = False
        self.states: list[Partition] = []


class FetchApi:
    """Fetch, over the topic logs."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog) -> None:
        self.topic_logs = topic_logs
        self.catalog = catalog

    def evaluate(self, req: Request[FetchRequest]) -> Plan:
        body = req.body
        plan = Plan()
        budget = body.max_bytes
        first = True
        committed = body.isolation_level == READ_COMMITTED
        magic = fetch_magic(req.version)
        topics = []
        for t in body.topics:
            topic = self.catalog.by_id.get(t.topic_id) if req.version >= 13 else self.catalog.get(t.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_ID if req.version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts = []
            for p in t.partitions:
                pd = PartitionData(partition_index=p.partition, error_code=0, high_watermark=-1,
                                   last_stable_offset=-1, log_start_offset=-1,
                                   aborted_transactions=[] if committed else None, preferred_read_replica=-1,
                                   records=b"")
                parts.append(pd)
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
                limit = min(p.partition_max_bytes, budget)
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
            topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
        plan.response = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
        return plan

    async def park(self, req: Request[FetchRequest], deadline: float, states: list[Partition]) -> None:
        while True:
            woken = trio.Event()
            for s in states:
                s.watchers.add(woken)
            with trio.move_on_at(deadline):
                await woken.wait()
            for s in states:
                s.watchers.discard(woken)
            plan = self.evaluate(req)
            if plan.size >= req.body.min_bytes or plan.error or trio.current_time() >= deadline:
                req.reply.set(plan.response)
                return
            states = plan.states

    def fetch(self, req: Request[FetchRequest]) -> None:
        body = req.body
        if req.version >= 7 and (body.session_id != 0 or body.session_epoch not in (-1, 0)):
            # Incremental fetches need a session this broker never handed out.
            req.reply.set(FetchResponse(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                                        session_id=0, responses=[]))
            return
        plan = self.evaluate(req)
        if plan.size >= body.min_bytes or plan.error or body.max_wait_ms <= 0 or not body.topics:
            req.reply.set(plan.response)
            return
        self.topic_logs.spawn(self.park, req, trio.current_time() + body.max_wait_ms / 1000, plan.states)
