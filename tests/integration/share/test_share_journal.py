"""Share groups in the rebalance journal, with confluent-kafka's ShareConsumer: members joining and
leaving, the group's epochs with what each member was assigned, a poison record archived at the
group's delivery limit (set with IncrementalAlterConfigs) and acquisition locks expiring on a
stalled consumer, all read back from ``__kcoord_group_events`` and shown by ``kcoord groups
--history`` and ``--doctor``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kclient.group_history import read_events
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import wait_for
from tests.integration.helpers.journal import groups_command

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType  # noqa: E402

from tests.integration.helpers.clients import set_group_configs as set_configs  # noqa: E402
from tests.integration.helpers.share import (  # noqa: E402
    LOCK_MS,
    OVERRIDES,
    bootstrap,
    consumer,
    make_topic,
    poll_holding,
    poll_until,
    produce,
)


def set_group_configs(broker: BrokerProcess, group: str, configs: dict[str, str]) -> None:
    set_configs(bootstrap(broker), group, configs)


def events_of(broker: BrokerProcess, group: str, want: Callable[[list[dict[str, Any]]], bool],
              what: str) -> list[dict[str, Any]]:
    """The group's journal events once ``want`` holds (they are readable once flushed)."""
    seen: list[list[dict[str, Any]]] = [[]]

    def ready() -> bool:
        seen[0] = read_events(bootstrap(broker), group)
        return want(seen[0])

    wait_for(ready, 15, what)
    return seen[0]


def of(events: list[dict[str, Any]], kind: str, cause: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind and (cause is None or e["cause"] == cause)]


def test_a_poison_record_and_expiring_locks_in_the_journal_and_the_doctor(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(OVERRIDES)
    suffix = uuid.uuid4().hex[:6]
    topic, poison_group, slow_group = f"orders-{suffix}", f"billing-{suffix}", f"slow-{suffix}"
    make_topic(broker, topic)
    for group in (poison_group, slow_group):
        set_group_configs(broker, group, {"share.delivery.count.limit": "2", "share.auto.offset.reset": "earliest"})
    produce(broker, topic, ["fine-0", "poison", "fine-1"])

    # A consumer that fails on one record and releases it every time: archived at the limit of 2.
    c = consumer(broker, poison_group, topic, explicit=True)
    seen: list[tuple[str, int, int]] = []

    def judge(m: Any) -> None:
        seen.append((m.value().decode(), m.delivery_count(), m.offset()))
        c.acknowledge(m, AcknowledgeType.RELEASE if m.value() == b"poison" else AcknowledgeType.ACCEPT)

    try:
        poll_until(c, lambda got: len(got) >= 4, on_message=judge)
        c.commit_sync()
        poll_until(c, lambda got: False, seconds=1.5, on_message=judge)
    finally:
        c.close()
    assert sorted((v, n) for v, n, _ in seen) == [("fine-0", 1), ("fine-1", 1), ("poison", 1), ("poison", 2)]
    poison_offset = next(o for v, _, o in seen if v == "poison")

    events = events_of(broker, poison_group, lambda evs: bool(of(evs, "delivery")) and bool(
        of(evs, "member", "member-left")), "the poison record and the leave in the journal")
    assert {e["group_type"] for e in events} == {"share"}
    [joined] = of(events, "member", "new-member-joined")
    assert joined["subscribed_topics"] == [topic]
    gained = [e for e in of(events, "assignment") if e["gained"]]
    assert gained and gained[0]["gained"] == {joined["member_id"]: [f"{topic}-0"]}
    [poison] = of(events, "delivery")
    assert poison["cause"] == "delivery-limit-reached" and poison["topic"] == topic and poison["partition"] == 0
    assert poison["offsets"] == [[poison_offset, poison_offset]] and poison["records"] == 1
    assert poison["delivery_limit"] == 2 and poison["released_by"] == {"released": 1}
    assert poison["member_id"] == joined["member_id"] and poison["generation"] > 0
    assert of(events, "member", "member-left")[0]["member_id"] == joined["member_id"]

    # A consumer that stalls holding its records: their locks expire; a second one stalls too,
    # and at the second expiry (the delivery limit) they are archived.
    produce(broker, topic, ["slow-0", "slow-1"])
    stalled: list[Any] = []
    try:
        for rounds in (1, 2):
            s = consumer(broker, slow_group, topic, explicit=True)
            stalled.append(s)
            def hold_slow(m: Any, s: Any = s) -> bool:
                """The earlier records accepted (the group reads from the start); the slow ones held."""
                if m.value().startswith(b"slow"):
                    return False
                s.acknowledge(m, AcknowledgeType.ACCEPT)
                return True

            held = poll_holding(s, hold_slow, lambda got: any(m.value().startswith(b"slow") for m in got))
            assert any(m.value().startswith(b"slow") for m in held)
            # No acknowledgement and no poll: the lock runs out.
            events = events_of(broker, slow_group, lambda evs, n=rounds: len(
                of(evs, "delivery", "acquisition-lock-expired")) >= n, "the expired locks in the journal")
        expired = of(events, "delivery", "acquisition-lock-expired")
        assert all(e["lock_duration_ms"] == LOCK_MS and e["topic"] == topic for e in expired)
        assert sum(e["records"] for e in expired) >= 2
        [archived] = of(events_of(broker, slow_group, lambda evs: bool(of(evs, "delivery", "delivery-limit-reached")),
                                  "the records archived after their locks expired twice"),
                        "delivery", "delivery-limit-reached")
        assert archived["released_by"].get("lock-expired", 0) >= 1
    finally:
        for s in stalled:
            s.close()

    history = groups_command(broker, "--history", "--group", poison_group)
    assert history.startswith(f"SHARE GROUP {poison_group}:")
    [line] = [li for li in history.splitlines() if "delivery-limit-reached" in li]
    assert f"{topic}-0" in line and str(poison_offset) in line
    assert "new-member-joined" in history and "member-left" in history

    doctor = groups_command(broker, "--doctor", "--group", poison_group)
    assert "[poison-records]" in doctor and f"{topic}-0 offsets {poison_offset}" in doctor
    assert f"--offset {poison_offset}" in doctor and "REJECT" in doctor
    slow = groups_command(broker, "--doctor", "--group", slow_group)
    assert "[lock-expiries]" in slow and "share.record.lock.duration.ms" in slow
