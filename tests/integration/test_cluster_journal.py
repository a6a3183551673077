"""The rebalance journal in a cluster: two nodes on one shared data dir, each journaling the groups
it coordinates into the `__kcoord_group_events` partition of the same index as the group's
`__consumer_offsets` partition; `kcoord groups --history` given either node reads each group's
events from the node that leads its partition; after `kill -9` of one node the survivor takes the
shards over and journals the moved groups into the same partitions, at its own owner epoch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.group_history import read_events
from kcoord.cli import main
from protocol.group_events import EVENTS_TOPIC, decode_event
from protocol.record_batch import decode_records, iter_batches
from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.cluster import OFFSETS, Cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


# Journal events become readable at the periodic flush: a short one keeps the test short.
CLUSTER_OVERRIDES = {"log.flush.interval.ms": "200"}


def join_and_leave(bootstrap: str, group: str, topic: str) -> None:
    """One confluent-kafka member joins (a rebalance: new member joined) and closes (member left)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300, "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"{group}: no assignment"
            consumer.poll(0.1)
    finally:
        consumer.close()


def history(capsys: Any, bootstrap: str, group: str) -> tuple[int, str]:
    """`kcoord groups --history --group <group>` given one node: (exit status, output)."""
    capsys.readouterr()
    status = main(["groups", "--bootstrap-server", bootstrap, "--history", "--group", group])
    return status, capsys.readouterr().out


def rebalance_count(capsys: Any, bootstrap: str, group: str) -> int:
    """How many rebalances `--history` shows for ``group`` (-1 when it failed: owners moving)."""
    status, out = history(capsys, bootstrap, group)
    first = out.splitlines()[0] if out else ""
    if status != 0 or not first.startswith(f"GROUP {group}: "):
        return -1
    return int(first.split()[2])


def journal_batches(partition_dir: Path) -> list[tuple[int, list[dict[str, Any]]]]:
    """(partition leader epoch, events) of every batch of a journal partition, as on disk."""
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        for batch in iter_batches(log.read_bytes(), verify_crc=False):
            events = [e for r in decode_records(batch) if (e := decode_event(r.value)) is not None]
            out.append((batch.partition_leader_epoch, events))
    return out


def test_each_node_journals_its_groups_and_the_survivor_goes_on_after_kill_9(cluster: Cluster, capsys: Any) -> None:
    for node in (1, 2):
        cluster.start_node(node)
    leaders = cluster.wait_spread({1, 2})
    one, two = cluster.nodes[1], cluster.nodes[2]
    # The journal has a partition per __consumer_offsets partition, each led by that shard's owner.
    for via in (one, two):
        assert cluster.leaders(via, topic=EVENTS_TOPIC) == leaders
    bootstrap = f"{one.bootstrap},{two.bootstrap}"
    create_topic(bootstrap, "jt", 1)
    here, moved = cluster.groups_on(1, 1, "journal")[0], cluster.groups_on(2, 1, "journal")[0]
    for group in (here, moved):
        join_and_leave(bootstrap, group, "jt")
    # Either node, asked for either group's history, reads it from the group's coordinator.
    for via in (one, two):
        for group in (here, moved):
            wait_for(lambda g=group, b=via.bootstrap: rebalance_count(capsys, b, g) >= 2, 20,
                     f"{group}'s rebalances read through {via.bootstrap}")
            status, out = history(capsys, via.bootstrap, group)
            assert status == 0 and "new-member-joined" in out and "member-left" in out, out
    # On disk: each group's events in its own partition only, written at its owner's epoch.
    epochs = cluster_offsets_epochs(cluster, one)
    for group in (here, moved):
        index = partition_for(group)
        batches = journal_batches(cluster.data_dir / f"{EVENTS_TOPIC}-{index}")
        assert any(e["group"] == group for _, events in batches for e in events)
        assert {epoch for epoch, events in batches if any(e["group"] == group for e in events)} == {epochs[index]}
        others = {e["group"] for d in cluster.data_dir.glob(f"{EVENTS_TOPIC}-*") if d.name != f"{EVENTS_TOPIC}-{index}"
                  for _, events in journal_batches(d) for e in events}
        assert group not in others
    before = len(read_events(one.bootstrap, moved))

    # kill -9 the node coordinating `moved`: node 1 takes every shard over after the lease.
    two.kill()
    cluster.wait_spread({1})
    assert set(cluster.leaders(one, topic=EVENTS_TOPIC).values()) == {1}
    join_and_leave(one.bootstrap, moved, "jt")
    wait_for(lambda: rebalance_count(capsys, one.bootstrap, moved) >= 4, 20,
             "the moved group's new rebalances in the journal")
    after = read_events(one.bootstrap, moved)
    assert len(after) > before
    # The survivor wrote into the same partition, at its own (higher) owner epoch.
    index = partition_for(moved)
    new_epoch = cluster_offsets_epochs(cluster, one)[index]
    assert new_epoch > epochs[index]
    batches = journal_batches(cluster.data_dir / f"{EVENTS_TOPIC}-{index}")
    late = [e for epoch, events in batches if epoch == new_epoch for e in events if e["group"] == moved]
    assert {e["cause"] for e in late} >= {"new-member-joined", "member-left"}, late
    assert [epoch for epoch, _ in batches] == sorted(epoch for epoch, _ in batches)


def cluster_offsets_epochs(cluster: Cluster, via: Any) -> dict[int, int]:
    """Partition -> leader epoch of `__consumer_offsets`, as Metadata tells it."""
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.metadata import MetadataRequest

    with WireClient("127.0.0.1", via.port, timeout=5) as c:
        r = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name=OFFSETS)],
                                                      allow_auto_topic_creation=False))
    return {p.partition_index: p.leader_epoch for p in r.topics[0].partitions}
