"""Kafka 4.4's own reader (kafka-dump-log.sh, DumpLogSegments, with --offsets-decoder and
--share-group-state-decoder, which decode with Kafka's generated record classes) against the
analysis decoder, on share-group and share-state records of every type written by our codecs, and
on those a real Kafka 4.4 broker wrote for a share consumer: both must find the same records with
the same fields, and the fold must see in Kafka's records what the consumer did."""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from analytics.decoder import decode_segment
from analytics.share_state import PROGRESS_FIELDS, decode_share_state_segment, fold
from storage.layout import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from testkit.kafka import run_tool
from tests.integration.helpers.clients import set_group_configs
from tests.integration.helpers.kafka_programs import DUMP_LOG
from tests.unit.analytics.share_bytes import segment, share_group_records, share_state_records

_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (.*?) payload: ?(.*)$")
# Our record names by Kafka's record type (the key's "type"), per log.
_GROUP_TYPES = {"10": "ShareGroupMemberMetadata", "11": "ShareGroupMetadata",
                "12": "ShareGroupTargetAssignmentMetadata", "13": "ShareGroupTargetAssignmentMember",
                "14": "ShareGroupCurrentMemberAssignment", "15": "ShareGroupStatePartitionMetadata"}
_STATE_TYPES = {"0": "ShareSnapshot", "1": "ShareUpdate"}
_DECODERS = {"--offsets-decoder": _GROUP_TYPES, "--share-group-state-decoder": _STATE_TYPES}


def kafka_records(libs: Path, decoder: str, path: Path) -> dict[int, dict[str, Any]]:
    """offset -> {"type", "key", "data" (None for a tombstone)} as DumpLogSegments prints them,
    for the share records only (other groups' records of __consumer_offsets are left out)."""
    done = run_tool(libs, DUMP_LOG, decoder, "--files", str(path), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = {}
    for line in done.stdout.splitlines():
        m = _RECORD.match(line)
        if m:
            key = json.loads(m.group(2))
            kind = _DECODERS[decoder].get(str(key.get("type")))
            if kind is None:
                continue
            payload = json.loads(m.group(3)) if m.group(3).startswith("{") else None  # "<DELETE>"
            out[int(m.group(1))] = {"type": kind, "key": key["data"],
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
    assert len(ours_groups) == 8 and {r["type"] for r in ours_groups.values()} == set(_GROUP_TYPES.values())

    ours_state = {r.log_offset: state_row_as_kafka(r)
                  for chunk in decode_share_state_segment(state_log.read_bytes()) for r in chunk.rows}
    assert ours_state == theirs_state
    assert [r["type"] for r in ours_state.values()] == ["ShareSnapshot", "ShareUpdate", "ShareUpdate", "ShareSnapshot",
                                                        "ShareSnapshot"]
    assert ours_state[1]["data"]["stateBatches"][1] == {"firstOffset": 3, "lastOffset": 3, "deliveryState": 4,
                                                        "deliveryCount": 1}


def _share_consumer_run(bootstrap: str, group: str, topic: str) -> list[tuple[str, int]]:
    """Ten jobs through an explicit-acknowledgement share consumer: job-3 released twice and
    accepted on its third delivery, job-7 rejected, the rest accepted. (value, delivery count)s."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # The jobs are in the topic before the group reads it: it starts at the earliest offset.
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, value=f"job-{i}".encode())
    p.flush(10)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    deliveries: list[tuple[str, int]] = []
    try:
        c.subscribe([topic])
        for wanted in (10, 1, 1):
            got = 0
            deadline = time.monotonic() + 60
            while got < wanted and time.monotonic() < deadline:
                for m in c.poll(0.5):
                    if m.error() is not None:
                        continue
                    value = m.value().decode()
                    deliveries.append((value, m.delivery_count()))
                    got += 1
                    c.acknowledge(m, AcknowledgeType.RELEASE if value == "job-3" and m.delivery_count() < 3
                                  else AcknowledgeType.REJECT if value == "job-7" else AcknowledgeType.ACCEPT)
            assert got == wanted, deliveries
            c.commit_sync()
    finally:
        c.close()
    return deliveries


def test_a_kafka_brokers_share_records_read_and_folded(kafka_libs: Path, kafka: Any) -> None:
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"workers-{suffix}", f"jobs-{suffix}"
    deliveries = _share_consumer_run(kafka.bootstrap, group, topic)
    assert sorted(n for v, n in deliveries if v == "job-3") == [1, 2, 3]
    data_dir = Path(kafka.data_dir)

    state_logs = sorted(data_dir.glob(f"{SHARE_STATE_TOPIC}-*/*.log"))
    ours_rows = [(path, r) for path in state_logs for chunk in decode_share_state_segment(path.read_bytes())
                 for r in chunk.rows if r.group == group]
    assert ours_rows, "Kafka wrote no share state for the group"
    (path,) = {p for p, _ in ours_rows}  # one share partition: one partition of __share_group_state
    theirs = {o: r for o, r in kafka_records(kafka_libs, "--share-group-state-decoder", path).items()
              if r["key"]["groupId"] == group}
    assert {r.log_offset: state_row_as_kafka(r) for _, r in ours_rows} == theirs

    rows = [{**vars(r), "at_ms": r.timestamp, "seq": r.log_offset} for _, r in ours_rows]
    last = dict(zip(PROGRESS_FIELDS, fold(rows, 3_600_000)[-1], strict=True))
    # Everything acknowledged or archived (Kafka leaves the written start offset at job-3 until a
    # later write moves it); job-3 redelivered, delivered three times, job-7 archived.
    assert (last["effective_start_offset"], last["end_offset"], last["in_flight_records"]) == (10, 10, 0)
    assert (last["redelivered_total"], last["archived_total"], last["max_delivery_count"]) == (1, 1, 3)

    groups_logs = sorted(data_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"))
    ours_groups = {(str(p), r.log_offset): group_row_as_kafka(r) for p in groups_logs
                   for chunk in decode_segment(p.read_bytes()) for r in chunk.share_groups if r.group == group}
    (where,) = {Path(p) for p, _ in ours_groups}
    theirs_groups = {(str(where), o): _without(r, "assignmentTimestamp")
                     for o, r in kafka_records(kafka_libs, "--offsets-decoder", where).items()
                     if r["key"]["groupId"] == group}
    assert ours_groups == theirs_groups
    types = {r["type"] for r in ours_groups.values()}
    assert {"ShareGroupMemberMetadata", "ShareGroupMetadata", "ShareGroupCurrentMemberAssignment",
            "ShareGroupStatePartitionMetadata"} <= types
