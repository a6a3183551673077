"""Rebalance scenarios driven by real clients and the journal events they leave, with the
clients' own view of each stall to compare with."""

from __future__ import annotations

import io
import signal
import time
from typing import Any, NamedTuple

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaConsumer

from kclient.group_history import read_events
from kcoord.cli import build_parser
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, start_consumer_process, wait_for

HEARTBEAT_MS = 300
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


def formed(broker: BrokerProcess, group: str, members: int) -> int:
    """Once the journal holds the rebalance that left ``group`` stable with ``members`` members:
    the timestamp of its last event, after which a scenario's own rebalance is looked for."""
    events: list[dict[str, Any]] = []

    def recorded() -> bool:
        events[:] = read_events(broker.bootstrap, group)
        done = [e for e in events if e["kind"] == "rebalance"]
        return bool(done) and done[-1]["outcome"] == "Stable" and done[-1]["members_after"] == members

    wait_for(recorded, 30, f"the journal to record {group} formed of {members} members",
             seen=lambda: [(e["kind"], e["cause"], e.get("members_after")) for e in events])
    return max(e["timestamp"] for e in events)


def two_stable(broker: BrokerProcess, group: str, topic: str, partitions: int = 4,
               **conf: Any) -> tuple[TimedConsumer, TimedConsumer, int]:
    create_topic(broker.bootstrap, topic, partitions)
    a = consumer(broker, group, topic, **conf)
    b = consumer(broker, group, topic, **conf)
    wait_for(lambda: settled([a, b], partitions), 30, "two members sharing the topic")
    return a, b, formed(broker, group, 2)


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
    # The confluent member leads the group (it holds every partition before the other joins): a
    # kafka-python leader that joined before its metadata had the new topic assigned nothing,
    # and did not rebalance for the 30 s this scenario waits (two full runs in three).
    wait_for(lambda: len(a.held()) == 4, 30, "the first member to hold every partition")
    leaver = KafkaConsumer("close-t", bootstrap_servers=broker.bootstrap, group_id="close-g",
                           client_id="billing-worker", session_timeout_ms=6000, heartbeat_interval_ms=HEARTBEAT_MS,
                           enable_auto_commit=False, metadata_max_age_ms=1000)
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
    since = formed(broker, "kill-g", 2)
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
    assert r["join_phase_ms"] >= 7000, r  # the join phase ran to the rebalance timeout (max.poll.interval.ms)
    assert stall_matches(r["stall_ms"], a.last_stall_ms()), (r["stall_ms"], a.last_stall_ms())
    assert "rebalance-timeout" in history(broker, "poll-g")
    stall = a.last_stall_ms()
    for m in (a, b, c):
        m.close()
    return Seen("poll-g", "rebalance-timeout", stall)


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
