"""What the console's pages show, read the way ``kcoord groups`` reads it: over the Kafka protocol
with ``KafkaAdmin`` (coordinators found with FindCoordinator, so any node shows every group of a
cluster) and the journal with ``group_history.JournalTail`` (only what is new at each read). Nothing here touches the
coordinators' state directly: a page costs the broker what the same ``kcoord groups`` commands
would. Every function blocks (sockets) and is meant for a worker thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from broker.console.timeline import Span, Timeline, build_timeline
from doctor import Finding, diagnose
from kclient.admin_client import AdminError, GroupDescription, KafkaAdmin, Node, TopicInfo, TopicPartition
from kclient.group_history import JournalTail, JournalUnavailable
from kclient.groups_command import offset_rows
from kclient.groups_output import OffsetRow

T = TypeVar("T")

GROUP_TYPES = ("classic", "consumer", "share", "streams")
# The groups list computes lag (two ListOffsets per group) for this many groups at most; the
# others show their state and members only, so a broker with thousands of groups stays cheap to view.
LAG_GROUPS = 100
# A group's page reads the age of the first unconsumed record of this many lagging partitions at most.
SECONDS_PARTITIONS = 200


@dataclass
class GroupSummary:
    group_id: str
    group_type: str
    state: str
    members: int | None = None
    assignor: str = ""
    lag: int | None = None
    lag_seconds: float | None = None
    last: Span | None = None
    coordinator: int | None = None
    error: str = ""


@dataclass
class ClusterState:
    nodes: list[Node]
    topics: list[TopicInfo]
    groups: list[GroupSummary]
    # Why the journal could not be read (it is off, or its partitions are moving), else empty.
    journal_error: str = ""
    read_at_ms: int = 0


@dataclass
class GroupState:
    group: GroupDescription
    offsets: list[OffsetRow]
    # A share group's partitions: start offset and lag, as DescribeShareGroupOffsets tells.
    share_offsets: dict[TopicPartition, tuple[int, int]]
    timeline: Timeline
    findings: list[Finding]
    journal_error: str = ""
    error: str = ""
    lag: int | None = field(default=None)
    # Per partition with a committed offset: the age (s) of the first record not consumed, 0 when
    # caught up; the group's lag in seconds is the largest.
    lag_seconds: dict[TopicPartition, float] = field(default_factory=dict)

    @property
    def max_lag_seconds(self) -> float | None:
        return max(self.lag_seconds.values()) if self.lag_seconds else None


def _journal(journal: JournalTail, group: str | None) -> tuple[list[dict[str, Any]], str]:
    """The journal's events (as ``read_events`` decodes them), or why there are none."""
    try:
        return journal.events(group), ""
    except (JournalUnavailable, OSError, ConnectionError) as exc:
        return [], str(exc)


def _total(lags: list[int | None]) -> int | None:
    known = [lag for lag in lags if lag is not None and lag >= 0]
    return sum(known) if known else None


def _lag(admin: KafkaAdmin, group: GroupDescription) -> tuple[list[OffsetRow], dict[TopicPartition, tuple[int, int]]]:
    if group.group_type == "Share":
        return [], admin.share_offsets(group.group_id)
    return offset_rows(admin, group), {}


def lag_seconds(admin: KafkaAdmin, rows: list[OffsetRow], now_ms: int) -> dict[TopicPartition, float]:
    """Each partition's lag in seconds: how old its first record after the committed offset is
    (at most ``SECONDS_PARTITIONS`` partitions read, one Fetch per leader)."""
    out: dict[TopicPartition, float] = {}
    behind: dict[TopicPartition, int] = {}
    for r in rows:
        if r.topic is None or r.partition is None or r.lag is None or r.offset is None:
            continue
        if r.lag <= 0:
            out[(r.topic, r.partition)] = 0.0
        elif len(behind) < SECONDS_PARTITIONS:
            behind[(r.topic, r.partition)] = max(r.offset, r.log_start or 0)
    for tp, at in admin.record_times(behind).items():
        out[tp] = max(now_ms - at, 0) / 1000
    return out


