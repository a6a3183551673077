"""The timers a coordinator core asks for, as data: every core returns them from its operations and
the runtime arms them (broker/runtime/timers.py). Pure, so that the cores may import it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SetTimer:
    """Arm (or re-arm: the same key replaces) a timer that calls ``on_timer(key)`` at ``deadline_ms``."""

    key: str
    deadline_ms: int


@dataclass(frozen=True)
class CancelTimer:
    key: str
