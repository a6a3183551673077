"""Share consumers, topics and records for the share-group tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)

from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import set_group_configs

LOCK_MS = 1500


# A short heartbeat interval: a member is given its partitions at the heartbeat after their
# share state is initialized.
# Both below Kafka's minimums, so the minimums go down with them (as Kafka requires).
OVERRIDES = {"group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.min.record.lock.duration.ms": "1000",
             "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}


def bootstrap(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.port}"


def make_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(broker)})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(broker: BrokerProcess, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap(broker)})
    for v in values:
        p.produce(topic, value=v.encode())
    p.flush(10)


def consumer(broker: BrokerProcess, group: str, topic: str, explicit: bool = False) -> Any:
    """A share consumer of ``group`` on ``topic``. The group reads its (fresh) topics from their
    start (``share.auto.offset.reset=earliest``): records produced before a slow join has started
    the share partition are delivered all the same, as the tests expect."""
    set_group_configs(bootstrap(broker), group, {"share.auto.offset.reset": "earliest"})
    config = {"bootstrap.servers": bootstrap(broker), "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(config)
    c.subscribe([topic])
    return c


def joined(c: Any) -> None:
    """A first poll: the member joins (and, in time, is given its partitions)."""
    c.poll(2)




def poll_until(c: Any, done: Callable[[list[Any]], bool], seconds: float = 15.0,
               on_message: Callable[[Any], None] | None = None) -> list[Any]:
    """Polls until ``done(got)``, ``on_message`` seeing each record. A consumer in explicit
    acknowledgement mode must acknowledge every record of one poll there before it polls again;
    one that holds records uses ``poll_holding``."""
    def seen(m: Any) -> bool:
        if on_message is not None:
            on_message(m)
        return True

    return poll_holding(c, seen, done, seconds)


def poll_holding(c: Any, decide: Callable[[Any], bool], done: Callable[[list[Any]], bool],
                 seconds: float = 15.0) -> list[Any]:
    """Polls a consumer in explicit acknowledgement mode until ``done(got)``; ``decide(m)``
    acknowledges a record (True) or leaves it acquired and unacknowledged (False). Such a consumer
    refuses to poll again while records of its last poll are unacknowledged (Kafka's does too), so
    a poll that leaves one is the last: records arrive over as many polls as the fetches that
    brought them (a share fetch answers with what the log holds when it comes), and what the
    consumer holds is what that last poll left."""
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done(got):
        held = False
        for m in c.poll(0.5):
            if m.error() is None:
                got.append(m)
                held = not decide(m) or held
        if held:
            break
    return got


