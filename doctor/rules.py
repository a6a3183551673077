"""The doctor's rules: findings, with evidence and a concrete recommendation, from a group's
journal events as readers decode them (``protocol.group_events``, whose vocabulary they use).

Pure functions over decoded events, so that the broker (its metrics), ``kcoord groups --doctor``
and the Spark job apply the very same rules.

The rules and their thresholds (``Thresholds``):
- ``rebalance-timeout-evictions``: members removed for not rejoining in time (or leaving because
  their poll loop stalled) at least ``evictions`` times: raise ``max.poll.interval.ms`` or lower
  ``max.poll.records``.
- ``session-timeout-cluster``: at least ``session_cluster`` session timeouts within
  ``session_cluster_window_ms``: the clients paused (GC, blocking calls); raise
  ``session.timeout.ms`` (for a streams group, its ``streams.session.timeout.ms`` group config) or
  fix the pause.
- ``member-churn``: one client id joined as a new dynamic member ``churn`` times or more: give it a
  ``group.instance.id`` (static membership) so restarts do not rebalance.
- ``eager-rebalances``: rebalances of a classic group with an eager assignor that moved fewer
  partitions than every member gave up: ``cooperative-sticky`` or the consumer protocol
  (``group.protocol=consumer``) would have let the others keep consuming.
- ``slow-joiner``: a join phase that waited ``slow_join_ms`` or more for one member after the
  others had joined: that member's poll loop is slow to reach ``poll()``.
- ``rebalance-storm``: ``storm`` rebalances or more within ``storm_window_ms``.
- ``poison-records`` (share groups): records archived because they were delivered
  ``share.delivery.count.limit`` times (``poison`` or more): look at those records and at why
  the consumers fail on them; reject what can never be processed.
- ``lock-expiries`` (share groups): acquisition locks expired in ``lock_expiries`` rounds or more
  within ``lock_expiry_window_ms``: the consumers hold records longer than
  ``share.record.lock.duration.ms``; raise it or process (and fetch) less at a time.

- ``streams-not-ready`` (streams groups): the group's last state is NotReady because its topology
  cannot run (a source topic missing, topics partitioned wrongly): no member runs any task until
  the topics the journaled status names are created or fixed. Internal topics missing alone are
  left out: the broker creates them at once and the next heartbeat leaves NotReady.

Share groups have no static membership and no rebalance (members joining cost the others
nothing), so ``member-churn`` leaves them alone; their session timeout is the broker's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.group_events import (
    DELIVERY,
    DELIVERY_LIMIT,
    LOCK_EXPIRED,
    MEMBER,
    MEMBER_LEFT,
    NEW_MEMBER,
    REBALANCE,
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    STATE,
)

RULES = ("rebalance-timeout-evictions", "session-timeout-cluster", "member-churn", "eager-rebalances",
         "slow-joiner", "rebalance-storm", "poison-records", "lock-expiries", "streams-not-ready")
_POLL_WORDS = ("poll", "max.poll")


@dataclass(frozen=True)
class Thresholds:
    evictions: int = 2
    session_cluster: int = 2
    session_cluster_window_ms: int = 60_000
    churn: int = 3
    slow_join_ms: int = 3_000
    storm: int = 5
    storm_window_ms: int = 600_000
    poison: int = 1
    lock_expiries: int = 2
    lock_expiry_window_ms: int = 600_000


@dataclass
class Finding:
    group: str
    rule: str
    count: int
    evidence: str
    recommendation: str
    timestamps: list[int] = field(default_factory=list)
    members: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "rule": self.rule, "count": self.count, "evidence": self.evidence,
                "recommendation": self.recommendation, "first": min(self.timestamps, default=None),
                "last": max(self.timestamps, default=None), "members": self.members}


def is_poll_eviction(event: dict[str, Any]) -> bool:
    """A member removed because its poll loop stalled: evicted by the rebalance timeout, or leaving
    on its own with a KIP-800 reason that says so (clients leave when max.poll.interval.ms lapses)."""
    if event.get("kind") != MEMBER:
        return False
    if event.get("cause") == REBALANCE_TIMEOUT:
        return True
    reason = str(event.get("client_reason") or "").lower()
    return event.get("cause") == MEMBER_LEFT and any(w in reason for w in _POLL_WORDS)


def diagnose(events: Iterable[dict[str, Any]], limits: Thresholds = Thresholds()) -> list[Finding]:
    """Every finding for every group in ``events`` (any order)."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_group[str(e.get("group"))].append(e)
    findings: list[Finding] = []
    for group, evs in sorted(by_group.items()):
        evs.sort(key=lambda e: int(e.get("timestamp", 0)))
        findings += _diagnose_group(group, evs, limits)
    return findings


