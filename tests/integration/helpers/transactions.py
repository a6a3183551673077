"""Transactional producers and read_committed consumers of confluent-kafka."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer


def consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed", **conf})


def txn_producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, quiet_s: float = 2.0, limit_s: float = 20.0) -> list[bytes]:
    """Every value a fresh read_committed consumer reads from ``topic`` until it goes quiet."""
    c = consumer(bootstrap, f"reader-{uuid.uuid4()}")
    c.subscribe([topic])
    values: list[bytes] = []
    last = time.monotonic()
    deadline = last + limit_s
    try:
        while time.monotonic() < deadline and time.monotonic() - last < quiet_s:
            m = c.poll(0.2)
            if m is not None and not m.error():
                values.append(m.value())
                last = time.monotonic()
    finally:
        c.close()
    return values


def produce_plain(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0


