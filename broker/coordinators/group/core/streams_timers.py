"""A streams member's timers: its session, re-armed by every heartbeat, and its rebalance
timeout, armed while it has tasks to revoke; either fences it when it fires."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import TimerKind, TimerTarget

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

SESSION = TimerKind.STREAMS_SESSION
REBALANCE = TimerKind.STREAMS_REBALANCE
FENCING = (SESSION, REBALANCE)


def _key(kind: str, group_id: str, member_id: str) -> str:
    return f"{kind}:{group_id}:{member_id}"


def set_session_timeout(st: CoordinatorState, out: Result, group_id: str, member_id: str, deadline_ms: int) -> None:
    st.timers.set(out, _key(SESSION, group_id, member_id), deadline_ms, TimerTarget(SESSION, group_id, member_id))


def set_rebalance_timeout(st: CoordinatorState, out: Result, group_id: str, member_id: str, epoch: int,
                          deadline_ms: int) -> None:
    st.timers.set(out, _key(REBALANCE, group_id, member_id), deadline_ms,
                  TimerTarget(REBALANCE, group_id, member_id, epoch))


def cancel_rebalance_timeout(st: CoordinatorState, out: Result, group_id: str, member_id: str) -> None:
    st.timers.cancel(out, _key(REBALANCE, group_id, member_id))


def cancel_member_timers(st: CoordinatorState, out: Result, group_id: str, member_id: str) -> None:
    st.timers.cancel(out, _key(REBALANCE, group_id, member_id))
    st.timers.cancel(out, _key(SESSION, group_id, member_id))
