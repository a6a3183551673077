"""The ``kafka_offsets_log`` Spark data source.

    spark.dataSource.register(OffsetsLogDataSource)
    df = spark.read.format("kafka_offsets_log").load("/var/lib/kafka/data")
    segments = spark.read.format("kafka_offsets_log").option("view", "segments").load(path)

One Spark partition per segment file. The ``records`` view (default) has one row per offset
commit, group-metadata, KIP-848 consumer-group, KIP-1071 streams-group or KIP-932 share-group
record of ``__consumer_offsets``, and per share-state record of ``__share_group_state`` (kind
``share_state``; the columns after ``tombstone`` belong to the group records of the newer
protocols and to the share-state records); the ``segments`` view has one row per file with its batch
and record counts, offsets, times and the problems met reading it (torn tail, bad CRC, bytes
that are not a log), walking batch headers only: the offsets log's, or with ``kinds`` share_state
alone, ``__share_group_state``'s. Rows are handed to Spark as Arrow batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from analytics.decoder import (
    CONSUMER_GROUP,
    GROUP_METADATA,
    KINDS,
    OFFSET_COMMIT,
    SHARE_GROUP,
    STREAMS_GROUP,
    Decoded,
    decode_segment,
)
from analytics.segments import (
    NoSegments,
    SegmentFile,
    SegmentHealth,
    iter_batches,
    list_segments,
    log_segment_base,
    open_bytes,
    path_exists,
)
from analytics.share_state import SHARE_STATE, ShareStateChunk, decode_share_state_segment
from storage.layout import OFFSETS_TOPIC, SHARE_STATE_TOPIC

NAME = "kafka_offsets_log"

MEMBER = StructType([
    StructField("member_id", StringType()),
    StructField("group_instance_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("rebalance_timeout", IntegerType()),
    StructField("session_timeout", IntegerType()),
    StructField("subscribed_topics", ArrayType(StringType())),
    StructField("assigned_partitions", ArrayType(StructType([
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
    ]))),
])

TOPIC_PARTITIONS = ArrayType(StructType([
    StructField("topic_id", StringType()),
    StructField("partitions", ArrayType(IntegerType())),
]))

CONSUMER_MEMBER = StructType([
    StructField("instance_id", StringType()),
    StructField("rack_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("subscribed_topic_names", ArrayType(StringType())),
    StructField("subscribed_topic_regex", StringType()),
    StructField("rebalance_timeout_ms", IntegerType()),
    StructField("server_assignor", StringType()),
    StructField("classic_session_timeout_ms", IntegerType()),
    StructField("classic_protocols", ArrayType(StringType())),
])

TOPIC_METADATA = ArrayType(StructType([
    StructField("topic_id", StringType()),
    StructField("topic_name", StringType()),
    StructField("num_partitions", IntegerType()),
]))

STREAMS_MEMBER = StructType([
    StructField("instance_id", StringType()),
    StructField("rack_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("process_id", StringType()),
    StructField("topology_epoch", IntegerType()),
    StructField("rebalance_timeout_ms", IntegerType()),
])

TASKS = ArrayType(StructType([
    StructField("subtopology_id", StringType()),
    StructField("partitions", ArrayType(IntegerType())),
]))

SHARE_MEMBER = StructType([
    StructField("rack_id", StringType()),
    StructField("client_id", StringType()),
    StructField("client_host", StringType()),
    StructField("subscribed_topic_names", ArrayType(StringType())),
])

SHARE_TOPICS = ArrayType(StructType([
    StructField("topic_id", StringType()),
    StructField("topic_name", StringType()),
    StructField("partitions", ArrayType(IntegerType())),
    StructField("status", StringType()),  # initializing, initialized or deleting
]))

STATE_BATCHES = ArrayType(StructType([
    StructField("first_offset", LongType()),
    StructField("last_offset", LongType()),
    StructField("delivery_state", IntegerType()),  # 0 available, 2 acknowledged, 4 archived
    StructField("delivery_count", IntegerType()),
]))

ALL_KINDS = KINDS | {SHARE_STATE}

RECORDS = StructType([
    StructField("log_partition", IntegerType()),
    StructField("log_offset", LongType()),
    StructField("batch_timestamp", TimestampType()),
    StructField("kind", StringType()),
    StructField("group", StringType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("committed_offset", LongType()),
    StructField("leader_epoch", IntegerType()),
    StructField("metadata", StringType()),
    StructField("commit_timestamp", TimestampType()),
    StructField("expire_timestamp", TimestampType()),
    StructField("generation", IntegerType()),
    StructField("protocol_type", StringType()),
    StructField("protocol", StringType()),
    StructField("leader", StringType()),
    StructField("current_state_timestamp", TimestampType()),
    StructField("members", ArrayType(MEMBER)),
    StructField("tombstone", BooleanType()),
    # Consumer-group (KIP-848) records only; see analytics.decoder.ConsumerGroupRow.
    StructField("record_type", StringType()),
    StructField("member_id", StringType()),
    StructField("epoch", IntegerType()),
    StructField("previous_member_epoch", IntegerType()),
    StructField("member_state", IntegerType()),
    StructField("metadata_hash", LongType()),
    StructField("assignment", TOPIC_PARTITIONS),
    StructField("pending_revocation", TOPIC_PARTITIONS),
    StructField("consumer_member", CONSUMER_MEMBER),
    StructField("topics_metadata", TOPIC_METADATA),
    StructField("regular_expression", StringType()),
    StructField("resolved_topics", ArrayType(StringType())),
    StructField("regex_version", LongType()),
    StructField("regex_resolved_at", TimestampType()),
    # Streams-group (KIP-1071) records only, beside record_type, member_id, epoch,
    # previous_member_epoch and member_state; see analytics.decoder.StreamsGroupRow.
    StructField("streams_member", STREAMS_MEMBER),
    StructField("active_tasks", TASKS),
    StructField("standby_tasks", TASKS),
    StructField("warmup_tasks", TASKS),
    StructField("subtopologies", ArrayType(StringType())),
    # Offset commits only: how the transaction of a TxnOffsetCommit ended (null for a plain commit).
    StructField("txn", StringType()),
    # Share-group (KIP-932) records only, beside record_type, member_id, epoch, previous_member_epoch,
    # member_state, metadata_hash and assignment; see analytics.decoder.ShareGroupRow.
    StructField("share_member", SHARE_MEMBER),
    StructField("share_topics", SHARE_TOPICS),
    # Share-state records (__share_group_state) only, beside group, partition, leader_epoch,
    # record_type (ShareSnapshot or ShareUpdate) and tombstone; see analytics.share_state.ShareStateRow.
    StructField("topic_id", StringType()),
    StructField("snapshot_epoch", IntegerType()),
    StructField("state_epoch", IntegerType()),
    StructField("start_offset", LongType()),
    StructField("delivery_complete_count", IntegerType()),
    StructField("create_timestamp", TimestampType()),
    StructField("write_timestamp", TimestampType()),
    StructField("state_batches", STATE_BATCHES),
])

SEGMENTS = StructType([
    StructField("path", StringType()),
    StructField("log_partition", IntegerType()),
    StructField("base_offset", LongType()),
    StructField("size_bytes", LongType()),
    StructField("batches", LongType()),
    StructField("records", LongType()),
    StructField("first_offset", LongType()),
    StructField("last_offset", LongType()),
    StructField("first_timestamp", TimestampType()),
    StructField("last_timestamp", TimestampType()),
    StructField("problems", ArrayType(StringType())),
])


# Segments read by one Spark task, up to about this many bytes. A task costs a round trip to a
# Python worker (~0.1-0.4 s here): one per segment file made a data dir of a few dozen records,
# spread over 50 partitions, take ~20 s to decode; packed, small inputs are one task while large
# ones still give every core work.
PACK_BYTES = 32 << 20


class SegmentPartition(InputPartition):
    """Segment files one task reads: (path, partition of the topic) pairs, in order; the topic is
    ``__consumer_offsets`` or ``__share_group_state``."""

    def __init__(self, files: list[tuple[str, int]], topic: str = OFFSETS_TOPIC) -> None:
        super().__init__(files[0][0] if files else "")
        self.files = files
        self.topic = topic


def pack_segments(segments: Sequence[Any], pack_bytes: int = PACK_BYTES,
                  topic: str = OFFSETS_TOPIC) -> list[SegmentPartition]:
    """Consecutive segments grouped into tasks of up to ``pack_bytes`` (a larger file alone)."""
    packs: list[SegmentPartition] = []
    files: list[tuple[str, int]] = []
    size = 0
    for s in segments:
        if files and size + s.size > pack_bytes:
            packs.append(SegmentPartition(files, topic))
            files, size = [], 0
        files.append((s.path, s.log_partition))
        size += s.size
    if files:
        packs.append(SegmentPartition(files, topic))
    return packs


def reader_segments(path: str, kinds: frozenset[str]) -> tuple[list[SegmentFile], list[SegmentFile]]:
    """(``__consumer_offsets`` segments, ``__share_group_state`` segments) to read for ``kinds``.

    A data dir without share state gives no share-state segments, not an error. Share-state
    segments are known by their directory (``__share_group_state-N``) alone: a file or directory
    named otherwise is read as the offsets log.
    """
    offsets: list[SegmentFile] = []
    shares: list[SegmentFile] = []
    wants_offsets = bool(kinds & KINDS)
    if SHARE_STATE in kinds:
        try:
            shares = list_segments(path, SHARE_STATE_TOPIC)
        except NoSegments:
            if not wants_offsets and not path_exists(path):
                raise
        shares = [f for f in shares if f.log_partition >= 0]
    if wants_offsets:
        try:
            offsets = list_segments(path)
        except NoSegments:
            if not shares:
                raise
    return offsets, shares



def _ts(ms: Sequence[int | None]) -> pa.Array:
    """Milliseconds since the epoch -> Spark's Arrow timestamp type (microseconds, UTC)."""
    arr = pa.array(ms, pa.int64())
    return pc.multiply(arr, 1000).cast(pa.timestamp("us", tz="UTC"))


