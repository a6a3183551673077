"""Share groups with confluent-kafka's ShareConsumer (librdkafka's KIP-932 client): records shared
by several consumers without one being accepted twice, RELEASE redelivering with a higher
delivery count, REJECT never redelivering, lock expiry, and acknowledgements that survive
``kill -9``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.metrics import scrape

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType  # noqa: E402

from tests.integration.helpers.share import (  # noqa: E402
    OVERRIDES,
    consumer,
    joined,
    make_topic,
    poll_holding,
    poll_until,
    produce,
)


def test_two_consumers_share_a_partition_without_duplicates(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    make_topic(broker, "q")
    a, b = consumer(broker, "sg", "q"), consumer(broker, "sg", "q")
    try:
        joined(a)
        joined(b)
        values = [f"m{i}" for i in range(40)]
        produce(broker, "q", values)
        seen: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < len(values):
            for c in (a, b):
                seen += [m.value().decode() for m in c.poll(0.3) if m.error() is None]
        a.commit_sync()
        b.commit_sync()
        assert sorted(seen) == sorted(values)  # every record once: none accepted twice
    finally:
        a.close()
        b.close()


def test_release_redelivers_counted_and_reject_never(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    make_topic(broker, "q")
    c = consumer(broker, "sg", "q", explicit=True)
    try:
        joined(c)
        produce(broker, "q", ["keep", "again", "poison"])
        verdict = {"keep": AcknowledgeType.ACCEPT, "again": AcknowledgeType.RELEASE, "poison": AcknowledgeType.REJECT}
        first = poll_until(c, lambda got: len(got) >= 3, on_message=lambda m: c.acknowledge(m, verdict[m.value().decode()]))
        assert sorted(m.value().decode() for m in first) == ["again", "keep", "poison"]
        assert all(m.delivery_count() == 1 for m in first)
        c.commit_sync()
        again = poll_until(c, lambda got: len(got) >= 1, on_message=lambda m: c.acknowledge(m, AcknowledgeType.ACCEPT))
        assert [(m.value().decode(), m.delivery_count()) for m in again] == [("again", 2)]
        c.commit_sync()
        assert poll_until(c, lambda got: False, seconds=2) == []  # the rejected record never comes back
        metrics = scrape(broker.metrics_port)
        assert metrics.value("kcoord_share_redeliveries", group="sg") == 1
        assert metrics.value("kcoord_share_groups", state="Stable") == 1
    finally:
        c.close()


def test_the_delivery_limit_archives_a_poison_record(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory({**OVERRIDES, "group.share.delivery.count.limit": "2"})
    make_topic(broker, "q")
    c = consumer(broker, "sg", "q", explicit=True)
    try:
        joined(c)
        produce(broker, "q", ["poison", "fine"])
        seen: list[tuple[str, int]] = []

        def judge(m: Any) -> None:
            seen.append((m.value().decode(), m.delivery_count()))
            c.acknowledge(m, AcknowledgeType.RELEASE if m.value() == b"poison" else AcknowledgeType.ACCEPT)

        poll_until(c, lambda got: len(got) >= 3, on_message=judge)
        c.commit_sync()
        poll_until(c, lambda got: False, seconds=2, on_message=judge)
        # Released twice, then archived: never a third delivery.
        assert sorted(seen) == [("fine", 1), ("poison", 1), ("poison", 2)]
        assert scrape(broker.metrics_port).value("kcoord_share_archived_at_delivery_limit", group="sg") == 1
    finally:
        c.close()


def test_unacknowledged_records_return_after_the_lock_expires(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    make_topic(broker, "q")
    a = consumer(broker, "sg", "q", explicit=True)
    b = None
    try:
        joined(a)
        produce(broker, "q", ["x", "y"])
        # Acquired; a stalls and never acknowledges. It holds what its last poll brought: both, or
        # x alone when the two came in two fetches.
        held = {m.value().decode() for m in poll_holding(a, lambda m: False, lambda got: len(got) >= 2)}
        assert held
        assert scrape(broker.metrics_port).value("kcoord_share_records_in_flight", group="sg",
                                                  state="acquired") >= len(held)
        # b joins only now (a consumer fetches ahead of its application: had b been there first,
        # it could have held the records in its own buffer).
        b = consumer(broker, "sg", "q", explicit=True)
        back = poll_until(b, lambda got: len(got) >= 2, on_message=lambda m: b.acknowledge(m))
        counts = {m.value().decode(): m.delivery_count() for m in back}
        assert sorted(counts) == ["x", "y"]
        # What a held came back once its lock expired, counted twice; a record a never took (not
        # even in the buffer its client fetches ahead into) came with its first delivery.
        assert all(counts[v] == 2 for v in held)
        expired = sum(1 for n in counts.values() if n == 2)
        b.commit_sync()
        assert scrape(broker.metrics_port).value("kcoord_share_lock_expiries", group="sg") == expired
    finally:
        a.close()
        if b is not None:
            b.close()


def test_acknowledgements_survive_kill_9(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    make_topic(broker, "q")
    c = consumer(broker, "sg", "q", explicit=True)
    joined(c)
    values = [f"m{i}" for i in range(6)]
    produce(broker, "q", values)
    decided: list[str] = []

    def decide_four(m: Any) -> bool:
        """The first four records decided (m1 rejected, the others accepted); the rest left
        acquired, or never delivered."""
        if len(decided) == 4:
            return False
        decided.append(m.value().decode())
        c.acknowledge(m, AcknowledgeType.REJECT if decided[-1] == "m1" else AcknowledgeType.ACCEPT)
        return True

    poll_holding(c, decide_four, lambda got: len(got) >= 6)
    assert decided == values[:4]
    c.commit_sync()  # answered only once durable
    broker.kill()
    c.close()
    broker.start_loaded()
    # The share group itself came back from __consumer_offsets.
    with WireClient("127.0.0.1", broker.port) as wire:
        (described,) = wire.call(77, 1, ShareGroupDescribeRequest(group_ids=["sg"])).groups
    assert described.error_code == 0 and described.group_epoch >= 2
    d = consumer(broker, "sg", "q", explicit=True)
    try:
        again = poll_until(d, lambda got: len(got) >= 2, seconds=20, on_message=lambda m: d.acknowledge(m))
        d.commit_sync()
        names = sorted(m.value().decode() for m in again)
        assert names == sorted(set(values) - set(decided))  # those left acquired or never delivered, and only those
    finally:
        d.close()
