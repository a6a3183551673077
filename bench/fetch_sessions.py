"""What an incremental fetch session (KIP-227) saves the broker, fetch for fetch: a consumer of a
topic of many partitions, one of them written to, each fetch finding one new batch there.

    python -m bench.fetch_sessions [--partitions 64] [--fetches 3000] [--rounds 3]

One client on one connection, one fetch in flight (``max_wait_ms`` 0). Partition 0 holds
``--fetches`` one-record batches, written before the measure; each fetch reads the next of them
(``partition_max_bytes`` 1: one whole batch). Without a session (epoch -1, what librdkafka sends)
every fetch names every partition and is answered with every one; with a session (what the Java
client and kafka-python send) the first fetch names them all and each later one only partition 0,
whose offset moved, and is answered with partition 0 alone. Same broker build, one broker per run,
the order alternating by round. Printed per run: the broker's CPU per fetch, the bytes it received
and sent per fetch (its own counters: only the fetches run in the measure), fetches per second; the
last lines are the medians and the ratios with a session / without.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.harness import Broker
from kclient.wire_client import WireClient
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.produce import ProduceRequest
from protocol.record import Record
from protocol.record_batch import build_batch
from testkit.ports import free_port
from tests.integration.helpers.metrics import scrape

TOPIC = "sessions"
Partition = FetchRequest.Topic.Partition


def fill(c: WireClient, count: int) -> None:
    """``count`` one-record batches on partition 0 (a Produce request carries one batch a partition)."""
    for _ in range(count):
        batch = build_batch([Record(0, 0, None, b"x" * 100, [])], base_timestamp=1_700_000_000_000)
        answer = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])]))
        assert answer.responses[0].partition_responses[0].error_code == 0, answer


def fetch(c: WireClient, session_id: int, epoch: int, offsets: dict[int, int]) -> FetchResponse:
    answer: FetchResponse = c.call(1, 12, FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
        session_epoch=epoch, topics=[FetchRequest.Topic(topic=TOPIC, partitions=[
            Partition(partition=p, fetch_offset=o, partition_max_bytes=1) for p, o in offsets.items()])],
        forgotten_topics_data=[]))
    assert answer.error_code == 0, answer
    return answer


def one(partitions: int, fetches: int, sessions: bool) -> dict[str, float]:
    metrics_port = free_port()
    broker = Broker(metrics_listener=f"http://127.0.0.1:{metrics_port}")
    try:
        with WireClient("127.0.0.1", broker.port, timeout=30) as c:
            created = c.call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=30000))
            assert created.topics[0].error_code == 0, created
            fill(c, fetches + 1)
            every = {p: 0 for p in range(partitions)}
            before, cpu0, started = scrape(metrics_port), broker.cpu(), time.perf_counter()
            if sessions:
                first = fetch(c, 0, 0, every)
                session_id, epoch = first.session_id, 1
                assert session_id != 0
                for offset in range(1, fetches):
                    answer = fetch(c, session_id, epoch, {0: offset})
                    assert len(answer.responses) == 1 and len(answer.responses[0].partitions) == 1
                    epoch += 1
            else:
                for offset in range(fetches):
                    every[0] = offset
                    answer = fetch(c, 0, -1, every)
                    assert len(answer.responses[0].partitions) == partitions
            elapsed, cpu1, after = time.perf_counter() - started, broker.cpu(), scrape(metrics_port)
    finally:
        broker.stop()

    def delta(name: str) -> float:
        return (after.value(name) or 0.0) - (before.value(name) or 0.0)

    return {"cpu_us": (cpu1 - cpu0) * 1e6 / fetches, "in": delta("kcoord_received_bytes_total") / fetches,
            "out": delta("kcoord_sent_bytes_total") / fetches, "rate": fetches / elapsed}


def line(label: str, r: dict[str, float]) -> str:
    return (f"{label:24} {r['cpu_us']:7.0f} µs CPU/fetch  {r['in']:7.0f} B in/fetch  {r['out']:7.0f} B out/fetch  "
            f"{r['rate']:7.0f} fetches/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--fetches", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for round_no in range(args.rounds):
        for sessions in ((True, False) if round_no % 2 == 0 else (False, True)):
            r = one(args.partitions, args.fetches, sessions)
            results[sessions].append(r)
            print(line(f"round {round_no + 1}, {'session' if sessions else 'no session'}", r), flush=True)
    med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in results.items()}
    print(line("median, session", med[True]))
    print(line("median, no session", med[False]))
    print(f"session / none: CPU per fetch {med[True]['cpu_us'] / med[False]['cpu_us']:.2f}x, bytes in "
          f"{med[True]['in'] / med[False]['in']:.2f}x, out {med[True]['out'] / med[False]['out']:.2f}x, "
          f"fetches/s {med[True]['rate'] / med[False]['rate']:.2f}x")


if __name__ == "__main__":
    main()
