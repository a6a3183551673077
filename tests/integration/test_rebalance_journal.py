"""The rebalance journal with real clients: each way a member goes (poll loop stalls, SIGKILL, close
with a reason, static restart, a topic growing) is recorded with its cause, readable by any Kafka
client from `__kcoord_group_events`, and the stall the journal measured matches what the clients
saw, within a heartbeat interval."""

from __future__ import annotations

import io
import json
import signal
import time
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaConsumer

from kclient.group_history import read_events
from kcoord.cli import build_parser
from testkit.kcoord import BrokerProcess
from tests.integration.clients import ThreadedConsumer, create_topic, start_consumer_process, wait_for

pytestmark = pytest.mark.timeout(120)

HEARTBEAT_MS = 300
# The client learns of a rebalance at its next heartbeat and of its end when its SyncGroup returns:
# its own view of a stall (revoke to assign) is inside the journal's, shorter by up to a heartbeat
# interval plus the time its rejoin takes on a loaded machine.
EARLY_MS, LATE_MS = 250, HEARTBEAT_MS + 1000


def stall_matches(journal_ms: float, client_ms: float) -> bool:
    """The journal's stall covers the client's, and is longer by no more than the client's delay
    in noticing the rebalance (a stall computed from the wrong event is off by seconds)."""
    return -EARLY_MS <= journal_ms - client_ms <= LATE_MS


