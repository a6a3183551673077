"""Restarts load from the replay snapshot plus the log after it, lose no acknowledged commit, and
fall back to the whole log when the snapshot is damaged."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from broker.coordinators.group.service.replay_snapshot import FILE_NAME
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic

pytestmark = pytest.mark.timeout(180)

TOPIC = "orders"
PARTITIONS = 6
Offsets = dict[tuple[str, int], int]


def commit_all(port: int, groups: list[str], base: int) -> dict[str, Offsets]:
    """Commits an offset for every partition of every group; returns those acknowledged."""
    acked: dict[str, Offsets] = {}
    with WireClient("127.0.0.1", port) as c:
        for i, group in enumerate(groups):
            resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[OffsetCommitRequest.Topic(
                    name=TOPIC, partitions=[OffsetCommitRequest.Topic.Partition(
                        partition_index=p, committed_offset=base + 10 * i + p, committed_metadata=f"m{base}")
                        for p in range(PARTITIONS)])]))
            for part in resp.topics[0].partitions:
                if part.error_code == 0:
                    acked.setdefault(group, {})[(TOPIC, part.partition_index)] = base + 10 * i + part.partition_index
    return acked


def fetched(port: int, group: str) -> Offsets:
    with WireClient("127.0.0.1", port) as c:
        resp = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id=group, topics=None))
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def loaded_event(broker: BrokerProcess) -> dict[str, str]:
    lines = [line for line in broker.log().splitlines() if " shards.loaded " in line]
    assert lines, broker.log()
    return dict(re.findall(r"(\w+)=(\S+)", lines[-1]))


def load_records(broker: BrokerProcess) -> dict[str, float]:
    """kcoord_shard_load_records summed over partitions, by source."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {"snapshot": 0.0, "log": 0.0}
    for source, value in re.findall(r'^kcoord_shard_load_records\{[^}]*source="(\w+)"[^}]*\} (\S+)$', text, re.M):
        out[source] += float(value)
    return out


def snapshots(data: Path) -> list[Path]:
    return sorted(data.glob(f"__consumer_offsets-*/{FILE_NAME}"))


def test_restart_after_kill_loads_snapshot_and_tail_with_every_acknowledged_commit(
        broker_factory: object, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first: BrokerProcess = broker_factory(data_dir=data)  # type: ignore[operator]
    create_topic(first.bootstrap, TOPIC, PARTITIONS)
    groups = [f"billing-{i}" for i in range(12)]
    acked = commit_all(first.port, groups, 100)
    assert sum(len(v) for v in acked.values()) == len(groups) * PARTITIONS
    assert first.stop() == 0
    written = snapshots(data)
    assert written, "a graceful stop leaves a replay snapshot of every partition written to"

    second: BrokerProcess = broker_factory(data_dir=data)  # type: ignore[operator]
    event = loaded_event(second)
    assert int(event["from_snapshot"]) == len(written)
    assert int(event["log_records"]) == 0
    assert load_records(second)["snapshot"] >= len(groups) * PARTITIONS
    for group in groups:
        assert fetched(second.port, group) == acked[group]
    # More commits, then kill -9: they are in the log only, after the snapshot.
    later = commit_all(second.port, [*groups[:6], "audit"], 5000)
    second.kill()
    for group, offsets in later.items():
        acked.setdefault(group, {}).update(offsets)

    third: BrokerProcess = broker_factory(data_dir=data)  # type: ignore[operator]
    event = loaded_event(third)
    assert int(event["from_snapshot"]) >= 1
    assert int(event["log_records"]) >= 7 * PARTITIONS
    counts = load_records(third)
    assert counts["snapshot"] > 0 and counts["log"] >= 7 * PARTITIONS
    for group, offsets in acked.items():
        assert fetched(third.port, group) == offsets
    third.kill()

    # A damaged snapshot is ignored (said once per partition) and the whole log replayed.
    for path in snapshots(data):
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
    fourth: BrokerProcess = broker_factory(data_dir=data)  # type: ignore[operator]
    assert int(loaded_event(fourth)["from_snapshot"]) == 0
    assert fourth.log().count("replay_snapshot.ignored") == len(snapshots(data))
    assert "CRC-32C mismatch" in fourth.log()
    for group, offsets in acked.items():
        assert fetched(fourth.port, group) == offsets
