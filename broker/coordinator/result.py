"""What a coordinator operation asks the broker shell to do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.records import Record


@dataclass(frozen=True)
class SetTimer:
    """Arm (or re-arm: the same key replaces) a timer that calls ``on_timer(key)`` at ``deadline_ms``."""

    key: str
    deadline_ms: int


@dataclass(frozen=True)
class CancelTimer:
    key: str


# (group, from_state, to_state, generation, member count, reason)
Transition = tuple[str, str, str, int, int, str]


@dataclass
class Result:
    """Replies to send, records to make durable first, timers to (re)arm and state transitions to log.

    ``replies`` holds ``(reply token, response)``: the current request's token unless it was
    parked, plus any parked requests of other members this operation completed. Every record has
    already been replayed into the shard; none of the replies may leave before the records are
    durable.
    """

    replies: list[tuple[int, Any]] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
