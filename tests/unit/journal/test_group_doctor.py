"""The doctor's rules over journal events: each finding fires on its pattern and not below it."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core.base import journal
from doctor import Thresholds, diagnose
from protocol import group_events


def member(ts: int, cause: str, member_id: str = "m", **kw: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "member", "group": "g", "group_type": "classic", "timestamp": ts,
            "cause": cause, "member_id": member_id, **kw}


def rebalance(ts: int, **kw: Any) -> dict[str, Any]:
    doc = {"version": 1, "kind": "rebalance", "group": "g", "group_type": "classic", "timestamp": ts,
           "cause": "member-left", "state_after": "Stable", "protocol": "range", "stall_ms": 1000,
           "join_phase_ms": 800, "members_before": 3, "no_partitions_ms": {"a": 900, "b": 900},
           "moved_count": 2, "partitions_before": 6, "waited_for": []}
    doc.update(kw)
    return doc


def rules(events: list[dict[str, Any]]) -> list[str]:
    return [f.rule for f in diagnose(events)]


def test_every_cause_the_coordinator_names_is_in_the_vocabulary() -> None:
    reasons = ["member-joined", "static-member-joined", "member-rejoined", "metadata-changed", "leader-rejoined",
               "static-member-protocol-changed", "static-member-replaced", "member-left", "session-timeout",
               "sync-timeout", "over-capacity", "deleted", "offsets-expired", "member m-1 joined", "member left",
               "member m-1 fenced: session timeout", "member m-1 fenced: rebalance timeout",
               "topics changed", "something else"]
    causes = {journal.cause_of_reason(r) for r in reasons}
    assert causes <= set(group_events.CAUSES)
    assert len(set(group_events.CAUSES)) == len(group_events.CAUSES) == 14


def test_repeated_rebalance_timeout_evictions() -> None:
    one = [member(1000, "rebalance-timeout", "a", rebalance_timeout_ms=300000)]
    assert "rebalance-timeout-evictions" not in rules(one)
    two = [*one, member(90_000, "rebalance-timeout", "b", rebalance_timeout_ms=300000)]
    [f] = [f for f in diagnose(two) if f.rule == "rebalance-timeout-evictions"]
    assert f.count == 2 and "300000" in f.evidence and "max.poll.records" in f.recommendation


def test_session_timeouts_clustered_in_time() -> None:
    apart = [member(0, "session-timeout", "a"), member(3_600_000, "session-timeout", "b")]
    assert "session-timeout-cluster" not in rules(apart)
    together = [member(0, "session-timeout", "a"), member(1500, "session-timeout", "b")]
    [f] = [f for f in diagnose(together) if f.rule == "session-timeout-cluster"]
    assert f.count == 2 and "session.timeout.ms" in f.recommendation


def test_the_same_client_joining_over_and_over() -> None:
    joins = [member(i * 1000, "new-member-joined", f"w-{i}", client_id="worker") for i in range(3)]
    [f] = [f for f in diagnose(joins) if f.rule == "member-churn"]
    assert "group.instance.id" in f.recommendation and f.members
    static = [member(i * 1000, "new-member-joined", f"w-{i}", client_id="worker", instance_id="w")
              for i in range(3)]
    assert "member-churn" not in rules(static)


def test_eager_rebalances_that_could_have_been_incremental() -> None:
    [f] = [f for f in diagnose([rebalance(0)]) if f.rule == "eager-rebalances"]
    assert "cooperative-sticky" in f.recommendation
    assert "eager-rebalances" not in rules([rebalance(0, protocol="cooperative-sticky")])
    assert "eager-rebalances" not in rules([rebalance(0, moved_count=6)])


def test_a_join_phase_waiting_for_one_slow_member() -> None:
    slow = rebalance(0, protocol="cooperative-sticky", join_phase_ms=20_000, waited_for=[
        {"member_id": "slowpoke", "join_delay_ms": 20_000}, {"member_id": "quick", "join_delay_ms": 200}])
    [f] = [f for f in diagnose([slow]) if f.rule == "slow-joiner"]
    assert f.members == ["slowpoke"]
    even = rebalance(0, waited_for=[{"member_id": "a", "join_delay_ms": 900},
                                    {"member_id": "b", "join_delay_ms": 800}])
    assert "slow-joiner" not in rules([even])


def test_rebalance_storms() -> None:
    storm = [rebalance(i * 60_000, protocol="cooperative-sticky") for i in range(5)]
    [f] = [f for f in diagnose(storm) if f.rule == "rebalance-storm"]
    assert f.count == 5 and "member-left x5" in f.evidence
    spread = [rebalance(i * 3_600_000, protocol="cooperative-sticky") for i in range(5)]
    assert "rebalance-storm" not in rules(spread)
    assert "rebalance-storm" in [f.rule for f in diagnose(spread, Thresholds(storm_window_ms=10 * 3_600_000))]


def test_a_streams_groups_session_timeouts_point_at_its_group_config() -> None:
    together = [member(0, "session-timeout", "a", group_type="streams"),
                member(1500, "session-timeout", "b", group_type="streams")]
    [f] = [f for f in diagnose(together) if f.rule == "session-timeout-cluster"]
    assert "streams.session.timeout.ms" in f.recommendation
