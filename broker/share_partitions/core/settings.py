"""What one share group's share partitions obey: its lock duration, delivery count limit, in-flight
cap, isolation level and where a new share partition starts (``share.auto.offset.reset``). Each
comes from the group's own config (IncrementalAlterConfigs on the GROUP resource) or else the
broker's ``group.share.*`` property; the shell resolves them, this module only says what they mean."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from broker.share_partitions.core.partition import Limits

EARLIEST: Final = "earliest"
LATEST: Final = "latest"
BY_DURATION: Final = "by_duration"
_BY_DURATION_PREFIX = BY_DURATION + ":"

# java.time.Duration's text form (ISO-8601 PnDTnHnMn.nS, signs allowed on the whole and on each
# part), which Kafka parses a ``by_duration:`` value with.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


@dataclass(frozen=True)
class Reset:
    """Where a share partition with no state yet starts: the log start, the end, or the first
    record no older than ``duration_ms`` (the end when there is none)."""

    kind: Literal["earliest", "latest", "by_duration"]
    duration_ms: int = 0


def parse_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration as java.time.Duration reads it; None when it does not
    parse. Finer than a millisecond is dropped, as Duration.toMillis drops it."""
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, t_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and t_part is None:
        return None
    if t_part is not None and hours is None and minutes is None and seconds is None:
        return None  # "P1DT": a T with nothing after it
    nanos = 0
    for part, unit in ((days, 86400), (hours, 3600), (minutes, 60)):
        if part is not None:
            nanos += int(part) * unit * 10**9
    if seconds is not None:
        frac = int((fraction or "").ljust(9, "0"))
        nanos += int(seconds) * 10**9 + (-frac if seconds.startswith("-") else frac)
    if sign == "-":
        nanos = -nanos
    return nanos // 10**6  # Duration.toMillis floors toward negative infinity


def parse_reset(text: str) -> Reset | None:
    """A ``share.auto.offset.reset`` value as Kafka 4.4 reads it (surrounding blanks trimmed,
    names lower case, a non-negative duration), or None when Kafka refuses it."""
    value = text.strip()
    if value == EARLIEST:
        return Reset(EARLIEST)
    if value == LATEST:
        return Reset(LATEST)
    if value.startswith(_BY_DURATION_PREFIX):
        millis = parse_duration_ms(value[len(_BY_DURATION_PREFIX):])
        if millis is not None and millis >= 0:
            return Reset(BY_DURATION, millis)
    return None


@dataclass(frozen=True)
class ShareGroupSettings:
    """One share group's effective settings (its own configs over the broker's)."""

    limits: Limits = field(default_factory=Limits)
    read_committed: bool = False
    reset: Reset = Reset(LATEST)
    # The dead-letter queue (errors.deadletterqueue.topic.name; "" for none) and whether the
    # rejected record itself is copied there (errors.deadletterqueue.copy.record.enable).
    dead_letter_topic: str = ""
    copy_dead_letters: bool = False