def _diagnose_group(group: str, evs: list[dict[str, Any]], t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    members = [e for e in evs if e.get("kind") == MEMBER]
    rebalances = [e for e in evs if e.get("kind") == REBALANCE]
    configs = _member_configs(members)

    evicted = [e for e in members if is_poll_eviction(e)]
    if len(evicted) >= t.evictions:
        poll = sorted({int(v) for e in evicted
                       for v in [configs.get(str(e.get("member_id")), {}).get("rebalance_timeout_ms")
                                 or e.get("rebalance_timeout_ms")] if v is not None})
        out.append(Finding(
            group, "rebalance-timeout-evictions", len(evicted),
            f"{len(evicted)} members were removed because they did not return to poll() in time "
            f"(max.poll.interval.ms {', '.join(map(str, poll)) or 'unknown'})",
            "raise max.poll.interval.ms above the longest time one batch takes to process, or lower "
            "max.poll.records so that each poll() returns sooner",
            [int(e["timestamp"]) for e in evicted], _ids(evicted)))

    expired = [e for e in members if e.get("cause") == SESSION_TIMEOUT]
    cluster = _densest(expired, t.session_cluster_window_ms)
    if len(cluster) >= t.session_cluster:
        span = int(cluster[-1]["timestamp"]) - int(cluster[0]["timestamp"])
        out.append(Finding(
            group, "session-timeout-cluster", len(cluster),
            f"{len(cluster)} session timeouts within {span / 1000:.1f} s: the members stopped heartbeating "
            "together, which points at pauses (garbage collection, a blocked process or host) more than "
            "at crashes",
            _session_advice(cluster),
            [int(e["timestamp"]) for e in cluster], _ids(cluster)))

    joins: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in members:
        # A share group has no static membership, and a member joining stops no other member.
        if e.get("cause") == NEW_MEMBER and not e.get("instance_id") and e.get("client_id") \
                and e.get("group_type") != "share":
            joins[str(e["client_id"])].append(e)
    for client_id, js in sorted(joins.items()):
        if len(js) >= t.churn:
            out.append(Finding(
                group, "member-churn", len(js),
                f"client {client_id!r} joined as a new member {len(js)} times: every restart or reconnect "
                "rebalanced the group",
                "set group.instance.id on this client (static membership): a restart within "
                "session.timeout.ms then keeps its partitions without a rebalance",
                [int(e["timestamp"]) for e in js], _ids(js)))

    eager = [r for r in rebalances if _incremental_would_do(r)]
    if eager:
        stalled = sum(int(r.get("stall_ms") or 0) for r in eager)
        out.append(Finding(
            group, "eager-rebalances", len(eager),
            f"{len(eager)} stop-the-world rebalances (assignor {eager[-1].get('protocol')!r}): every member "
            f"gave up all its partitions though only {sum(int(r.get('moved_count') or 0) for r in eager)} "
            f"moved; {stalled / 1000:.1f} s of stall in total",
            "use partition.assignment.strategy=cooperative-sticky, or the consumer protocol "
            "(group.protocol=consumer), so members keep the partitions that do not move",
            [int(r["timestamp"]) for r in eager]))

    slow = [(r, w) for r in rebalances for w in [_slow_joiner(r, t.slow_join_ms)] if w is not None]
    if slow:
        names = sorted({w for _, w in slow})
        worst = max(int(r.get("join_phase_ms") or 0) for r, _ in slow)
        out.append(Finding(
            group, "slow-joiner", len(slow),
            f"{len(slow)} join phases waited for {', '.join(names)} after every other member had joined "
            f"(longest join phase {worst / 1000:.1f} s)",
            "that member is slow to return to poll() when a rebalance starts: process smaller batches "
            "(max.poll.records) or move slow work off the poll loop",
            [int(r["timestamp"]) for r, _ in slow], names))

    storm = _densest(rebalances, t.storm_window_ms)
    if len(storm) >= t.storm:
        causes: dict[str, int] = defaultdict(int)
        for r in storm:
            causes[str(r.get("cause"))] += 1
        top = ", ".join(f"{c} x{n}" for c, n in sorted(causes.items(), key=lambda kv: -kv[1]))
        out.append(Finding(
            group, "rebalance-storm", len(storm),
            f"{len(storm)} rebalances within {t.storm_window_ms // 60_000} minutes ({top})",
            "address the leading cause above; each rebalance stalls consumption of the whole group",
            [int(r["timestamp"]) for r in storm]))

    deliveries = [e for e in evs if e.get("kind") == DELIVERY]
    out += _poison(group, [e for e in deliveries if e.get("cause") == DELIVERY_LIMIT], t)
    out += _lock_expiries(group, [e for e in deliveries if e.get("cause") == LOCK_EXPIRED], t)
    out += _not_ready(group, [e for e in evs if e.get("kind") == STATE and e.get("group_type") == "streams"])
    return out


# What to do about each status that holds a streams group NotReady (Kafka's status names).
_NOT_READY_ADVICE = {
    "MISSING_SOURCE_TOPICS": "create the source topics named above (kafka-topics --create) or correct the "
                             "application's topic names",
    "INCORRECTLY_PARTITIONED_TOPICS": "give the topics the application joins (copartitioned) the same number of "
                                      "partitions, and its internal topics the partitions named above (delete a "
                                      "wrongly partitioned internal topic so that the broker creates it again)",
    "MISSING_INTERNAL_TOPICS": "let the application's principal create its internal topics (CREATE on the cluster "
                               "or on those topics), or create them with the partitions named above",
}


def _not_ready(group: str, states: list[dict[str, Any]]) -> list[Finding]:
    """A streams group still NotReady at its last state event, for a reason a person must fix."""
    if not states or states[-1].get("state_after") != "NotReady":
        return []
    statuses = [s for s in states[-1].get("topology_status") or [] if isinstance(s, dict)]
    names = [str(s.get("status")) for s in statuses]
    if not statuses or set(names) <= {"MISSING_INTERNAL_TOPICS"}:
        return []
    entered = [e for e in states if e.get("state_after") == "NotReady" and e.get("state_before") != "NotReady"]
    advice = [_NOT_READY_ADVICE[n] for n in dict.fromkeys(names) if n in _NOT_READY_ADVICE]
    return [Finding(
        group, "streams-not-ready", len(entered) or 1,
        f"the group is NotReady ({states[-1].get('members')} members): its topology cannot run and no member runs "
        f"any task: {'; '.join(str(s.get('detail')) for s in statuses)}",
        "; ".join(advice) + "; the members' next heartbeat then assigns the tasks",
        [int(e["timestamp"]) for e in entered or states[-1:]])]


def _session_advice(timeouts: list[dict[str, Any]]) -> str:
    """Streams and share groups' session timeouts are the broker's (KIP-1071, KIP-932), not the client's."""
    types = {e.get("group_type") for e in timeouts}
    if "streams" in types:
        return ("find and fix the pause, or raise the group's streams.session.timeout.ms (a group config) above "
                "its length")
    if "share" in types:
        return ("find and fix the pause, or raise the group's share.session.timeout.ms (a group config; the "
                "broker's default is group.share.session.timeout.ms) above its length")
    return "find and fix the pause, or raise session.timeout.ms above its length"


def _where(events: list[dict[str, Any]], limit: int = 5) -> str:
    """``topic-partition offsets a-b, c`` for the first share partitions the events name."""
    offsets: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for e in events:
        # The same records may be named by several rounds (expired again, then archived).
        offsets[f"{e.get('topic')}-{e.get('partition')}"].update((int(r[0]), int(r[1])) for r in e.get("offsets") or [])
    parts = []
    for tp, ranges in sorted(offsets.items())[:limit]:
        shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in sorted(ranges)[:8])
        parts.append(f"{tp} offsets {shown}" + (" ..." if len(ranges) > 8 else ""))
    return "; ".join(parts) + (f"; and {len(offsets) - limit} more partitions" if len(offsets) > limit else "")


