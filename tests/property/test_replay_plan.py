"""Skipping superseded records at startup leaves the shard exactly as replaying every record does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    encode_record,
)
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.replay_plan import replay_log
from protocol.messages.offsets_log import GroupMetadataValue, OffsetCommitValue
from protocol.record_batch import decode_records
from storage.config import LogConfig
from storage.partition_log import PartitionLog


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


groups = st.sampled_from(["a", "b", "c"])
event = st.one_of(
    st.tuples(st.just("commit"), groups, st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("delete-offset"), groups, st.integers(0, 2), st.just(0)),
    st.tuples(st.just("group"), groups, st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("delete-group"), groups, st.just(0), st.just(0)),
)


def to_record(kind: str, group: str, n: int, value: int, ts: int) -> Any:
    if kind == "commit":
        return OffsetCommitRecord(group, "t", n, OffsetCommitValue(offset=value, leader_epoch=-1, metadata="",
                                                                   commit_timestamp=ts, expire_timestamp=-1))
    if kind == "delete-offset":
        return OffsetCommitRecord(group, "t", n, None)
    if kind == "group":
        return GroupMetadataRecord(group, group_value(ts, n))
    return GroupMetadataRecord(group, None)


def view(shard: GroupCoordinatorShard) -> Any:
    state: Any = shard.state
    groups_view = {g: (grp.state.value, grp.state_timestamp, grp.generation, sorted(grp.members))
                   for g, grp in state.groups.items()}
    return shard.snapshot(), groups_view


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, max_size=60), batch_size=st.integers(1, 7))
def test_planned_replay_equals_full_replay(tmp_path: Path, events: list[tuple[str, str, int, int]],
                                           batch_size: int) -> None:
    directory = tmp_path / f"log-{abs(hash((tuple(events), batch_size)))}"
    log, _ = PartitionLog.open(directory, LogConfig.offsets_topic())
    entries = [encode_record(to_record(kind, g, n, v, 1000 + i)) for i, (kind, g, n, v) in enumerate(events)]
    for i in range(0, len(entries), batch_size):
        log.append([(k, v, 1000 + i) for k, v in entries[i : i + batch_size]])

    full = new_shard()
    for batch in log.batches():
        for rec in decode_records(batch):
            parsed = decode_record(rec.key, rec.value)
            if parsed is not None:
                full.replay(parsed, batch.base_offset + rec.offset_delta)
    planned = new_shard()
    read, replayed = replay_log(log.batches, planned.replay)
    log.close()
    assert read == len(entries)
    assert replayed <= read
    assert view(planned) == view(full)
