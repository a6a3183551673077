"""Durability of a kcoord cluster under failures: N rounds of pausing (SIGSTOP past the lease, then
SIGCONT) or killing (SIGKILL, then a restart) the node that leads a topic partition and coordinates
a few groups, with a producer and committers writing all along. After every round a fresh consumer
reads the partition from offset 0 and every record acknowledged so far must come back with its
value; at the end every acknowledged commit is read back with OffsetFetch.

    python -m bench.cluster_durability [--rounds 20] [--mode pause|kill] [--lease-ms 3000]
                                       [--segment-bytes 65536] [--groups 8] [--producer operator|fast]

``--producer operator`` (the default) is a producer as an operator configures one for throughput:
librdkafka's default request timeout, ``linger.ms=20``, ``batch.size=600000``, metadata refreshed
every 500 ms, 300-byte records at 4,000/s; the reader fetches 16 MiB at a time. ``fast`` is a
producer tuned to fail over within seconds (2 s request and socket timeouts, small records as fast
as it can).

Two `kcoord serve` nodes on one shared data dir and a real etcd (Debian's etcd-server), a
confluent-kafka producer (``acks=all``) on a topic of one partition, and one committer per group
(OffsetCommit one at a time, following FindCoordinator). The partition's preferred owner is
stopped each round, so ownership flips to the other node and back: each round the returning node
claims again what the other wrote. Failover time: from the stop (or kill) to the first record, and
to every group's first commit, acknowledged by the node that took over. Prints each round, then the
totals: records and commits acknowledged and lost (zero is the acceptance), failover p50 and max.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

from bench.harness import work_dir
from testkit.etcd import ETCD_BINARY, EtcdProcess
from tests.integration.helpers.cluster import (
    AckedProducer,
    Cluster,
    Committer,
    fetch_offset,
    lost_records,
    metadata_leaders,
    partition_leader,
    read_partition,
    wait_for,
)

TOPIC = "durable"
OPERATOR_PRODUCER = {"enable.idempotence": False, "linger.ms": 20, "batch.size": 600000, "message.timeout.ms": 60000,
                     "topic.metadata.refresh.interval.ms": 500}
LARGE_FETCHES = {"fetch.max.bytes": 16 << 20, "max.partition.fetch.bytes": 8 << 20}


MARGIN_S = 0.5  # replies a stopped node had sent before it stopped are read within this


def _serving_again(producer: AckedProducer, committers: list[Committer], since: float,
                   timeout: float = 90) -> tuple[float, float]:
    """Waits for records and every group's commits acknowledged after ``since`` (by whoever serves
    them now); returns the seconds from ``since`` to the first such record and to the last group's
    first such commit. A cluster that does not serve again within ``timeout`` fails the run, saying
    who each node names the leader (a liveness failure, as much a finding as a lost record)."""
    bootstrap = producer.bootstrap
    wait_for(lambda: producer.first_new_ack_after(since, MARGIN_S) is not None
             and producer.acks_after(since + MARGIN_S) >= 100, timeout, "acknowledged records",
             seen=lambda: (producer.failed, metadata_leaders(bootstrap, producer.topic)))
    wait_for(lambda: all(c.first_success_after(since + MARGIN_S) is not None for c in committers), timeout,
             "acknowledged commits", seen=lambda: [(c.group, c.acked, c.errors) for c in committers])
    first = producer.first_new_ack_after(since, MARGIN_S)
    commits = [c.first_success_after(since + MARGIN_S) for c in committers]
    assert first is not None and all(t is not None for t in commits)
    return first - since, max(t for t in commits if t is not None) - since


def _pct(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s"


def run(args: argparse.Namespace, tmp: Path) -> int:
    (tmp / "etcd").mkdir()
    etcd = EtcdProcess(tmp / "etcd" / "data").start()
    cluster = Cluster(etcd, tmp, session_timeout_ms=args.lease_ms,
                      **{"log.segment.bytes": str(args.segment_bytes), "log.level": "WARNING"})
    rng = random.Random(args.seed)
    produce_failovers: list[float] = []
    commit_failovers: list[float] = []
    read_backs: list[float] = []
    lost_in_rounds = 0
    try:
        bootstrap, leader = cluster.start_with_topic(TOPIC)
        if args.producer == "operator":
            producer = AckedProducer(bootstrap, TOPIC, in_flight=40000, value_size=300, rate=4000,
                                     config=OPERATOR_PRODUCER)
        else:
            producer = AckedProducer(bootstrap, TOPIC, in_flight=args.in_flight)
        producer.start()
        committers = [Committer(cluster, g, TOPIC, timeout=3.0) for g in cluster.groups_on(leader, args.groups, "bench")]
        for c in committers:
            c.start()
        started = time.monotonic()
        wait_for(lambda: producer.acks_after(started) >= 200 and all(c.acked > 0 for c in committers), 60,
                 "the first acknowledgements")
        print(f"{args.mode} rounds: {args.rounds}, lease {args.lease_ms} ms, segment.bytes {args.segment_bytes}, "
              f"leader node {leader}, {len(committers)} committing groups", flush=True)
        for round_no in range(1, args.rounds + 1):
            wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 60, "the preferred node leading")
            time.sleep(rng.uniform(0.2, 1.0))
            if args.mode == "pause":
                cluster.pause(leader)
            else:
                cluster.nodes[leader].kill()
            stopped = time.monotonic()
            try:
                wait_for(lambda: partition_leader(cluster, TOPIC) not in (-1, leader), 60, "a takeover")
                produce_s, commit_s = _serving_again(producer, committers, stopped)
                time.sleep(rng.uniform(0.5, 2.0))  # the other node writes, rolls segments meanwhile
            finally:
                if args.mode == "pause":
                    cluster.resume(leader)
                else:
                    cluster.start_node(leader)
            back = time.monotonic()
            back_s = wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 60, "the preferred node back") - back
            _serving_again(producer, committers, back)
            with producer.lock:
                acked = dict(producer.acked)
            read_started = time.monotonic()
            stored, high = read_partition(bootstrap, TOPIC, timeout=300, config=LARGE_FETCHES)
            lost_now = lost_records(acked, stored)
            read_backs.append(time.monotonic() - read_started)
            if lost_now:
                print(f"round {round_no:2d}: {len(lost_now)} of {len(acked)} acknowledged records not read back "
                      f"(high watermark {high}): first {lost_now[:3]}", flush=True)
                lost_in_rounds += len(lost_now)
            produce_failovers.append(produce_s)
            commit_failovers.append(commit_s)
            print(f"round {round_no:2d}: failover produce {produce_s:.2f} s, commits {commit_s:.2f} s; "
                  f"node {leader} leads again {back_s:.2f} s after it came back; "
                  f"{len(acked)} records acked, read back from offset 0 in {read_backs[-1]:.1f} s", flush=True)
        producer.stop_flag.set()
        for c in committers:
            c.stop_flag.set()
        producer.join(120)
        for c in committers:
            c.join(30)
        stored, high = read_partition(bootstrap, TOPIC, timeout=300, config=LARGE_FETCHES)
        lost = lost_records(producer.acked, stored)
        lost_commits = []
        for c in committers:
            fetched = fetch_offset(cluster, c.group, TOPIC)
            if not c.acked <= fetched <= c.attempted:
                lost_commits.append((c.group, c.acked, fetched, c.attempted))
        commits_acked = sum(c.acked for c in committers)
        print(f"records: {len(producer.acked)} acknowledged ({producer.failed} failed to the producer), "
              f"{len(lost)} lost or changed at the end, {lost_in_rounds} missing from the read-backs after each "
              f"round; high watermark {high}")
        print(f"commits: {commits_acked} acknowledged over {len(committers)} groups, {len(lost_commits)} groups "
              f"read back below their last acknowledged commit")
        print(f"failover ({args.mode}, lease {args.lease_ms} ms): produce {_pct(produce_failovers)}; "
              f"commits {_pct(commit_failovers)}")
        if lost:
            print(f"first lost records: {lost[:5]}")
        if lost_commits:
            print(f"lost commits: {lost_commits[:5]}")
        return 1 if lost or lost_commits or lost_in_rounds else 0
    finally:
        cluster.stop_all()
        etcd.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mode", choices=("pause", "kill"), default="pause")
    parser.add_argument("--lease-ms", type=int, default=3000)
    parser.add_argument("--segment-bytes", type=int, default=65536)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--producer", choices=("operator", "fast"), default="operator")
    parser.add_argument("--in-flight", type=int, default=5000, help="records the producer keeps unacknowledged")
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args()
    if not os.path.exists(ETCD_BINARY):
        print("etcd is not installed (Debian package etcd-server)", file=sys.stderr)
        return 2
    with work_dir("kcoord-durability-") as tmp:
        return run(args, tmp)


if __name__ == "__main__":
    sys.exit(main())
