"""A consumer-protocol member's two timers: its session, re-armed by every heartbeat, and its
rebalance timeout, armed while it has partitions to revoke (Kafka fences it if it is still in that
epoch when the timeout fires)."""

from __future__ import annotations

from typing import Any

from broker.coordinator.result import Result
from broker.coordinator.timers import TimerTarget, consumer_rebalance_key, consumer_session_key

SESSION = "consumer-session"
REBALANCE = "consumer-rebalance"


def set_session_timeout(state: Any, out: Result, group_id: str, member_id: str, deadline_ms: int) -> None:
    state.timers.set(out, consumer_session_key(group_id, member_id), deadline_ms,
                     TimerTarget(SESSION, group_id, member_id))


def set_rebalance_timeout(state: Any, out: Result, group_id: str, member_id: str, epoch: int,
                          deadline_ms: int) -> None:
    state.timers.set(out, consumer_rebalance_key(group_id, member_id), deadline_ms,
                     TimerTarget(REBALANCE, group_id, member_id, epoch))


def cancel_member_timers(state: Any, out: Result, group_id: str, member_id: str, session: bool = True) -> None:
    state.timers.cancel(out, consumer_rebalance_key(group_id, member_id))
    if session:
        state.timers.cancel(out, consumer_session_key(group_id, member_id))
