"""Share groups in the analysis: KIP-932 records of ``__consumer_offsets`` and the share
coordinator's ``__share_group_state`` records decoded into rows, a share partition's records
folded into its progress, and which segments the data source reads for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.decoder import KINDS, Decoded, decode_segment
from analytics.report import ReportData, share_summary, summary_text
from analytics.segments import NoSegments, list_segments
from analytics.share_state import PROGRESS_FIELDS, Ranges, decode_share_state_segment, fold
from broker.coordinators.share.core.shard import ShareCoordinatorShard
from protocol.messages.share_state_log import ShareSnapshotValue, ShareUpdateValue
from protocol.payloads import share_state_records as ssr
from storage.layout import SHARE_STATE_TOPIC
from tests.unit.analytics.share_bytes import (
    MEMBER,
    OTHER_ID_TEXT,
    T0,
    TOPIC_ID,
    TOPIC_ID_TEXT,
    batches_of,
    segment,
    share_group_records,
    share_state_records,
)


def decoded(data: bytes, kinds: frozenset[str] = KINDS) -> Decoded:
    out = Decoded()
    for chunk in decode_segment(data, chunk_rows=2, kinds=kinds):
        out.share_groups.extend(chunk.share_groups)
        out.commits.extend(chunk.commits)
        out.skipped += chunk.skipped
        out.undecodable += chunk.undecodable
    return out


def test_share_group_records_become_rows_of_their_type() -> None:
    d = decoded(segment(share_group_records()))
    assert d.skipped == 0 and d.undecodable == 0
    rows = d.share_groups
    assert [(r.log_offset, r.timestamp, r.record_type, r.member_id, r.tombstone, r.epoch) for r in rows] == [
        (0, T0, "ShareGroupMemberMetadata", MEMBER, False, None),
        (1, T0 + 1000, "ShareGroupMetadata", None, False, 5),
        (2, T0 + 2000, "ShareGroupTargetAssignmentMember", MEMBER, False, None),
        (3, T0 + 3000, "ShareGroupTargetAssignmentMetadata", None, False, 5),
        (4, T0 + 4000, "ShareGroupCurrentMemberAssignment", MEMBER, False, 5),
        (5, T0 + 5000, "ShareGroupStatePartitionMetadata", None, False, None),
        (6, T0 + 6000, "ShareGroupCurrentMemberAssignment", MEMBER, True, None),
        (7, T0 + 7000, "ShareGroupMemberMetadata", MEMBER, True, None),
    ]
    assert {r.group for r in rows} == {"workers"}
    assert rows[0].share_member == {"rack_id": "rack-a", "client_id": "worker-1", "client_host": "/10.0.0.7",
                                    "subscribed_topic_names": ["jobs"]}
    assert rows[1].metadata_hash == -12345
    assert rows[2].assignment == rows[4].assignment == [{"topic_id": TOPIC_ID_TEXT, "partitions": [0, 1]}]
    assert (rows[4].previous_member_epoch, rows[4].member_state) == (4, 0)
    assert rows[5].share_topics == [
        {"topic_id": TOPIC_ID_TEXT, "topic_name": "jobs", "partitions": [1], "status": "initializing"},
        {"topic_id": TOPIC_ID_TEXT, "topic_name": "jobs", "partitions": [0], "status": "initialized"},
        {"topic_id": OTHER_ID_TEXT, "topic_name": "old", "partitions": None, "status": "deleting"},
    ]
    # Reading another kind leaves them out, uncounted.
    other = decoded(segment(share_group_records()), frozenset({"offset_commit"}))
    assert other.share_groups == [] and other.skipped == 0


def test_share_state_records_become_rows() -> None:
    rows = [r for chunk in decode_share_state_segment(segment(share_state_records()), chunk_rows=2)
            for r in chunk.rows]
    assert [(r.log_offset, r.record_type, r.tombstone, r.group, r.topic_id, r.partition) for r in rows] == [
        (0, "ShareSnapshot", False, "workers", TOPIC_ID_TEXT, 0), (1, "ShareUpdate", False, "workers", TOPIC_ID_TEXT, 0),
        (2, "ShareUpdate", False, "workers", TOPIC_ID_TEXT, 0), (3, "ShareSnapshot", False, "workers", TOPIC_ID_TEXT, 0),
        (4, "ShareSnapshot", True, "workers", TOPIC_ID_TEXT, 0)]
    first, update = rows[0], rows[1]
    assert (first.snapshot_epoch, first.state_epoch, first.leader_epoch, first.start_offset) == (0, 1, -1, 0)
    assert (first.create_timestamp, first.write_timestamp, first.state_batches) == (T0, T0, [])
    assert (update.state_epoch, update.leader_epoch, update.start_offset, update.create_timestamp) == (None, 3, 2, None)
    assert update.state_batches == [
        {"first_offset": 2, "last_offset": 2, "delivery_state": 0, "delivery_count": 1},
        {"first_offset": 3, "last_offset": 3, "delivery_state": 4, "delivery_count": 1},
        {"first_offset": 4, "last_offset": 5, "delivery_state": 2, "delivery_count": 1}]
    assert rows[3].delivery_complete_count == 0 and rows[4].start_offset is None


def as_fold_input(records: list[tuple[bytes, bytes | None]], step_ms: int = 1000) -> list[dict[str, object]]:
    rows = [r for chunk in decode_share_state_segment(segment(records, step_ms)) for r in chunk.rows]
    return [{**vars(r), "at_ms": r.timestamp, "seq": r.log_offset} for r in rows]


def progress(records: list[dict[str, object]], bucket_ms: int = 1000) -> list[dict[str, object]]:
    return [dict(zip(PROGRESS_FIELDS, row, strict=True)) for row in fold(records, bucket_ms)]


def test_the_fold_follows_the_start_offset_redeliveries_and_archived_records() -> None:
    rows = progress(as_fold_input(share_state_records()))
    cols = ("start_offset", "start_offset_advance", "end_offset", "in_flight_records", "acknowledged_records",
            "available_records", "archived_records", "redelivered_total", "archived_total", "max_delivery_count")
    assert [tuple(r[c] for c in cols) for r in rows] == [
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        # 2 released (available after a delivery: it will be redelivered), 3 archived, 4-5 acknowledged.
        (2, 2, 6, 1, 2, 1, 1, 1, 1, 1),
        # 2 released again: the same record, now delivered twice.
        (2, 0, 6, 1, 2, 1, 1, 1, 1, 2),
        # Accepted on its third delivery: the snapshot starts past everything.
        (6, 4, 6, 0, 0, 0, 0, 1, 1, 2),
        (None, None, None, None, None, None, None, 1, 1, 2),
    ]
    assert [r["deleted"] for r in rows] == [False] * 4 + [True]
    assert [(r["snapshots"], r["updates"], r["records"]) for r in rows] == [(1, 0, 1), (0, 1, 1), (0, 1, 1), (1, 0, 1),
                                                                           (0, 0, 1)]
    assert [r["leader_epoch"] for r in rows[:4]] == [-1, 3, 3, 3]  # an update's -1 keeps the epoch known
    assert [r["bucket_ms_start"] for r in rows] == [T0 + i * 1000 for i in range(5)]
    assert [r["effective_start_offset"] for r in rows] == [0, 2, 2, 6, None]
    # One bucket for everything: the state after the last record, advance measured from the first.
    (whole,) = progress(as_fold_input(share_state_records()[:4]), bucket_ms=60_000)
    assert (whole["records"], whole["start_offset"], whole["start_offset_advance"]) == (4, 6, 6)


def test_acknowledgements_at_the_start_offset_move_the_effective_start() -> None:
    """Kafka's way: the acknowledgement of the record at the start offset is written as a batch
    there, the start offset moving on a later write; the first snapshot's -1 is no start yet."""
    snap, upd = ShareSnapshotValue, ShareUpdateValue
    records = [
        ssr.encode(ssr.ShareStateRecord(ssr.SNAPSHOT, "workers", TOPIC_ID, 0, snap(
            snapshot_epoch=0, state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1,
            create_timestamp=T0, write_timestamp=T0, state_batches=[]))),
        ssr.encode(ssr.ShareStateRecord(ssr.UPDATE, "workers", TOPIC_ID, 0, upd(
            snapshot_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=-1,
            state_batches=batches_of(upd, (0, 2, 2, 1), (3, 3, 0, 1), (4, 6, 2, 1), (7, 7, 4, 1), (8, 9, 2, 1))))),
        ssr.encode(ssr.ShareStateRecord(ssr.UPDATE, "workers", TOPIC_ID, 0, upd(
            snapshot_epoch=0, leader_epoch=0, start_offset=3, delivery_complete_count=-1,
            state_batches=batches_of(upd, (3, 3, 2, 3))))),
    ]
    rows = progress(as_fold_input(records))
    assert [(r["start_offset"], r["effective_start_offset"], r["start_offset_advance"], r["in_flight_records"])
            for r in rows] == [(-1, -1, None, 0), (0, 3, 3, 1), (3, 10, 7, 0)]
    assert (rows[-1]["redelivered_total"], rows[-1]["archived_total"], rows[-1]["max_delivery_count"]) == (1, 1, 3)


