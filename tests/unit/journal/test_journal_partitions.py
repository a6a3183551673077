"""Which rebalance-journal partition a group's events go to, and who writes it: a single broker
keeps one partition; a cluster node writes partition p only while it owns `__consumer_offsets`
partition p, at that shard's owner epoch, and writes what is queued before handing it over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from broker.coordinators.group.service.journal_writer import JournalWriter
from broker.log_runtime.runtime import LogRuntime
from protocol.group_events import EVENTS_TOPIC, decode_event, journal_partition
from protocol.partitioning import partition_for
from protocol.record_batch import decode_records, iter_batches
from storage.config import LogConfig
from tests.unit.coordinators.group.core.harness import Harness

PARTITIONS = 5


def group_in(partition: int, prefix: str) -> str:
    return next(g for i in range(1000) if journal_partition(g := f"{prefix}-{i}", PARTITIONS) == partition)


def events_of(group: str) -> list[Any]:
    h = Harness()
    (m,), _ = h.stable(group=group)
    h.leave(group, [(m, None)])
    assert h.events
    return list(h.events)


def on_disk(data_dir: Path, partition: int) -> list[tuple[int, str]]:
    """(partition leader epoch, group) of every journal record of one partition, as on disk."""
    out = []
    for log in sorted((data_dir / f"{EVENTS_TOPIC}-{partition}").glob("*.log")):
        for batch in iter_batches(log.read_bytes(), verify_crc=False):
            for record in decode_records(batch):
                event = decode_event(record.value)
                assert event is not None
                out.append((batch.partition_leader_epoch, event["group"]))
    return out


def test_a_group_goes_to_partition_0_alone_or_to_the_index_of_its_offsets_partition() -> None:
    for group in ["", "g", "orders-consumers", "ü-gruppe", *(f"group-{i}" for i in range(200))]:
        assert journal_partition(group, 1) == 0
        assert journal_partition(group, 50) == partition_for(group, 50)
    # Spread like the groups' shards: every partition gets some of 200 groups.
    assert {journal_partition(f"group-{i}", 50) for i in range(200)} == set(range(50))


async def durable(writer: JournalWriter, partition: int) -> None:
    """Until what was handed to the partition's log is written (a pass of the log runtime)."""
    done = trio.Event()
    writer.parts[partition].when_durable(lambda _ok: done.set())
    with trio.fail_after(5):
        await done.wait()


def make_writer(tmp_path: Path, *, clustered: bool) -> tuple[LogRuntime, JournalWriter]:
    from broker.topics.catalog import TopicCatalog

    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None)
    catalog = TopicCatalog(tmp_path, PARTITIONS)
    writer = JournalWriter(runtime, catalog, retention_ms=86_400_000, segment_bytes=1 << 20, enabled=True,
                           partitions=PARTITIONS if clustered else 1, clustered=clustered)
    return runtime, writer


@pytest.mark.trio
async def test_a_cluster_node_writes_only_the_partitions_of_the_shards_it_owns(tmp_path: Path) -> None:
    runtime, writer = make_writer(tmp_path, clustered=True)
    assert writer.partitions == PARTITIONS
    mine, handed, foreign = group_in(1, "mine"), group_in(3, "handed"), group_in(2, "foreign")
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        writer.gain(1, 7)
        writer.gain(3, 9)
        # Queued while the partitions open (a shard's load writes before its journal is open).
        writer.write(events_of(mine) + events_of(handed) + events_of(foreign))
        with trio.fail_after(5):
            while not {1, 3} <= writer.parts.keys():  # opened on worker threads
                await trio.sleep(0.01)
        await writer.hand_over()
        await durable(writer, 1)
        # Queued and not yet handed over: the controlled hand-over writes it before closing.
        writer.write(events_of(handed))
        await writer.release(3)
        writer.write(events_of(handed))  # no longer this node's: dropped
        writer.lose(1)
        writer.write(events_of(mine))
        await writer.hand_over()
        nursery.cancel_scope.cancel()
    writer.close()
    runtime.close()
    count = len(events_of(mine))
    assert on_disk(tmp_path, 1) == [(7, mine)] * count
    assert on_disk(tmp_path, 3) == [(9, handed)] * (2 * count)
    assert on_disk(tmp_path, 2) == []


@pytest.mark.trio
async def test_a_single_broker_keeps_one_partition_for_every_group(tmp_path: Path) -> None:
    runtime, writer = make_writer(tmp_path, clustered=False)
    groups = [group_in(p, "solo") for p in range(PARTITIONS)]
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        writer.open()
        for group in groups:
            writer.write(events_of(group))
        await writer.hand_over()
        await durable(writer, 0)
        nursery.cancel_scope.cancel()
    writer.close()
    runtime.close()
    assert writer.partitions == 1
    assert {group for _, group in on_disk(tmp_path, 0)} == set(groups)
    assert not (tmp_path / f"{EVENTS_TOPIC}-1").exists()
