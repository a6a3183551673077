"""Raw Produce, Fetch and ListOffsets requests over a wire client, and what the tests read back."""

from __future__ import annotations

import time
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.produce import ProduceRequest
from protocol.record_batch import build_simple_batch, decode_records, iter_batches

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, INIT_PID, API_VERSIONS = 0, 1, 2, 3, 8, 22, 18


def create(c: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> bytes:
    t = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])
    res = c.call(19, 7, CreateTopicsRequest(topics=[t], timeout_ms=5000, validate_only=False)).topics[0]
    assert res.error_code == 0, res.error_message
    return bytes(res.topic_id)


def records(n: int, ts: int | None = None, **options: Any) -> bytes:
    ts = int(time.time() * 1000) if ts is None else ts
    return build_simple_batch([(b"k%d" % i, b"value-%d" % i, ts + i) for i in range(n)], **options)


def produce(c: WireClient, topic: str, raw: bytes | None, *, partition: int = 0, version: int = 9, acks: int = -1,
            topic_id: bytes = bytes(16), transactional_id: str | None = None) -> Any:
    body = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=raw)])])
    return c.call(PRODUCE, version, body).responses[0].partition_responses[0]


def fetch(c: WireClient, topic: str, offset: int, *, partition: int = 0, version: int = 12, max_wait_ms: int = 0,
          min_bytes: int = 1, max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20,
          topic_id: bytes = bytes(16), extra: list[tuple[int, int]] | None = None, **body: Any) -> Any:
    parts = [FetchRequest.Topic.Partition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
             for p, o in [(partition, offset), *(extra or [])]]
    req = FetchRequest(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
                       session_id=body.pop("session_id", 0), session_epoch=body.pop("session_epoch", -1),
                       topics=[FetchRequest.Topic(topic=topic, topic_id=topic_id, partitions=parts)],
                       forgotten_topics_data=[], rack_id="")
    return c.call(FETCH, version, req)


def values(raw: bytes | None) -> list[bytes]:
    out = []
    for b in iter_batches(raw or b"", allow_partial=True):
        out += [r.value for r in decode_records(b) if r.value is not None]
    return out


def list_offset(c: WireClient, topic: str, timestamp: int, version: int = 7, partition: int = 0) -> Any:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.Topic(name=topic, partitions=[
        ListOffsetsRequest.Topic.Partition(partition_index=partition, timestamp=timestamp)])], timeout_ms=1000)
    return c.call(LIST_OFFSETS, version, req).topics[0].partitions[0]
