"""Kafka 4.4's Java clients against kcoord and, as the reference, against a real Kafka: two
KafkaConsumers sharing a topic (group.protocol classic and consumer, whose committed offsets go
by topic id: OffsetFetch and OffsetCommit v10), a read-process-write loop of
transactions with an aborted one that read_committed readers never see, and the Admin client's
topic, cluster and group calls. The same program runs against both brokers at once and what it
reports is compared.

The program is ``tests/java/KafkaClients.java``; it is compiled once with javac against Kafka's
jars into pytest's cache directory, under a hash of the sources, the jars and the compiler, and
prints one JSON object per line."""

from __future__ import annotations

import json
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from testkit.kafka import java_command
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.java import MAIN
from tests.integration.helpers.metrics import scrape
from tests.integration.helpers.offsets import committed

pytestmark = [pytest.mark.timeout(240), pytest.mark.differential]

Events = list[dict[str, Any]]




def run_java(classes: Path, libs: Path, *args: str) -> Events:
    done = subprocess.run(java_command(libs, MAIN, *args, classes=classes), capture_output=True, text=True,
                          timeout=180)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = [e for e in events if e["event"] == "error"]
    assert done.returncode == 0 and not errors, \
        f"{' '.join(args[:1])} exited {done.returncode}: {errors}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return events


