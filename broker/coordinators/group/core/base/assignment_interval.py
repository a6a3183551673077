"""Assignment batching (Kafka 4.3+, KIP-1263): a modern group's target assignment is computed at
most once per its assignment interval (``consumer.assignment.interval.ms``,
``share.assignment.interval.ms``); a change within it waits for a heartbeat after it."""

from __future__ import annotations


def can_compute_target(assignment_time: int, interval_ms: int, now: int) -> bool:
    """Whether a group's next target assignment may be computed now (Kafka 4.3+, KIP-1263): at
    once when the last one's time is unknown (0: a new group, one left empty, a log written before
    4.3) or the interval is 0; else once the interval has passed since the last one. A wall clock
    stepped back past the last assignment computes at once too, where Kafka would wait for the
    clock to catch up (an operator's escape there is an interval of 0)."""
    if assignment_time == 0 or interval_ms == 0 or now < assignment_time:
        return True
    return now >= assignment_time + interval_ms
