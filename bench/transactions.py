"""Transactions per second of a read-process-write loop, beside the same loop with plain commits.

    python -m bench.transactions [--records 10000] [--per-txn 100] [--rounds 3] [--flush sync|interval]
                                 [--compare PROPERTY=VALUE]

Each round pre-fills an input topic (3 partitions), then runs confluent-kafka loops of
``--per-txn`` records each, against a fresh broker with the given flush policy (``sync``, the
durable default, by default):

* transactional: poll a batch, produce it to the output topic, ``send_offsets_to_transaction``,
  ``commit_transaction`` (what Kafka Streams' exactly-once does per commit);
* plain: poll a batch, produce it with an idempotent producer and ``flush``, then a synchronous
  ``commit`` of the consumer's offsets (at-least-once with the same durability of each step).

Prints batches/s and records/s of each, the ratio, and broker CPU; the last lines are medians.
``--compare`` runs every round a second time against a broker with that property set (A/B in one
run, alternating which goes first) and prints the medians of both, e.g.
``--compare transaction.partition.verification.enable=false``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from bench.harness import Broker

PARTITIONS = 3


def prefill(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in (topic, topic + "-out"):
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, value=b"record-%08d" % i)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def run_loop(bootstrap: str, topic: str, count: int, per_txn: int, transactional: bool) -> tuple[float, int]:
    """Seconds to move ``count`` records in batches of ``per_txn``; the number of batches."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    group = f"bench-{uuid.uuid4()}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 1}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4()}"
    else:
        conf["enable.idempotence"] = True
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
    # Wait for the assignment before timing.
    first = []
    while not first:
        first = c.consume(per_txn, 1.0)
    pending = [m for m in first if not m.error()]
    moved = batches = 0
    started = time.perf_counter()
    deadline = started + 300
    while moved < count and time.perf_counter() < deadline:
        batch = pending or [m for m in c.consume(per_txn, 1.0) if not m.error()]
        pending = []
        if not batch:
            continue
        if transactional:
            p.begin_transaction()
        for m in batch:
            p.produce(topic + "-out", value=m.value())
        offsets: dict[tuple[str, int], int] = {}
        for m in batch:
            offsets[(m.topic(), m.partition())] = m.offset() + 1
        tps = [TopicPartition(t, pa, o) for (t, pa), o in offsets.items()]
        if transactional:
            p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
        else:
            p.flush(30)
            c.commit(offsets=tps, asynchronous=False)
        moved += len(batch)
        batches += 1
    seconds = time.perf_counter() - started
    c.close()
    return seconds, batches


def one_round(args: argparse.Namespace, overrides: dict[str, str]) -> dict[str, float]:
    broker = Broker(log_flush_policy=args.flush, **overrides)
    try:
        bs = f"127.0.0.1:{broker.port}"
        prefill(bs, "in-txn", args.records)
        prefill(bs, "in-plain", args.records)
        cpu0 = broker.cpu()
        t_secs, t_batches = run_loop(bs, "in-txn", args.records, args.per_txn, transactional=True)
        cpu1 = broker.cpu()
        p_secs, p_batches = run_loop(bs, "in-plain", args.records, args.per_txn, transactional=False)
        cpu2 = broker.cpu()
    finally:
        broker.stop()
    txn_rate, plain_rate = t_batches / t_secs, p_batches / p_secs
    return {"txn/s": txn_rate, "plain batches/s": plain_rate, "ratio": txn_rate / plain_rate,
            "txn records/s": args.records / t_secs, "plain records/s": args.records / p_secs,
            "txn broker cores": (cpu1 - cpu0) / t_secs, "plain broker cores": (cpu2 - cpu1) / p_secs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flush", default="sync", choices=["sync", "interval"])
    ap.add_argument("--compare", default=None, help="PROPERTY=VALUE: also run each round with this set")
    args = ap.parse_args()
    variants: list[tuple[str, dict[str, str]]] = [("default", {})]
    if args.compare:
        name, _, value = args.compare.partition("=")
        variants.append((args.compare, {name.replace(".", "_"): value}))
    rows: dict[str, dict[str, list[float]]] = {label: {} for label, _ in variants}
    for r in range(args.rounds):
        for label, overrides in (variants if r % 2 == 0 else variants[::-1]):
            got = one_round(args, overrides)
            for key, value in got.items():
                rows[label].setdefault(key, []).append(value)
            print(f"round {r + 1} [{label}]: transactional {got['txn/s']:.1f} txn/s ({got['txn records/s']:.0f} "
                  f"records/s, broker {got['txn broker cores']:.2f} cores); plain {got['plain batches/s']:.1f} "
                  f"batches/s ({got['plain records/s']:.0f} records/s, broker {got['plain broker cores']:.2f} "
                  f"cores); ratio {got['ratio']:.2f}", flush=True)
    print(f"median over {args.rounds} rounds, {args.per_txn} records per transaction, "
          f"log.flush.policy={args.flush}:")
    for label, _ in variants:
        print(f"  [{label}]")
        for name, values in rows[label].items():
            print(f"    {name}: {statistics.median(values):.2f}")
    if args.compare:
        base, other = rows["default"], rows[args.compare]
        print(f"  txn/s, default / {args.compare}: {statistics.median(base['txn/s']) / statistics.median(other['txn/s']):.3f}")


if __name__ == "__main__":
    main()
