"""``__share_group_state`` as Kafka's share coordinator writes it: a ShareSnapshot first, then
ShareUpdates of what changed, a snapshot again after
``share.coordinator.snapshot.update.records.per.snapshot`` updates; after ``kill -9`` the broker
rebuilds every share partition from the snapshot and the updates after it (confluent-kafka's
ShareConsumer over TCP)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol.payloads import share_state_records
from protocol.payloads.share_state_records import SNAPSHOT, UPDATE
from protocol.record_batch import decode_records
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from testkit.kcoord import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.integration.helpers.share import poll_holding, poll_until  # noqa: E402

OVERRIDES = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
             "share.coordinator.snapshot.update.records.per.snapshot": "3"}


def bootstrap(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.port}"


def consumer(broker: BrokerProcess) -> Any:
    c = ShareConsumer({"bootstrap.servers": bootstrap(broker), "group.id": "sg",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["q"])
    return c


def state_record_types(data_dir: Path) -> list[int]:
    """The record types written to __share_group_state, in log order (one share partition here)."""
    kinds = []
    for directory in sorted(data_dir.glob("__share_group_state-*")):
        log, _ = PartitionLog.open(directory, LogConfig())
        try:
            for batch in log.batches():
                for record in decode_records(batch):
                    if record.key is not None:
                        decoded = share_state_records.decode(record.key, record.value)
                        assert decoded is not None
                        kinds.append(decoded.record_type)
        finally:
            log.close()
    return kinds


def test_updates_between_snapshots_rebuild_after_kill_9(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    admin = AdminClient({"bootstrap.servers": bootstrap(broker)})
    admin.create_topics([NewTopic("q", 1, 1)])["q"].result(15)
    c = consumer(broker)
    c.poll(2)  # joins; the share partition starts at the end
    p = Producer({"bootstrap.servers": bootstrap(broker)})
    for i in range(8):
        p.produce("q", value=f"m{i}".encode())
    p.flush(10)
    decided: set[str] = set()
    seen: list[str] = []

    def decide(m: Any) -> bool:
        """One durable write per acknowledgement: m1 rejected, m5 released, the others up to m6
        accepted; m7 left acquired, unacknowledged."""
        value = m.value().decode()
        seen.append(value)
        if value == "m7":
            return False
        kind = {"m1": AcknowledgeType.REJECT, "m5": AcknowledgeType.RELEASE}.get(value, AcknowledgeType.ACCEPT)
        c.acknowledge(m, kind)
        c.commit_sync()
        if kind != AcknowledgeType.RELEASE:
            decided.add(value)
        return True

    poll_holding(c, decide, lambda got: len(got) >= 8)
    assert seen == [f"m{i}" for i in range(8)]
    broker.kill()
    c.close()
    kinds = state_record_types(broker.data_dir)
    # The first write (the start offset) a snapshot, then one write per acknowledgement: a
    # snapshot again after every 3 updates.
    assert kinds == [SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE, UPDATE]
    broker.start_loaded()
    d = consumer(broker)
    try:
        again = poll_until(d, lambda got: len(got) >= 2, seconds=20,
                           on_message=lambda m: d.acknowledge(m, AcknowledgeType.ACCEPT))
        # m5 (released) and m7 (acquired, never acknowledged) come back, counted; nothing decided does.
        assert sorted((m.value().decode(), m.delivery_count()) for m in again) == [("m5", 2), ("m7", 2)]
        assert not decided & {m.value().decode() for m in again}
    finally:
        d.close()
