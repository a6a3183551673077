"""Every produce gets an answer: after its partition's log failed (and once the log is reopened,
produce works again), and when its topic is deleted before a pass took the write."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.delete_topics import DeleteTopicsRequest
from tests.unit.runtime.inproc import api_versions, produce, produced, running_broker

pytestmark = pytest.mark.timeout(60)


@pytest.mark.trio
async def test_produce_after_a_failed_flush_is_answered(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        node.broker.app.admin.create_topic("u", 1, {})
        client = node.connect()
        assert produced(await client.call(produce("u", b"one"))) == (0, 0)

        node.disk.fail_flushes()
        assert produced(await client.call(produce("u", b"two")))[0] == ErrorCode.KAFKA_STORAGE_ERROR

        # The device is back, but the partition's log is being reopened from what it holds:
        # produces meanwhile are refused (producers retry KAFKA_STORAGE_ERROR), and requests
        # pipelined behind them are not held up.
        node.disk.fail_flushes(False)
        ids = client.send(produce("u", b"three"), api_versions())
        (first, refused), (second, _versions) = await client.recv(), await client.recv()
        assert [first, second] == ids
        assert produced(refused)[0] == ErrorCode.KAFKA_STORAGE_ERROR

        # Once reopened, the partition takes writes again, after what the log really holds: "one",
        # and "two" only if closing the failed log managed to flush it (the device may be back by
        # then). Never a gap, never an offset handed out twice.
        for _ in range(500):
            mock_clock.jump(0.2)  # past the reopen delay
            code, offset = produced(await client.call(produce("u", b"four")))
            if code == 0:
                break
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
        assert code == 0 and offset in (1, 2)


@pytest.mark.trio
async def test_produce_pipelined_with_the_deletion_of_its_topic_is_answered(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        node.broker.app.admin.create_topic("u", 1, {})
        client = node.connect()
        assert produced(await client.call(produce("u", b"one"))) == (0, 0)

        # One read carries both: the batch is queued, then its topic is deleted before any pass.
        delete = ApiKey.DeleteTopics, 4, DeleteTopicsRequest(topic_names=["u"], timeout_ms=1_000)
        ids = client.send(produce("u", b"two"), delete)
        (first, refused), (second, deleted) = await client.recv(), await client.recv()
        assert [first, second] == ids
        assert produced(refused)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert [(r.name, r.error_code) for r in deleted.responses] == [("u", 0)]
