"""Kafka 4.4's own reader (kafka-dump-log.sh, DumpLogSegments, with --offsets-decoder and
--share-group-state-decoder, which decode with Kafka's generated record classes) against the
analysis decoder, on share-group and share-state records of every type written by our codecs:
both must find the same records with the same fields."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from analytics.decoder import decode_segment
from analytics.share_state import decode_share_state_segment
from storage.layout import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from testkit.kafka import run_tool
from tests.integration.helpers.kafka_programs import DUMP_LOG
from tests.unit.analytics.share_bytes import segment, share_group_records, share_state_records

_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (.*?) payload: ?(.*)$")
# Our record names by Kafka's record type (the key's "type").
_TYPES = {"10": "ShareGroupMemberMetadata", "11": "ShareGroupMetadata", "12": "ShareGroupTargetAssignmentMetadata",
          "13": "ShareGroupTargetAssignmentMember", "14": "ShareGroupCurrentMemberAssignment",
          "15": "ShareGroupStatePartitionMetadata", "0": "ShareSnapshot", "1": "ShareUpdate"}


def kafka_records(libs: Path, decoder: str, path: Path) -> dict[int, dict[str, Any]]:
    """offset -> {"type", "key", "data" (None for a tombstone)} as DumpLogSegments prints them."""
    done = run_tool(libs, DUMP_LOG, decoder, "--files", str(path), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = {}
    for line in done.stdout.splitlines():
        m = _RECORD.match(line)
        if m:
            key = json.loads(m.group(2))
            payload = json.loads(m.group(3)) if m.group(3).startswith("{") else None  # "<DELETE>"
            out[int(m.group(1))] = {"type": _TYPES[key["type"]], "key": key["data"],
                                    "data": None if payload is None else payload["data"]}
    return out


def _topics(entries: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"topicId": t["topic_id"], "partitions": t["partitions"]} for t in entries or []]


def group_row_as_kafka(r: Any) -> dict[str, Any]:
    """One of our share-group rows in the shape of Kafka's dump (camelCase fields)."""
    key: dict[str, Any] = {"groupId": r.group, **({"memberId": r.member_id} if r.member_id is not None else {})}
    data: dict[str, Any] | None = None
    if not r.tombstone:
        if r.record_type == "ShareGroupMemberMetadata":
            m = r.share_member
            data = {"rackId": m["rack_id"], "clientId": m["client_id"], "clientHost": m["client_host"],
                    "subscribedTopicNames": m["subscribed_topic_names"]}
        elif r.record_type == "ShareGroupMetadata":
            data = {"epoch": r.epoch, "metadataHash": r.metadata_hash}
        elif r.record_type == "ShareGroupTargetAssignmentMetadata":
            data = {"assignmentEpoch": r.epoch}
        elif r.record_type == "ShareGroupTargetAssignmentMember":
            data = {"topicPartitions": _topics(r.assignment)}
        elif r.record_type == "ShareGroupCurrentMemberAssignment":
            data = {"memberEpoch": r.epoch, "previousMemberEpoch": r.previous_member_epoch, "state": r.member_state,
                    "assignedPartitions": _topics(r.assignment)}
        else:
            def info(status: str) -> list[dict[str, Any]]:
                return [{"topicId": t["topic_id"], "topicName": t["topic_name"], "partitions": t["partitions"]}
                        for t in r.share_topics if t["status"] == status]

            data = {"initializingTopics": info("initializing"), "initializedTopics": info("initialized"),
                    "deletingTopics": [{"topicId": t["topic_id"], "topicName": t["topic_name"]}
                                       for t in r.share_topics if t["status"] == "deleting"]}
    return {"type": r.record_type, "key": key, "data": data}


def state_row_as_kafka(r: Any) -> dict[str, Any]:
    key = {"groupId": r.group, "topicId": r.topic_id, "partition": r.partition}
    data: dict[str, Any] | None = None
    if not r.tombstone:
        data = {"snapshotEpoch": r.snapshot_epoch, "leaderEpoch": r.leader_epoch, "startOffset": r.start_offset}
        if r.record_type == "ShareSnapshot":
            data.update(stateEpoch=r.state_epoch, createTimestamp=r.create_timestamp, writeTimestamp=r.write_timestamp)
        if r.delivery_complete_count != -1:  # a tagged field: written only when not its default
            data["deliveryCompleteCount"] = r.delivery_complete_count
        data["stateBatches"] = [{"firstOffset": b["first_offset"], "lastOffset": b["last_offset"],
                                 "deliveryState": b["delivery_state"], "deliveryCount": b["delivery_count"]}
                                for b in r.state_batches]
    return {"type": r.record_type, "key": key, "data": data}


def _without(record: dict[str, Any], *fields: str) -> dict[str, Any]:
    data = record["data"]
    return {**record, "data": None if data is None else {k: v for k, v in data.items() if k not in fields}}


def test_kafka_reads_the_share_records_as_the_analysis_decoder_does(kafka_libs: Path, tmp_path: Path) -> None:
    groups_log = tmp_path / f"{OFFSETS_TOPIC}-0" / "00000000000000000000.log"
    state_log = tmp_path / f"{SHARE_STATE_TOPIC}-0" / "00000000000000000000.log"
    for path, records in ((groups_log, share_group_records()), (state_log, share_state_records())):
        path.parent.mkdir()
        path.write_bytes(segment(records))
    with ThreadPoolExecutor(2) as pool:
        theirs_groups, theirs_state = pool.map(lambda job: kafka_records(kafka_libs, *job), [
            ("--offsets-decoder", groups_log), ("--share-group-state-decoder", state_log)])

    ours_groups = {r.log_offset: group_row_as_kafka(r)
                   for chunk in decode_segment(groups_log.read_bytes()) for r in chunk.share_groups}
    # The assignment's time (a tagged field of type 12) is not a column of ours.
    assert ours_groups == {o: _without(r, "assignmentTimestamp") for o, r in theirs_groups.items()}
    assert len(ours_groups) == 8 and {r["type"] for r in ours_groups.values()} == set(list(_TYPES.values())[:6])

    ours_state = {r.log_offset: state_row_as_kafka(r)
                  for chunk in decode_share_state_segment(state_log.read_bytes()) for r in chunk.rows}
    assert ours_state == theirs_state
    assert [r["type"] for r in ours_state.values()] == ["ShareSnapshot", "ShareUpdate", "ShareUpdate", "ShareSnapshot",
                                                        "ShareSnapshot"]
    assert ours_state[1]["data"]["stateBatches"][1] == {"firstOffset": 3, "lastOffset": 3, "deliveryState": 4,
                                                        "deliveryCount": 1}