def on_both(kcoord: BrokerProcess, kafka: Any, scenario: Any) -> tuple[Events, Events]:
    """The scenario (a function of the bootstrap address) against kcoord and Kafka at once."""
    with ThreadPoolExecutor(2) as pool:
        ours, theirs = pool.submit(scenario, kcoord.bootstrap), pool.submit(scenario, kafka.bootstrap)
        return ours.result(), theirs.result()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-reader"})
    try:
        return {(topic, p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def assert_at_log_end(offsets: dict[tuple[str, int], int], ends: dict[tuple[str, int], int]) -> None:
    """Every partition's committed offset is its log end (the Java client also commits the
    position 0 of a partition it was assigned and never read from, or nothing for it)."""
    assert set(offsets) <= set(ends), offsets
    assert {tp: offsets.get(tp, 0) for tp in ends} == ends


def named(events: Events, name: str) -> Events:
    return [e for e in events if e["event"] == name]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_consumers_share_a_topic(java_classes: Path, kafka_libs: Path, broker: BrokerProcess, kafka: Any,
                                     protocol: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group, records = f"java-{protocol}-{suffix}", f"java-{protocol}-{suffix}", 200
    for b in (broker, kafka):
        create_topic(b.bootstrap, topic, 4)

    def v10(api: str) -> float:
        return scrape(broker.metrics_port).count("kcoord_requests_total", api=api, version="10")

    before = {api: v10(api) for api in ("OffsetCommit", "OffsetFetch")}
    results = on_both(broker, kafka, lambda bootstrap: run_java(
        java_classes, kafka_libs, "group", bootstrap, topic, group, protocol, str(records)))
    if protocol == "consumer":
        # The KIP-848 consumer names its topics by id: OffsetFetch and OffsetCommit v10.
        assert all(v10(api) > count for api, count in before.items()), before

    for b, events in zip((broker, kafka), results):
        shared = named(events, "shared")[0]["held"]
        held = [{p for _, p in member} for member in shared]
        assert all(held) and held[0].isdisjoint(held[1]) and held[0] | held[1] == {0, 1, 2, 3}
        consumed = named(events, "record")
        assert sorted(r["value"] for r in consumed) == sorted(f"v{i}" for i in range(records))  # each once
        assert all(r["partition"] in held[r["member"]] for r in consumed)
        assert named(events, "done")[0]["consumed"] == records
        assert {e["member"] for e in named(events, "closing")} == {0, 1}
        # Every record's offset was committed before the members left: the group is at the log end.
        ends = end_offsets(b.bootstrap, topic, 4)
        assert sum(ends.values()) == records
        assert_at_log_end(committed(b.bootstrap, group), ends)
    # KIP-848 members are told their partitions incrementally; classic (eager) members get all of
    # theirs at once, never an empty assignment: the same kinds of events on both brokers. How many
    # there are depends on whether the second member joined before the first rebalance ended.
    shapes = [{(e["member"], len(e["partitions"]) > 0) for e in named(events, "assigned")} for events in results]
    if protocol == "classic":
        assert shapes[0] == shapes[1] == {(0, True), (1, True)}


def test_read_process_write_transactions_and_an_abort(java_classes: Path, kafka_libs: Path, broker: BrokerProcess,
                                                      kafka: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    source, sink, group, records = f"rpw-in-{suffix}", f"rpw-out-{suffix}", f"rpw-{suffix}", 40
    for b in (broker, kafka):
        create_topic(b.bootstrap, source, 2)
        create_topic(b.bootstrap, sink, 2)

    results = on_both(broker, kafka, lambda bootstrap: run_java(
        java_classes, kafka_libs, "transactions", bootstrap, source, sink, group, str(records)))

    for b, events in zip((broker, kafka), results):
        processed = named(events, "processed")[0]
        assert processed["records"] == records and processed["transactions"] >= records // 7
        read = {e["isolation"]: e for e in named(events, "read")}
        upper = sorted(f"IN-{i}" for i in range(records))
        assert sorted(read["read_committed"]["values"]) == upper
        assert sorted(read["read_uncommitted"]["values"]) == sorted([*upper, *(f"aborted-{i}" for i in range(5))])
        # The offsets went with the transactions: the group resumes after the last record.
        assert_at_log_end(committed(b.bootstrap, group), end_offsets(b.bootstrap, source, 2))
        # Transactions version 2 on both: each of the transactions and the abort moved the epoch.
        (txn,) = named(events, "transaction")
        assert (txn["state"], txn["epoch"], txn["partitions"]) == (
            "CompleteAbort", processed["transactions"] + 1, 0), (b.bootstrap, txn, processed)


def test_admin_client(java_classes: Path, kafka_libs: Path, broker: BrokerProcess, kafka: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"java-admin-{suffix}", f"java-admin-{suffix}"

    ours, theirs = on_both(broker, kafka, lambda bootstrap: run_java(java_classes, kafka_libs, "admin", bootstrap,
                                                                      topic, group))

    cluster = named(ours, "cluster")[0]
    assert cluster["nodes"] == [[1, "127.0.0.1", broker.port]] and cluster["controller"] == 1
    assert len(named(theirs, "cluster")[0]["nodes"]) == 1
    for events in (ours, theirs):
        for e in named(events, "described_active"):
            for member in e["members"]:
                member["partitions"].sort()
    assert named(ours, "described_active") == [{
        "event": "described_active", "state": "Stable", "listed": [[group, "Classic", "consumer"]],
        "members": [{"client_id": f"consumer-{group}-1",
                     "partitions": [[topic, 0], [topic, 1], [topic, 2]]}]}]
    assert named(ours, "altered")[0]["offsets"] == {"0": 1, "1": 3, "2": 1}
    assert named(ours, "deleted") == [{"event": "deleted", "listed": [], "committed": {}}]
    assert named(ours, "deleted_records") == [{"event": "deleted_records", "low_watermark": 3,
                                               "earliest": {"0": 0, "1": 0, "2": 3}}]
    # The Java producer is idempotent: one producer per partition, epoch 0, its last sequence.
    assert named(ours, "producers")[0]["by_partition"] == {"0": [[0, 0, -1, -1]], "1": [[0, 2, -1, -1]],
                                                           "2": [[0, 4, -1, -1]]}
    replicas = named(ours, "log_dirs")[0]["replicas"]
    assert sorted(replicas) == ["0", "1", "2"] and all(r[0] > 0 and r[1:] == [0, False] for r in replicas.values())
    without_cluster = [[e for e in events if e["event"] != "cluster"] for events in (ours, theirs)]
    assert without_cluster[0] == without_cluster[1]
