"""Heartbeat: Kafka's decision table, and one timer re-arm per heartbeat."""

from __future__ import annotations

from broker.runtime.timer_requests import SetTimer
from tests.unit.coordinators.group.core.harness import Harness

NONE, ILLEGAL_GENERATION, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 0, 22, 24, 25, 27
FENCED_INSTANCE_ID = 82


def test_heartbeat_errors(h: Harness) -> None:
    assert h.heartbeat("", "m", 0) == INVALID_GROUP_ID
    assert h.heartbeat("nope", "m", 0) == UNKNOWN_MEMBER_ID
    (a,), gen = h.stable()
    assert h.heartbeat("g", "stranger", gen) == UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", a, gen - 1) == ILLEGAL_GENERATION
    assert h.heartbeat("g", a, gen, instance_id="i") == UNKNOWN_MEMBER_ID
    pending = h.response(h.join("g")).member_id
    assert h.heartbeat("g", pending, gen) == UNKNOWN_MEMBER_ID


def test_heartbeat_by_state(h: Harness) -> None:
    a, t = h.join_new("g")
    h.sleep(3000)
    gen = h.response(t).generation_id
    assert h.heartbeat("g", a, gen) == NONE  # CompletingRebalance
    h.sync("g", a, gen, {a: b""})
    assert h.heartbeat("g", a, gen) == NONE  # Stable
    h.join_new("g")
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS  # PreparingRebalance, session still renewed
    assert h.timers[f"heartbeat:g:{a}"] == h.now + 10_000


def test_each_heartbeat_is_one_timer_rearm(h: Harness) -> None:
    (a,), gen = h.stable(session=8000)
    h.sleep(1234)
    h.heartbeat("g", a, gen)
    assert h.last.timers == [SetTimer(f"heartbeat:g:{a}", h.now + 8000)]
    assert h.last.records == [] and h.last.transitions == []


def test_heartbeats_keep_a_member_and_silence_expires_it(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, session=6000)
    for _ in range(10):
        h.sleep(5000)
        assert h.heartbeat("g", a, gen) in (NONE, REBALANCE_IN_PROGRESS)
        if h.state("g") != "Stable":
            break
    assert b not in h.group("g").members
    assert any(t[5] == "session-timeout" for t in h.transitions)
    assert h.heartbeat("g", b, gen) == UNKNOWN_MEMBER_ID


def test_static_member_with_an_old_member_id_is_fenced(h: Harness) -> None:
    t = h.join("s", instance_id="i1")
    h.sleep(3000)
    old = h.response(t).member_id
    h.join("s", instance_id="i1")  # a restarted instance takes over the instance id
    assert h.heartbeat("s", old, 1, instance_id="i1") == FENCED_INSTANCE_ID