def test_the_fold_is_the_share_coordinators_replay() -> None:
    """The broker's own replay of the same records holds the state the fold reports."""
    records = share_state_records()[:3]
    shard = ShareCoordinatorShard(0)
    for key, value in records:
        rec = ssr.decode(key, value)
        assert rec is not None
        shard.replay(rec)
    state = shard.states[("workers", TOPIC_ID, 0)]
    last = progress(as_fold_input(records))[-1]
    acked = sum(b.last - b.first + 1 for b in state.batches if b.state == 2)
    assert (last["start_offset"], last["leader_epoch"], last["acknowledged_records"]) == (
        state.start_offset, state.leader_epoch, acked)
    assert last["end_offset"] == max(b.last + 1 for b in state.batches)
    assert last["max_delivery_count"] == max(b.deliveries for b in state.batches)


def test_an_update_after_the_state_was_deleted_is_ignored() -> None:
    snapshot, update = share_state_records()[0], share_state_records()[1]
    tombstone = share_state_records()[4]
    rows = progress(as_fold_input([snapshot, tombstone, update]))
    assert [r["deleted"] for r in rows] == [False, True, True]
    assert rows[2]["start_offset"] is None


def test_ranges_merge_overlapping_and_adjacent_offsets() -> None:
    r = Ranges()
    for first, last in [(10, 12), (1, 1), (13, 14), (3, 4), (2, 2), (11, 20), (30, 30)]:
        r.add(first, last)
    assert list(zip(r.firsts, r.lasts, strict=True)) == [(1, 4), (10, 20), (30, 30)]
    assert len(r) == 4 + 11 + 1


