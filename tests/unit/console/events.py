"""Journal events of one group as the coordinator writes them (docs/journal.md): two members join,
one leaves with a reason, one times out."""

from __future__ import annotations

from typing import Any

T0 = 1_790_000_000_000


def member(at: int, cause: str, client: str, member_id: str, **more: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "member", "group": "billing", "group_type": "classic", "timestamp": T0 + at,
            "cause": cause, "client_id": client, "member_id": member_id, **more}


def rebalance(start: int, end: int, generation: int, cause: str, before: int, after: int,
              **detail: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "rebalance", "group": "billing", "group_type": "classic", "timestamp": T0 + end,
            "rebalance_start": T0 + start, "generation": generation, "cause": cause, "stall_ms": end - start,
            "members_before": before, "members_after": after, "moved_count": 2, "outcome": "Stable",
            "cause_detail": detail}


EVENTS: list[dict[str, Any]] = [
    member(0, "new-member-joined", "alpha", "alpha-1"),
    member(2, "new-member-joined", "beta", "beta-1"),
    rebalance(0, 3000, 1, "new-member-joined", 0, 2, member_id="alpha-1", client_id="alpha"),
    member(10_000, "member-left", "beta", "beta-1", client_reason="deploying"),
    rebalance(10_000, 10_400, 2, "member-left", 2, 1, member_id="beta-1", client_id="beta",
              client_reason="deploying"),
    member(20_000, "new-member-joined", "gamma", "gamma-1"),
    rebalance(20_000, 21_000, 3, "new-member-joined", 1, 2, member_id="gamma-1", client_id="gamma"),
    member(40_000, "session-timeout", "gamma", "gamma-1", last_heartbeat_age_ms=6100),
    rebalance(40_000, 40_250, 4, "session-timeout", 2, 1, member_id="gamma-1", client_id="gamma",
              last_heartbeat_age_ms=6100),
    # Another group's event in the same journal partition.
    {**member(5, "new-member-joined", "x", "x-1"), "group": "other"},
]
