"""A consumer-group member's timers. Every member has a session, re-armed by every heartbeat. A
consumer-protocol member has a rebalance timeout, armed while it has partitions to revoke (Kafka
fences it if it is still in that epoch when the timeout fires). A classic member (JoinGroup inside
a consumer group) instead has a join timeout, armed when it is told to rejoin, and a sync timeout,
armed when it has joined and must collect its assignment; both fence it when they fire."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import (
    TimerKind,
    TimerTarget,
    consumer_classic_join_key,
    consumer_classic_sync_key,
    consumer_rebalance_key,
    consumer_session_key,
)

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

SESSION = TimerKind.CONSUMER_SESSION
REBALANCE = TimerKind.CONSUMER_REBALANCE
CLASSIC_JOIN = TimerKind.CONSUMER_CLASSIC_JOIN
CLASSIC_SYNC = TimerKind.CONSUMER_CLASSIC_SYNC
FENCING = (SESSION, REBALANCE, CLASSIC_JOIN, CLASSIC_SYNC)


def set_session_timeout(state: CoordinatorState, out: Result, group_id: str, member_id: str, deadline_ms: int) -> None:
    state.timers.set(out, consumer_session_key(group_id, member_id), deadline_ms,
                     TimerTarget(SESSION, group_id, member_id))


def set_rebalance_timeout(state: CoordinatorState, out: Result, group_id: str, member_id: str, epoch: int,
                          deadline_ms: int) -> None:
    state.timers.set(out, consumer_rebalance_key(group_id, member_id), deadline_ms,
                     TimerTarget(REBALANCE, group_id, member_id, epoch))


def set_join_timeout_if_absent(state: CoordinatorState, out: Result, group_id: str, member_id: str, deadline_ms: int) -> None:
    key = consumer_classic_join_key(group_id, member_id)
    if key not in state.timers:
        state.timers.set(out, key, deadline_ms, TimerTarget(CLASSIC_JOIN, group_id, member_id))


def cancel_join_timeout(state: CoordinatorState, out: Result, group_id: str, member_id: str) -> None:
    state.timers.cancel(out, consumer_classic_join_key(group_id, member_id))


def set_sync_timeout(state: CoordinatorState, out: Result, group_id: str, member_id: str, deadline_ms: int) -> None:
    state.timers.set(out, consumer_classic_sync_key(group_id, member_id), deadline_ms,
                     TimerTarget(CLASSIC_SYNC, group_id, member_id))


def cancel_sync_timeout(state: CoordinatorState, out: Result, group_id: str, member_id: str) -> None:
    state.timers.cancel(out, consumer_classic_sync_key(group_id, member_id))


def cancel_member_timers(state: CoordinatorState, out: Result, group_id: str, member_id: str, session: bool = True) -> None:
    """Cancels the member's rebalance timeout and, unless ``session`` is False, every other timer
    it has (it is leaving the group)."""
    state.timers.cancel(out, consumer_rebalance_key(group_id, member_id))
    if session:
        state.timers.cancel(out, consumer_session_key(group_id, member_id))
        state.timers.cancel(out, consumer_classic_join_key(group_id, member_id))
        state.timers.cancel(out, consumer_classic_sync_key(group_id, member_id))
