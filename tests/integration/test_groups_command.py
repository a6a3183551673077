"""`kcoord groups` against a running broker with real clients: what it prints agrees with
kafka-python's admin client, in kafka-consumer-groups.sh's format, and a reset it executes is
where a restarted confluent-kafka consumer resumes."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kcoord.cli import main
from testkit.kcoord import KCOORD, ROOT
from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for
from tests.integration.helpers.tables import table

pytestmark = pytest.mark.timeout(120)

OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]


def groups(capsys: Any, broker: Any, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["groups", "--bootstrap-server", broker.bootstrap, *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(15) == 0




def test_describe_offsets_matches_kafka_python(broker: Any, capsys: Any) -> None:
    from kafka.admin import KafkaAdminClient, OffsetSpec
    from kafka.structs import TopicPartition as KTP

    create_topic(broker.bootstrap, "orders", 4)
    produce(broker.bootstrap, "orders", {0: 7, 1: 3, 2: 5, 3: 0})
    members = [ThreadedConsumer(broker.bootstrap, "billing", ["orders"], **{"client.id": f"biller-{i}"})
               for i in range(2)]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        wait_for(lambda: covers_exactly(members, "orders", 4), 30, "assignment")
        for m in members:
            m.commit([TopicPartition(t, p, 2) for t, p in sorted(m.held()) if p != 3])
        status, out, _err = groups(capsys, broker, "--describe", "--group", "billing")
        assert status == 0

        described = admin.describe_groups(["billing"])["billing"]
        lines = out.split("\n")
        assert lines[0] == "" and table(lines[1]) == [OFFSETS_HEADER]
        # Kafka's widths: 15 for group, topic, consumer id and host unless a value is longer.
        consumer_width = max(15, *(len(m["member_id"]) for m in described["members"]))
        assert lines[1].index("PARTITION") == 16 + 16 and lines[1].index("HOST") == 16 + 16 + 11 + 16 * 3 + \
            consumer_width + 1
        rows = {(r[1], int(r[2])): r for r in table(out)[1:]}

        committed = admin.list_group_offsets("billing")["billing"]
        tps = [KTP("orders", p) for p in range(4)]
        ends = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
        owner = {}
        for m in described["members"]:
            for assigned in m["member_assignment"]["assigned_partitions"]:
                for p in assigned["partitions"]:
                    owner[(assigned["topic"], p)] = m
        assert set(rows) == {("orders", p) for p in range(4)}
        for tp in tps:
            row = rows[(tp.topic, tp.partition)]
            m = owner[(tp.topic, tp.partition)]
            current = committed[tp].offset if tp in committed else None
            end = ends[tp].offset
            expected = ["billing", tp.topic, str(tp.partition), "-" if current is None else str(current), str(end),
                        "-" if current is None else str(end - current), m["member_id"], m["client_host"],
                        m["client_id"]]
            assert row == expected
        assert rows[("orders", 0)][3:6] == ["2", "7", "5"]
        assert rows[("orders", 3)][3:6] == ["-", "0", "-"]
    finally:
        admin.close()
        for m in members:
            m.close()


def test_members_state_and_list_of_a_consumer_protocol_group(broker: Any, capsys: Any) -> None:
    create_topic(broker.bootstrap, "events", 2)
    member = ThreadedConsumer(broker.bootstrap, "kip848", ["events"], **{"group.protocol": "consumer",
                                                                          "client.id": "new-proto"})
    try:
        wait_for(lambda: member.held() == {("events", 0), ("events", 1)}, 30, "assignment")
        wait_for(lambda: "Stable" in groups(capsys, broker, "--describe", "--group", "kip848", "--state")[1],
                 20, "a Stable group")
        status, out, _ = groups(capsys, broker, "--describe", "--group", "kip848", "--members", "--verbose")
        assert status == 0
        header, row = table(out)
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert row[0] == "kip848" and len(row[1]) == 22 and row[3:] == ["new-proto", "2",
                                                                                          "events(0,1)"]
        _, out, _ = groups(capsys, broker, "--describe", "--group", "kip848", "--state")
        header_line, value_line = [line for line in out.split("\n") if line]
        assert header_line.split()[:3] == ["GROUP", "COORDINATOR", "(ID)"]
        assert value_line.split() == ["kip848", broker.bootstrap, "(1)", "uniform", "Stable", "1"]
        _, out, _ = groups(capsys, broker, "--list", "--state", "--type")
        assert ["kip848", "Consumer", "Stable"] in table(out)
        _, out, _ = groups(capsys, broker, "--list", "--type", "classic")
        assert table(out) == [["GROUP", "TYPE"]]
    finally:
        member.close()


def test_reset_is_refused_while_active_and_a_restarted_consumer_resumes_from_it(broker: Any, capsys: Any) -> None:
    create_topic(broker.bootstrap, "ledger", 2)
    produce(broker.bootstrap, "ledger", {0: 20, 1: 10})
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "replay", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
    member = ThreadedConsumer(broker.bootstrap, "replay", ["ledger"])
    try:
        wait_for(lambda: len(member.messages) == 30, 30, "all records consumed")
        member.commit([TopicPartition("ledger", 0, 20), TopicPartition("ledger", 1, 10)])
        status, out, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--topic", "ledger",
                                "--to-offset", "5", "--execute")
        assert status == 1
        # Kafka prints the refusal, then the (empty) plan's header.
        assert out.strip().split("\n")[0] == ("Error: Assignments can only be reset if the group 'replay' is "
                                              "inactive, but the current state is Stable.")
    finally:
        member.close()

    # Dry run (the default) changes nothing.
    status, out, err = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--topic", "ledger:0",
                              "--to-offset", "5")
    assert status == 0 and "WARN: No action will be performed" in err
    assert table(out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["replay", "ledger", "0", "5"]]
    # Clamped to the log end, as Kafka clamps.
    _, out, err = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--topic", "ledger:1",
                         "--to-offset", "99", "--dry-run")
    assert table(out)[1] == ["replay", "ledger", "1", "10"] and "higher than latest offset" in err
    status, _, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--topic", "ledger:0",
                          "--to-offset", "5", "--execute")
    assert status == 0
    status, _, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--topic", "ledger:1",
                          "--shift-by", "-4", "--execute")
    assert status == 0

    restarted = Consumer(conf)
    try:
        restarted.subscribe(["ledger"])
        first: dict[int, int] = {}
        deadline_polls = 400
        while len(first) < 2 and deadline_polls:
            deadline_polls -= 1
            msg = restarted.poll(0.1)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
        assert first == {0: 5, 1: 6}
    finally:
        restarted.close()

    # Earliest, latest and by time, planned (dry run) from the log.
    _, out, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--all-topics", "--to-earliest")
    assert [r[2:] for r in table(out)[1:]] == [["0", "0"], ["1", "0"]]
    _, out, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--all-topics", "--to-latest")
    assert [r[2:] for r in table(out)[1:]] == [["0", "20"], ["1", "10"]]
    _, out, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--all-topics", "--by-duration",
                       "PT1H")
    assert [r[2:] for r in table(out)[1:]] == [["0", "0"], ["1", "0"]]
    _, out, _ = groups(capsys, broker, "--reset-offsets", "--group", "replay", "--all-topics", "--to-datetime",
                       "2999-01-01T00:00:00.000")
    assert [r[2:] for r in table(out) if r[0] == "replay"] == [["0", "20"], ["1", "10"]]
    assert "Partition 0 from topic ledger is empty. Falling back to latest known offset." in out


def test_delete_offsets_and_delete_groups(broker: Any, capsys: Any) -> None:
    create_topic(broker.bootstrap, "audit", 2)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "auditors", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("audit", 0, 1), TopicPartition("audit", 1, 1)], asynchronous=False)
    c.close()
    status, out, _ = groups(capsys, broker, "--delete-offsets", "--group", "auditors", "--topic", "audit:0")
    assert status == 0
    assert table(out) == [["Request", "succeed", "for", "deleting", "offsets", "with", "topic", "audit:0", "group",
                           "auditors"], ["TOPIC", "PARTITION", "STATUS"], ["audit", "0", "Successful"]]
    _, out, _ = groups(capsys, broker, "--describe", "--group", "auditors")
    assert [r[1:4] for r in table(out)[1:]] == [["audit", "1", "1"]]
    status, out, _ = groups(capsys, broker, "--delete", "--group", "auditors")
    assert status == 0 and out.strip() == "Deletion of requested consumer groups ('auditors') was successful."
    status, out, _ = groups(capsys, broker, "--describe", "--group", "auditors")
    assert status == 1 and out.strip() == "Error: Consumer group 'auditors' does not exist."
    status, out, _ = groups(capsys, broker, "--delete", "--group", "auditors")
    assert status == 1 and "* Group 'auditors' could not be deleted due to: GROUP_ID_NOT_FOUND" in out


def test_the_command_refuses_what_kafka_refuses(broker: Any) -> None:
    """Run as a user runs it: usage errors exit 1 with Kafka's message on stderr."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*KCOORD, "groups", "--bootstrap-server", broker.bootstrap, *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)

    assert "exactly one action" in run("--list", "--describe").stderr
    assert "takes one of these options: --group, --all-groups" in run("--describe").stderr
    assert "at most one of these options" in run("--describe", "--group", "g", "--members", "--state").stderr
    bad_state = run("--list", "--state", "sleepy")
    assert bad_state.returncode == 1 and "Invalid state list 'sleepy'. Valid states are: " in bad_state.stderr
    both = run("--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest")
    assert both.returncode == 1 and "can't be used with option" in both.stderr
    assert "One of the reset scopes" in run("--reset-offsets", "--group", "g", "--to-earliest").stderr
    listed = run("--list")
    assert listed.returncode == 0 and listed.stderr == ""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_against_a_cluster_it_follows_coordinators_and_partition_leaders(etcd: Any, tmp_path: Any,
                                                                          capsys: Any) -> None:
    """Three nodes: the group's coordinator and the partitions' leaders are different nodes, and
    the command, given one node, asks each of them what it owns."""
    from tests.integration.helpers.cluster import Cluster

    cluster = Cluster(etcd, tmp_path)
    try:
        for node in (1, 2, 3):
            cluster.start_node(node)
        cluster.wait_spread({1, 2, 3})
        first = cluster.nodes[1]
        bootstrap = ",".join(b.bootstrap for b in cluster.alive())
        create_topic(bootstrap, "spread", 3)
        produce(bootstrap, "spread", {0: 4, 1: 5, 2: 6})
        cluster.wait_topic_spread("spread", {1, 2, 3})
        group = cluster.groups_on(3, 1, "far")[0]
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("spread", p, 1) for p in range(3)], asynchronous=False)
        c.close()

        _, out, _ = groups(capsys, first, "--describe", "--group", group)
        assert [r[2:6] for r in table(out)[1:]] == [["0", "1", "4", "3"], ["1", "1", "5", "4"], ["2", "1", "6", "5"]]
        _, out, _ = groups(capsys, first, "--list")
        assert group in out.split()
        status, _, _ = groups(capsys, first, "--reset-offsets", "--group", group, "--all-topics", "--to-latest",
                              "--execute")
        assert status == 0
        _, out, _ = groups(capsys, first, "--describe", "--group", group)
        assert [r[5] for r in table(out)[1:]] == ["0", "0", "0"]
    finally:
        cluster.stop_all()