def read_cluster(admin: KafkaAdmin, journal: JournalTail) -> ClusterState:
    """Nodes, topics and every group (each type) with its state, members, lag and last rebalance."""
    events, journal_error = _journal(journal, None)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_group.setdefault(str(event.get("group", "")), []).append(event)
    admin.refresh_nodes()
    topics = admin.topics()
    listings = sorted(admin.list_groups(types=list(GROUP_TYPES)), key=lambda g: g.group_id)
    groups = []
    seconds_left = SECONDS_PARTITIONS  # lag in seconds costs a Fetch: for this many partitions in all
    now_ms = int(time.time() * 1000)
    for i, listing in enumerate(listings):
        summary = GroupSummary(listing.group_id, listing.group_type, listing.state)
        try:
            group = admin.describe_group(listing.group_id)
            summary.state, summary.group_type = group.state, group.group_type
            summary.members, summary.assignor = len(group.members), group.assignor
            summary.coordinator = group.coordinator.node_id
            if i < LAG_GROUPS:
                rows, share = _lag(admin, group)
                summary.lag = _total([r.lag for r in rows] + [lag for _, lag in share.values()])
                if rows and seconds_left > 0:
                    ages = lag_seconds(admin, rows[:seconds_left], now_ms)
                    seconds_left -= len(rows)
                    summary.lag_seconds = max(ages.values()) if ages else None
        except AdminError as exc:  # e.g. its coordinator moving: the others are still shown
            summary.error = str(exc)
        summary.last = build_timeline(by_group.get(listing.group_id, []), listing.group_id).last
        groups.append(summary)
    return ClusterState(sorted(admin.nodes.values(), key=lambda n: n.node_id), topics, groups, journal_error,
                        int(time.time() * 1000))


def read_group(admin: KafkaAdmin, group_id: str, journal: JournalTail) -> GroupState | None:
    """One group's members, offsets and lag, timeline and the doctor's findings; None when the
    broker knows nothing of it (no such group, no committed offsets, no journal events)."""
    events, journal_error = _journal(journal, group_id)
    group = admin.describe_group(group_id)
    error = ""
    rows: list[OffsetRow] = []
    share: dict[TopicPartition, tuple[int, int]] = {}
    seconds: dict[TopicPartition, float] = {}
    try:
        rows, share = _lag(admin, group)
        seconds = lag_seconds(admin, rows, int(time.time() * 1000))
    except AdminError as exc:
        error = str(exc)
    known = group.state != "Dead" or group.members or any(r.offset is not None for r in rows) or events
    if not known:
        return None
    return GroupState(group, rows, share, build_timeline(events, group_id), diagnose(events), journal_error, error,
                      _total([r.lag for r in rows] + [lag for _, lag in share.values()]), seconds)


class Reads(Protocol):
    """What the web application reads: the cluster, and one group (None when unknown)."""

    def cluster(self) -> ClusterState: ...

    def group(self, group_id: str) -> GroupState | None: ...


class Reader:
    """The console's reads over one kept admin client and one journal tail: connections are made
    once, not at every refresh, and made again after a failure. One read at a time (the admin
    client is not shared between threads)."""

    def __init__(self, bootstrap: str, timeout: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.journal = JournalTail(bootstrap, timeout=timeout)
        self._admin: KafkaAdmin | None = None
        self._lock = threading.Lock()

    def cluster(self) -> ClusterState:
        return self._read(lambda admin: read_cluster(admin, self.journal))

    def group(self, group_id: str) -> GroupState | None:
        return self._read(lambda admin: read_group(admin, group_id, self.journal))

    def _read(self, read: Callable[[KafkaAdmin], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                if self._admin is None:
                    self._admin = KafkaAdmin(self.bootstrap, timeout=self.timeout, client_id="kcoord-console")
                try:
                    return read(self._admin)
                except (OSError, ConnectionError):
                    # A kept connection closed (idle, a node restarted or gone): once more on new ones.
                    self._admin.close()
                    self._admin = None
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")
