"""Produced data leaves the broker's memory once it is in the log: a producer sending hundreds of
megabytes does not make the broker grow with it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.helpers.clients import create_topic

pytestmark = pytest.mark.timeout(180)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def produce_mb(bootstrap: str, topic: str, megabytes: int) -> None:
    payload = os.urandom(1024)
    # A queue that holds a whole round: produce() never has to wait for room.
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1,
                  "queue.buffering.max.messages": megabytes * 1024 + 1,
                  "queue.buffering.max.kbytes": 2 * megabytes * 1024})
    for _ in range(megabytes * 1024):
        p.produce(topic, payload)
    assert p.flush(60) == 0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_broker_memory_does_not_grow_with_produced_volume(broker) -> None:
    create_topic(broker.bootstrap, "volume", 4)
    assert broker.proc is not None
    produce_mb(broker.bootstrap, "volume", 100)  # warm up: buffers, allocator pools
    after_first = rss_mb(broker.proc.pid)
    for _ in range(4):
        produce_mb(broker.bootstrap, "volume", 100)
    after_five = rss_mb(broker.proc.pid)
    # 400 MB more went through; batches held until a full garbage collection grew this by ~150 MB.
    assert after_five - after_first < 60, (after_first, after_five)
