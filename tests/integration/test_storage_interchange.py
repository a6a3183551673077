"""The `__consumer_offsets` log in Kafka's bytes, both ways: Kafka's DumpLogSegments (the tool
behind kafka-dump-log.sh --offsets-decoder) reads the segments kcoord wrote and finds every record
`kcoord dump-log` shows, field for field; and `kcoord dump-log` (and `kcoord analyze`) read the
segments a real Kafka 4.4 wrote and find what `kafka-consumer-groups --describe` reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from broker.coordinators.group.core.base.partitioning import partition_for
from protocol.payloads.consumer_protocol import decode_assignment, decode_subscription
from testkit.kafka import run_tool
from testkit.kcoord import ROOT
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.kafka_programs import DUMP_LOG, GROUPS, Tools, table

pytestmark = [pytest.mark.timeout(240), pytest.mark.differential]
RECORDS = 40
# A field kcoord's decoder prints that Kafka's leaves out holds its default: a field the record's
# version does not carry (expireTimestamp of an OffsetCommit value v3), or a tagged field at its
# default, which Kafka's JSON omits (classicMemberMetadata of a consumer-protocol member, the
# metadataHash 0 of a consumer group's metadata).
ABSENT = (None, -1, 0, [], "")


def snake(name: str) -> str:
    """Kafka's JSON names (camelCase, from its schemas) as kcoord's tables spell them."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def normalized(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {snake(k): normalized(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [normalized(v) for v in obj]
    return obj


def _consumer_blobs(member: dict[str, Any]) -> dict[str, Any]:
    """A classic member's subscription and assignment: Kafka's decoder prints them decoded, kcoord's
    as the bytes; both become (subscribed topics, assigned partitions)."""
    member = dict(member)
    subscription, assignment = member.pop("subscription"), member.pop("assignment")
    if isinstance(subscription, str):
        topics = list(decode_subscription(bytes.fromhex(subscription)).topics)
        assigned = sorted((tp.topic, p) for tp in decode_assignment(bytes.fromhex(assignment)).assigned_partitions
                          for p in tp.partitions)
    else:
        topics = subscription["topics"]
        assigned = sorted((tp["topic"], p) for tp in assignment["assigned_partitions"] for p in tp["partitions"])
    member["subscribed"], member["assigned"] = topics, assigned
    return member


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    out = normalized({"key": record["key"], "payload": record["payload"]})
    payload = out["payload"]
    if not isinstance(out["key"], dict):  # a record kcoord could not decode: reported as a difference
        return out
    if out["key"]["type"] == "2" and isinstance(payload, dict) and payload["data"]["protocol_type"] == "consumer":
        payload["data"]["members"] = [_consumer_blobs(m) for m in payload["data"]["members"]]
    return out


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where kcoord's decoding of a record differs from Kafka's: every field Kafka prints must be
    there with the same value; a field only kcoord prints must hold its absent default."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = [f"{path}.{k}: missing" for k in theirs if k not in ours]
        found += [f"{path}.{k}: only kcoord, {ours[k]!r}" for k in ours if k not in theirs and ours[k] not in ABSENT]
        for k in theirs.keys() & ours.keys():
            found += differences(ours[k], theirs[k], f"{path}.{k}")
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: kcoord {ours!r}, Kafka {theirs!r}"]


# Tagged fields Kafka 4.4 writes that kcoord's record tables (Kafka 4.1's layouts) do not declare:
# kcoord reads past them (unknown tags are skipped), so neither the offsets nor the groups change.
NEWER_THAN_KCOORD = {
    ".payload.data.topic_id: missing",  # OffsetCommitValue v4 (KAFKA-19141)
    ".payload.data.assigned_partitions[0].assignment_epochs: missing",  # ConsumerGroupCurrentMemberAssignmentValue
}


_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (.*?) payload: ?(.*)$")


