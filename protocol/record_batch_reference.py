"""The construct declaration of record batch v2: the readable statement of the layout and the
oracle the ``struct`` fast path in ``record_batch`` is tested against.

The CRC covers bytes that follow it, which construct cannot compute while building in one pass,
so ``build`` builds the covered part first and then the header around it.
"""

from __future__ import annotations

from typing import Any

import construct as cs
from crc32c import crc32c

from protocol.record_batch import CorruptBatchError, Record
from protocol.record_compression import compress, decompress


class _NullableBytes(cs.Construct):
    """Zigzag varint length then that many bytes; length -1 is null."""

    def _parse(self, stream: Any, context: Any, path: str) -> bytes | None:
        n = cs.ZigZag._parsereport(stream, context, path)
        if n < -1:
            raise cs.ConstructError(f"length {n}", path=path)
        return None if n == -1 else cs.stream_read(stream, n, path)

    def _build(self, obj: bytes | None, stream: Any, context: Any, path: str) -> bytes | None:
        if obj is None:
            cs.ZigZag._build(-1, stream, context, path)
        else:
            cs.ZigZag._build(len(obj), stream, context, path)
            cs.stream_write(stream, obj, len(obj), path)
        return obj


NullableBytes = _NullableBytes()

Header = cs.Struct(
    "key" / cs.PascalString(cs.ZigZag, "utf8"),
    "value" / NullableBytes,
)

RecordBody = cs.Struct(
    "attributes" / cs.Int8sb,
    "timestamp_delta" / cs.ZigZag,
    "offset_delta" / cs.ZigZag,
    "key" / NullableBytes,
    "value" / NullableBytes,
    "headers" / cs.PrefixedArray(cs.ZigZag, Header),
)

RecordDecl = cs.Prefixed(cs.ZigZag, RecordBody)

# Everything the CRC covers: from attributes to the end of the batch.
CrcCovered = cs.Struct(
    "attributes" / cs.Int16sb,
    "last_offset_delta" / cs.Int32sb,
    "base_timestamp" / cs.Int64sb,
    "max_timestamp" / cs.Int64sb,
    "producer_id" / cs.Int64sb,
    "producer_epoch" / cs.Int16sb,
    "base_sequence" / cs.Int32sb,
    "records_count" / cs.Int32sb,
    "records" / cs.GreedyBytes,  # raw or one compressed blob, per attributes bits 0-2
)

Batch = cs.Struct(
    "base_offset" / cs.Int64sb,
    "batch_length" / cs.Int32sb,
    "body"
    / cs.FixedSized(
        cs.this.batch_length,
        cs.Struct(
            "partition_leader_epoch" / cs.Int32sb,
            "magic" / cs.Const(2, cs.Int8sb),
            "crc" / cs.Int32ub,
            "covered" / cs.RawCopy(CrcCovered),
            cs.Check(lambda ctx: crc32c(ctx.covered.data) == ctx.crc),
        ),
    ),
)

Records = cs.GreedyRange(RecordDecl)


def parse(buf: bytes) -> tuple[dict[str, Any], list[Record]]:
    """Header fields and records of the single batch ``buf``."""
    try:
        tree = Batch.parse(buf)
        if len(buf) != tree.batch_length + 12:
            raise CorruptBatchError("trailing bytes after the batch")
        body = tree.body
        covered = body.covered.value
        data = covered.records
        codec = covered.attributes & 0x07
        if codec:
            data = decompress(codec, data)
        parsed = cs.Struct("records" / cs.Array(covered.records_count, RecordDecl), cs.Terminated).parse(data)
    except cs.ConstructError as exc:
        raise CorruptBatchError(f"reference: {exc}") from None
    header = {
        "base_offset": tree.base_offset,
        "batch_length": tree.batch_length,
        "partition_leader_epoch": body.partition_leader_epoch,
        "magic": 2,
        "crc": body.crc,
        **{k: covered[k] for k in COVERED_FIELDS},
    }
    records = [
        Record(r.offset_delta, r.timestamp_delta, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for r in parsed.records
    ]
    return header, records


COVERED_FIELDS = (
    "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "records_count",
)


def build(header: dict[str, Any], records: list[Record]) -> bytes:
    """A batch from header fields (as ``parse`` returns them, minus length and crc) and records."""
    raw = cs.Array(len(records), RecordDecl).build(
        [
            {
                "attributes": 0,
                "timestamp_delta": r.timestamp_delta,
                "offset_delta": r.offset_delta,
                "key": r.key,
                "value": r.value,
                "headers": [{"key": k, "value": v} for k, v in r.headers],
            }
            for r in records
        ]
    )
    codec = header["attributes"] & 0x07
    if codec:
        raw = compress(codec, raw)
    covered = CrcCovered.build({**{k: header[k] for k in COVERED_FIELDS}, "records": raw})
    return Batch.build(
        {
            "base_offset": header["base_offset"],
            "batch_length": 4 + 1 + 4 + len(covered),
            "body": {
                "partition_leader_epoch": header["partition_leader_epoch"],
                "crc": crc32c(covered),
                "covered": {"data": covered},
            },
        }
    )
