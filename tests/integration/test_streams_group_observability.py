"""A streams group seen through kcoord's own tools, over TCP: two members (on two processes) split
a word count's tasks and commit offsets; `kcoord groups` lists it with its type and state,
describes its lag and its members' tasks, /metrics counts it and exports its lag with the member
that holds each partition, and the rebalance journal (`kcoord groups --history`) tells who joined."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from kclient.group_history import read_events
from kclient.wire_client import WireClient
from kcoord.cli import main
from protocol.messages.offset_commit import OffsetCommitRequest
from tests.differential.streams_ops import Member, describe, until_tasks
from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.metrics import scrape
from tests.integration.helpers.tables import table

pytestmark = pytest.mark.timeout(90)

GROUP, SOURCE = "wordcount", "sentences"


def groups(capsys: Any, bootstrap: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["groups", "--bootstrap-server", bootstrap, *args])
    return status, capsys.readouterr().out


def test_a_streams_group_in_kcoord_groups_metrics_and_the_journal(broker_factory: Any, capsys: Any) -> None:
    broker = broker_factory({"group.streams.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, SOURCE, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, n in ((0, 5), (1, 3)):
        for i in range(n):
            p.produce(SOURCE, f"w{i}".encode(), partition=partition)
    assert p.flush(15) == 0

    with WireClient("127.0.0.1", broker.port) as a_conn, WireClient("127.0.0.1", broker.port) as b_conn:
        a, b = Member(a_conn, GROUP, SOURCE, "a"), Member(b_conn, GROUP, SOURCE, "b")
        until_tasks(a)
        b.heartbeat()

        def settled() -> bool:
            a.heartbeat()
            b.heartbeat()
            return bool(describe(a_conn, GROUP)["state"] == "Stable" and a.active and b.active)
        wait_for(settled, 30, "both members running tasks")
        holder = {p: m for m in (a, b) for t in m.active if t.subtopology_id == "0" for p in t.partitions}
        for partition, offset in ((0, 2), (1, 3)):
            m = holder[partition]
            answer = m.c.call(8, 9, OffsetCommitRequest(
                group_id=GROUP, generation_id_or_member_epoch=m.epoch, member_id=m.mid,
                topics=[OffsetCommitRequest.Topic(name=SOURCE, partitions=[
                    OffsetCommitRequest.Topic.Partition(partition_index=partition, committed_offset=offset)])]))
            assert answer.topics[0].partitions[0].error_code == 0

        status, out = groups(capsys, broker.bootstrap, "--list", "--type", "--state")
        assert status == 0 and [GROUP, "Streams", "Stable"] in table(out)

        status, out = groups(capsys, broker.bootstrap, "--describe", "--group", GROUP)
        rows = {(r[1], r[2]): r for r in table(out)[1:] if r[0] == GROUP}
        assert rows[(SOURCE, "0")][3:6] == ["2", "5", "3"] and rows[(SOURCE, "1")][3:6] == ["3", "3", "0"]
        assert rows[(SOURCE, "0")][6] == holder[0].mid

        status, out = groups(capsys, broker.bootstrap, "--describe", "--group", GROUP, "--members")
        [header, *members] = table(out)
        assert header == ["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ACTIVE-TASKS", "STANDBY-TASKS", "WARMUP-TASKS"]
        active = {r[1]: set(r[4].split(",")) for r in members}
        assert active[a.mid] | active[b.mid] == {"0_0", "0_1", "1_0", "1_1"} and not active[a.mid] & active[b.mid]
        assert {r[2] for r in members} == {a.process, b.process}

        s = scrape(broker.metrics_port)
        assert s.value("kcoord_streams_groups", state="Stable") == 1
        assert s.value("kcoord_streams_group_members") == 2
        # b's arrival moved tasks: a rebalance, counted and timed (no other group on this broker).
        assert sum(v for _, v in s.samples.get("kcoord_rebalances_total", [])) >= 1
        assert s.value("kcoord_rebalance_duration_seconds_count") >= 1  # type: ignore[operator]
        assert s.value("kafka_consumergroup_lag", consumergroup=GROUP, topic=SOURCE, partition="0") == 3
        [(labels, _)] = [(got, v) for got, v in s.samples["kafka_consumergroup_group_lag_seconds"]
                         if got.get("group") == GROUP and got.get("partition") == "0"]
        assert labels["consumer_id"] == holder[0].mid

        wait_for(lambda: any(e["kind"] == "rebalance" for e in read_events(broker.bootstrap, GROUP)), 60,
                 "a rebalance summary in the group's history", step=0.3)
        events = read_events(broker.bootstrap, GROUP)
        summaries = [e for e in events if e["kind"] == "rebalance"]
        joined = [e for e in events if e["kind"] == "member" and e["cause"] == "new-member-joined"]
        assert {e["member_id"] for e in joined} == {a.mid, b.mid}
        assert all(e["group_type"] == "streams" for e in events)
        assert summaries and summaries[-1]["state_after"] == "Stable" and summaries[-1]["moved"]
        status, out = groups(capsys, broker.bootstrap, "--history", "--group", GROUP)
        assert status == 0 and "new-member-joined" in out


def test_a_streams_group_missing_its_source_topic_is_not_ready_and_the_doctor_says_which(
        broker_factory: Any, capsys: Any) -> None:
    broker = broker_factory({"group.streams.initial.rebalance.delay.ms": "0"})
    group, source = "orders-app", "orders"
    with WireClient("127.0.0.1", broker.port) as conn:
        m = Member(conn, group, source, "a")
        answer = m.heartbeat()
        assert answer.error_code == 0 and [s.status_code for s in answer.status or []] == [1]
        assert describe(conn, group)["state"] == "NotReady"
        status, out = groups(capsys, broker.bootstrap, "--list", "--type", "--state")
        assert status == 0 and [group, "Streams", "NotReady"] in table(out)
        status, out = groups(capsys, broker.bootstrap, "--describe", "--group", group, "--state", "--verbose")
        [header, row] = [line.split() for line in out.strip().splitlines()]
        assert header[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"] and row[-1] == "1"
        assert row[0] == group and "NotReady" in row

        def doctor() -> str:
            return groups(capsys, broker.bootstrap, "--doctor", "--group", group)[1]
        wait_for(lambda: "[streams-not-ready]" in doctor(), 60, "the doctor's finding", step=0.3)
        out = doctor()
        assert "Source topics orders are missing." in out and "kafka-topics --create" in out
        wait_for(lambda: scrape(broker.metrics_port).value("kcoord_doctor_findings", rule="streams-not-ready") == 1,
                 60, "the finding counted in /metrics", step=0.3,
                 seen=lambda: scrape(broker.metrics_port).samples.get("kcoord_doctor_findings"))
        s = scrape(broker.metrics_port)
        assert s.value("kcoord_streams_groups", state="NotReady") == 1
        [event] = [e for e in read_events(broker.bootstrap, group) if e["kind"] == "state"
                   and e["state_after"] == "NotReady"]
        assert event["topology_status"] == [{"status": "MISSING_SOURCE_TOPICS",
                                             "detail": "Source topics orders are missing."}]

        status, out = groups(capsys, broker.bootstrap, "--history", "--group", group)
        assert status == 0 and "TOPOLOGY NOT READY" in out and "MISSING_SOURCE_TOPICS: Source topics orders" in out

        create_topic(broker.bootstrap, source, 2)
        until_tasks(m)
        assert m.active
        wait_for(lambda: "[streams-not-ready]" not in doctor(), 60, "the finding gone once the group runs", step=0.3)
        wait_for(lambda: scrape(broker.metrics_port).value("kcoord_doctor_findings", rule="streams-not-ready") == 0,
                 60, "the finding no longer counted", step=0.3)
        status, out = groups(capsys, broker.bootstrap, "--history", "--group", group)
        [spell] = [line for line in out.splitlines() if "MISSING_SOURCE_TOPICS" in line]
        assert spell.split()[1] != "-"  # it ended
