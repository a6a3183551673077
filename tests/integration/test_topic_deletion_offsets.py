"""Deleting a topic deletes its committed offsets in every group, as Kafka does: OffsetFetch no
longer returns them, `kcoord dump-log` shows the tombstones, and a restart replays to the same."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.coordinators.group.core.base.partitioning import partition_for
from testkit.kcoord import ROOT
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.offsets import committed

pytestmark = pytest.mark.timeout(120)

GROUPS = ["audit", "billing", "search"]  # three groups on three different shards


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()




def dumped_offsets(data_dir: Any, group: str) -> list[tuple[str, int, int | None]]:
    """(topic, partition, offset or None for a tombstone) of the group's offset records, in log
    order, as `kcoord dump-log --json` decodes its shard's segments."""
    shard = data_dir / f"__consumer_offsets-{partition_for(group)}"
    out = subprocess.run([sys.executable, "-m", "kcoord", "dump-log", "--json", str(shard)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    found = []
    for line in out.splitlines():
        for rec in json.loads(line).get("records", []):
            key = rec.get("key")
            if key and key["type"] in ("0", "1") and key["data"]["group"] == group:
                payload = rec["payload"]
                found.append((key["data"]["topic"], key["data"]["partition"],
                              None if payload is None else payload["data"]["offset"]))
    return found


@pytest.mark.slow  # the restart after a kill recovers all 50 offsets partitions (~10-20 s here)
def test_deleting_a_topic_deletes_its_offsets_in_every_group_durably(broker_factory: Any) -> None:
    assert len({partition_for(g) for g in GROUPS}) == len(GROUPS)
    broker = broker_factory()
    create_topic(broker.bootstrap, "doomed", 3)
    create_topic(broker.bootstrap, "kept", 1)
    for i, group in enumerate(GROUPS):
        commit(broker.bootstrap, group, {("doomed", 0): 10 + i, ("doomed", 2): 20 + i, ("kept", 0): 30 + i})

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(15)

    for i, group in enumerate(GROUPS):
        assert committed(broker.bootstrap, group) == {("kept", 0): 30 + i}
        assert dumped_offsets(broker.data_dir, group) == [
            ("doomed", 0, 10 + i), ("doomed", 2, 20 + i), ("kept", 0, 30 + i),
            ("doomed", 0, None), ("doomed", 2, None),
        ]

    # Replay after a crash agrees; a topic recreated under the same name starts with no offsets.
    broker.kill()
    broker = broker_factory(data_dir=broker.data_dir)
    create_topic(broker.bootstrap, "doomed", 3)
    for i, group in enumerate(GROUPS):
        assert committed(broker.bootstrap, group) == {("kept", 0): 30 + i}
