"""`kcoord analyze` over logs that real clients made through a running kcoord, and over a log in
Kafka's own bytes with damage in it. The session's one Spark session serves every test here."""

from __future__ import annotations

import base64
import os
import queue
import re
import shutil
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the analysis tests need the analysis extra (pyspark)")
pytest.importorskip("pyarrow", reason="Python data sources need pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)", allow_module_level=True)

from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from analytics.job import AnalyzeOptions, analyze, end_offsets_from_data_dir  # noqa: E402
from analytics.source import NAME  # noqa: E402
from testkit.kcoord import BrokerProcess  # noqa: E402
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for  # noqa: E402
from tests.unit.analytics import kafka_bytes as kb  # noqa: E402

# The first test also builds the module's story and runs the analysis (minutes on a loaded 2-core machine).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

TOPIC = "orders"


@dataclass
class Story:
    """What the clients did, to hold the tables against."""

    data_dir: Path
    committed: dict[tuple[str, int], int] = field(default_factory=dict)  # (group, partition) -> last offset
    commit_calls: dict[str, int] = field(default_factory=dict)  # group -> partition offsets committed
    started: int = 0
    ended: int = 0
    deliveries: list[tuple[str, int]] = field(default_factory=list)  # share group: (value, delivery count)


class CommittingConsumer(ThreadedConsumer):
    """A consumer that commits from its own polling thread: librdkafka's synchronous commit
    waits forever when another thread is inside poll()."""

    def __init__(self, *args: Any, **conf: Any) -> None:
        self.jobs: queue.Queue[tuple[list[TopicPartition], threading.Event]] = queue.Queue()
        super().__init__(*args, **conf)

    def _run(self) -> None:
        self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.stop_flag.is_set():
            self.consumer.poll(0.05)
            while not self.jobs.empty():
                offsets, done = self.jobs.get_nowait()
                self.consumer.commit(offsets=offsets, asynchronous=False)
                done.set()

    def commit(self, offsets: list[TopicPartition]) -> None:
        done = threading.Event()
        self.jobs.put((offsets, done))
        assert done.wait(15), "commit did not complete"


