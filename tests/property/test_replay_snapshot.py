"""Loading from a replay snapshot leaves a shard exactly as replaying the whole log does, and a
snapshot that does not match the log (damaged, cut short, stale, from before a compaction) or was
never finished is ignored."""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    encode_record,
)
from broker.coordinators.group.core.consumer import records as cg
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service import replay_snapshot
from broker.coordinators.group.service.replay_snapshot import ReplaySnapshot, SnapshotRejected
from protocol.messages.offsets_log import GroupMetadataValue, OffsetCommitValue
from protocol.record_batch import decode_records
from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog

SMALL_SEGMENTS = LogConfig(segment_bytes=600, cleanup_policy="compact", delete_retention_ms=0)
_dirs = itertools.count()


class AnyTopic:
    def partition_count(self, topic: str) -> int | None:
        return 8


def new_shard() -> GroupCoordinatorShard:
    return GroupCoordinatorShard(0, CoordinatorConfig(num_partitions=1), AnyTopic(), lambda p: f"{p}-id")


def group_value(ts: int, members: int) -> Any:
    return GroupMetadataValue(protocol_type="consumer", generation=ts % 7, protocol="range" if members else None,
                              leader="m0" if members else None, current_state_timestamp=ts, members=[
        GroupMetadataValue.MemberMetadata(member_id=f"m{i}", group_instance_id=None, client_id="c",
                                          client_host="/h", rebalance_timeout=1000, session_timeout=6000,
                                          subscription=b"", assignment=b"") for i in range(members)])


groups = st.sampled_from(["a", "b", "c", "k1", "k2"])
event = st.tuples(
    st.sampled_from(["commit", "commit", "commit", "delete-offset", "group", "delete-group", "cgroup",
                     "cgroup-delete", "target-epoch", "target-epoch-delete", "regex", "regex-delete"]),
    groups, st.integers(0, 2), st.integers(0, 1000))


def to_record(kind: str, group: str, n: int, value: int, ts: int) -> Any:
    if kind == "commit":
        return OffsetCommitRecord(group, "t", n, OffsetCommitValue(offset=value, leader_epoch=-1, metadata=f"m{value}",
                                                                   commit_timestamp=ts, expire_timestamp=-1))
    if kind == "delete-offset":
        return OffsetCommitRecord(group, "t", n, None)
    if kind == "group":
        return GroupMetadataRecord(group, group_value(ts, n))
    if kind == "delete-group":
        return GroupMetadataRecord(group, None)
    if kind == "cgroup":
        return cg.group_epoch(group, value, n)
    if kind == "cgroup-delete":
        return cg.group_tombstone(group)
    if kind == "target-epoch":
        return cg.target_epoch(group, value)
    if kind == "target-epoch-delete":
        return cg.target_epoch_tombstone(group)
    if kind == "regex":
        return cg.regular_expression(group, f"^t{n}.*", frozenset({f"t{n}"}), value, ts)
    return cg.regular_expression_tombstone(group, f"^t{n}.*")


def view(shard: GroupCoordinatorShard) -> Any:
    state: Any = shard.state
    classic = {g: (grp.state.value, grp.state_timestamp, grp.generation, sorted(grp.members))
               for g, grp in state.groups.items()}
    consumer = {g: (grp.group_epoch, grp.metadata_hash, grp.assignment_epoch, sorted(grp._resolved_regexes.items()))
                for g, grp in state.consumer_groups.items()}
    return shard.snapshot(), classic, consumer, state.replay_anomalies


def append(log: PartitionLog, events: list[tuple[str, str, int, int]], batch_size: int, ts0: int) -> None:
    entries = [encode_record(to_record(kind, g, n, v, ts0 + i)) for i, (kind, g, n, v) in enumerate(events)]
    for i in range(0, len(entries), batch_size):
        log.append([(k, v, ts0 + i) for k, v in entries[i : i + batch_size]])
    log.flush()


def full_replay(log: PartitionLog) -> Any:
    shard = new_shard()
    for batch in log.batches():
        for rec in decode_records(batch):
            parsed = decode_record(rec.key, rec.value)
            if parsed is not None:
                shard.replay(parsed, batch.base_offset + rec.offset_delta)
    return view(shard)


def fast_load(log: PartitionLog) -> tuple[Any, ReplaySnapshot | None]:
    """What the broker does: the snapshot if it holds, else nothing, then replay."""
    try:
        snapshot = replay_snapshot.read(log, 0)
    except SnapshotRejected:
        snapshot = None
    shard = new_shard()
    loaded = replay_snapshot.load(snapshot, log, shard.replay)
    assert loaded.snapshot_records == (snapshot.records if snapshot is not None else 0)
    return view(shard), snapshot


def new_log(tmp_path: Path, config: LogConfig | None = None) -> PartitionLog:
    log, _ = PartitionLog.open(tmp_path / f"log-{next(_dirs)}", config or LogConfig.offsets_topic())
    return log


def snap(log: PartitionLog) -> ReplaySnapshot:
    previous = None
    with contextlib.suppress(SnapshotRejected):
        previous = replay_snapshot.read(log, 0)
    snapshot = replay_snapshot.build(log, 0, previous)
    assert snapshot is not None
    replay_snapshot.write(log, snapshot)
    return snapshot


event_lists = st.lists(event, min_size=1, max_size=40)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(event_lists, min_size=1, max_size=4), tail=st.lists(event, max_size=30),
       batch_size=st.integers(1, 6))