def kafka_dump_text(libs: Path, files: list[Path]) -> str:
    done = run_tool(libs, DUMP_LOG, "--offsets-decoder", "--files", ",".join(map(str, files)), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def kafka_dump(libs: Path, files: list[Path], text: str | None = None) -> dict[tuple[str, int], dict[str, Any]]:
    """DumpLogSegments --offsets-decoder over the files: (file, offset) -> key and payload."""
    records: dict[tuple[str, int], dict[str, Any]] = {}
    current = ""
    for line in (text if text is not None else kafka_dump_text(libs, files)).splitlines():
        if line.startswith("Dumping "):
            current = str(Path(line.removeprefix("Dumping ")).resolve())
        m = _RECORD.match(line)
        if m:
            key = json.loads(m.group(2))
            payload = json.loads(m.group(3)) if m.group(3).startswith("{") else None  # "<DELETE>": a tombstone
            records[(current, int(m.group(1)))] = {"key": key, "payload": payload}
    return records


def dump_lines(text: str) -> list[str]:
    """kafka-dump-log's text: file, batch and record lines, each record's cut before its key."""
    return [line.split(" key: ", 1)[0] for line in text.splitlines() if line.strip()]


def kcoord_dump(files: list[Path]) -> dict[tuple[str, int], dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "kcoord", "dump-log", "--json", *map(str, files)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    records: dict[tuple[str, int], dict[str, Any]] = {}
    for line in done.stdout.splitlines():
        batch = json.loads(line)
        assert "error" not in batch, batch
        for rec in batch.get("records", []):
            if "key" in rec:  # control records (transaction markers) carry none
                records[(str(Path(batch["file"]).resolve()), rec["offset"])] = {"key": rec["key"],
                                                                                 "payload": rec["payload"]}
    return records


def offsets_segments(data_dir: Path, groups: list[str] | None = None) -> list[Path]:
    shards = sorted(data_dir.glob("__consumer_offsets-*")) if groups is None else \
        sorted({data_dir / f"__consumer_offsets-{partition_for(g)}" for g in groups})
    return [f for shard in shards for f in sorted(shard.glob("*.log")) if f.stat().st_size > 0]


def of_groups(record: dict[str, Any], groups: list[str]) -> bool:
    """Whether a record is about one of ``groups`` (a key that did not decode counts: it is a
    difference to report)."""
    key = normalized(record["key"])
    if not isinstance(key, dict):
        return True
    data = key.get("data") or {}
    return data.get("group", data.get("group_id")) in groups


def commits_of(records: dict[tuple[str, int], dict[str, Any]], groups: list[str]) -> dict[tuple[str, str, int], int]:
    """The committed offsets a reader of the log rebuilds: the last record of each key wins, a
    tombstone deletes it."""
    last: dict[tuple[str, str, int], int | None] = {}
    for (_file, _offset), rec in sorted(records.items()):
        key = normalized(rec["key"])
        if key["type"] in ("0", "1") and key["data"]["group"] in groups:
            data = key["data"]
            payload = rec["payload"]
            last[(data["group"], data["topic"], data["partition"])] = None if payload is None else \
                payload["data"]["offset"]
    return {k: v for k, v in last.items() if v is not None}


def consume_and_commit(bootstrap: str, topic: str, group: str, close: bool = True, **conf: Any) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": group, **conf})
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < RECORDS:
        assert time.monotonic() < deadline, f"{group} consumed {seen} of {RECORDS}"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    if close:
        consumer.close()
    return consumer


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def test_kafka_dump_log_segments_reads_kcoord_offsets_log(kafka_libs: Path, broker_factory: Any) -> None:
    broker = broker_factory()
    suffix = uuid.uuid4().hex[:6]
    topic = f"interchange-{suffix}"
    classic, consumer_group, live, deleted = (f"{name}-{suffix}" for name in ("classic", "kip848", "live", "deleted"))
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic)
    consume_and_commit(broker.bootstrap, topic, classic)
    consume_and_commit(broker.bootstrap, topic, consumer_group, **{"group.protocol": "consumer"})
    consume_and_commit(broker.bootstrap, topic, deleted)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups([deleted])[deleted].result(15)
    # A member still in its group when the broker stops: its GroupMetadata record holds it.
    member = consume_and_commit(broker.bootstrap, topic, live, close=False)
    try:
        assert broker.stop() == 0
    finally:
        member.close()

    files = offsets_segments(broker.data_dir)
    kafka_text = kafka_dump_text(kafka_libs, files)
    theirs, ours = kafka_dump(kafka_libs, files, kafka_text), kcoord_dump(files)

    # The text of `kcoord dump-log` is Kafka's, line for line, up to the decoded key and value
    # (whose field names Kafka spells in camelCase).
    ours_text = subprocess.run([sys.executable, "-m", "kcoord", "dump-log", *map(str, files)], cwd=ROOT,
                               capture_output=True, text=True, timeout=120, check=True).stdout
    assert dump_lines(ours_text) == dump_lines(kafka_text)

    assert ours.keys() == theirs.keys() and ours
    mismatches = {where: found for where in sorted(ours)
                  if (found := differences(comparable(ours[where]), comparable(theirs[where])))}
    assert not mismatches, sorted({d for found in mismatches.values() for d in found})

    groups = [classic, consumer_group, live, deleted]
    expected = {(g, topic, p): o for g in (classic, consumer_group, live) for (_, _, p), o in
                commits_of(ours, [g]).items()}
    assert commits_of(theirs, groups) == commits_of(ours, groups) == expected
    assert sum(o for (g, _, _), o in expected.items() if g == classic) == RECORDS
    assert {g for g, _, _ in expected} == {classic, consumer_group, live}  # `deleted` is tombstoned
    last_live = [comparable(rec) for (_, _), rec in sorted(theirs.items())
                 if rec["key"]["type"] == "2" and rec["key"]["data"]["group"] == live][-1]
    members = last_live["payload"]["data"]["members"]
    assert [(m["client_id"], m["subscribed"], len(m["assigned"])) for m in members] == [(live, [topic], 4)]


@pytest.fixture(scope="module")
def kafka_groups(kafka: Any) -> Iterator[tuple[str, list[str]]]:
    """Two groups that committed on the real Kafka: a classic one and a consumer-protocol one."""
    suffix = uuid.uuid4().hex[:6]
    topic = f"interchange-{suffix}"
    groups = [f"kafka-classic-{suffix}", f"kafka-kip848-{suffix}"]
    create_topic(kafka.bootstrap, topic, 3)
    produce(kafka.bootstrap, topic)
    consume_and_commit(kafka.bootstrap, topic, groups[0])
    consume_and_commit(kafka.bootstrap, topic, groups[1], **{"group.protocol": "consumer"})
    yield topic, groups


def test_kcoord_dump_log_reads_kafka_offsets_log(kafka_libs: Path, kafka: Any,
                                                 kafka_groups: tuple[str, list[str]]) -> None:
    topic, groups = kafka_groups
    tools = Tools(kafka_libs, kafka.bootstrap)
    described = tools.out(GROUPS, "--describe", "--group", groups[0], "--group", groups[1])
    reported = {(r["GROUP"], r["TOPIC"], int(r["PARTITION"])): int(r["CURRENT-OFFSET"])
                for r in table(described, "GROUP") if r["CURRENT-OFFSET"] != "-"}
    assert {(g, t) for g, t, _ in reported} == {(g, topic) for g in groups} and sum(reported.values()) == 2 * RECORDS

    # The live segments of the running broker: Kafka writes them through the page cache, which
    # another process reads as it is.
    files = offsets_segments(kafka.data_dir, groups)
    ours = kcoord_dump(files)
    assert commits_of(ours, groups) == reported

    # And record for record what Kafka's own decoder reads in them.
    # Only this test's groups: the session's Kafka also holds the groups of other tests (the
    # differential tests join with protocol metadata that is no consumer subscription at all).
    theirs = {where: rec for where, rec in kafka_dump(kafka_libs, files).items() if of_groups(rec, groups)}
    ours = {where: rec for where, rec in ours.items() if of_groups(rec, groups)}
    common = ours.keys() & theirs.keys()
    assert len(common) >= len(theirs) - 5 and {g for (g, _, _) in commits_of({k: ours[k] for k in common}, groups)}
    mismatches = {where: found for where in sorted(common)
                  if (found := [d for d in differences(comparable(ours[where]), comparable(theirs[where]))
                                if re.sub(r"\[\d+\]", "[0]", d) not in NEWER_THAN_KCOORD])}
    assert not mismatches, sorted({d for found in mismatches.values() for d in found})

    # The consumer group's own records (KIP-848): its epoch and that every member left.
    consumer_records = [normalized(ours[k]) for k in sorted(ours)
                        if normalized(ours[k])["key"]["data"].get("group_id") == groups[1]]
    kinds = {r["key"]["type"] for r in consumer_records}
    assert {"3", "5", "6", "7", "8"} <= kinds, kinds
    members: dict[str, bool] = {}
    for r in consumer_records:
        if r["key"]["type"] == "5":
            members[r["key"]["data"]["member_id"]] = r["payload"] is not None
    assert members and not any(members.values())  # every member record ends in a tombstone


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_kcoord_analyze_reads_kafka_data_dir(kafka: Any, kafka_groups: tuple[str, list[str]], tmp_path: Path) -> None:
    """`kcoord analyze` over a copy of the real Kafka's __consumer_offsets directories."""
    pytest.importorskip("pyspark", reason="the analysis tests need the analysis extra (pyspark)")
    pytest.importorskip("pyarrow", reason="Python data sources need pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    topic, groups = kafka_groups
    data = tmp_path / "kafka-data"
    for shard in kafka.data_dir.glob("__consumer_offsets-*"):
        shutil.copytree(shard, data / shard.name, ignore=shutil.ignore_patterns("*.index", "*.timeindex"))
    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "kcoord", "analyze", "--data-dir", str(data), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=540, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    latest = pq.read_table(out / "latest_offsets").to_pylist()
    found = {(r["group"], r["topic"], r["partition"]): r["current_offset"] for r in latest if r["group"] in groups}
    files = offsets_segments(kafka.data_dir, groups)
    assert found == commits_of(kcoord_dump(files), groups)
    assert sum(found.values()) == 2 * RECORDS and {t for _, t, _ in found} == {topic}
