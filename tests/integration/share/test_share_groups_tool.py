"""Kafka's own kafka-share-groups (ShareGroupCommand) against kcoord: list, describe offsets
and members, reset the start offsets of an empty group, delete its offsets, delete it."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.kcoord import BrokerProcess
from tests.integration.helpers.kafka_programs import Tools, table
from tests.integration.helpers.share import OVERRIDES, consumer, joined, make_topic, produce

pytest.importorskip("confluent_kafka")
SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def test_kafka_share_groups_describes_resets_and_deletes(broker_factory: Callable[..., BrokerProcess],
                                                         kafka_libs: Path) -> None:
    broker = broker_factory(OVERRIDES)
    make_topic(broker, "q", 2)
    tools = Tools(kafka_libs, f"127.0.0.1:{broker.port}")
    c = consumer(broker, "sg", "q")
    joined(c)
    joined(c)  # the second heartbeat brings the initialized partitions
    produce(broker, "q", [f"m{i}" for i in range(10)])
    got = 0
    deadline = time.monotonic() + 15
    while got < 10 and time.monotonic() < deadline:
        got += sum(1 for m in c.poll(0.5) if m.error() is None)
    c.commit_sync()
    assert got == 10
    # Three JVMs at once (each takes seconds to start).
    with ThreadPoolExecutor(3) as pool:
        listed, described, members_out = pool.map(lambda args: tools.out(SHARE_GROUPS, *args), [
            ["--list"], ["--describe", "--group", "sg"], ["--describe", "--group", "sg", "--members"]])
    assert listed.split() == ["sg"]
    offsets = table(described, "GROUP")
    assert sum(int(r["START-OFFSET"]) for r in offsets) == 10 and {r["LAG"] for r in offsets} == {"0"}
    assert [m["ASSIGNMENT"] for m in table(members_out, "GROUP")] == ["q:0,1"]
    c.close()
    reset = table(tools.out(SHARE_GROUPS, "--reset-offsets", "--group", "sg", "--topic", "q", "--to-earliest",
                            "--execute"), "GROUP")
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in reset) == [("0", "0"), ("1", "0")]
    # The reset start offsets are what the next member gets: every record again.
    d = consumer(broker, "sg", "q")
    try:
        again = 0
        deadline = time.monotonic() + 15
        while again < 10 and time.monotonic() < deadline:
            again += sum(1 for m in d.poll(0.5) if m.error() is None)
        d.commit_sync()
        assert again == 10
    finally:
        d.close()
    assert "Successful" in tools.out(SHARE_GROUPS, "--delete-offsets", "--group", "sg", "--topic", "q")
    assert "successful" in tools.out(SHARE_GROUPS, "--delete", "--group", "sg")
