"""What the exact lag series cost a scrape: 2,000 groups x 5 partitions committed (10,000 series of
each lag family), every partition holding records so each lag in seconds reads one record.
Prints the first scrape (every timestamp read from the logs) and the median of later ones (cached
timestamps), and a heartbeat's round trip measured while scrapes run back to back."""

from __future__ import annotations

import statistics
import threading
import time
import urllib.request

from bench.harness import Broker
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.produce import ProduceRequest
from protocol.record_batch import build_simple_batch
from testkit.ports import free_port

GROUPS, PARTITIONS, RECORDS = 2000, 5, 20


def scrape(port: int) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        body = r.read()
    return time.perf_counter() - started, body.count(b"kafka_consumergroup_group_lag_seconds{")


def main() -> None:
    metrics_port = free_port()
    broker = Broker(metrics_listener=f"http://127.0.0.1:{metrics_port}")
    try:
        with WireClient("127.0.0.1", broker.port) as c:
            c.call(ApiKey.CreateTopics, 4, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="bench", num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=10_000))
            now = int(time.time() * 1000)
            for p in range(PARTITIONS):
                batch = build_simple_batch([(None, b"x" * 100, now - 60_000 + i) for i in range(RECORDS)], 0)
                c.call(ApiKey.Produce, 8, ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
                    ProduceRequest.TopicProduceData(name="bench", partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=batch)])]))
            for g in range(GROUPS):
                c.send(ApiKey.OffsetCommit, 8, OffsetCommitRequest(group_id=f"group-{g}", topics=[
                    OffsetCommitRequest.Topic(name="bench", partitions=[
                        OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=(g + p) % RECORDS)
                        for p in range(PARTITIONS)])]))
            for _ in range(GROUPS):
                c.recv_frame()
        first, series = scrape(metrics_port)
        later = [scrape(metrics_port)[0] for _ in range(9)]
        print(f"lag series per family: {series}")
        print(f"first scrape (reads every timestamp): {first * 1000:.0f} ms")
        print(f"later scrapes (cached), median of 9: {statistics.median(later) * 1000:.0f} ms")

        stop = threading.Event()

        def keep_scraping() -> None:
            while not stop.is_set():
                scrape(metrics_port)

        def commit_latencies(n: int) -> list[float]:
            out = []
            with WireClient("127.0.0.1", broker.port) as c:
                for i in range(n):
                    started = time.perf_counter()
                    c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(group_id="probe", topics=[
                        OffsetCommitRequest.Topic(name="bench", partitions=[
                            OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=i % RECORDS)])]))
                    out.append(time.perf_counter() - started)
            return out

        idle = commit_latencies(300)
        scraper = threading.Thread(target=keep_scraping)
        scraper.start()
        busy = commit_latencies(300)
        stop.set()
        scraper.join()
        for name, values in (("idle", idle), ("while scraping", busy)):
            values.sort()
            print(f"OffsetCommit round trip {name}: p50 {values[len(values) // 2] * 1000:.2f} ms, "
                  f"p99 {values[int(len(values) * 0.99)] * 1000:.2f} ms, max {values[-1] * 1000:.1f} ms")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