def _batch(cols: dict[str, Callable[[], pa.Array]], n: int, schema: pa.Schema) -> pa.RecordBatch:
    """Builds only the columns ``schema`` asks for; the rest of this kind's columns are null."""
    arrays = [cols[f.name]() if f.name in cols else pa.nulls(n, f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def records_to_arrow(chunk: Decoded, log_partition: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    c = chunk.commits
    n = len(c)
    if n:
        commit_cols: dict[str, Callable[[], pa.Array]] = {
            "log_partition": lambda: pa.repeat(pa.scalar(log_partition, pa.int32()), n),
            "log_offset": lambda: pa.array(c.log_offset, pa.int64()),
            "batch_timestamp": lambda: _ts(c.timestamp),
            "kind": lambda: pa.repeat(pa.scalar(OFFSET_COMMIT, pa.string()), n),
            "group": lambda: pa.array(c.group, pa.string()),
            "topic": lambda: pa.array(c.topic, pa.string()),
            "partition": lambda: pa.array(c.partition, pa.int32()),
            "committed_offset": lambda: pa.array(c.offset, pa.int64()),
            "leader_epoch": lambda: pa.array(c.leader_epoch, pa.int32()),
            "metadata": lambda: pa.array(c.metadata, pa.string()),
            "commit_timestamp": lambda: _ts(c.commit_timestamp),
            "expire_timestamp": lambda: _ts(c.expire_timestamp),
            "tombstone": lambda: pa.array(c.tombstone, pa.bool_()),
            "txn": lambda: pa.array(c.txn, pa.string()),
        }
        yield _batch(commit_cols, n, schema)
    g = chunk.groups
    if g:
        m = len(g)
        group_cols: dict[str, Callable[[], pa.Array]] = {
            "log_partition": lambda: pa.array([log_partition] * m, pa.int32()),
            "log_offset": lambda: pa.array([r.log_offset for r in g], pa.int64()),
            "batch_timestamp": lambda: _ts([r.timestamp for r in g]),
            "kind": lambda: pa.array([GROUP_METADATA] * m, pa.string()),
            "group": lambda: pa.array([r.group for r in g], pa.string()),
            "generation": lambda: pa.array([r.generation for r in g], pa.int32()),
            "protocol_type": lambda: pa.array([r.protocol_type for r in g], pa.string()),
            "protocol": lambda: pa.array([r.protocol for r in g], pa.string()),
            "leader": lambda: pa.array([r.leader for r in g], pa.string()),
            "current_state_timestamp": lambda: _ts([r.current_state_timestamp for r in g]),
            "members": lambda: pa.array([r.members for r in g], schema.field("members").type),
            "tombstone": lambda: pa.array([r.tombstone for r in g], pa.bool_()),
        }
        yield _batch(group_cols, m, schema)
    k = chunk.consumer_groups
    if k:
        r = len(k)

        def col(name: str, typ: pa.DataType) -> Callable[[], pa.Array]:
            return lambda: pa.array([getattr(row, name) for row in k], typ)

        def nested(name: str) -> Callable[[], pa.Array]:
            return col(name, schema.field(name).type)

        consumer_cols: dict[str, Callable[[], pa.Array]] = {
            "log_partition": lambda: pa.array([log_partition] * r, pa.int32()),
            "log_offset": col("log_offset", pa.int64()),
            "batch_timestamp": lambda: _ts([row.timestamp for row in k]),
            "kind": lambda: pa.array([CONSUMER_GROUP] * r, pa.string()),
            "group": col("group", pa.string()),
            "tombstone": col("tombstone", pa.bool_()),
            "record_type": col("record_type", pa.string()),
            "member_id": col("member_id", pa.string()),
            "epoch": col("epoch", pa.int32()),
            "previous_member_epoch": col("previous_member_epoch", pa.int32()),
            "member_state": col("member_state", pa.int32()),
            "metadata_hash": col("metadata_hash", pa.int64()),
            "assignment": nested("assignment"),
            "pending_revocation": nested("pending_revocation"),
            "consumer_member": nested("consumer_member"),
            "topics_metadata": nested("topics_metadata"),
            "regular_expression": col("regular_expression", pa.string()),
            "resolved_topics": nested("resolved_topics"),
            "regex_version": col("regex_version", pa.int64()),
            "regex_resolved_at": lambda: _ts([row.regex_resolved_at for row in k]),
        }
        yield _batch(consumer_cols, r, schema)
    st = chunk.streams_groups
    if st:
        n_st = len(st)

        def scol(name: str, typ: pa.DataType) -> Callable[[], pa.Array]:
            return lambda: pa.array([getattr(row, name) for row in st], typ)

        def snested(name: str) -> Callable[[], pa.Array]:
            return scol(name, schema.field(name).type)

        streams_cols: dict[str, Callable[[], pa.Array]] = {
            "log_partition": lambda: pa.array([log_partition] * n_st, pa.int32()),
            "log_offset": scol("log_offset", pa.int64()),
            "batch_timestamp": lambda: _ts([row.timestamp for row in st]),
            "kind": lambda: pa.array([STREAMS_GROUP] * n_st, pa.string()),
            "group": scol("group", pa.string()),
            "tombstone": scol("tombstone", pa.bool_()),
            "record_type": scol("record_type", pa.string()),
            "member_id": scol("member_id", pa.string()),
            "epoch": scol("epoch", pa.int32()),
            "previous_member_epoch": scol("previous_member_epoch", pa.int32()),
            "member_state": scol("member_state", pa.int32()),
            "streams_member": snested("streams_member"),
            "active_tasks": snested("active_tasks"),
            "standby_tasks": snested("standby_tasks"),
            "warmup_tasks": snested("warmup_tasks"),
            "subtopologies": snested("subtopologies"),
        }
        yield _batch(streams_cols, n_st, schema)
    sh = chunk.share_groups
    if sh:
        n_sh = len(sh)

        def hcol(name: str, typ: pa.DataType) -> Callable[[], pa.Array]:
            return lambda: pa.array([getattr(row, name) for row in sh], typ)

        def hnested(name: str) -> Callable[[], pa.Array]:
            return hcol(name, schema.field(name).type)

        share_cols: dict[str, Callable[[], pa.Array]] = {
            "log_partition": lambda: pa.array([log_partition] * n_sh, pa.int32()),
            "log_offset": hcol("log_offset", pa.int64()),
            "batch_timestamp": lambda: _ts([row.timestamp for row in sh]),
            "kind": lambda: pa.array([SHARE_GROUP] * n_sh, pa.string()),
            "group": hcol("group", pa.string()),
            "tombstone": hcol("tombstone", pa.bool_()),
            "record_type": hcol("record_type", pa.string()),
            "member_id": hcol("member_id", pa.string()),
            "epoch": hcol("epoch", pa.int32()),
            "previous_member_epoch": hcol("previous_member_epoch", pa.int32()),
            "member_state": hcol("member_state", pa.int32()),
            "metadata_hash": hcol("metadata_hash", pa.int64()),
            "assignment": hnested("assignment"),
            "share_member": hnested("share_member"),
            "share_topics": hnested("share_topics"),
        }
        yield _batch(share_cols, n_sh, schema)


def share_state_to_arrow(chunk: ShareStateChunk, log_partition: int, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    rows = chunk.rows
    if not rows:
        return
    n = len(rows)

    def col(name: str, typ: pa.DataType) -> Callable[[], pa.Array]:
        return lambda: pa.array([getattr(row, name) for row in rows], typ)

    cols: dict[str, Callable[[], pa.Array]] = {
        "log_partition": lambda: pa.array([log_partition] * n, pa.int32()),
        "log_offset": col("log_offset", pa.int64()),
        "batch_timestamp": lambda: _ts([row.timestamp for row in rows]),
        "kind": lambda: pa.array([SHARE_STATE] * n, pa.string()),
        "group": col("group", pa.string()),
        "topic_id": col("topic_id", pa.string()),
        "partition": col("partition", pa.int32()),
        "record_type": col("record_type", pa.string()),
        "tombstone": col("tombstone", pa.bool_()),
        "snapshot_epoch": col("snapshot_epoch", pa.int32()),
        "state_epoch": col("state_epoch", pa.int32()),
        "leader_epoch": col("leader_epoch", pa.int32()),
        "start_offset": col("start_offset", pa.int64()),
        "delivery_complete_count": col("delivery_complete_count", pa.int32()),
        "create_timestamp": lambda: _ts([row.create_timestamp for row in rows]),
        "write_timestamp": lambda: _ts([row.write_timestamp for row in rows]),
        "state_batches": col("state_batches", schema.field("state_batches").type),
    }
    yield _batch(cols, n, schema)


def segment_summary(path: str, log_partition: int) -> dict[str, Any]:
    """One ``segments`` row: counts from the batch headers and every problem met."""
    health = SegmentHealth()
    row: dict[str, Any] = {"path": path, "log_partition": log_partition, "base_offset": None,
                           "size_bytes": 0, "batches": 0, "records": 0, "first_offset": None,
                           "last_offset": None, "first_timestamp": None, "last_timestamp": None}
    try:
        data = open_bytes(path)
    except OSError as exc:
        row["problems"] = [f"cannot read: {exc}"]
        return row
    row["size_bytes"] = len(data)
    name = path.rsplit("/", 1)[-1]
    row["base_offset"] = log_segment_base(name)
    first_ts: int | None = None
    last_ts: int | None = None
    for b in iter_batches(data, health):
        row["records"] += b.records_count
        if row["first_offset"] is None:
            row["first_offset"] = b.base_offset
        row["last_offset"] = b.base_offset + b.last_offset_delta
        if b.is_control or b.records_count == 0:
            continue
        # With the delete-horizon bit the base timestamp is the horizon, not a record's time.
        start = b.max_timestamp if b.attributes & 0x40 else b.base_timestamp
        first_ts = start if first_ts is None else min(first_ts, start)
        last_ts = b.max_timestamp if last_ts is None else max(last_ts, b.max_timestamp)
    # An empty file is a segment nothing was written to yet: normal, not a problem.
    if data and health.batches == 0 and not health.problems:
        health.problems.append("no record batches")
    row["batches"] = health.batches
    row["first_timestamp"] = first_ts
    row["last_timestamp"] = last_ts
    row["problems"] = health.problems
    return row


def segments_to_arrow(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    arrays = []
    for f in schema:
        values = [r[f.name] for r in rows]
        arrays.append(_ts(values) if pa.types.is_timestamp(f.type) else pa.array(values, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class OffsetsLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.path = options.get("path") or options.get("paths", "")
        self.view = options.get("view", "records")
        self.verify_crc = options.get("verifyCrc", "true").lower() != "false"
        self.chunk_rows = int(options.get("chunkRows", "65536"))
        # Reading one kind of record is cheaper: the other kind's values are never decoded.
        wanted = options.get("kinds", ",".join(sorted(ALL_KINDS)))
        self.kinds = frozenset(k.strip() for k in wanted.split(",") if k.strip())
        if not self.kinds or not self.kinds <= ALL_KINDS:
            raise ValueError(f"{NAME}: option kinds takes {' and/or '.join(sorted(ALL_KINDS))}, not {wanted!r}")
        self.schema = schema
        full = {f.name: f.dataType for f in (SEGMENTS if self.view == "segments" else RECORDS).fields}
        for f in schema.fields:
            if full.get(f.name) != f.dataType:
                raise ValueError(f"{NAME}: no column {f.name} {f.dataType.simpleString()} in the {self.view} view; "
                                 f"columns: {', '.join(full)}")

    def partitions(self) -> Sequence[InputPartition]:
        if self.view == "segments" and self.kinds == {SHARE_STATE}:
            return pack_segments(reader_segments(self.path, self.kinds)[1], topic=SHARE_STATE_TOPIC)
        if self.view == "segments":
            return pack_segments(list_segments(self.path))
        offsets, shares = reader_segments(self.path, self.kinds)
        return pack_segments(offsets) + pack_segments(shares, topic=SHARE_STATE_TOPIC)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentPartition):
            return  # Spark's stand-in when there is nothing to read (share state asked of a dir without it)
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        if self.view == "segments":
            yield segments_to_arrow([segment_summary(path, log_partition) for path, log_partition in partition.files],
                                    arrow_schema)
            return
        for path, log_partition in partition.files:
            try:
                data = open_bytes(path)
            except OSError:
                continue  # the segments view reports it
            if partition.topic == SHARE_STATE_TOPIC:
                for state in decode_share_state_segment(data, None, self.chunk_rows, self.verify_crc):
                    yield from share_state_to_arrow(state, log_partition, arrow_schema)
                continue
            for chunk in decode_segment(data, None, self.chunk_rows, self.verify_crc, self.kinds & KINDS):
                yield from records_to_arrow(chunk, log_partition, arrow_schema)


class OffsetsLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        view = self.options.get("view", "records")
        if view not in ("records", "segments"):
            raise ValueError(f"{NAME}: option view must be 'records' or 'segments', not {view!r}")
        return SEGMENTS if view == "segments" else RECORDS

    def reader(self, schema: StructType) -> DataSourceReader:
        return OffsetsLogReader(dict(self.options), schema)


def register(spark: Any) -> None:
    spark.dataSource.register(OffsetsLogDataSource)