def test_snapshot_then_tail_equals_full_replay(tmp_path: Path, parts: list[list[tuple[str, str, int, int]]],
                                               tail: list[tuple[str, str, int, int]], batch_size: int) -> None:
    """Snapshots taken one after another (each from the previous one plus the log after it), then
    more records: loading equals replaying every record, and the snapshot is what was used."""
    log = new_log(tmp_path)
    ts = 1000
    for part in parts:
        append(log, part, batch_size, ts)
        ts += len(part)
        snapshot = snap(log)
        assert snapshot.end_offset == log.end_offset
    append(log, tail, batch_size, ts)
    loaded, used = fast_load(log)
    assert used is not None and used.end_offset == log.end_offset - len(tail)
    assert loaded == full_replay(log)
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=event_lists, more=event_lists, data=st.data())
def test_damaged_or_cut_snapshot_is_ignored(tmp_path: Path, events: list[tuple[str, str, int, int]],
                                            more: list[tuple[str, str, int, int]], data: st.DataObject) -> None:
    log = new_log(tmp_path)
    append(log, events, 3, 1000)
    snap(log)
    append(log, more, 3, 5000)
    path = replay_snapshot.path_of(log)
    raw = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="flip"):
        i = data.draw(st.integers(0, len(raw) - 1), label="byte")
        raw[i] ^= data.draw(st.integers(1, 255), label="xor")
    else:
        del raw[data.draw(st.integers(0, len(raw) - 1), label="cut at"):]
    path.write_bytes(bytes(raw))
    with pytest.raises(SnapshotRejected):
        replay_snapshot.read(log, 0)
    loaded, used = fast_load(log)
    assert used is None
    assert loaded == full_replay(log)
    log.close()


def test_snapshot_of_another_log_or_partition_is_ignored(tmp_path: Path) -> None:
    events = [("commit", "a", p, p) for p in range(3)]
    one, other = new_log(tmp_path), new_log(tmp_path)
    append(one, events, 2, 1000)
    append(other, [("commit", "b", 0, 7), *events[1:]], 2, 1000)
    snap(one)
    os.replace(replay_snapshot.path_of(one), replay_snapshot.path_of(other))
    with pytest.raises(SnapshotRejected, match="changed"):
        replay_snapshot.read(other, 0)
    with pytest.raises(SnapshotRejected, match="partition"):
        snap(other)
        replay_snapshot.read(other, 1)
    one.close()
    other.close()


def test_a_log_cut_below_the_snapshot_makes_it_stale(tmp_path: Path) -> None:
    """What recovery does to a damaged tail: the snapshot covered records the log lost."""
    log = new_log(tmp_path)
    append(log, [("commit", "a", 0, i) for i in range(10)], 2, 1000)
    snapshot = snap(log)
    directory = log.directory
    log.close()
    segment = directory / "00000000000000000000.log"
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 10)
    log, _ = PartitionLog.open(directory, LogConfig.offsets_topic())
    assert log.end_offset < snapshot.end_offset
    loaded, used = fast_load(log)
    assert used is None
    assert loaded == full_replay(log)
    log.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, min_size=5, max_size=60), tail=st.lists(event, max_size=10))
def test_compaction_below_the_snapshot_never_changes_what_loads(tmp_path: Path,
                                                                 events: list[tuple[str, str, int, int]],
                                                                 tail: list[tuple[str, str, int, int]]) -> None:
    """After the cleaner rewrites segments the snapshot covered, it is ignored (or still matches
    byte for byte); either way loading equals replaying the log as it now is."""
    log = new_log(tmp_path, SMALL_SEGMENTS)
    append(log, events, 2, 1000)
    before = snap(log)
    log.roll()
    append(log, tail, 2, 9000)
    clean(log, now_ms=10**13, force=True)
    loaded, used = fast_load(log)
    assert loaded == full_replay(log)
    if used is not None:
        assert used.coverage == before.coverage
    log.close()


def test_an_unfinished_write_leaves_the_previous_snapshot(tmp_path: Path) -> None:
    """A crash while writing leaves the temporary file half written and the previous snapshot in
    place: the previous one is used, the temporary one never read."""
    log = new_log(tmp_path)
    append(log, [("commit", "a", 0, i) for i in range(6)], 2, 1000)
    first = snap(log)
    append(log, [("group", "g", 1, 5), ("commit", "b", 1, 9)], 2, 2000)
    newer = replay_snapshot.build(log, 0, first)
    assert newer is not None
    path = replay_snapshot.path_of(log)
    whole = len(newer.to_bytes())
    (path.parent / (path.name + ".tmp")).write_bytes(newer.to_bytes()[: whole // 2])
    loaded, used = fast_load(log)
    assert used is not None and used.end_offset == first.end_offset
    assert loaded == full_replay(log)
    # Without any finished snapshot: a full replay.
    path.unlink()
    loaded, used = fast_load(log)
    assert used is None
    assert loaded == full_replay(log)
    log.close()


def test_nothing_new_writes_nothing_and_transactions_are_not_snapshotted(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    assert replay_snapshot.build(log, 0, None) is None  # an empty log
    append(log, [("commit", "a", 0, 1)], 1, 1000)
    first = snap(log)
    assert replay_snapshot.build(log, 0, first) is None  # nothing past it
    from protocol.record_batch import build_simple_batch
    key, value = encode_record(to_record("commit", "a", 1, 2, 1))
    raw = bytearray(build_simple_batch([(key, value, 1)], 0))
    raw[21 + 1] |= 0x10  # the transactional attribute; the CRC is recomputed below
    from crc32c import crc32c
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    log.append_batch(bytes(raw))
    log.flush()
    assert replay_snapshot.build(log, 0, first) is None
    log.close()
