"""Produce and fetch as the differential tests send them."""

from __future__ import annotations

from kclient.wire_client import WireClient
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.record_batch import decode_records, iter_batches

Topic = CreateTopicsRequest.CreatableTopic


def produce(c: WireClient, topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 9,
            transactional_id: str | None = None) -> ProduceResponse:
    return c.call(0, version, ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=10000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])]))


def fetch(c: WireClient, topic: str, partitions: list[int], offset: int = 0, *, isolation: int = 0,
          version: int = 12) -> object:
    answer: FetchResponse = c.call(1, version, FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
        topics=[FetchRequest.Topic(topic=topic, partitions=[
            FetchRequest.Topic.Partition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
            for p in partitions])]))
    return readable_fetch(answer)


def readable_fetch(answer: FetchResponse) -> object:
    """The answer with each partition's records decoded: batches as their attributes and records."""
    out = answer.to_dict()
    for t_out, t in zip(out["responses"], answer.responses, strict=True):
        for p_out, p in zip(t_out["partitions"], t.partitions, strict=True):
            batches = []
            for b in iter_batches(p.records or b"", allow_partial=True):
                batches.append({
                    "base_offset": b.base_offset, "last_offset": b.last_offset, "count": b.records_count, "leader_epoch": b.partition_leader_epoch,
                    "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                    "base_sequence": b.base_sequence, "transactional": b.is_transactional,
                    "control": b.is_control, "max_timestamp": b.max_timestamp,
                    "records": [(r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers)
                                for r in decode_records(b)]})
            p_out["records"] = batches
    return out


