"""A write that reached the log but could not be acknowledged (its fence found lapsed once the
data was flushed) fails the partition until its log is reopened. Meanwhile an idempotent producer's
next batches must get a retriable error, never a judgement of their sequence numbers: librdkafka
takes OUT_OF_ORDER_SEQUENCE_NUMBER behind a failed request as skipped sequences, bumps its epoch and
sends again, under new sequences, records the failed write had stored (duplicates the fault checker
found). After the reopen the retried batch is recognised from the log as a duplicate."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from broker.handlers.produce import Rejected, outcome, submit
from broker.log_runtime.runtime import BatchWrite, LogRuntime
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import PartitionState, TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceResponse
from protocol.record_batch import build_simple_batch
from storage.config import LogConfig

PID = 7
PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def batch(seq: int, n: int = 3) -> bytes:
    now = int(time.time() * 1000)  # producers of batches older than the expiration are forgotten
    return build_simple_batch([(None, b"v%d" % (seq + i), now) for i in range(n)], producer_id=PID,
                              producer_epoch=0, base_sequence=seq)


async def send(tl: TopicLogs, state: PartitionState, seq: int) -> tuple[int, int]:
    """(error code, base offset) of the producer's batch at ``seq``, once it is answered."""
    resp = PartitionResponse(index=0, error_code=0, base_offset=-1)
    answered = trio.Event()
    try:
        queued = submit(tl, state, batch(seq), resp, answered.set)
    except Rejected as exc:
        return exc.error_code, -1
    if not isinstance(queued, BatchWrite):  # a duplicate: answered with the original's offsets
        return resp.error_code, resp.base_offset
    with trio.fail_after(10):
        await answered.wait()
    code, _message = outcome(queued)
    return code, queued.first if code == 0 else -1


@pytest.mark.trio
async def test_a_failed_write_in_the_log_is_a_duplicate_after_the_reopen_and_nothing_is_judged_before(
        tmp_path: Path) -> None:
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None)
    tl = TopicLogs(runtime, TopicCatalog(tmp_path, 1), max_message_bytes=1 << 20)
    tl.catalog.create("t", 1)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        await nursery.start(tl.run)
        state = tl.get("t", 0)
        assert state is not None
        assert await send(tl, state, 0) == (0, 0)

        # The next write reaches the file, then the node finds it may no longer write (a lease
        # renewal late): the write is in the log, and not acknowledged.
        log, log_flush = state.log, state.log.flush
        trusted = [True]
        runtime.may_write = lambda: trusted[0]

        def flush_then_lapse() -> None:
            log_flush()
            log.flush = log_flush  # type: ignore[method-assign]  (once)
            trusted[0] = False

        log.flush = flush_then_lapse  # type: ignore[method-assign]
        assert await send(tl, state, 3) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        trusted[0] = True
        assert state.part.failed or state.part.closed

        # The producer's next batch, pipelined behind the failed one, while the log is reopened.
        assert await send(tl, state, 6) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        with trio.fail_after(10):
            while state.part.failed or state.part.closed:
                await trio.sleep(0.01)

        # The producer retries both with their sequences: the stored one is a duplicate, answered
        # with its offsets; the other follows it.
        assert await send(tl, state, 3) == (0, 3)
        assert await send(tl, state, 6) == (0, 6)
        assert [b.base_offset for b in state.log.batches(0)] == [0, 3, 6]
        nursery.cancel_scope.cancel()
    runtime.close()
