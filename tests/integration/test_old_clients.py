"""Clients of the old message formats against a real broker, over raw sockets: ListOffsets v0,
Fetch v0-3 and Produce v0-2 as clients from before Kafka 0.11 send them. Requests are laid out
and responses read by kafka-python's hand-written protocol classes, and the down-converted
message sets by its legacy message-set reader: nothing of ours decodes what is checked."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from kafka.protocol.old import fetch as old_fetch
from kafka.protocol.old import list_offsets as old_offsets
from kafka.protocol.old import produce as old_produce
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.record import Record
from protocol.record_batch import build_batch, decode_records, iter_batches
from protocol.record_compression import GZIP, ZSTD
from tests.integration.helpers.dataplane import create, fetch, produce

pytestmark = pytest.mark.timeout(120)

PRODUCE, FETCH, LIST_OFFSETS, API_VERSIONS = 0, 1, 2, 18


class OldClient:
    """One connection speaking only the hand-written pre-0.11 request and response classes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, request: Any, response_cls: Any) -> Any:
        self.correlation += 1
        head = struct.pack(">hhih", request.API_KEY, request.API_VERSION, self.correlation, 3) + b"old"
        payload = head + request.encode()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        assert struct.unpack_from(">i", frame)[0] == self.correlation
        return response_cls.decode(frame[4:])

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out


@pytest.fixture
def old(broker: Any) -> Any:
    c = OldClient(broker.port)
    yield c
    c.close()


def legacy(data: bytes) -> list[tuple[int, int, int | None, int | None, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, timestamp type, key, value) of each message, by kafka-python."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            assert r.validate_crc()
            out.append((batch.magic, r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


def old_fetch_partition(old: OldClient, version: int, topic: str, offset: int, max_bytes: int = 1 << 20) -> Any:
    request_cls = getattr(old_fetch, f"FetchRequest_v{version}")
    fields: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                              "topics": [(topic, [(0, offset, max_bytes)])]}
    if version >= 3:
        fields["max_bytes"] = 50 << 20
    resp = old.call(request_cls(**fields), getattr(old_fetch, f"FetchResponse_v{version}"))
    (name, partitions), = resp.responses
    assert name == topic
    (_index, error_code, high_watermark, records), = partitions
    return error_code, high_watermark, records


def old_list_offsets(old: OldClient, topic: str, timestamp: int, max_num: int) -> tuple[int, list[int]]:
    req = old_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[(topic, [(0, timestamp, max_num)])])
    resp = old.call(req, old_offsets.ListOffsetsResponse_v0)
    (_name, partitions), = resp.topics
    (_index, error_code, offsets), = partitions
    return error_code, list(offsets)


def test_api_versions_advertise_every_old_version_served(client: WireClient) -> None:
    keys = {k.api_key: (k.min_version, k.max_version) for k in client.call(API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")).api_keys}
    assert keys[PRODUCE] == (0, 13) and keys[FETCH] == (0, 18) and keys[LIST_OFFSETS] == (0, 11)


def test_list_offsets_v0_answers_with_old_style_offsets(client: WireClient, old: OldClient) -> None:
    create(client, "lo0")
    assert old_list_offsets(old, "lo0", -1, 1) == (0, [0])
    for n in (3, 2):
        now = int(time.time() * 1000)
        raw = build_batch([Record(i, i, b"k", b"v", []) for i in range(n)], base_timestamp=now)
        assert produce(client, "lo0", raw).error_code == 0
    assert old_list_offsets(old, "lo0", -1, 1) == (0, [5])
    assert old_list_offsets(old, "lo0", -2, 1) == (0, [0])
    # Newest first: the log end, then the start of the (one) segment.
    assert old_list_offsets(old, "lo0", -1, 10) == (0, [5, 0])
    assert old_list_offsets(old, "lo0", -2, 10) == (0, [0])
    assert old_list_offsets(old, "lo0", -1, 0) == (0, [])
    # A time before the segment was last written: no segment (and not the log end) qualifies.
    assert old_list_offsets(old, "lo0", 1, 10) == (0, [])
    assert old_list_offsets(old, "lo0", int(time.time() * 1000) + 60_000, 10) == (0, [5, 0])
    assert old_list_offsets(old, "no-such-topic", -1, 1) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])


def test_fetch_v0_to_v3_get_down_converted_message_sets(client: WireClient, old: OldClient) -> None:
    create(client, "fetch-old")
    ts = int(time.time() * 1000)
    plain = build_batch([Record(0, 0, b"a", b"first", [("trace", b"x")]), Record(1, 1, None, b"second", []),
                         Record(2, 2, b"c", None, [])], base_timestamp=ts)
    zipped = build_batch([Record(0, 0, b"d", b"zipped-1", []), Record(1, 4, b"e", b"zipped-2", [])],
                         base_timestamp=ts + 10, compression=GZIP)
    assert produce(client, "fetch-old", plain).base_offset == 0
    assert produce(client, "fetch-old", zipped).base_offset == 3
    expected = [(0, ts, b"a", b"first"), (1, ts + 1, None, b"second"), (2, ts + 2, b"c", None),
                (3, ts + 10, b"d", b"zipped-1"), (4, ts + 14, b"e", b"zipped-2")]
    for version in range(4):
        error_code, hw, records = old_fetch_partition(old, version, "fetch-old", 0)
        assert (error_code, hw) == (0, 5), version
        got = legacy(records)
        magic = 0 if version <= 1 else 1
        assert {m for m, *_ in got} == {magic}, version
        assert [(o, k, v) for _m, o, _ts, _tt, k, v in got] == [(o, k, v) for o, _ts, k, v in expected], version
        if magic == 1:
            assert [(ts_, tt) for _m, _o, ts_, tt, _k, _v in got] == [(t, 0) for _o, t, _k, _v in expected]
    # From the middle: an uncompressed batch starts at the fetch offset, a compressed one stays whole.
    assert [o for _m, o, *_ in legacy(old_fetch_partition(old, 2, "fetch-old", 1)[2])] == [1, 2, 3, 4]
    assert [o for _m, o, *_ in legacy(old_fetch_partition(old, 2, "fetch-old", 4)[2])] == [3, 4]
    # Clients of the current format still get the batches as stored, headers included.
    stored = fetch(client, "fetch-old", 0, version=4).responses[0].partitions[0].records
    first = next(iter_batches(stored))
    assert decode_records(first)[0].headers == [("trace", b"x")]


def test_zstd_batches_cannot_reach_old_fetchers(client: WireClient, old: OldClient) -> None:
    create(client, "fetch-zstd")
    raw = build_batch([Record(0, 0, b"k", b"v", [])], base_timestamp=int(time.time() * 1000), compression=ZSTD)
    assert produce(client, "fetch-zstd", raw).error_code == 0
    error_code, hw, records = old_fetch_partition(old, 3, "fetch-zstd", 0)
    assert (error_code, hw) == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 1)
    assert not records
    assert fetch(client, "fetch-zstd", 0, version=12).responses[0].partitions[0].error_code == 0


