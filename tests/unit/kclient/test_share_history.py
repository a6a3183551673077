"""``kcoord groups --history`` of a share group: its epochs with what each member gained and lost,
its delivery problems (poison records, expired locks) and its membership changes."""

from __future__ import annotations

from typing import Any

from kclient.group_history import render_history


def event(kind: str, ts: int, cause: str, **kw: Any) -> dict[str, Any]:
    return {"version": 1, "kind": kind, "group": "sg", "group_type": "share", "generation": 3, "timestamp": ts,
            "cause": cause, "state_before": "Stable", "state_after": "Stable", **kw}


def test_a_share_groups_history() -> None:
    events = [
        event("member", 1000, "new-member-joined", member_id="m-1", client_id="worker",
              subscribed_topics=["orders"]),
        event("assignment", 1000, "new-member-joined", epoch_before=2, members=2, partitions=1,
              shared_partitions=1, gained={"m-1": ["orders-0"]}, lost={}, reason="member m-1 joined"),
        event("delivery", 5000, "delivery-limit-reached", topic="orders", partition=0, records=1,
              offsets=[[7, 7]], delivery_limit=2, lock_duration_ms=15000, members=["m-1"]),
        event("delivery", 6000, "acquisition-lock-expired", topic="orders", partition=0, records=10,
              offsets=[[8, 17]], delivery_limit=2, lock_duration_ms=15000, members=["m-1"]),
        {**event("member", 9000, "member-left", member_id="m-1"), "group": "other"},
    ]
    text = render_history(events, "sg")
    assert text.startswith("SHARE GROUP sg: 1 assignments, 2 delivery problems")
    lines = text.splitlines()
    [assignment] = [line for line in lines if "2->3" in line]
    assert "new-member-joined" in assignment and "m-1:orders-0" in assignment
    [poison] = [line for line in lines if "delivery-limit-reached" in line]
    assert "orders-0" in poison and " 7 " in poison and "15.000s" in poison
    [expired] = [line for line in lines if "acquisition-lock-expired" in line]
    assert "8-17" in expired and " 10 " in expired
    assert "MEMBERSHIP CHANGES" in text and "worker/m-1" in text and "subscribed_topics=['orders']" in text
    assert "member-left" not in text