class TimedConsumer(ThreadedConsumer):
    """Records when it lost and regained partitions (eager: everything at each rebalance)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.timeline: list[tuple[str, float]] = []
        self.revoke_delay = 0.0
        super().__init__(*args, **kw)

    def _on_assign(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.timeline.append(("assign", time.monotonic()))
        super()._on_assign(consumer, parts)

    def _on_revoke(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.timeline.append(("revoke", time.monotonic()))
        if self.revoke_delay:
            time.sleep(self.revoke_delay)
        super()._on_revoke(consumer, parts)

    def _run(self) -> None:
        self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.stop_flag.is_set():
            self.consumer.poll(0.05)

    def last_stall_ms(self) -> float:
        """From the last revocation to the assignment after it."""
        revoked = [t for kind, t in self.timeline if kind == "revoke"][-1]
        assigned = next(t for kind, t in self.timeline if kind == "assign" and t >= revoked)
        return (assigned - revoked) * 1000


def consumer(broker: BrokerProcess, group: str, topic: str, **conf: Any) -> TimedConsumer:
    return TimedConsumer(broker.bootstrap, group, [topic], **{"heartbeat.interval.ms": HEARTBEAT_MS, **conf})


def rebalances(broker: BrokerProcess, group: str, after: int = 0) -> list[dict[str, Any]]:
    return [e for e in read_events(broker.bootstrap, group) if e["kind"] == "rebalance" and e["timestamp"] > after]


def settled(cs: list[TimedConsumer], partitions: int) -> bool:
    return sum(len(c.held()) for c in cs) == partitions and all(c.held() for c in cs)


def two_stable(broker: BrokerProcess, group: str, topic: str, partitions: int = 4,
               **conf: Any) -> tuple[TimedConsumer, TimedConsumer, int]:
    create_topic(broker.bootstrap, topic, partitions)
    a = consumer(broker, group, topic, **conf)
    b = consumer(broker, group, topic, **conf)
    wait_for(lambda: settled([a, b], partitions), 30, "two members sharing the topic")
    time.sleep(0.5)
    return a, b, int(time.time() * 1000)


class Seen(NamedTuple):
    """What a scenario's clients observed: the group, the cause it must be recorded with and the
    stall a surviving member saw (None when the members' views differ too much to compare)."""

    group: str
    cause: str
    client_stall_ms: float | None


def groups_command(broker: BrokerProcess, *argv: str) -> str:
    """``kcoord groups --bootstrap-server ... <argv>``, as the command line runs it."""
    args = build_parser().parse_args(["groups", "--bootstrap-server", broker.bootstrap, *argv])
    out, err = io.StringIO(), io.StringIO()
    assert args.func(args, out=out, err=err) == 0, err.getvalue() + out.getvalue()
    return out.getvalue()


def history(broker: BrokerProcess, group: str) -> str:
    return groups_command(broker, "--history", "--group", group)


def member_closing_with_a_reason(broker: BrokerProcess) -> Seen:
    create_topic(broker.bootstrap, "close-t", 4)
    a = consumer(broker, "close-g", "close-t")
    leaver = KafkaConsumer("close-t", bootstrap_servers=broker.bootstrap, group_id="close-g",
                           client_id="billing-worker", session_timeout_ms=6000, heartbeat_interval_ms=HEARTBEAT_MS,
                           enable_auto_commit=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (leaver.assignment() and len(a.held()) == 2):
        leaver.poll(timeout_ms=100)
    assert len(a.held()) == 2
    since = int(time.time() * 1000)
    # KIP-800: kafka-python's coordinator sends the reason in LeaveGroup v5.
    leaver._coordinator.maybe_leave_group(reason="deploying version 2")
    leaver.close()
    wait_for(lambda: len(a.held()) == 4, 20, "the survivor to take every partition")
    wait_for(lambda: rebalances(broker, "close-g", since), 10, "the rebalance in the journal")
    [r] = rebalances(broker, "close-g", since)
    assert r["cause"] == "member-left"
    assert r["cause_detail"]["client_reason"] == "deploying version 2"
    assert r["cause_detail"]["client_id"] == "billing-worker"
    assert r["moved_count"] == 2
    assert stall_matches(r["stall_ms"], a.last_stall_ms()), (r["stall_ms"], a.last_stall_ms())
    text = history(broker, "close-g")
    assert "member-left" in text and "deploying version 2" in text
    stall = a.last_stall_ms()
    a.close()
    return Seen("close-g", "member-left", stall)


def member_killed_with_sigkill(broker: BrokerProcess) -> Seen:
    create_topic(broker.bootstrap, "kill-t", 4)
    a = consumer(broker, "kill-g", "kill-t")
    victim = start_consumer_process(broker.bootstrap, "kill-g", "kill-t")
    wait_for(lambda: len(a.held()) == 2, 30, "the two members to share the topic")
    time.sleep(0.5)
    since = int(time.time() * 1000)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    wait_for(lambda: len(a.held()) == 4, 30, "the survivor to take every partition")
    wait_for(lambda: rebalances(broker, "kill-g", since), 10, "the rebalance in the journal")
    [r] = rebalances(broker, "kill-g", since)
    assert r["cause"] == "session-timeout"
    assert r["cause_detail"]["last_heartbeat_age_ms"] >= 6000
    assert stall_matches(r["stall_ms"], a.last_stall_ms()), (r["stall_ms"], a.last_stall_ms())
    assert "session-timeout" in history(broker, "kill-g")
    stall = a.last_stall_ms()
    a.close()
    return Seen("kill-g", "session-timeout", stall)


def member_stops_polling(broker: BrokerProcess) -> Seen:
    poll = {"max.poll.interval.ms": 7000}
    a, b, since = two_stable(broker, "poll-g", "poll-t", **poll)
    b.revoke_delay = 10.0  # its poll loop is stuck in processing when the next rebalance starts
    c = consumer(broker, "poll-g", "poll-t", **poll)
    wait_for(lambda: settled([a, c], 4), 40, "the members that poll to share the topic")
    wait_for(lambda: rebalances(broker, "poll-g", since), 10, "the rebalance in the journal")
    r = rebalances(broker, "poll-g", since)[0]
    assert r["cause"] == "rebalance-timeout", r
    assert r["cause_detail"]["trigger"] == "new-member-joined"
    assert r["join_phase_ms"] >= 7000
    assert stall_matches(r["stall_ms"], a.last_stall_ms()), (r["stall_ms"], a.last_stall_ms())
    assert "rebalance-timeout" in history(broker, "poll-g")
    stall = a.last_stall_ms()
    for m in (a, b, c):
        m.close()
    return Seen("poll-g", "rebalance-timeout", stall)


def static_member_restarting(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "static-t", 2)
    first = start_consumer_process(broker.bootstrap, "static-g", "static-t", instance_id="worker-1")
    assert first.stdout is not None and "ASSIGNED" in first.stdout.readline()
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    since = int(time.time() * 1000)
    second = start_consumer_process(broker.bootstrap, "static-g", "static-t", instance_id="worker-1")
    try:
        assert second.stdout is not None and "ASSIGNED" in second.stdout.readline()

        def recent() -> list[dict[str, Any]]:
            return [e for e in read_events(broker.bootstrap, "static-g") if e["timestamp"] >= since]

        # The journal is readable once flushed (every log.flush.interval.ms).
        wait_for(lambda: any(e["cause"] == "static-member-rejoined" for e in recent()), 10, "the rejoin")
        events = recent()
        [rejoined] = [e for e in events if e["cause"] == "static-member-rejoined"]
        assert rejoined["instance_id"] == "worker-1" and rejoined["avoided_rebalance"] is True
        assert not [e for e in events if e["kind"] == "rebalance"]
        assert "static-member-rejoined" in history(broker, "static-g")
    finally:
        second.kill()
        second.wait(10)


def partition_count_change(broker: BrokerProcess) -> Seen:
    a, b, since = two_stable(broker, "grow-g", "grow-t", partitions=2,
                             **{"topic.metadata.refresh.interval.ms": 1000})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions("grow-t", 4)])["grow-t"].result(15)
    wait_for(lambda: settled([a, b], 4), 30, "the members to share the grown topic")
    wait_for(lambda: rebalances(broker, "grow-g", since), 10, "the rebalance in the journal")
    r = rebalances(broker, "grow-g", since)[0]
    assert r["cause"] == "partition-count-changed", r
    assert r["cause_detail"]["partitions"] == {"grow-t": [2, 4]}
    assert "partition-count-changed" in history(broker, "grow-g")
    a.close()
    b.close()
    return Seen("grow-g", "partition-count-changed", None)


