"""Records/s through a share group of 4 consumers against a consumer group of 4 on the same kind
of topic (confluent-kafka clients, librdkafka), with the broker's CPU and RSS.

    python -m bench.share_groups [--records 20000] [--consumers 4] [--partitions 4]

For each kind of group: the consumers join (and, for the share group, fetch once, which starts
its share partitions at their end), then --records records are produced and the time from the
first record produced until every record has been consumed (acknowledged, for the share group:
implicit acknowledgement, as confluent's ShareConsumer does by default; committed automatically
for the consumer group) is measured. Printed per kind: records/s, broker CPU seconds per 10,000
records, broker RSS at the end.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import Broker


def run(broker: Broker, kind: str, records: int, consumers: int, partitions: int) -> dict[str, float]:
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = f"bench-{kind}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    counts = [0] * consumers
    stop = threading.Event()
    ready = threading.Barrier(consumers + 1)

    def consume(i: int) -> None:
        c: Any
        if kind == "share":
            c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-share"})
        else:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consumer", "group.protocol": "consumer",
                          "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        joined_until = time.monotonic() + 6
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
    cpu0 = broker.cpu()
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
    cpu = broker.cpu() - cpu0
    stop.set()
    for t in threads:
        t.join()
    return {"records": float(sum(counts)), "seconds": elapsed, "records_per_s": sum(counts) / elapsed,
            "cpu_per_10k": cpu / max(1, sum(counts)) * 10_000, "rss_mb": broker.rss()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    broker = Broker(group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
    try:
        for kind in ("share", "consumer"):
            r = run(broker, kind, args.records, args.consumers, args.partitions)
            print(f"{kind:8} group of {args.consumers}: {r['records']:.0f} records in {r['seconds']:.1f} s = "
                  f"{r['records_per_s']:.0f} records/s; broker CPU {r['cpu_per_10k']:.2f} s per 10,000 records; "
                  f"RSS {r['rss_mb']:.0f} MB")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
