"""Resolving a consumer group's regular expressions off the heartbeat path, as Kafka 4.4 does.

Kafka's ``GroupMetadataManager`` never resolves an expression inside the heartbeat that brings it:
the heartbeat only decides whether the group's expressions need resolving and, if so, schedules
one resolution of all of them on a background executor; its result is written as
ConsumerGroupRegularExpression records and, when what they matched (or the group's metadata hash)
changed, a group epoch bump, so that a later heartbeat computes the target assignment. A client
sees it: the heartbeat that subscribes with a new expression is not given its topics.

A heartbeat asks for a refresh (Kafka's ``maybeUpdateRegularExpressions``) when the group
subscribes with at least one expression, none is pending, the last one is more than 10 s old
(``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``, read from the records' timestamps), and an expression is
not resolved yet, or a topic was created since the group last resolved, or the last resolution is
older than ``group.consumer.regex.refresh.interval.ms`` (10 minutes). A deleted topic asks for
nothing: it leaves the group's metadata hash (and its assignment) through the heartbeat's check of
the topics, and leaves the recorded resolutions at the next refresh.

Here the refresh is a timer of the shard armed for the heartbeat's ``now``: the runtime fires it
as a write operation of its own after the heartbeat is answered, with the time it fires at
(``regex_resolution.on_timer``). The
core stays a state machine: the timer is soft state like Kafka's executor (a refresh lost with a
reload is asked for again by the next heartbeat), and what it decides is in its records.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Set
from typing import TYPE_CHECKING

from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.base.timers import TimerKind, TimerTarget, consumer_regex_key
from broker.coordinators.group.core.consumer.group import ConsumerGroup
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

# The timer's kind.
REFRESH = TimerKind.CONSUMER_REGEX
# Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: the least time between two refreshes of a group.
MIN_INTERVAL_MS = 10_000


class RegexChange(enum.Enum):
    """What a member's request did to its expression (Kafka's UpdateRegularExpressionStatus)."""

    NONE = "none"
    # Changed to an expression not resolved yet: the subscription changed, the epoch waits for
    # the refresh.
    UPDATED = "updated"
    # Changed to an expression already resolved, or dropped one: the epoch is bumped at once.
    UPDATED_AND_RESOLVED = "updated and resolved"


def on_member_update(st: CoordinatorState, group: ConsumerGroup, member: ConsumerGroupMember,
                     updated: ConsumerGroupMember, in_use: Set[str], resolved: Mapping[str, frozenset[str]],
                     now: int) -> tuple[RegexChange, bool]:
    """What ``updated`` (``member`` as the request leaves it) changes of the group's expressions,
    and whether the request asks for a refresh (``schedule`` it once the request has succeeded).
    ``in_use``: the expressions the group's members subscribe with after the request;
    ``resolved``: the group's resolutions after it (a tombstone left out)."""
    old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
    change = RegexChange.NONE
    required = False
    if (old or None) != (new or None):
        change = RegexChange.UPDATED
        if new:
            if group.regex_subscribers(new) == 0:
                required = True  # a new expression: resolve it
            elif new in group.resolved_regexes:
                change = RegexChange.UPDATED_AND_RESOLVED
        elif old:
            change = RegexChange.UPDATED_AND_RESOLVED
    if not required and not group.subscribed_regexes():
        return change, False
    if group.group_id in st.regex_refreshes:
        return change, False  # one is pending
    last = group.last_regex_refresh_ms()
    if last is not None and now <= last + MIN_INTERVAL_MS:
        return change, False
    required = (required or set(in_use) != set(resolved)
                or group.regex_topics_version < st.topics_created_version
                or last is None or now > last + st.config.consumer_regex_refresh_interval_ms)
    return change, required and bool(in_use)


def schedule(st: CoordinatorState, out: Result, group_id: str, may_describe: Callable[[str], bool] | None,
             now: int) -> None:
    """Arms the group's refresh for ``now``: it runs once the operation asking for it is done."""
    st.regex_refreshes[group_id] = may_describe
    st.timers.set(out, consumer_regex_key(group_id), now, TimerTarget(REFRESH, group_id))


def on_topics_created(st: CoordinatorState) -> None:
    """A topic was created: every group resolved before now refreshes at its next heartbeat (the
    interval allowing)."""
    st.topics_created_version = st.topics.version
