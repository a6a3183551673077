"""Produce requests for a partition this node claimed but has not opened yet wait for it, and a
connection's requests keep their order meanwhile: the pipelined requests of an idempotent
producer must not be split into a refused first one and an appended second one (which librdkafka
answers by bumping its epoch and re-sending what it may already have written)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker.handlers.produce import OpeningHold
from broker.topics.catalog import TopicCatalog
from protocol.messages.produce import ProduceRequest


class Opening:
    """What the hold asks of the topic logs: which partitions are being opened, and a call when one
    is no longer (``TopicLogs.opening`` and ``TopicLogs.when_opened``)."""

    def __init__(self, *keys: tuple[str, int]) -> None:
        self.opening = dict.fromkeys(keys, 1)
        self.waiters: dict[tuple[str, int], list[Callable[[], None]]] = {}

    def when_opened(self, key: tuple[str, int], callback: Callable[[], None]) -> None:
        if key in self.opening:
            self.waiters.setdefault(key, []).append(callback)
        else:
            callback()

    def opened(self, key: tuple[str, int]) -> None:
        del self.opening[key]
        for callback in self.waiters.pop(key, []):
            callback()


def body(*partitions: tuple[str, int]) -> ProduceRequest:
    TopicData = ProduceRequest.TopicProduceData
    PartitionData = TopicData.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        TopicData(name=name, partition_data=[PartitionData(index=index, records=b"")])
        for name, index in partitions])


def hold(logs: Opening, tmp_path: Path) -> OpeningHold:
    return OpeningHold(logs, TopicCatalog(tmp_path, 1))  # type: ignore[arg-type]


def test_requests_wait_for_an_opening_partition_and_keep_their_connections_order(tmp_path: Path) -> None:
    logs = Opening(("a", 0), ("b", 0))
    ran: list[str] = []
    h = hold(logs, tmp_path)
    h.submit(1, body(("a", 0)), lambda: ran.append("1: a0"))
    h.submit(1, body(("c", 0)), lambda: ran.append("1: c0"))  # serves, but waits behind the first
    h.submit(2, body(("c", 0)), lambda: ran.append("2: c0"))  # another connection is not held
    h.submit(1, body(("b", 0)), lambda: ran.append("1: b0"))
    assert ran == ["2: c0"]
    logs.opened(("a", 0))
    assert ran == ["2: c0", "1: a0", "1: c0"]  # the third waits for b-0
    h.submit(1, body(("c", 0)), lambda: ran.append("1: c0 again"))
    assert ran == ["2: c0", "1: a0", "1: c0"]
    logs.opened(("b", 0))
    assert ran == ["2: c0", "1: a0", "1: c0", "1: b0", "1: c0 again"]
    assert h.queues == {}


def test_nothing_is_held_when_nothing_is_opening(tmp_path: Path) -> None:
    logs = Opening()
    ran: list[str] = []
    h = hold(logs, tmp_path)
    h.submit(1, body(("a", 0)), lambda: ran.append("a0"))
    assert ran == ["a0"] and h.queues == {}
