"""kafka-python's and aiokafka's transactional producers: send_offsets_to_transaction commits with
the transaction and is discarded with an aborted one."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.transactions import read_all

pytestmark = pytest.mark.timeout(120)


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], 15)
    finally:
        c.close()
    return tp.offset


def test_kafka_python_commits_and_aborts_offsets_with_the_transaction(broker: Any) -> None:
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTopicPartition

    bs = broker.bootstrap
    create_topic(bs, "kp-out", 1)
    create_topic(bs, "kp-in", 1)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=f"kp-{uuid.uuid4()}")
    p.init_transactions()
    try:
        p.begin_transaction()
        p.send("kp-out", b"committed")
        p.send_offsets_to_transaction({KTopicPartition("kp-in", 0): OffsetAndMetadata(5, "", -1)}, "kp-group")
        p.commit_transaction()
        p.begin_transaction()
        p.send("kp-out", b"aborted")
        p.send_offsets_to_transaction({KTopicPartition("kp-in", 0): OffsetAndMetadata(9, "", -1)}, "kp-group")
        p.abort_transaction()
    finally:
        p.close()
    assert read_all(bs, "kp-out") == [b"committed"]
    assert committed(bs, "kp-group", "kp-in") == 5


def test_aiokafka_commits_and_aborts_offsets_with_the_transaction(broker: Any) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    bs = broker.bootstrap
    create_topic(bs, "aio-out", 1)
    create_topic(bs, "aio-in", 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"aio-{uuid.uuid4()}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("aio-out", b"committed")
                await p.send_offsets_to_transaction({ATopicPartition("aio-in", 0): 7}, "aio-group")
            await p.begin_transaction()
            await p.send_and_wait("aio-out", b"aborted")
            await p.send_offsets_to_transaction({ATopicPartition("aio-in", 0): 11}, "aio-group")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert read_all(bs, "aio-out") == [b"committed"]
    assert committed(bs, "aio-group", "aio-in") == 7