def test_a_member_closing_with_a_reason(broker: BrokerProcess) -> None:
    member_closing_with_a_reason(broker)


def test_a_member_killed_with_sigkill_times_out(broker: BrokerProcess) -> None:
    member_killed_with_sigkill(broker)


def test_a_member_that_stops_polling_past_max_poll_interval(broker: BrokerProcess) -> None:
    member_stops_polling(broker)


def test_a_static_member_restarting_avoids_a_rebalance(broker: BrokerProcess) -> None:
    static_member_restarting(broker)


def test_a_partition_count_change(broker: BrokerProcess) -> None:
    partition_count_change(broker)


def test_any_kafka_client_reads_the_journal_and_the_doctor_speaks(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "churn-t", 2)
    for _ in range(3):  # the same client joining and leaving, over and over
        c = consumer(broker, "churn-g", "churn-t", **{"client.id": "flaky-worker"})
        wait_for(lambda c=c: len(c.held()) == 2, 20, "the member to get the topic")
        c.close()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "journal-reader",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.assign([TopicPartition("__kcoord_group_events", 0, 0)])
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len([e for e in seen if e["kind"] == "rebalance"]) < 3:
        msg = reader.poll(0.2)
        if msg is not None and msg.error() is None:
            assert json.loads(msg.key()) == {"version": 1, "group": json.loads(msg.value())["group"]}
            seen.append(json.loads(msg.value()))
    reader.close()
    assert len([e for e in seen if e["kind"] == "rebalance" and e["group"] == "churn-g"]) >= 3
    out = groups_command(broker, "--doctor", "--group", "churn-g")
    assert "[member-churn]" in out and "flaky-worker" in out and "group.instance.id" in out