@pytest.mark.parametrize("version,magic,codec", [(0, 0, 0), (1, 0, GZIP), (2, 1, 0), (2, 1, GZIP)])
def test_produce_v0_to_v2_message_sets_are_stored(client: WireClient, old: OldClient, version: int, magic: int,
                                                  codec: int) -> None:
    topic = f"produce-old-{version}-{codec}"
    create(client, topic)
    for round_ in range(2):
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
        for i in range(3):
            builder.append(i, 1_600_000_000_000 + i, b"k%d" % i, b"r%d-%d" % (round_, i))
        req = getattr(old_produce, f"ProduceRequest_v{version}")(
            required_acks=-1, timeout=5000, topics=[(topic, [(0, bytes(builder.build()))])])
        resp = old.call(req, getattr(old_produce, f"ProduceResponse_v{version}"))
        (_name, partitions), = resp.topics
        _index, error_code, base_offset, *_rest = partitions[0]
        assert (error_code, base_offset) == (0, 3 * round_)
    stored = fetch(client, topic, 0, version=12).responses[0].partitions[0]
    assert stored.high_watermark == 6
    records = [(b.base_timestamp + r.timestamp_delta, r.key, r.value)
               for b in iter_batches(stored.records) for r in decode_records(b)]
    ts = [1_600_000_000_000 + i if magic else -1 for i in range(3)]
    assert records == [(ts[i], b"k%d" % i, b"r%d-%d" % (r, i)) for r in range(2) for i in range(3)]
    # And an old fetcher reads back what an old producer wrote.
    got = legacy(old_fetch_partition(old, 0, topic, 0)[2])
    assert [v for *_x, v in got] == [b"r%d-%d" % (r, i) for r in range(2) for i in range(3)]
