"""The doctor on share groups: poison records archived at the delivery limit, acquisition locks
that keep expiring, and the rules written for other groups treating share groups sensibly."""

from __future__ import annotations

from typing import Any

from doctor import diagnose


def delivery(ts: int, cause: str, offsets: list[list[int]], records: int, **kw: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "delivery", "group": "sg", "group_type": "share", "timestamp": ts,
            "cause": cause, "topic": "orders", "partition": 2, "offsets": offsets, "records": records,
            "delivery_limit": 3, "lock_duration_ms": 15000, "members": ["m-1"], **kw}


def share_member(ts: int, cause: str, member_id: str, **kw: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "member", "group": "sg", "group_type": "share", "timestamp": ts,
            "cause": cause, "member_id": member_id, **kw}


def test_one_poison_record_is_a_finding_naming_where_it_is() -> None:
    [f] = diagnose([delivery(1000, "delivery-limit-reached", [[41, 41]], 1, released_by={"released": 1})])
    assert f.rule == "poison-records" and f.group == "sg" and f.count == 1
    assert "orders-2 offsets 41" in f.evidence and "after 3 deliveries" in f.evidence and f.evidence.startswith("1 record was")
    assert "--partition 2 --offset 41" in f.recommendation and "REJECT" in f.recommendation
    assert "share.delivery.count.limit" in f.recommendation and f.members == ["m-1"]


def test_poison_records_archived_by_expiring_locks_say_so() -> None:
    events = [delivery(1000, "delivery-limit-reached", [[5, 9]], 5, released_by={"lock-expired": 5}),
              delivery(2000, "delivery-limit-reached", [[12, 12]], 1, released_by={"released": 1})]
    [f] = [f for f in diagnose(events) if f.rule == "poison-records"]
    assert f.count == 6 and "orders-2 offsets 5-9, 12" in f.evidence
    assert "5 of them because their acquisition locks expired" in f.evidence
    assert "--offset 5 " in f.recommendation and "share.record.lock.duration.ms" in f.recommendation


def test_locks_expiring_again_and_again() -> None:
    once = [delivery(1000, "acquisition-lock-expired", [[0, 99]], 100)]
    assert diagnose(once) == []
    apart = [*once, delivery(1000 + 3_600_000, "acquisition-lock-expired", [[100, 199]], 100)]
    assert diagnose(apart) == []
    again = [*once, delivery(40_000, "acquisition-lock-expired", [[100, 199]], 100)]
    [f] = diagnose(again)
    assert f.rule == "lock-expiries" and f.count == 2
    assert "200 records" in f.evidence and "15000" in f.evidence and "orders-2 offsets 0-99, 100-199" in f.evidence
    assert "share.record.lock.duration.ms" in f.recommendation and "max.poll.records" in f.recommendation


def test_rules_for_other_groups_treat_share_groups_sensibly() -> None:
    # Share members rejoining as new members is not churn: no static membership, no rebalance.
    joins = [share_member(i * 1000, "new-member-joined", f"m-{i}", client_id="worker") for i in range(5)]
    assert diagnose(joins) == []
    # A share group's session timeout is a group config, not the client's.
    timeouts = [share_member(0, "session-timeout", "a"), share_member(1000, "session-timeout", "b")]
    [f] = diagnose(timeouts)
    assert f.rule == "session-timeout-cluster" and "share.session.timeout.ms" in f.recommendation
    # Assignments (a new group epoch) are no rebalances: no storm.
    epochs = [{"version": 1, "kind": "assignment", "group": "sg", "group_type": "share", "timestamp": i * 1000,
               "cause": "new-member-joined", "members": i} for i in range(10)]
    assert diagnose(epochs) == []


def test_records_named_by_several_rounds_are_named_once() -> None:
    again = [delivery(1000, "acquisition-lock-expired", [[0, 4]], 5),
             delivery(5000, "acquisition-lock-expired", [[0, 4]], 5)]
    [f] = diagnose(again)
    assert "orders-2 offsets 0-4" in f.evidence and "0-4, 0-4" not in f.evidence


def test_an_event_without_offsets_still_makes_a_finding() -> None:
    [f] = diagnose([delivery(1000, "delivery-limit-reached", [], 3)])
    assert f.rule == "poison-records" and f.count == 3 and "--offset O" in f.recommendation