def _members_of(events: list[dict[str, Any]]) -> list[str]:
    return sorted({str(m) for e in events for m in e.get("members") or [] if m})


def _poison(group: str, archived: list[dict[str, Any]], t: Thresholds) -> list[Finding]:
    records = sum(int(e.get("records") or 0) for e in archived)
    if not archived or records < t.poison:
        return []
    limit = max(int(e.get("delivery_limit") or 0) for e in archived)
    via: dict[str, int] = defaultdict(int)
    for e in archived:
        for how, n in (e.get("released_by") or {}).items():
            via[str(how)] += int(n)
    expired = via.get("lock-expired", 0)
    named = [(e, r) for e in archived for r in e.get("offsets") or []]
    look = "kafka-console-consumer.sh --topic T --partition P --offset O --max-messages 1"
    if named:
        e, r = min(named, key=lambda er: int(er[1][0]))
        look = (f"kafka-console-consumer.sh --topic {e.get('topic')} --partition {e.get('partition')} "
                f"--offset {r[0]} --max-messages 1")
    return [Finding(
        group, "poison-records", records,
        (f"{records} records were" if records != 1 else "1 record was")
        + f" archived after {limit} deliveries (share.delivery.count.limit {limit}), "
        f"so no consumer will get them again: {_where(archived)}"
        + (f"; {expired} of them because their acquisition locks expired" if expired else ""),
        f"look at those records (e.g. {look}) and at the consumers' logs for the error they raise on them; a "
        "record that can never be processed should be acknowledged with REJECT rather than released, and "
        "share.delivery.count.limit (a group config) raised only if the failures are transient"
        + ("; locks expiring on them points at processing slower than share.record.lock.duration.ms"
           if expired else ""),
        [int(e["timestamp"]) for e in archived], _members_of(archived))]


