"""A real Kafka Streams 4.4 application on the streams rebalance protocol (KIP-1071) against
kcoord: a word count with a repartition topic and a counting state store, exactly_once_v2, run
as two and then three instances (``tests/java/StreamsWordCount.java``), with one standby replica.
The broker creates the internal topics, every instance reaches RUNNING with its share of the tasks
and standby copies of the stateful ones on other instances, an instance killed with SIGKILL has
its tasks taken over by the others, and the counts read back (read_committed) are exact."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from testkit.kafka import run_tool
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.streams_app import Instance, counts, produce, sentences

pytestmark = [pytest.mark.timeout(240)]

STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"
PARTITIONS = 4
ALL_TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)}
# Sessions short enough for the test to see a killed instance's tasks move within seconds.
BROKER = {"group.streams.num.standby.replicas": "1", "group.streams.session.timeout.ms": "4000", "group.streams.heartbeat.interval.ms": "500",
          "group.streams.initial.rebalance.delay.ms": "0"}


def spread(instances: list[Instance]) -> bool:
    """Every instance RUNNING with some tasks, every task active on exactly one instance."""
    live = [i for i in instances if i.proc.poll() is None]
    if not live or not all(i.running() and i.active for i in live):
        return False
    owned = [t for i in live for t in i.active]
    return len(owned) == len(set(owned)) and set(owned) == ALL_TASKS


def standbys_elsewhere(instances: list[Instance]) -> bool:
    """Every stateful task (the counting subtopology, 1) has a standby copy on another instance
    than the one running it; the stateless ones have none."""
    live = [i for i in instances if i.proc.poll() is None]
    standby = [t for i in live for t in i.standby]
    stateful = {t for t in ALL_TASKS if t.startswith("1_")}
    return sorted(standby) == sorted(stateful) and all(not (i.active & i.standby) for i in live)


def test_word_count_on_the_streams_protocol_two_then_three_instances_one_killed(
        java_classes: Path, kafka_libs: Path, broker_factory: Any, tmp_path: Path) -> None:
    broker: BrokerProcess = broker_factory(BROKER)
    suffix = uuid.uuid4().hex[:6]
    app, source, sink = f"wordcount-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    rng = random.Random(7)
    expected: Counter[str] = Counter()

    def start(n: int) -> Instance:
        return Instance(java_classes, kafka_libs, broker.bootstrap, app, (source, sink), tmp_path / f"state{n}",
                        tmp_path / f"instance{n}.log")

    def feed(n: int) -> None:
        lines = sentences(rng, n)
        expected.update(w for line in lines for w in line.split())
        produce(broker.bootstrap, source, lines)

    instances = [start(0), start(1)]
    started = time.monotonic()
    try:
        feed(200)
        wait_for(lambda: spread(instances), 90, "two instances RUNNING with the tasks spread")
        print(f"two RUNNING after {time.monotonic() - started:.1f}s")
        assert all(len(i.active) == 4 for i in instances)
        instances.append(start(2))
        feed(200)
        wait_for(lambda: spread(instances) and all(len(i.active) >= 2 for i in instances)
                 and standbys_elsewhere(instances), 90,
                 "three instances RUNNING, each with its share of the tasks, standbys on the others")
        print(f"three RUNNING after {time.monotonic() - started:.1f}s")
        described = run_tool(kafka_libs, STREAMS_GROUPS, "--bootstrap-server", broker.bootstrap, "--describe",
                             "--members", "--group", app, timeout=60)
        members = [line.split() for line in described.stdout.splitlines() if line.startswith(app)]
        assert len(members) == 3 and all("ACTIVE:" in m for m in members), described.stdout + described.stderr
        feed(200)
        instances[0].kill()
        killed = time.monotonic()
        wait_for(lambda: spread(instances[1:]) and standbys_elsewhere(instances[1:]), 60,
                 "the killed instance's tasks taken over")
        print(f"taken over {time.monotonic() - killed:.1f}s after the kill")
        feed(200)
        wait_for(lambda: counts(broker.bootstrap, sink) == dict(expected), 90, "exact counts")
        print(f"exact counts after {time.monotonic() - started:.1f}s")
        assert not [e for i in instances for e in i.errors]
    finally:
        for i in instances:
            i.stop()


def test_a_streams_group_survives_a_broker_killed_and_restarted(broker_factory: Any) -> None:
    """The group's records are in __consumer_offsets: after SIGKILL and a restart the broker
    describes the same group, and its member goes on heartbeating with its epoch and tasks."""
    from kclient.wire_client import WireClient
    from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
    from tests.differential.streams_ops import Member

    broker: BrokerProcess = broker_factory({**BROKER, "group.streams.session.timeout.ms": "30000"})
    suffix = uuid.uuid4().hex[:6]
    group, source = f"restart-{suffix}", f"restart-in-{suffix}"
    create_topic(broker.bootstrap, source, 2)

    def described() -> Any:
        with WireClient("127.0.0.1", broker.port) as c:
            return c.call(89, 0, StreamsGroupDescribeRequest(group_ids=[group])).groups[0].to_dict()

    with WireClient("127.0.0.1", broker.port) as c:
        m = Member(c, group, source, "a")
        wait_for(lambda: bool(m.heartbeat() and m.active), 30, "the member's tasks")
        m.heartbeat()
    before = described()
    assert before["group_state"] == "Stable" and len(before["members"]) == 1
    broker.kill()
    broker.start()
    broker.wait_loaded()
    assert described() == before
    with WireClient("127.0.0.1", broker.port) as c:
        m.c = c
        epoch, tasks = m.epoch, [t.to_dict() for t in m.active]
        answer = m.heartbeat()
        assert answer.error_code == 0 and m.epoch == epoch and [t.to_dict() for t in m.active] == tasks


def test_kafka_streams_groups_tool_lists_describes_resets_and_deletes(broker_factory: Any, kafka_libs: Path) -> None:
    """Kafka's own kafka-streams-groups against kcoord: --list, --describe --offsets, and on the
    group once its member left: --reset-offsets --to-earliest, --delete-offsets and --delete."""
    from kclient.wire_client import WireClient
    from protocol.messages.offset_commit import OffsetCommitRequest
    from tests.differential.streams_ops import Member

    # The member does not heartbeat while a tool runs: a session long enough to outlast two.
    broker: BrokerProcess = broker_factory({**BROKER, "group.streams.session.timeout.ms": "30000"})
    suffix = uuid.uuid4().hex[:6]
    group, source = f"tool-{suffix}", f"tool-in-{suffix}"
    create_topic(broker.bootstrap, source, 2)
    produce(broker.bootstrap, source, ["a b", "c d", "e f"])

    def tool(*args: str) -> str:
        done = run_tool(kafka_libs, STREAMS_GROUPS, "--bootstrap-server", broker.bootstrap, *args, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    with WireClient("127.0.0.1", broker.port) as c:
        m = Member(c, group, source, "a")
        wait_for(lambda: bool(m.heartbeat() and m.active), 30, "the member's tasks")
        committed = c.call(8, 9, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=m.epoch, member_id=m.mid,
            topics=[OffsetCommitRequest.Topic(name=source, partitions=[
                OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=1) for p in range(2)])]))
        assert all(p.error_code == 0 for t in committed.topics for p in t.partitions)
        assert group in tool("--list").split()
        described = tool("--describe", "--group", group, "--offsets")
        rows = [line.split() for line in described.splitlines()]
        assert sorted(r[2] for r in rows if r[:2] == [group, source]) == ["0", "1"], described
        m.heartbeat(epoch=-1)
    reset = tool("--reset-offsets", "--group", group, "--to-earliest", "--all-input-topics", "--execute")
    assert sorted(line.split()[2:] for line in reset.splitlines() if line.startswith(group)) == [["0", "0"], ["1", "0"]]
    assert "Successful" in tool("--delete-offsets", "--group", group, "--all-input-topics")
    assert "successful" in tool("--delete", "--group", group)
    assert group not in tool("--list").split()
