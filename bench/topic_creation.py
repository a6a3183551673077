"""Creating a topic of many partitions while a group heartbeats: how long the broker's event loop
is held. A heartbeat is sent every 10 ms on its own connection; the slowest answers during the
CreateTopics call are the stall every group on the broker sees.

    python -m bench.topic_creation [--partitions 1000] [--runs 5] [--against REV_CHECKOUT]

``--against`` runs the same measurement, interleaved, against another checkout (A/B)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import trio

from bench.harness import Broker, cpu_seconds, rss_mb
from kclient.wire_client import AsyncWireClient
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.heartbeat import HeartbeatRequest


def _opened(broker: Broker, name: str) -> int:
    return sum(1 for _ in Path(broker.tmp, "data").glob(f"{name}-*"))


async def _measure(broker: Broker, partitions: int, name: str) -> tuple[float, float, float, float]:
    """(CreateTopics seconds, seconds until every partition's log is open, slowest heartbeat
    answer meanwhile in ms, broker CPU seconds)."""
    latencies: list[float] = []
    done = trio.Event()
    hb = await AsyncWireClient.connect(broker.port)
    admin = await AsyncWireClient.connect(broker.port)

    async def heartbeats() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await hb.call(12, 3, HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
            latencies.append((time.perf_counter() - started) * 1000)
            await trio.sleep(0.01)

    cpu = cpu_seconds(broker.pid)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(heartbeats)
        await trio.sleep(0.2)
        latencies.clear()
        started = time.perf_counter()
        T = CreateTopicsRequest.CreatableTopic
        await admin.call(19, 5, CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions,
                                                               replication_factor=1, assignments=[], configs=[])],
                                                    timeout_ms=60000, validate_only=False))
        took = time.perf_counter() - started
        while _opened(broker, name) < partitions:  # logs still opening in the background count too
            await trio.sleep(0.05)
        opened = time.perf_counter() - started
        await trio.sleep(0.1)
        done.set()
    cpu = cpu_seconds(broker.pid) - cpu
    await hb.stream.aclose()
    await admin.stream.aclose()
    return took, opened, max(latencies), cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another checkout, for an A/B comparison")
    args = parser.parse_args()
    variants: list[tuple[str, Path | None]] = [("this", None)]
    if args.against is not None:
        variants.append(("against", args.against))
    results: dict[str, list[tuple[float, ...]]] = {v: [] for v, _ in variants}
    for run in range(args.runs):
        for label, root in (variants if run % 2 == 0 else list(reversed(variants))):
            broker = Broker(root=root)
            try:
                measured = trio.run(_measure, broker, args.partitions, f"wide-{run}")
                results[label].append((*measured, rss_mb(broker.pid)))
            finally:
                broker.stop()
    print(f"CreateTopics of {args.partitions} partitions while a heartbeat runs every 10 ms; medians of {args.runs}")
    print(f"{'variant':<10}{'answer s':>10}{'all open s':>12}{'max heartbeat ms':>18}{'broker CPU s':>14}{'RSS MB':>9}")
    med = {}
    for label, rows in results.items():
        m = [statistics.median(col) for col in zip(*rows)]
        med[label] = m
        print(f"{label:<10}{m[0]:>10.2f}{m[1]:>12.2f}{m[2]:>18.1f}{m[3]:>14.2f}{m[4]:>9.0f}")
    if "against" in med:
        print(f"max heartbeat, this / against: {med['this'][2] / med['against'][2]:.3f}; "
              f"broker CPU: {med['this'][3] / med['against'][3]:.2f}")


if __name__ == "__main__":
    main()