def _commit(consumer: CommittingConsumer, story: Story, group: str, base: int) -> None:
    parts = sorted(p for _, p in consumer.held())
    offsets = [TopicPartition(TOPIC, p, base + p) for p in parts]
    consumer.commit(offsets)
    for p in parts:
        story.committed[(group, p)] = base + p
    story.commit_calls[group] = story.commit_calls.get(group, 0) + len(parts)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """A group forms, grows, shrinks and empties; another is deleted; a third only commits."""
    root = tmp_path_factory.mktemp("kcoord-analysis")
    from tests.integration.helpers import share

    broker = BrokerProcess(root / "data", {"group.consumer.heartbeat.interval.ms": "500",
                                           "group.consumer.min.heartbeat.interval.ms": "500",
                                           **share.OVERRIDES}).start()
    broker.wait_loaded()
    s = Story(root / "data", started=int(time.time() * 1000))
    try:
        create_topic(broker.bootstrap, TOPIC, 4)
        alice = CommittingConsumer(broker.bootstrap, "shop", [TOPIC], **{"client.id": "alice"})
        wait_for(lambda: len(alice.held()) == 4, 30, "alice to hold every partition")
        _commit(alice, s, "shop", 100)
        bob = CommittingConsumer(broker.bootstrap, "shop", [TOPIC], **{"client.id": "bob"})
        wait_for(lambda: len(alice.held()) == 2 and len(bob.held()) == 2, 30, "alice and bob to split")
        _commit(alice, s, "shop", 200)
        _commit(bob, s, "shop", 300)
        bob.close()
        wait_for(lambda: len(alice.held()) == 4, 30, "alice to take bob's partitions")
        _commit(alice, s, "shop", 400)
        alice.close()

        doomed = CommittingConsumer(broker.bootstrap, "gone", [TOPIC], **{"client.id": "doomed"})
        wait_for(lambda: len(doomed.held()) == 4, 30, "the doomed group to form")
        _commit(doomed, s, "gone", 10)
        doomed.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_for(lambda: _try_delete(admin, "gone"), 30, "the group 'gone' to be deleted")
        for p in range(4):
            s.committed.pop(("gone", p), None)

        # A consumer that assigns partitions itself: offsets with no membership.
        from confluent_kafka import Consumer

        manual = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "manual",
                           "enable.auto.commit": False})
        manual.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
        manual.commit(offsets=[TopicPartition(TOPIC, 0, 9)], asynchronous=False)
        manual.close()
        s.committed[("manual", 0)] = 9
        s.commit_calls["manual"] = 2

        # A classic group upgraded by a consumer-protocol member, then downgraded when it leaves.
        carol = CommittingConsumer(broker.bootstrap, "mixed", [TOPIC], **{"client.id": "carol"})
        wait_for(lambda: len(carol.held()) == 4, 30, "carol to hold every partition")
        dave = CommittingConsumer(broker.bootstrap, "mixed", [TOPIC],
                                  **{"client.id": "dave", "group.protocol": "consumer"})
        wait_for(lambda: len(carol.held()) == 2 and len(dave.held()) == 2, 60, "carol and dave to split")
        dave.close()
        wait_for(lambda: len(carol.held()) == 4, 30, "carol to take dave's partitions back")
        carol.close()

        # A streams group (KIP-1071) of two instances, one of which leaves.
        from kclient.wire_client import WireClient
        from tests.differential.streams_ops import Member, until_tasks

        with WireClient("127.0.0.1", broker.port) as one, WireClient("127.0.0.1", broker.port) as two:
            first, second = Member(one, "wordcount", TOPIC, "a"), Member(two, "wordcount", TOPIC, "b")
            until_tasks(first)
            # The second instance gets tasks once the first has given them up (Kafka 4.4's sticky
            # assignor moves a task only after its holder revokes it): both heartbeat meanwhile.
            wait_for(lambda: bool(first.heartbeat() and second.heartbeat() and first.active and second.active
                                  and first.epoch == second.epoch), 60, "the two instances to split the tasks",
                     seen=lambda: (first.epoch, first.active, second.epoch, second.active))
            second.heartbeat(epoch=-1)

        # A share group (KIP-932): ten jobs, one released twice before it is accepted, one rejected.
        _share_story(broker, s)
    finally:
        s.ended = int(time.time() * 1000)
        broker.stop()
    yield s


JOBS = "jobs"


def _share_story(broker: BrokerProcess, s: Story) -> None:
    from confluent_kafka import AcknowledgeType

    from tests.integration.helpers import share

    share.make_topic(broker, JOBS)
    worker = share.consumer(broker, "workers", JOBS, explicit=True)
    try:
        share.joined(worker)
        share.produce(broker, JOBS, [f"job-{i}" for i in range(10)])

        def verdict(m: Any) -> None:
            value = m.value().decode()
            s.deliveries.append((value, m.delivery_count()))
            worker.acknowledge(m, AcknowledgeType.RELEASE if value == "job-3" and m.delivery_count() < 3
                               else AcknowledgeType.REJECT if value == "job-7" else AcknowledgeType.ACCEPT)

        for wanted in (10, 1, 1):  # every job; job-3 again; job-3 a third time
            got = share.poll_until(worker, lambda got, n=wanted: len(got) >= n, on_message=verdict)
            assert len(got) == wanted, s.deliveries
            worker.commit_sync()
    finally:
        worker.close()


def _try_delete(admin: AdminClient, group: str) -> bool:
    try:
        admin.delete_consumer_groups([group])[group].result(10)
        return True
    except Exception:
        return False  # still Empty-ing after the last member left


