"""Records/s through a share group of 4 consumers against a consumer group of 4 on the same kind
of topic (confluent-kafka clients, librdkafka), with the broker's CPU and RSS, against kcoord and
against Apache Kafka 4.4 on the same machine, in one run.

    python -m bench.share_groups [--records 20000] [--consumers 4] [--partitions 4] [--json] [--kcoord-only]

Needs the Kafka 4.4 jars (``KCOORD_KAFKA_LIBS``, or ``bash scripts/kafka.sh``) unless
``--kcoord-only``. Both brokers run with a 500 ms share heartbeat interval (Kafka's lower bound
moved to allow it) and assign share partitions at once.

For each broker and each kind of group: the consumers join (and, for the share group, fetch,
which initializes its share partitions; the group starts at the log start,
``share.auto.offset.reset=earliest``, so nothing produced is missed however late a member's first
fetch is), then --records records are produced and the time from the first record produced until
every record has been consumed (acknowledged, for the share group: implicit acknowledgement, as
confluent's ShareConsumer does by default; committed automatically for the consumer group) is
measured. Printed per broker and kind: records/s, broker CPU seconds per 10,000 records, broker
RSS at the end; and kcoord's figure over Kafka's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.harness import Broker, cpu_seconds, rss_mb
from testkit.kafka import KafkaProcess, kafka_libs

KINDS = ("share", "consumer")
SHARE_GROUP = "bench-share"
# The same share-group settings on both brokers (Kafka's minimum heartbeat interval is 5 s).
KAFKA_SHARE = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}
# The consumers' first polls: long enough for every member to be assigned its partitions.
JOIN_SECONDS = 6.0


def start_at_log_start(admin: AdminClient) -> None:
    """``share.auto.offset.reset=earliest`` for the share group (a group config, set before it exists)."""
    resource = ConfigResource(ResourceType.GROUP, SHARE_GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def run(bootstrap: str, pid: int, kind: str, records: int, consumers: int, partitions: int) -> dict[str, float]:
    topic = f"bench-{kind}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    if kind == "share":
        start_at_log_start(admin)
    counts = [0] * consumers
    stop = threading.Event()
    ready = threading.Barrier(consumers + 1)

    def consume(i: int) -> None:
        c: Any
        if kind == "share":
            c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": SHARE_GROUP})
        else:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consumer", "group.protocol": "consumer",
                          "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        joined_until = time.monotonic() + JOIN_SECONDS
        while time.monotonic() < joined_until:
            got = c.poll(0.2)
            if kind == "share":
                counts[i] += sum(1 for m in got if m.error() is None)
            elif got is not None and got.error() is None:
                counts[i] += 1
        ready.wait()
        while not stop.is_set():
            if kind == "share":
                counts[i] += sum(1 for m in c.poll(0.2) if m.error() is None)
            else:
                counts[i] += sum(1 for m in c.consume(500, 0.2) if m.error() is None)
        c.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    ready.wait()
    cpu0 = cpu_seconds(pid)
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(records):
        producer.produce(topic, value=b"x" * 100, key=str(n).encode())
        if n % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 300
    while sum(counts) < records and time.monotonic() < deadline:
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(pid) - cpu0
    stop.set()
    for t in threads:
        t.join()
    return {"records": float(sum(counts)), "seconds": elapsed, "records_per_s": sum(counts) / elapsed,
            "cpu_per_10k": cpu / max(1, sum(counts)) * 10_000, "rss_mb": rss_mb(pid)}


def both_kinds(bootstrap: str, pid: int, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    return {kind: run(bootstrap, pid, kind, args.records, args.consumers, args.partitions) for kind in KINDS}


ROWS = (("share", "records_per_s", "rec/s, share group", ".0f"),
        ("consumer", "records_per_s", "rec/s, consumer group", ".0f"),
        ("share", "cpu_per_10k", "CPU s / 10k rec, share group", ".3f"),
        ("consumer", "cpu_per_10k", "CPU s / 10k rec, consumer group", ".3f"),
        ("share", "rss_mb", "RSS MB after share group", ".0f"),
        ("consumer", "rss_mb", "RSS MB after consumer group", ".0f"))


def table(results: dict[str, dict[str, dict[str, float]]], args: argparse.Namespace) -> str:
    brokers = list(results)
    lines = [f"{args.records} records of 100 bytes, {args.partitions} partitions, groups of {args.consumers}"]
    header = f"{'':34}" + "".join(f"{'kcoord' if b == 'kcoord' else 'Kafka 4.4':>12}" for b in brokers)
    lines.append(header + (f"{'kcoord/Kafka':>14}" if len(brokers) == 2 else ""))
    for kind, key, label, fmt in ROWS:
        values = [results[b][kind][key] for b in brokers]
        row = f"{label:34}" + "".join(f"{v:>12{fmt}}" for v in values)
        if len(values) == 2:
            row += f"{values[0] / values[1]:>14.2f}" if values[1] else f"{'-':>14}"
        lines.append(row)
    short = [f"{b} {k} group: {results[b][k]['records']:.0f} of {args.records} consumed"
             for b in brokers for k in KINDS if results[b][k]["records"] < args.records]
    return "\n".join(lines + short)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--kcoord-only", action="store_true", help="skip Apache Kafka")
    args = parser.parse_args()
    libs = None if args.kcoord_only else kafka_libs()
    if libs is None and not args.kcoord_only:
        raise SystemExit("the Kafka 4.4 jars are needed: set KCOORD_KAFKA_LIBS or run scripts/kafka.sh "
                         "(or pass --kcoord-only)")
    results: dict[str, dict[str, dict[str, float]]] = {}
    broker = Broker(group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
    try:
        results["kcoord"] = both_kinds(f"127.0.0.1:{broker.port}", broker.pid, args)
    finally:
        broker.stop()
    if libs is not None:
        with tempfile.TemporaryDirectory(prefix="kcoord-bench-share-") as tmp:
            kafka = KafkaProcess(libs, Path(tmp) / "kafka", KAFKA_SHARE).start()
            try:
                assert kafka.proc is not None
                results["kafka"] = both_kinds(kafka.bootstrap, kafka.proc.pid, args)
            finally:
                kafka.stop()
    print(json.dumps(results, indent=2) if args.json else table(results, args))


if __name__ == "__main__":
    main()
