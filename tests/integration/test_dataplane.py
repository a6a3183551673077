"""Produce, Fetch, ListOffsets and InitProducerId on the wire, at exact versions, against a real
broker process: what a client sees for good input, bad input and idempotent retries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.group.core.base.records import OffsetCommitRecord, decode_record
from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.produce import ProduceRequest
from protocol.record_batch import build_simple_batch, decode_records, iter_batches
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.dataplane import (
    API_VERSIONS,
    FETCH,
    INIT_PID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    create,
    fetch,
    list_offset,
    produce,
    records,
    values,
)
from tests.integration.helpers.metrics import scrape

pytestmark = pytest.mark.timeout(120)















def test_every_produce_and_fetch_version_round_trips(client: WireClient) -> None:
    topic_id = create(client, "versions")
    expected: list[bytes] = []
    for pv in range(3, 14):
        raw = build_simple_batch([(None, b"p%d" % pv, int(time.time() * 1000))])
        resp = produce(client, "versions", raw, version=pv, topic_id=topic_id)
        assert resp.error_code == 0 and resp.base_offset == len(expected), pv
        expected.append(b"p%d" % pv)
    for fv in range(4, 19):
        res = fetch(client, "versions", 0, version=fv, topic_id=topic_id)
        part = res.responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == len(expected), fv
        assert values(part.records) == expected, fv


def test_transaction_apis_are_advertised(client: WireClient) -> None:
    keys = {k.api_key: k for k in client.call(API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")).api_keys}
    # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (test_transactions.py).
    assert {22, 24, 25, 26, 28} <= set(keys)


def test_bad_batches_get_per_partition_errors_and_leave_the_log_intact(client: WireClient) -> None:
    create(client, "strict", 2)
    assert produce(client, "strict", records(3)).base_offset == 0
    good = records(2)
    bad_crc = bytearray(good)
    bad_crc[-2] ^= 0xFF
    huge = bytearray(good)
    huge[8:12] = (1 << 30).to_bytes(4, "big")
    cases = {
        "crc": (bytes(bad_crc), 0, ErrorCode.CORRUPT_MESSAGE),
        "claimed size": (bytes(huge), 0, ErrorCode.INVALID_RECORD),
        "two batches": (good + good, 0, ErrorCode.INVALID_RECORD),
        "no records": (None, 0, ErrorCode.INVALID_RECORD),
        "missing partition": (good, 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    }
    for what, (raw, partition, code) in cases.items():
        resp = produce(client, "strict", raw, partition=partition)
        assert (resp.error_code, resp.base_offset) == (code, -1), what
        assert resp.error_message, what
    assert produce(client, "missing-topic", good).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(client, "x", good, version=13, topic_id=b"\x01" * 16).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert produce(client, "__consumer_offsets", good).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    # Nothing was written: the next good batch follows the first, and the log reads back whole.
    assert produce(client, "strict", good).base_offset == 3
    part = fetch(client, "strict", 0).responses[0].partitions[0]
    assert part.high_watermark == 5
    assert values(part.records) == [b"value-0", b"value-1", b"value-2", b"value-0", b"value-1"]


def test_batches_over_max_message_bytes_are_refused(client: WireClient) -> None:
    create(client, "small", configs={"max.message.bytes": "2000"})
    resp = produce(client, "small", build_simple_batch([(None, b"x" * 3000, 1)]))
    assert resp.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(client, "small", build_simple_batch([(None, b"x" * 100, 1)])).error_code == 0


def test_invalid_topic_configs_are_refused_at_creation(client: WireClient) -> None:
    t = CreateTopicsRequest.CreatableTopic(name="bad-config", num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                                               name="retention.ms", value="soon")])
    res = client.call(19, 7, CreateTopicsRequest(topics=[t], timeout_ms=5000, validate_only=False)).topics[0]
    assert res.error_code == ErrorCode.INVALID_CONFIG and "retention" in res.error_message
    assert produce(client, "bad-config", records(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time_topics_stamp_the_broker_clock(client: WireClient) -> None:
    create(client, "stamped", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    resp = produce(client, "stamped", records(2, ts=1_000))
    assert resp.error_code == 0 and resp.log_append_time_ms >= before
    batch = next(iter_batches(fetch(client, "stamped", 0).responses[0].partitions[0].records))
    assert batch.log_append_time and batch.max_timestamp == resp.log_append_time_ms


def test_acks_zero_gets_no_response(client: WireClient) -> None:
    create(client, "fire")
    corr = client.send(PRODUCE, 9, ProduceRequest(transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="fire", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records(4))])]))
    # The next response on the connection belongs to the next request.
    res = client.recv(LIST_OFFSETS, 7, client.send(LIST_OFFSETS, 7, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.Topic(name="fire", partitions=[
            ListOffsetsRequest.Topic.Partition(partition_index=0, timestamp=-2)])])))
    assert corr < client.correlation and res.topics[0].partitions[0].offset == 0
    wait_for(lambda: list_offset(client, "fire", -1).offset == 4, 30, "the acks=0 records to be visible (flushed)",
             step=0.01, seen=lambda: list_offset(client, "fire", -1).offset)


def test_idempotent_retries_are_answered_with_the_original_offsets(client: WireClient) -> None:
    create(client, "idem")
    init = client.call(INIT_PID, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
    assert init.error_code == 0 and init.producer_id >= 0 and init.producer_epoch == 0
    pid = init.producer_id
    assert produce(client, "idem", records(2)).base_offset == 0  # a non-idempotent neighbour
    first = records(3, producer_id=pid, producer_epoch=0, base_sequence=0)
    second = records(2, producer_id=pid, producer_epoch=0, base_sequence=3)
    assert produce(client, "idem", first).base_offset == 2
    assert produce(client, "idem", second).base_offset == 5
    for retry, offset in ((first, 2), (second, 5), (first, 2)):
        resp = produce(client, "idem", retry)
        assert (resp.error_code, resp.base_offset) == (0, offset)
    gap = produce(client, "idem", records(1, producer_id=pid, producer_epoch=0, base_sequence=9))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    part = fetch(client, "idem", 0).responses[0].partitions[0]
    assert part.high_watermark == 7 and len(values(part.records)) == 7
    other = client.call(INIT_PID, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
    assert other.producer_id != pid


def test_fetch_limits_return_whole_batches_and_at_least_one(client: WireClient) -> None:
    create(client, "limits", 2)
    for _ in range(5):
        produce(client, "limits", build_simple_batch([(None, b"x" * 1000, 1)] * 3))  # ~3 KiB batches
    produce(client, "limits", records(1), partition=1)
    one = fetch(client, "limits", 0, partition_max_bytes=10, extra=[(1, 0)]).responses[0].partitions
    assert [b.base_offset for b in iter_batches(one[0].records)] == [0]  # bigger than the limit, still one
    assert one[1].records == b""  # only the first partition with data may exceed its limit
    alone = fetch(client, "limits", 0, partition=1, partition_max_bytes=10).responses[0].partitions[0]
    assert values(alone.records) == [b"value-0"]
    some = fetch(client, "limits", 0, partition_max_bytes=7000).responses[0].partitions[0]
    assert [b.base_offset for b in iter_batches(some.records)] == [0, 3]
    capped = fetch(client, "limits", 0, max_bytes=100, extra=[(1, 0)]).responses[0].partitions
    assert len(list(iter_batches(capped[0].records))) == 1 and capped[1].records == b""
    middle = fetch(client, "limits", 4).responses[0].partitions[0]
    assert next(iter_batches(middle.records)).base_offset == 3  # the batch holding offset 4


def test_fetch_out_of_range_and_unknown_partitions(client: WireClient) -> None:
    topic_id = create(client, "ranges")
    produce(client, "ranges", records(3))
    part = fetch(client, "ranges", 4).responses[0].partitions[0]
    # As Apache Kafka: an out-of-range answer carries no offsets (tests/differential compares it).
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and part.high_watermark == -1
    assert fetch(client, "ranges", 3).responses[0].partitions[0].error_code == 0
    assert fetch(client, "nope", 0).responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    by_id = fetch(client, "", 0, version=13, topic_id=b"\x02" * 16).responses[0].partitions[0]
    assert by_id.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert fetch(client, "", 0, version=13, topic_id=topic_id).responses[0].partitions[0].error_code == 0
    res = fetch(client, "ranges", 0, session_id=77, session_epoch=3)
    assert res.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Epoch 0 opens a session (tests/differential/test_fetch_sessions.py follows one with Kafka).
    full = fetch(client, "ranges", 0, session_epoch=0)
    assert full.error_code == 0 and full.session_id != 0


def test_long_poll_wakes_on_append_and_times_out_otherwise(broker: Any, client: WireClient) -> None:
    create(client, "poll")
    started = time.monotonic()
    empty = fetch(client, "poll", 0, max_wait_ms=300).responses[0].partitions[0]
    # Nothing to read: the broker holds the fetch for its max wait (never less) and answers empty.
    assert empty.records == b"" and time.monotonic() - started >= 0.25
    fetches = scrape(broker.metrics_port).count("kcoord_requests_total", api="Fetch", version="12")
    # A max wait far beyond the client's 10 s socket timeout: an answer can only come from the
    # append waking the fetch, never from its timeout.
    corr = client.send(FETCH, 12, FetchRequest(
        max_wait_ms=600_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.Topic(topic="poll", partitions=[
            FetchRequest.Topic.Partition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id=""))
    # The append comes after the broker has taken the fetch (and, finding nothing, parked it).
    wait_for(lambda: scrape(broker.metrics_port).count("kcoord_requests_total", api="Fetch", version="12") > fetches,
             30, "the broker to receive the long poll",
             seen=lambda: scrape(broker.metrics_port).count("kcoord_requests_total", api="Fetch", version="12"))
    with WireClient("127.0.0.1", broker.port) as producer:
        assert produce(producer, "poll", records(2)).error_code == 0
    res = client.recv(FETCH, 12, corr)
    assert values(res.responses[0].partitions[0].records) == [b"value-0", b"value-1"]


def test_list_offsets_earliest_latest_max_timestamp_and_by_time(client: WireClient) -> None:
    create(client, "times")
    assert list_offset(client, "times", -1).offset == 0
    assert list_offset(client, "times", -3).offset == -1
    produce(client, "times", records(3, ts=1_000))  # offsets 0-2 at 1000-1002
    produce(client, "times", build_simple_batch([(None, b"late", 9_000), (None, b"early", 5_000)]))  # 3, 4
    produce(client, "times", records(2, ts=2_000))  # 5, 6
    assert (list_offset(client, "times", -2).offset, list_offset(client, "times", -1).offset) == (0, 7)
    top = list_offset(client, "times", -3)
    assert (top.offset, top.timestamp) == (3, 9_000)
    at = list_offset(client, "times", 1_500)
    assert (at.offset, at.timestamp, at.leader_epoch) == (3, 9_000, 0)
    assert (list_offset(client, "times", 1_001).offset, list_offset(client, "times", 1_001).timestamp) == (1, 1_001)
    assert list_offset(client, "times", 10_000).offset == -1
    assert list_offset(client, "times", -1, version=1).offset == 7
    assert list_offset(client, "unknown", -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_consumer_offsets_can_be_fetched_and_decoded(client: WireClient) -> None:
    create(client, "watched", 2)
    group = "burrow-sees-this"
    body = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, retention_time_ms=-1, topics=[
                                   OffsetCommitRequest.Topic(name="watched", partitions=[
                                       OffsetCommitRequest.Topic.Partition(partition_index=1, committed_offset=42,
                                                                           committed_leader_epoch=-1,
                                                                           committed_metadata="m")])])
    assert client.call(OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code == 0
    shard = partition_for(group)
    part = fetch(client, "__consumer_offsets", 0, partition=shard).responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark > 0
    found = []
    for b in iter_batches(part.records):
        for r in decode_records(b):
            rec = decode_record(r.key, r.value) if r.key is not None else None
            if isinstance(rec, OffsetCommitRecord) and rec.group == group:
                found.append((rec.topic, rec.partition, rec.value.offset, rec.value.metadata))
    assert found == [("watched", 1, 42, "m")]
    meta = client.call(METADATA, 12, MetadataRequest(topics=[MetadataRequest.Topic(
        name="__consumer_offsets")], allow_auto_topic_creation=False))
    offsets_id = meta.topics[0].topic_id
    by_id = fetch(client, "", 0, partition=shard, version=13, topic_id=offsets_id).responses[0].partitions[0]
    assert by_id.records == part.records


def test_a_transactional_batch_for_a_partition_not_in_its_transaction_is_refused(client: WireClient) -> None:
    """KIP-890 part 1: the first transactional batch of a transaction on a partition is taken
    only when the coordinator has the partition in that transaction; a batch sent after the
    transaction ended (which would hang the partition's last stable offset) is refused too."""
    from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
    from protocol.messages.end_txn import EndTxnRequest

    create(client, "verified", 2)
    init = client.call(INIT_PID, 4, InitProducerIdRequest(transactional_id="verifier", transaction_timeout_ms=60000,
                                                          producer_id=-1, producer_epoch=-1))
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def send(partition: int, sequence: int) -> Any:
        return produce(client, "verified", records(1, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                                   transactional=True), partition=partition,
                       transactional_id="verifier")

    def add(partition: int) -> None:
        added = client.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="verifier", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.Topic(name="verified", partitions=[partition])]))
        assert [p.partition_error_code for t in added.results_by_topic_v3_and_below for p in t.results_by_partition] == [0]

    refused = send(0, 0)
    assert refused.error_code == ErrorCode.INVALID_TXN_STATE
    assert refused.error_message == "Partition was not added to the transaction"
    add(0)
    assert send(0, 0).error_code == 0
    assert send(0, 1).error_code == 0  # the transaction is open on the partition: no second check
    assert send(1, 0).error_code == ErrorCode.INVALID_TXN_STATE  # the other partition was never added
    assert client.call(26, 3, EndTxnRequest(transactional_id="verifier", producer_id=pid, producer_epoch=epoch,
                                            committed=True)).error_code == 0
    # The COMMIT marker closes the transaction on partition 0.
    wait_for(lambda: send(0, 2).error_code == ErrorCode.INVALID_TXN_STATE, 60,
             "a batch after the transaction ended to be refused")
    part = fetch(client, "verified", 0).responses[0].partitions[0]
    # The transaction's two batches and its marker; nothing after it, so nothing left open.
    assert (part.high_watermark, part.last_stable_offset) == (3, 3)
