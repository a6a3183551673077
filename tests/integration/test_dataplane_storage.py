"""Topic data on disk: it survives restarts and crashes, producer state survives with it, deleted
topics leave nothing behind, and end offsets can be read from a data dir without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from storage.end_offsets import topic_end_offsets
from tests.integration.helpers.dataplane import create, fetch, list_offset, produce, records, values

pytestmark = pytest.mark.timeout(120)


def restart(broker_factory: Any, old: Any, *, kill: bool = False) -> Any:
    if kill:
        old.kill()
    else:
        assert old.stop() == 0
    return broker_factory(data_dir=old.data_dir)


def test_records_and_idempotence_survive_a_restart(broker_factory: Any) -> None:
    broker = broker_factory()
    with WireClient("127.0.0.1", broker.port) as c:
        create(c, "durable", 2)
        pid = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)).producer_id
        batch = records(5, producer_id=pid, producer_epoch=0, base_sequence=0)
        assert produce(c, "durable", batch, partition=1).base_offset == 0
        assert produce(c, "durable", records(3), partition=0).base_offset == 0
    broker = restart(broker_factory, broker)
    with WireClient("127.0.0.1", broker.port) as c:
        # A retry that straddles the restart is still recognised.
        assert produce(c, "durable", batch, partition=1).base_offset == 0
        assert list_offset(c, "durable", -1, partition=1).offset == 5
        assert values(fetch(c, "durable", 0).responses[0].partitions[0].records) == [
            b"value-0", b"value-1", b"value-2"]
        again = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)).producer_id
        assert again != pid


def test_a_crash_with_a_torn_tail_keeps_every_acknowledged_record(broker_factory: Any) -> None:
    broker = broker_factory()
    with WireClient("127.0.0.1", broker.port) as c:
        create(c, "crashy")
        for _ in range(10):
            assert produce(c, "crashy", records(4)).error_code == 0
    broker.kill()
    segment = sorted((broker.data_dir / "crashy-0").glob("*.log"))[-1]
    with open(segment, "ab") as fh:
        fh.write(records(4)[:40])  # half a batch, as a crash mid-write leaves it
    assert topic_end_offsets(broker.data_dir)[("crashy", 0)] == 40
    broker = restart(broker_factory, broker, kill=True)
    with WireClient("127.0.0.1", broker.port) as c:
        assert list_offset(c, "crashy", -1).offset == 40
        assert produce(c, "crashy", records(1)).base_offset == 40
        part = fetch(c, "crashy", 0).responses[0].partitions[0]
        assert len(values(part.records)) == 41
    assert "log.recovered" in broker.log()


def test_deleted_topics_leave_no_directories_and_come_back_empty(broker: Any) -> None:
    with WireClient("127.0.0.1", broker.port) as c:
        create(c, "ephemeral", 3)
        # Records in every partition: a partition's directory is there once a write to it is
        # acknowledged (its log opens after CreateTopics answers, as Kafka's leaders do).
        for partition in range(3):
            assert produce(c, "ephemeral", records(5), partition=partition).error_code == 0
        assert len(list(broker.data_dir.glob("ephemeral-*"))) == 3
        res = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="ephemeral")],
                                                timeout_ms=5000))
        assert res.responses[0].error_code == 0
        assert not list(broker.data_dir.glob("ephemeral*"))
        assert produce(c, "ephemeral", records(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        create(c, "ephemeral", 1)
        assert list_offset(c, "ephemeral", -1).offset == 0


def test_end_offsets_of_a_live_data_dir(broker: Any) -> None:
    with WireClient("127.0.0.1", broker.port) as c:
        create(c, "lag", 2)
        produce(c, "lag", records(7), partition=0)
        produce(c, "lag", records(2), partition=1)
        produce(c, "lag", records(3), partition=1)
    offsets = topic_end_offsets(broker.data_dir)
    assert offsets[("lag", 0)] == 7 and offsets[("lag", 1)] == 5
    assert not any(t == "__consumer_offsets" for t, _ in offsets)
