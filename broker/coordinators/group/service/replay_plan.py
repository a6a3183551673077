"""Startup replay that skips what later records overwrite.

Replaying a partition must leave the shard exactly as replaying every record in order would. Most
records in a busy ``__consumer_offsets`` partition are offset commits that a later commit of the
same key replaces, so a first pass reads only keys (cheap) and marks the records whose replay can
matter; the second pass decodes and replays just those, in log order, and skips whole batches that
hold none of them.

An offset record matters if it is the last one for its key, or if it would create a group: the
first value-bearing commit for a group that does not exist at that point (before any
GroupMetadata record of the group, or after its tombstone). GroupMetadata records, the KIP-848
consumer-group records, the KIP-1071 streams-group records and the KIP-932 share-group records always matter.

Transactional batches (TxnOffsetCommit) and transaction markers always matter too, and do not
count as "the last commit of a key": whether a transactional offset takes effect depends on the
marker that follows it. Their records are replayed as pending offsets of the batch's producer,
and each marker applies or drops that producer's pending offsets.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from protocol.payloads.offsets_log_records import (
    GROUP_METADATA_KEY_VERSION,
    OFFSET_COMMIT_KEY_VERSIONS,
    SHARE_GROUP_RECORD_TYPES,
    STREAMS_GROUP_RECORD_TYPES,
    decode_record,
    key_group,
    key_version,
)
from protocol.record_batch import ControlType, RecordBatch, control_type_of, decode_keys, decode_records

# Key versions (record types) of the KIP-848 consumer-group records; 3 is the group's metadata.
CONSUMER_GROUP_KEY_VERSIONS = frozenset((3, 4, 5, 6, 7, 8, 16))
CONSUMER_GROUP_METADATA_KEY_VERSION = 3
# The KIP-1071 streams-group records, which always matter too; 17 is the group's metadata.
STREAMS_GROUP_KEY_VERSIONS = STREAMS_GROUP_RECORD_TYPES
STREAMS_GROUP_METADATA_KEY_VERSION = 17
# The KIP-932 share-group records always matter too; 11 is the group's metadata.
SHARE_GROUP_METADATA_KEY_VERSION = 11
GROUP_KEY_VERSIONS = CONSUMER_GROUP_KEY_VERSIONS | STREAMS_GROUP_KEY_VERSIONS | SHARE_GROUP_RECORD_TYPES


def plan(batches: Callable[[], Any]) -> tuple[list[int], set[int]]:
    """Sorted offsets of the offset-commit records whose replay matters, and the base offsets of
    the batches that hold GroupMetadata records (always replayed)."""
    last: dict[bytes, int] = {}
    group_batches: set[int] = set()
    creators: list[int] = []
    present: set[bytes] = set()  # groups that exist at this point of the log
    for batch in batches():
        if batch.is_control:
            continue
        base = batch.base_offset
        if batch.is_transactional:
            group_batches.add(base)
            continue
        for delta, key, value_is_null in decode_keys(batch):
            if key is None or len(key) < 4:
                continue
            version, group = key_group(key)
            if version in OFFSET_COMMIT_KEY_VERSIONS:
                offset = base + delta
                last[key] = offset
                if not value_is_null and group not in present:
                    present.add(group)
                    creators.append(offset)
            elif version == GROUP_METADATA_KEY_VERSION or version in GROUP_KEY_VERSIONS:
                group_batches.add(base)
                if not value_is_null:
                    present.add(group)
                elif version in (GROUP_METADATA_KEY_VERSION, CONSUMER_GROUP_METADATA_KEY_VERSION,
                                 STREAMS_GROUP_METADATA_KEY_VERSION, SHARE_GROUP_METADATA_KEY_VERSION):
                    present.discard(group)
    return sorted(set(creators).union(last.values())), group_batches


def _wanted(needed: list[int], batch: RecordBatch) -> bool:
    i = bisect.bisect_left(needed, batch.base_offset)
    return i < len(needed) and needed[i] <= batch.last_offset


class Selected(NamedTuple):
    """One record whose replay matters, as the log holds it."""

    offset: int
    timestamp: int
    key: bytes
    value: bytes | None


def select(batches: Callable[[], Iterable[RecordBatch]]) -> Iterator[Selected]:
    """The records whose replay matters, in log order, undecoded: what ``replay_log`` replays, for
    a log without transactional batches or markers (it skips markers and does not tell a
    transactional record from another). ``batches`` returns a fresh iterator over the batches each
    time it is called (it is walked twice)."""
    needed, group_batches = plan(batches)
    needed_set = set(needed)
    for batch in batches():
        if batch.is_control:
            continue
        if batch.base_offset not in group_batches and not _wanted(needed, batch):
            continue
        base = batch.base_offset
        base_ts = batch.base_timestamp
        for record in decode_records(batch):
            key = record.key
            if key is None or len(key) < 2:
                continue
            offset = base + record.offset_delta
            if key_version(key) in OFFSET_COMMIT_KEY_VERSIONS and offset not in needed_set:
                continue
            yield Selected(offset, base_ts + record.timestamp_delta, key, record.value)


def _replay_marker(batch: RecordBatch, on_marker: Callable[[int, bool], None] | None) -> None:
    if on_marker is None:
        return
    for record in decode_records(batch):
        kind = control_type_of(record)
        if kind in (ControlType.COMMIT, ControlType.ABORT):
            on_marker(batch.producer_id, kind == ControlType.COMMIT)


def replay_log(batches: Callable[[], Any], replay: Callable[[Any, int], None],
               replay_txn: Callable[[Any, int], None] | None = None,
               on_marker: Callable[[int, bool], None] | None = None) -> tuple[int, int]:
    """Replays a partition through ``replay(record, offset)``, the records of transactional
    batches through ``replay_txn(record, producer_id)`` and transaction markers through
    ``on_marker(producer_id, committed)``; returns (records read, records replayed). ``batches``
    returns a fresh iterator over the partition's batches each time it is called."""
    needed, group_batches = plan(batches)
    needed_set = set(needed)
    read = replayed = 0
    for batch in batches():
        if batch.is_control:
            if batch.is_transactional:
                _replay_marker(batch, on_marker)
            continue
        read += batch.records_count
        if batch.is_transactional:
            if replay_txn is not None:
                for record in decode_records(batch):
                    if record.key is None or len(record.key) < 2:
                        continue
                    rec = decode_record(record.key, record.value)
                    if rec is not None:
                        replay_txn(rec, batch.producer_id)
                        replayed += 1
            continue
        if batch.base_offset not in group_batches and not _wanted(needed, batch):
            continue
        base = batch.base_offset
        for record in decode_records(batch):
            key = record.key
            if key is None or len(key) < 2:
                continue
            offset = base + record.offset_delta
            if key_version(key) in OFFSET_COMMIT_KEY_VERSIONS and offset not in needed_set:
                continue
            rec = decode_record(key, record.value)
            if rec is not None:
                replay(rec, offset)
                replayed += 1
    return read, replayed