@pytest.fixture(scope="module")
def analysed(spark: Any, story: Story, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("analysis-out")
    result = analyze(spark, AnalyzeOptions(data_dir=str(story.data_dir), out=str(out),
                                           as_of_ms=story.ended + 1000))
    return out, result


def table(spark: Any, out: Path, name: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.read.parquet(str(out / name)).collect()]


def test_latest_offsets_are_what_the_clients_committed(spark: Any, story: Story, analysed: tuple[Path, Any]) -> None:
    out, _ = analysed
    got = {(r["group"], r["partition"]): r["current_offset"] for r in table(spark, out, "latest_offsets")}
    assert got == story.committed
    activity = table(spark, out, "commit_activity")
    for group, calls in story.commit_calls.items():
        assert sum(r["commits"] for r in activity if r["group"] == group) == calls, group
    statuses = {(r["group"], r["partition"]): r["status"] for r in table(spark, out, "partition_status")}
    assert set(statuses) == set(story.committed)
    assert set(statuses.values()) <= {"OK", "STOP"}


def test_generation_history_lists_every_rebalance(spark: Any, analysed: tuple[Path, Any]) -> None:
    out, _ = analysed
    history = sorted((r for r in table(spark, out, "generation_history") if r["group"] == "shop"),
                     key=lambda r: r["log_offset"])
    if history[0]["event"] == "created":
        assert (history[0]["generation"], history[0]["seconds_since_previous"]) == (0, None)
        history = history[1:]
    # alice alone, alice and bob, alice alone again, then nobody.
    assert [(r["event"], r["member_count"]) for r in history] == [
        ("rebalance", 1), ("rebalance", 2), ("rebalance", 1), ("emptied", 0)]
    generations = [r["generation"] for r in history]
    assert generations == sorted(generations) and len(set(generations)) == 4
    assert all(r["protocol"] == "range" for r in history[:3]) and history[0]["protocol_type"] == "consumer"
    assert all(r["seconds_since_previous"] >= 0 for r in history[1:])
    assert history[1]["member_ids"] and history[1]["leader"] in history[1]["member_ids"]
    gone = [r["event"] for r in table(spark, out, "generation_history") if r["group"] == "gone"]
    assert gone[-1] == "deleted"


def test_membership_timeline_and_group_inventory(spark: Any, story: Story, analysed: tuple[Path, Any]) -> None:
    out, _ = analysed
    members = {r["client_id"]: r for r in table(spark, out, "membership_timeline") if r["group"] == "shop"}
    assert set(members) == {"alice", "bob"}
    alice, bob = members["alice"], members["bob"]
    assert alice["client_host"] == "/127.0.0.1" and alice["group_instance_id"] is None
    assert (bob["first_generation"], bob["last_generation"]) == (alice["first_generation"] + 1,) * 2
    assert alice["generations"] == 3
    assert not alice["current_member"] and not bob["current_member"]
    assert bob["left_at"] < alice["left_at"]
    assert sorted(p["partition"] for p in alice["assigned_partitions"]) == [0, 1, 2, 3]

    inventory = {r["group"]: r for r in table(spark, out, "group_inventory")}
    assert set(inventory) == {"shop", "gone", "manual", "mixed"}
    assert inventory["shop"]["state"] == "Empty" and inventory["shop"]["rebalances"] == 3
    assert inventory["shop"]["partitions_with_offsets"] == 4 and inventory["shop"]["topics"] == [TOPIC]
    assert inventory["gone"]["state"] == "Dead" and inventory["gone"]["partitions_with_offsets"] == 0
    assert inventory["manual"]["state"] == "Empty" and inventory["manual"]["protocol_type"] is None
    assert not any(r["stale"] for r in inventory.values())
    assert inventory["manual"]["offsets_expire_at"] is not None


def test_consumer_group_tables_follow_an_upgrade_and_a_downgrade(spark: Any, analysed: tuple[Path, Any]) -> None:
    out, _ = analysed
    history = sorted((r for r in table(spark, out, "consumer_group_history") if r["group"] == "mixed"),
                     key=lambda r: r["log_offset"])
    events = [r["event"] for r in history]
    # The upgrade wrote the classic generation as the first group epoch; the downgrade deleted it.
    assert events[0] == "group epoch" and events[-1] == "deleted"
    assert "target assignment" in events
    epochs = [r["epoch"] for r in history if r["event"] == "group epoch"]
    assert epochs == sorted(epochs) and len(set(epochs)) >= 2
    members = {r["client_id"]: r for r in table(spark, out, "consumer_group_members") if r["group"] == "mixed"}
    assert members["carol"]["protocol"] == "classic" and members["dave"]["protocol"] == "consumer"
    assert not members["dave"]["current_member"] and members["dave"]["left_at"] is not None
    assert members["dave"]["epochs"] >= 1 and members["dave"]["subscribed_topic_names"] == [TOPIC]
    steps = sorted((r for r in table(spark, out, "consumer_assignments")
                    if r["group"] == "mixed" and r["member_id"] == members["dave"]["member_id"]),
                   key=lambda r: r["log_offset"])
    assert max(r["assigned_count"] for r in steps) == 2
    assert steps[-1]["state"] == "Left" and steps[-1]["assigned_count"] == 0
    # The group went back to classic: its generation history goes on after the downgrade.
    # The classic group's record was deleted by the upgrade and written again by the downgrade.
    classic = sorted((r for r in table(spark, out, "generation_history") if r["group"] == "mixed"),
                     key=lambda r: (r["log_partition"], r["log_offset"]))
    upgraded = [r["event"] for r in classic].index("deleted")
    assert any(r["protocol_type"] == "consumer" and r["event"] != "deleted" for r in classic[upgraded + 1:])


def test_streams_group_tables_follow_the_instances(spark: Any, analysed: tuple[Path, Any]) -> None:
    out, _ = analysed
    history = sorted((r for r in table(spark, out, "streams_group_history") if r["group"] == "wordcount"),
                     key=lambda r: r["log_offset"])
    events = [r["event"] for r in history]
    assert {"group epoch", "topology", "target assignment"} <= set(events) and "deleted" not in events
    assert next(r for r in history if r["event"] == "topology")["subtopologies"] == ["0", "1"]
    epochs = [r["epoch"] for r in history if r["event"] == "group epoch"]
    assert epochs == sorted(epochs) and len(set(epochs)) >= 3  # first joins, second joins, second leaves
    members = sorted((r for r in table(spark, out, "streams_group_members") if r["group"] == "wordcount"),
                     key=lambda r: r["first_seen"])
    assert len(members) == 2 and len({m["process_id"] for m in members}) == 2
    stayed, left = members
    assert stayed["current_member"] and stayed["left_at"] is None and stayed["active_task_count"] > 0
    assert not left["current_member"] and left["left_at"] is not None and left["epochs"] >= 1


def test_share_group_tables_show_progress_and_redeliveries(spark: Any, story: Story,
                                                         analysed: tuple[Path, Any]) -> None:
    out, result = analysed
    assert sorted(n for v, n in story.deliveries if v == "job-3") == [1, 2, 3]
    progress = sorted((r for r in table(spark, out, "share_progress") if r["group"] == "workers"),
                      key=lambda r: r["bucket_start"])
    assert {(r["topic"], r["partition"]) for r in progress} == {(JOBS, 0)}
    last = progress[-1]
    # Every job acknowledged or archived: the start offset is past the ten, nothing in flight.
    assert (last["effective_start_offset"], last["end_offset"], last["in_flight_records"]) == (10, 10, 0)
    assert sum(r["start_offset_advance"] for r in progress) == 10
    # job-3 released twice (the second time after its second delivery), job-7 rejected. Its third
    # delivery's count is durable only if the share partition wrote it before moving past it.
    assert (last["redelivered_total"], last["archived_total"]) == (1, 1) and last["max_delivery_count"] >= 2
    assert not last["deleted"] and last["state_epoch"] >= 0
    assert sum(r["snapshots"] + r["updates"] for r in progress) == sum(r["records"] for r in progress) >= 4

    (member,) = [r for r in table(spark, out, "share_group_members") if r["group"] == "workers"]
    assert (member["client_host"], member["subscribed_topic_names"]) == ("/127.0.0.1", [JOBS])
    assert not member["current_member"] and member["left_at"] is not None and member["epochs"] >= 1
    assert [(a["topic"], a["partitions"]) for a in member["last_assigned"]] == [(JOBS, [0])]
    history = sorted((r for r in table(spark, out, "share_group_history") if r["group"] == "workers"),
                     key=lambda r: r["log_offset"])
    events = [r["event"] for r in history]
    assert events[0] == "member joined" and "member left" in events and "share state topics" in events
    epochs = [r["epoch"] for r in history if r["event"] == "group epoch"]
    assert epochs == sorted(epochs) and len(set(epochs)) >= 2
    assert ("1 share group(s) over 1 share partition(s): 0 record(s) in flight, 1 redelivered and 1 archived"
            in result.summary)
    assert "<h2 id='share-groups'>Share groups</h2>" in (out / "report.html").read_text()


def test_the_report_has_its_charts_and_the_covered_window(analysed: tuple[Path, Any]) -> None:
    out, result = analysed
    page = (out / "report.html").read_text()
    images = dict(re.findall(r"<img id='([\w-]+)'[^>]*src='data:image/png;base64,([^']+)'", page))
    assert set(images) == {"commit-rate", "rebalances", "members", "stalls"}
    for png in images.values():
        raw = base64.b64decode(png)
        assert raw.startswith(b"\x89PNG") and len(raw) > 2000
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("The log covers ") and summary == result.summary + "\n"
    assert "4 group(s): 1 Dead, 3 Empty" in summary


T0 = 1_700_000_000_000


def test_a_kafka_data_dir_with_damage_is_read_around_it(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "kafka-data"
    good = data / "__consumer_offsets-7"
    good.mkdir(parents=True)
    members = [{"member_id": "consumer-1-abc", "client_id": "consumer-1", "host": "/10.1.2.3",
                "topics": ["payments"], "assigned": {"payments": [0, 1]}}]
    (good / "00000000000000000000.log").write_bytes(
        kb.batch(0, [(kb.group_key("billing"), kb.group_value_v3("consumer", 1, "range", "consumer-1-abc",
                                                                  T0, members), T0)])
        + kb.batch(1, [(kb.commit_key("billing", "payments", p), kb.commit_value_v3(50 + p, 3, "", T0 + 1), T0 + 1)
                       for p in (0, 1)])
        + kb.batch(3, [(kb.commit_key("billing", "payments", 0), kb.commit_value_v3(70, 3, "", T0 + 2), T0 + 2)],
                   compression=1))
    (good / "00000000000000000000.index").write_bytes(bytes(16))
    (good / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    torn = data / "__consumer_offsets-9"
    torn.mkdir()
    whole = kb.batch(0, [(kb.commit_key("ledger", "payments", 0), kb.commit_value_v3(11, -1, "", T0), T0)])
    (torn / "00000000000000000000.log").write_bytes(
        whole + kb.batch(1, [(kb.commit_key("ledger", "payments", 0), kb.commit_value_v3(12, -1, "", T0), T0)])[:-7])
    junk = data / "__consumer_offsets-11"
    junk.mkdir()
    (junk / "00000000000000000000.log").write_text("not a log segment at all\n" * 10)
    (data / "orders-0").mkdir()
    (data / "orders-0" / "00000000000000000000.log").write_bytes(struct.pack(">q", 0))

    rows = spark.read.format(NAME).load(str(data)).orderBy("log_partition", "log_offset").collect()
    assert [(r.log_partition, r.log_offset, r.kind) for r in rows] == [
        (7, 0, "group_metadata"), (7, 1, "offset_commit"), (7, 2, "offset_commit"), (7, 3, "offset_commit"),
        (9, 0, "offset_commit")]
    assert rows[0].members[0].client_host == "/10.1.2.3"
    assert rows[0].members[0].assigned_partitions[1].partition == 1
    assert rows[3].committed_offset == 70 and rows[3].leader_epoch == 3

    out = tmp_path / "out"
    result = analyze(spark, AnalyzeOptions(data_dir=str(data), out=str(out), as_of_ms=T0 + 10))
    problems = dict(result.problems)
    assert set(problems) == {str(torn / "00000000000000000000.log"), str(junk / "00000000000000000000.log")}
    assert problems[str(torn / "00000000000000000000.log")].startswith("truncated:")
    assert "not a record batch at position 0" in problems[str(junk / "00000000000000000000.log")]
    assert "Problem in" in result.summary
    latest = {(r["group"], r["partition"]): r["current_offset"] for r in table(spark, out, "latest_offsets")}
    assert latest == {("billing", 0): 70, ("billing", 1): 51, ("ledger", 0): 11}


def test_transactional_commits_count_as_committed_or_aborted(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "txn-data"
    part = data / "__consumer_offsets-3"
    part.mkdir(parents=True)

    def txn(base: int, pid: int, offset: int) -> bytes:
        return kb.batch(base, [(kb.commit_key("eos", "in", 0), kb.commit_value_v3(offset, -1, "", T0 + base), T0)],
                        producer_id=pid, transactional=True)

    (part / "00000000000000000000.log").write_bytes(
        kb.batch(0, [(kb.commit_key("eos", "in", 0), kb.commit_value_v3(5, -1, "", T0), T0)])
        + txn(1, 7, 10) + kb.control_batch(2, 7, commit=True, ts=T0 + 2)
        + txn(3, 8, 20) + kb.control_batch(4, 8, commit=False, ts=T0 + 4))
    out = tmp_path / "out"
    analyze(spark, AnalyzeOptions(data_dir=str(data), out=str(out), as_of_ms=T0 + 10))
    latest = {(r["group"], r["partition"]): r["current_offset"] for r in table(spark, out, "latest_offsets")}
    assert latest == {("eos", 0): 10}
    activity = table(spark, out, "commit_activity")
    assert (sum(r["commits"] for r in activity), sum(r["txn_commits"] for r in activity),
            sum(r["aborted_txn_commits"] for r in activity)) == (2, 1, 1)


def test_an_empty_dir_is_refused_before_spark_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analytics.cli import main

    assert main(["analyze", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no __consumer_offsets segment files" in err and str(tmp_path) in err
    assert not (tmp_path / "out").exists()


def test_end_offsets_give_lag_stall_and_warn(spark: Any, tmp_path: Path) -> None:
    from analytics.rules import EndOffset
    from analytics.synthetic import commit_record, encode_batch, group_record

    data = tmp_path / "data" / "__consumer_offsets-0"
    data.mkdir(parents=True)
    sec = 1000
    batches = [encode_batch(0, [group_record("lagging", 1, [])], T0)]
    offset = 1
    for i in range(6):
        at = T0 + i * 10 * sec
        records = [
            commit_record("lagging", "in", 0, 100, at),           # never moves
            commit_record("lagging", "in", 1, 100 + 10 * i, at),  # moves, but slower than the topic grows
            commit_record("lagging", "in", 2, 100 + 50 * i, at),  # catches up
        ]
        if i < 3:  # no end offset given for this one: judged on the log alone, it stopped
            records.append(commit_record("lagging", "other", 0, 7 + i, at))
        batches.append(encode_batch(offset, records, at))
        offset += len(records)
    (data / "00000000000000000000.log").write_bytes(b"".join(batches))
    last = T0 + 50 * sec
    ends = [EndOffset("in", p, 150 + 60 * i, T0 + i * 10 * sec) for p in range(3) for i in range(6)]
    ends[-1] = EndOffset("in", 2, 350, last)  # partition 2 is caught up at the end
    out = tmp_path / "out"
    analyze(spark, AnalyzeOptions(data_dir=str(data.parent), out=str(out), as_of_ms=last + sec), ends)
    latest = {(r["topic"], r["partition"]): (r["current_offset"], r["log_end_offset"], r["lag"])
              for r in table(spark, out, "latest_offsets")}
    assert latest == {("in", 0): (100, 450, 350), ("in", 1): (150, 450, 300), ("in", 2): (350, 350, 0),
                      ("other", 0): (9, None, None)}
    status = {(r["topic"], r["partition"]): r["status"] for r in table(spark, out, "partition_status")}
    assert status == {("in", 0): "STALL", ("in", 1): "WARN", ("in", 2): "OK", ("other", 0): "STOP"}
    (inventory,) = table(spark, out, "group_inventory")
    assert (inventory["status"], inventory["total_lag"]) == ("ERR", 650)
    assert "STALL and WARN need" not in (out / "summary.txt").read_text()


def test_a_local_session_stays_on_loopback_without_a_ui(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.sparkContext.uiWebUrl is None


def test_partition_status_of_a_data_dir_with_topic_logs(spark: Any, tmp_path: Path) -> None:
    """A broker's data dir: commits in __consumer_offsets and the topic's own log, whose end
    offset (read now, after every commit) gives the lag."""
    from analytics.synthetic import commit_record, encode_batch
    from protocol.record_batch import build_simple_batch

    data = tmp_path / "data"
    offsets = data / "__consumer_offsets-0"
    offsets.mkdir(parents=True)
    batches, offset = [], 0
    for i in range(5):
        at = T0 + i * 1000
        records = [commit_record("readers", "in", 0, 10 * (i + 1), at), commit_record("readers", "in", 1, 3, at)]
        batches.append(encode_batch(offset, records, at))
        offset += len(records)
    (offsets / "00000000000000000000.log").write_bytes(b"".join(batches))
    # Records of in-0 every 50 ms, in two batches; of in-1 every 500 ms.
    topic = data / "in-0"
    topic.mkdir()
    (topic / "00000000000000000000.log").write_bytes(
        build_simple_batch([(None, b"x", T0 + 50 * i) for i in range(30)])
        + build_simple_batch([(None, b"x", T0 + 50 * i) for i in range(30, 60)], 30))
    (data / "in-1").mkdir()
    (data / "in-1" / "00000000000000000000.log").write_bytes(
        build_simple_batch([(None, b"x", T0 + 500 * i) for i in range(8)]))
    ends = end_offsets_from_data_dir(str(data))
    assert ends is not None and {(e.topic, e.partition, e.end_offset) for e in ends} == {("in", 0, 60), ("in", 1, 8)}
    out = tmp_path / "out"
    analyze(spark, AnalyzeOptions(data_dir=str(data), out=str(out), as_of_ms=T0 + 5000), ends)
    status = {(r["topic"], r["partition"]): (r["status"], r["lag"], r["window_commits"])
              for r in table(spark, out, "partition_status")}
    assert status == {("in", 0): ("OK", 10, 5), ("in", 1): ("STALL", 5, 5)}
    # Lag in seconds from the topics' logs: as-of time minus the first unconsumed record's time
    # (in-0 committed 50, written at T0 + 2.5 s; in-1 committed 3, written at T0 + 1.5 s).
    latest = {(r["topic"], r["partition"]): (r["current_offset"], r["lag"], r["lag_seconds"])
              for r in table(spark, out, "latest_offsets")}
    assert latest == {("in", 0): (50, 10, 2.5), ("in", 1): (3, 5, 3.5)}
