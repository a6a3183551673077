"""Share-group state written by the release before this one, which hashed a share partition's key
(``group:topic id:partition``) with the topic id in hex: Kafka's share coordinator, and kcoord now,
print it in base64, so that state sits in another ``__share_group_state`` partition. It is found
and moved, and nothing that release acknowledged is delivered again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.coordinators.share.core.shard import ShareCoordinatorShard
from broker.coordinators.share.service.coordinator import coordinator_key
from kclient.wire_client import WireClient
from protocol.partitioning import partition_for
from protocol.payloads import share_state_records
from protocol.payloads.share_state_records import SNAPSHOT, ShareStateRecord
from protocol.record_batch import decode_records
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from testkit.kcoord import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType  # noqa: E402

from tests.integration.helpers.dataplane import create  # noqa: E402
from tests.integration.helpers.share import (  # noqa: E402
    OVERRIDES,
    consumer,
    joined,
    poll_holding,
    poll_until,
    produce,
)

TOPIC = "q-upgrade"


def records_of(log: PartitionLog) -> list[ShareStateRecord]:
    out = []
    for batch in log.batches():
        for record in decode_records(batch):
            if not batch.is_control and record.key is not None:
                rec = share_state_records.decode(record.key, record.value)
                if rec is not None:
                    out.append(rec)
    return out


def group_hashed_apart(topic_id: bytes) -> tuple[str, int, int]:
    """A group whose state key hashes to another partition in base64 (now) than in hex (the
    earlier release), with both partitions: the topic id is random, and for one group in 50 both
    keys land in the same partition."""
    for n in range(100):
        group = f"sg-upgrade-{n}"
        now_p = partition_for(coordinator_key((group, topic_id, 0)), 50)
        old_p = partition_for(f"{group}:{topic_id.hex()}:0", 50)
        if now_p != old_p:
            return group, now_p, old_p
    raise AssertionError("no group's two keys hash apart")


def test_state_an_earlier_release_hashed_elsewhere_is_moved_and_kept(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    with WireClient("127.0.0.1", broker.port) as client:
        topic_id = create(client, TOPIC)
    group, now_p, old_p = group_hashed_apart(topic_id)
    c = consumer(broker, group, TOPIC, explicit=True)
    joined(c)
    values = [f"m{i}" for i in range(6)]
    produce(broker, TOPIC, values)
    accepted: list[str] = []

    def accept_four(m: Any) -> bool:
        """The first four records (m0-m3) accepted; the rest left acquired, or never delivered."""
        if len(accepted) == 4:
            return False
        accepted.append(m.value().decode())
        c.acknowledge(m, AcknowledgeType.ACCEPT)
        return True

    poll_holding(c, accept_four, lambda got: len(got) >= 6)
    assert accepted == values[:4]
    c.commit_sync()  # answered only once durable
    broker.kill()
    c.close()

    # Rewrite the data dir as the earlier release left it: the state in the partition the hex key
    # hashes to, none in the partition of Kafka's key.
    key = (group, topic_id, 0)
    config = LogConfig.offsets_topic()
    log, _ = PartitionLog.open(broker.data_dir / f"__share_group_state-{now_p}", config)
    shard = ShareCoordinatorShard(now_p)
    for rec in records_of(log):
        shard.replay(rec)
    state = shard.states[key]
    assert state.start_offset >= 4  # the four accepted records are behind the start
    tombstone = share_state_records.encode(ShareStateRecord(SNAPSHOT, group, topic_id, 0, None))
    log.append([(*tombstone, int(time.time() * 1000))])
    log.flush()
    log.close()
    (snapshot,) = ShareCoordinatorShard(old_p).adopt(key, state).records
    old, _ = PartitionLog.open(broker.data_dir / f"__share_group_state-{old_p}", config)
    old.append([(*share_state_records.encode(snapshot), int(time.time() * 1000))])
    old.flush()
    old.close()

    broker.start_loaded()
    d = consumer(broker, group, TOPIC, explicit=True)
    try:
        again = poll_until(d, lambda got: len(got) >= 2, on_message=lambda m: d.acknowledge(m, AcknowledgeType.ACCEPT))
        d.commit_sync()
        assert sorted(m.value().decode() for m in again) == ["m4", "m5"]
    finally:
        d.close()
    # The state now lives in its own partition, and the earlier copy is gone.
    broker.kill()
    now_log, _ = PartitionLog.open(broker.data_dir / f"__share_group_state-{now_p}", config)
    old_log, _ = PartitionLog.open(broker.data_dir / f"__share_group_state-{old_p}", config)
    try:
        assert records_of(now_log)[-1].value is not None
        assert records_of(old_log)[-1].value is None
    finally:
        now_log.close()
        old_log.close()
