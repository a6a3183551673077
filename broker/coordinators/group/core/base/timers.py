"""Timer keys and the book of armed timers.

A key names what a timer is for; re-arming a key replaces its deadline, so a heartbeat costs one
``SetTimer``. Group and member ids may contain ``:``, so a fired key is resolved through the book
rather than parsed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from broker.coordinators.group.core.base.result import Result
from broker.runtime.timer_requests import CancelTimer, SetTimer


class TimerKind(StrEnum):
    """What a group coordinator timer is for: the shard's ``on_timer`` dispatches on it. Each
    value is also its keys' prefix."""

    HEARTBEAT = "heartbeat"  # a classic member's session
    JOIN = "join"  # a classic group's join phase ends
    SYNC = "sync"  # a classic group's leader did not sync in time
    OFFSETS_EXPIRY = "offsets-expiry"  # the shard's sweep of expired offsets
    CONSUMER_SESSION = "consumer-session"
    CONSUMER_REBALANCE = "consumer-rebalance"  # a member did not revoke in time
    CONSUMER_CLASSIC_JOIN = "consumer-classic-join"  # a classic member inside a consumer group
    CONSUMER_CLASSIC_SYNC = "consumer-classic-sync"
    CONSUMER_REGEX = "consumer-regex"  # a consumer group's regular expressions resolved
    SHARE_SESSION = "share-session"
    SHARE_INITIALIZE = "share-initialize"  # share partitions' state initialized
    STREAMS_SESSION = "streams-session"
    STREAMS_REBALANCE = "streams-rebalance"


OFFSETS_EXPIRY_KEY = TimerKind.OFFSETS_EXPIRY.value


class TimerTarget(NamedTuple):
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""
    epoch: int = -1  # consumer-rebalance: the member epoch it must have left by the deadline


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat:{group_id}:{member_id}"


def consumer_session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session:{group_id}:{member_id}"


def consumer_rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance:{group_id}:{member_id}"


def consumer_classic_join_key(group_id: str, member_id: str) -> str:
    return f"consumer-classic-join:{group_id}:{member_id}"


def consumer_classic_sync_key(group_id: str, member_id: str) -> str:
    return f"consumer-classic-sync:{group_id}:{member_id}"


def consumer_regex_key(group_id: str) -> str:
    return f"consumer-regex:{group_id}"


def join_key(group_id: str) -> str:
    return f"join:{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync:{group_id}"


class TimerBook:
    """The timers this shard has asked for and not yet seen fire or cancelled."""

    def __init__(self) -> None:
        self._targets: dict[str, TimerTarget] = {}

    def set(self, out: Result, key: str, deadline_ms: int, target: TimerTarget) -> None:
        # Re-arming (every heartbeat) keeps the target already stored: the new one is then freed at
        # once, where storing it would keep one object per member alive from one heartbeat to the
        # next, long enough for the garbage collector to promote it to its oldest generation.
        if self._targets.get(key) != target:
            self._targets[key] = target
        out.timers.append(SetTimer(key, deadline_ms))

    def cancel(self, out: Result, key: str) -> None:
        if self._targets.pop(key, None) is not None:
            out.timers.append(CancelTimer(key))

    def fire(self, key: str) -> TimerTarget | None:
        return self._targets.pop(key, None)

    def clear(self) -> None:
        self._targets.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._targets

    def __len__(self) -> int:
        return len(self._targets)