def _write(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True)
    path = directory / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def test_the_data_source_reads_each_log_for_its_kinds(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from analytics.source import reader_segments

    offsets = _write(tmp_path / "__consumer_offsets-4", segment(share_group_records()))
    state = _write(tmp_path / f"{SHARE_STATE_TOPIC}-7", segment(share_state_records()))
    everything = frozenset({"share_group", "share_state"})
    found = reader_segments(str(tmp_path), everything)
    assert ([(s.path, s.log_partition) for s in found[0]], [(s.path, s.log_partition) for s in found[1]]) == (
        [(str(offsets), 4)], [(str(state), 7)])
    assert reader_segments(str(tmp_path), frozenset({"share_state"}))[0] == []
    # Given on its own, a share-state partition is known by its name; an offsets segment is not share state.
    assert [s.path for s in reader_segments(str(state.parent), frozenset({"share_state"}))[1]] == [str(state)]
    assert reader_segments(str(offsets), frozenset({"share_state"})) == ([], [])
    assert [s.path for s in reader_segments(str(offsets), everything)[0]] == [str(offsets)]
    # A share-state partition given on its own is not read as the offsets log, nor the other way round.
    with pytest.raises(NoSegments):
        list_segments(str(state.parent))
    with pytest.raises(NoSegments):
        list_segments(str(state))
    with pytest.raises(NoSegments):
        list_segments(str(offsets.parent), SHARE_STATE_TOPIC)
    # A data dir without share state has none to read, which is no error; a missing one is.
    (tmp_path / f"{SHARE_STATE_TOPIC}-7" / "00000000000000000000.log").unlink()
    assert reader_segments(str(tmp_path), frozenset({"share_state"})) == ([], [])
    with pytest.raises(NoSegments):
        reader_segments(str(tmp_path / "missing"), frozenset({"share_state"}))


def test_the_summary_counts_share_partitions_redeliveries_and_archived_records() -> None:
    progress_rows = [
        {"group": "workers", "topic": "jobs", "topic_id": TOPIC_ID_TEXT, "partition": 0, "bucket_start": 1,
         "effective_start_offset": 2, "in_flight_records": 1, "acknowledged_records": 2, "redelivered_total": 1,
         "archived_total": 1, "max_delivery_count": 2, "last_write": None},
        {"group": "workers", "topic": "jobs", "topic_id": TOPIC_ID_TEXT, "partition": 0, "bucket_start": 2,
         "effective_start_offset": 6, "in_flight_records": 0, "acknowledged_records": 0, "redelivered_total": 3,
         "archived_total": 1, "max_delivery_count": 4, "last_write": None}]
    members = [{"group": "workers", "current_member": True}, {"group": "workers", "current_member": False},
               {"group": "idle", "current_member": True}]
    rows = share_summary(progress_rows, members)
    assert [(r["group"], r["members"], r.get("effective_start_offset")) for r in rows] == [("idle", 1, None),
                                                                                ("workers", 1, 6)]
    text = summary_text(ReportData(source="x", now_ms=T0, bucket_ms=1000, retention_ms=1, share_groups=rows))
    assert ("2 share group(s) over 1 share partition(s): 0 record(s) in flight, 3 redelivered and 1 archived "
            "as far as the log shows, highest delivery count 4.") in text


def test_the_segments_view_of_share_state_reports_its_damage(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from analytics.source import RECORDS, SEGMENTS, OffsetsLogReader

    data = bytearray(segment(share_state_records()))
    data[-3] ^= 0xFF  # in the last batch's records: its CRC no longer matches
    _write(tmp_path / f"{SHARE_STATE_TOPIC}-2", bytes(data))
    _write(tmp_path / "__consumer_offsets-0", segment(share_group_records()))
    reader = OffsetsLogReader({"path": str(tmp_path), "view": "segments", "kinds": "share_state"}, SEGMENTS)
    (pack,) = reader.partitions()
    rows = [r for batch in reader.read(pack) for r in batch.to_pylist()]
    assert [(Path(r["path"]).parent.name, r["log_partition"], r["batches"]) for r in rows] == [
        (f"{SHARE_STATE_TOPIC}-2", 2, 4)]
    assert rows[0]["problems"] and "CRC mismatch" in rows[0]["problems"][0]
    # The records view reads around it: the four good records.
    records = OffsetsLogReader({"path": str(tmp_path), "kinds": "share_state"}, RECORDS)
    (pack,) = records.partitions()
    assert sum(b.num_rows for b in records.read(pack)) == 4
