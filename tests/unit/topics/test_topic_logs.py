"""Topic logs without a server: group commit and the high watermark, fetch wake-ups, producer
state rebuilt from the log, retention, and end offsets read from a data dir."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.handlers.fetch import below
from broker.handlers.produce import Rejected, inspect_batch, stamp_log_append_time
from broker.log_runtime.runtime import BatchWrite, LogRuntime
from broker.topics.catalog import OFFSETS_TOPIC, TopicCatalog
from broker.topics.partitions import TopicLogs, topic_log_config
from protocol.errors import ErrorCode
from protocol.record_batch import build_simple_batch, iter_batches, read_batch
from storage.config import LogConfig
from storage.end_offsets import partition_end_offset, topic_end_offsets


def make_logs(tmp_path: Path, sync: bool = True) -> TopicLogs:
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=sync, flush_interval_ms=10, cleaner_backoff_ms=None)
    return TopicLogs(runtime, TopicCatalog(tmp_path, 3), max_message_bytes=1 << 20)


async def start(nursery: trio.Nursery, tl: TopicLogs) -> None:
    await nursery.start(tl.runtime.run)
    await nursery.start(tl.run)


def batch(n: int, ts: int = 1_000, pid: int = -1, seq: int = -1) -> bytes:
    return build_simple_batch([(None, b"v%d" % i, ts + i) for i in range(n)], producer_id=pid, producer_epoch=0,
                              base_sequence=seq)


@pytest.mark.trio
async def test_sync_policy_shows_records_only_after_the_flush(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    topic = tl.catalog.create("t", 1)
    async with trio.open_nursery() as nursery:
        await start(nursery, tl)
        tl.create_topic(topic)
        state = tl.get("t", 0)
        assert state is not None
        woken = trio.Event()
        state.part.watchers.add(woken)
        done: list[int] = []
        append = BatchWrite(batch(3), 0, lambda: done.append(state.high_watermark))
        tl.submit(state, append)
        assert state.high_watermark == 0  # queued, not yet written
        with trio.fail_after(5):
            await woken.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert done == [3] and state.high_watermark == 3 and state.log.recovery_point == 3
        assert (append.first, append.last, append.error) == (0, 2, None)
        nursery.cancel_scope.cancel()
    tl.runtime.close()


@pytest.mark.trio
async def test_interval_policy_shows_records_at_once(tmp_path: Path) -> None:
    tl = make_logs(tmp_path, sync=False)
    tl.catalog.create("t", 1)
    async with trio.open_nursery() as nursery:
        await start(nursery, tl)
        state = tl.get("t", 0)
        assert state is not None
        tl.submit(state, BatchWrite(batch(2), 0, lambda: None))
        with trio.fail_after(5):
            while state.high_watermark < 2:
                await trio.sleep(0.001)
        with trio.fail_after(5):
            while state.log.recovery_point < 2:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    tl.runtime.close()


def test_reopening_restores_logs_and_producer_state(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    tl.catalog.create("t", 2)
    state = tl.get("t", 1)
    assert state is not None
    for i in range(3):
        first, last = state.log.append_batch(batch(4, ts=int(time.time() * 1000), pid=9, seq=i * 4))
        state.producers.record(9, 0, i * 4, i * 4 + 3, first, last, 0)
    tl.runtime.close()

    again = make_logs(tmp_path)
    assert again.open_all() == 1
    reopened = again.get("t", 1)
    assert reopened is not None and reopened.high_watermark == 12
    dup = reopened.producers.check(9, 0, 8, 11).duplicate
    assert dup is not None and (dup.first_offset, dup.last_offset) == (8, 11)
    assert again.producer_ids.next_id() > 9
    again.runtime.close()


def test_deleting_a_topic_removes_its_directories(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    topic = tl.catalog.create("gone", 2)
    tl.create_topic(topic)
    assert (tmp_path / "gone-0").is_dir() and (tmp_path / "gone-1").is_dir()
    state = tl.get("gone", 0)
    assert state is not None
    tl.catalog.delete("gone")
    tl.delete_topic("gone")
    assert state.deleted and not list(tmp_path.glob("gone-*"))
    assert tl.get("gone", 0) is None
    tl.runtime.close()


def test_retention_by_size_drops_old_segments(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    tl.catalog.create("r", 1, {"segment.bytes": "2000", "retention.bytes": "3000"})
    state = tl.get("r", 0)
    assert state is not None and state.log.config.retention_bytes == 3000
    for _ in range(30):
        state.log.append_batch(batch(10))
    before = state.log.segment_count
    trio.run(tl.runtime._retain_all)
    assert state.log.segment_count < before
    assert state.log.size_bytes <= 3000 + 2000
    assert state.log.log_start_offset > 0 and state.log.end_offset == 300
    tl.runtime.close()


def test_topic_configs_override_broker_defaults_and_bad_values_are_refused() -> None:
    base = LogConfig(segment_bytes=1 << 20, retention_ms=1000)
    cfg = topic_log_config(base, {"retention.ms": "-1", "max.message.bytes": "5", "cleanup.policy": "compact"})
    assert cfg.retention_ms == -1 and cfg.segment_bytes == 1 << 20 and cfg.compact
    with pytest.raises(ValueError):
        topic_log_config(base, {"segment.bytes": "lots"})
    with pytest.raises(ValueError):
        topic_log_config(base, {"cleanup.policy": "shred"})
    with pytest.raises(ValueError):
        topic_log_config(base, {"max.message.bytes": "big"})
    with pytest.raises(ValueError):
        topic_log_config(base, {"message.timestamp.type": "Whenever"})


def test_end_offsets_are_read_from_a_data_dir_without_a_broker(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    tl.catalog.create("a", 2, {"segment.bytes": "4096", "index.interval.bytes": "100"})
    tl.catalog.create("b", 1)
    a0, a1, b0 = tl.get("a", 0), tl.get("a", 1), tl.get("b", 0)
    assert a0 and a1 and b0
    for _ in range(50):
        a0.log.append_batch(batch(7))
    b0.log.append_batch(batch(1))
    assert a0.log.segment_count > 1
    (tmp_path / f"{OFFSETS_TOPIC}-0").mkdir()
    live = topic_end_offsets(tmp_path)  # while the broker runs (indexes preallocated)
    tl.runtime.close()
    assert live == topic_end_offsets(tmp_path) == {("a", 0): 350, ("a", 1): 0, ("b", 0): 1}
    # A torn tail (a crash mid-write) is not counted.
    seg = sorted((tmp_path / "a-0").glob("*.log"))[-1]
    with open(seg, "ab") as fh:
        fh.write(batch(5)[:30])
    assert partition_end_offset(tmp_path / "a-0") == 350


def test_inspect_batch_rejects_what_kafka_rejects() -> None:
    good = batch(3)
    assert inspect_batch(good, 1 << 20).records_count == 3

    def code(raw: bytes | None, limit: int = 1 << 20) -> int:
        with pytest.raises(Rejected) as exc:
            inspect_batch(raw, limit)
        return exc.value.error_code

    flipped = bytearray(good)
    flipped[-1] ^= 1
    huge = bytearray(good)
    huge[8:12] = (10_000_000).to_bytes(4, "big")
    assert code(bytes(flipped)) == ErrorCode.CORRUPT_MESSAGE
    assert code(bytes(huge)) == ErrorCode.INVALID_RECORD
    assert code(good + good) == ErrorCode.INVALID_RECORD
    assert code(None) == ErrorCode.INVALID_RECORD
    assert code(good, limit=len(good) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    control = build_simple_batch([(None, b"v", 1)], producer_id=1, producer_epoch=0, transactional=True, control=True)
    assert code(control) == ErrorCode.INVALID_RECORD  # only the coordinator writes markers
    txn = build_simple_batch([(None, b"v", 1)], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    assert inspect_batch(txn, 1 << 20).is_transactional


def test_log_append_time_changes_only_the_header_and_keeps_a_valid_crc() -> None:
    stamped = stamp_log_append_time(batch(3), 5_000_000)
    b = read_batch(stamped)  # verifies the CRC
    assert b.log_append_time and b.max_timestamp == 5_000_000 and b.base_timestamp == 1_000


def test_fetch_data_is_cut_at_the_high_watermark() -> None:
    data = b"".join(build_simple_batch([(None, b"x", 1)] * 2, base_offset=o) for o in (0, 2, 4))
    assert [b.base_offset for b in iter_batches(below(data, 4))] == [0, 2]
    assert below(data, 6) == data and below(data, 0) == b""


def test_segment_files_are_kafkas(tmp_path: Path) -> None:
    tl = make_logs(tmp_path)
    tl.catalog.create("k", 1)
    state = tl.get("k", 0)
    assert state is not None
    state.log.append_batch(batch(1))
    tl.runtime.close()
    names = sorted(os.listdir(tmp_path / "k-0"))
    assert "00000000000000000000.log" in names and "partition.metadata" in names