def _lock_expiries(group: str, expired: list[dict[str, Any]], t: Thresholds) -> list[Finding]:
    rounds = _densest(expired, t.lock_expiry_window_ms)
    if len(rounds) < t.lock_expiries:
        return []
    records = sum(int(e.get("records") or 0) for e in rounds)
    lock_ms = sorted({int(e["lock_duration_ms"]) for e in rounds if e.get("lock_duration_ms") is not None})
    shown = ", ".join(map(str, lock_ms)) or "unknown"
    return [Finding(
        group, "lock-expiries", len(rounds),
        f"acquisition locks expired {len(rounds)} times within {t.lock_expiry_window_ms // 60_000} minutes "
        f"({records} records, share.record.lock.duration.ms {shown}): the consumers held what they fetched "
        f"longer than the lock lasts, and each record was delivered again: {_where(rounds)}",
        "raise share.record.lock.duration.ms (a group config; the broker's default is "
        "group.share.record.lock.duration.ms) above the time one poll's records take to process, fetch fewer "
        "records per poll (max.poll.records; share.acquire.mode=record_limit makes it exact), or process faster; "
        "a consumer that is slow but alive can renew its locks (acknowledge with RENEW)",
        [int(e["timestamp"]) for e in rounds], _members_of(rounds))]


def _member_configs(members: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    configs: dict[str, dict[str, Any]] = {}
    for e in members:
        if e.get("cause") == NEW_MEMBER and e.get("member_id"):
            configs[str(e["member_id"])] = e
    return configs


def _ids(events: list[dict[str, Any]]) -> list[str]:
    return sorted({str(e.get("client_id") or e.get("member_id")) for e in events})


def _densest(events: list[dict[str, Any]], window_ms: int) -> list[dict[str, Any]]:
    """The largest run of ``events`` (sorted by time) that fits in ``window_ms``."""
    best: list[dict[str, Any]] = []
    start = 0
    for end in range(len(events)):
        while int(events[end]["timestamp"]) - int(events[start]["timestamp"]) > window_ms:
            start += 1
        if end - start + 1 > len(best):
            best = events[start:end + 1]
    return best


def _incremental_would_do(r: dict[str, Any]) -> bool:
    if r.get("group_type") != "classic" or r.get("state_after") != "Stable":
        return False
    protocol = str(r.get("protocol") or "")
    if not protocol or "cooperative" in protocol:
        return False
    idle = r.get("no_partitions_ms") or {}
    # Members that kept some partitions through it: only those of the group before and after.
    return int(r.get("members_before") or 0) >= 2 and len(idle) >= 2 and \
        int(r.get("moved_count") or 0) < _held_before(r)


def _held_before(r: dict[str, Any]) -> int:
    held = r.get("partitions_before")
    return int(held) if held is not None else 1 << 30


def _slow_joiner(r: dict[str, Any], threshold_ms: int) -> str | None:
    waited = r.get("waited_for") or []
    if len(waited) < 2:
        return None
    last, second = waited[0], waited[1]
    gap = int(last.get("join_delay_ms") or 0) - int(second.get("join_delay_ms") or 0)
    return str(last.get("member_id")) if gap >= threshold_ms else None
