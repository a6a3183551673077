"""The rebalance journal, as the coordinator sees it: why each membership change and rebalance
phase happened, how long it took, and what moved.

Pure like the rest of the coordinator: operations leave ``note``s and ``joined`` marks here while
they run, and ``collect`` (called once per operation with the operation's ``Result`` and ``now``)
turns them and the operation's state transitions into ``GroupEvent``s, which the shell writes to
``__kcoord_group_events`` (``broker/coordinators/group/service/journal_writer.py``). Nothing here is persisted state:
a restart starts with no rebalance in flight, as the groups themselves do.

The causes are a fixed vocabulary and the events have one encoding, both the journal format's
(``protocol.group_events``); docs/journal.md documents them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.coordinators.group.core.base.result import Result
from protocol.errors import DecodeError
from protocol.group_events import (
    ADMIN,
    ASSIGNMENT,
    LEADER_REJOINED,
    MEMBER,
    MEMBER_LEFT,
    METADATA_CHANGED,
    NEW_MEMBER,
    PARTITIONS_CHANGED,
    REBALANCE,
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    SHARD_LOADED,
    STATE,
    STATIC_REJOINED,
    SYNC_TIMEOUT,
    GroupEvent,
)
from protocol.payloads.consumer_protocol import decode_assignment

# The coordinator's transition reasons (classic groups) and their cause.
_CLASSIC_REASONS = {
    "member-joined": NEW_MEMBER,
    "static-member-joined": NEW_MEMBER,
    "member-rejoined": METADATA_CHANGED,
    "metadata-changed": METADATA_CHANGED,
    "leader-rejoined": LEADER_REJOINED,
    "static-member-protocol-changed": METADATA_CHANGED,
    "static-member-replaced": STATIC_REJOINED,
    "member-left": MEMBER_LEFT,
    "session-timeout": SESSION_TIMEOUT,
    "sync-timeout": SYNC_TIMEOUT,
    "over-capacity": SHARD_LOADED,
    "deleted": ADMIN,
    "offsets-expired": ADMIN,
}

CLASSIC_REBALANCING = ("PreparingRebalance",)
CONSUMER_REBALANCING = ("Assigning", "Reconciling")
SETTLED = ("Stable", "Empty", "Dead")

Owned = dict[str, set[tuple[str, int]]]  # member id -> (topic, partition) it holds


def cause_of_reason(reason: str) -> str:
    """The cause a transition's reason names: classic reasons are tokens, consumer-group (KIP-848)
    reasons are phrases (``member X joined``, ``member X fenced: session timeout``)."""
    if reason in _CLASSIC_REASONS:
        return _CLASSIC_REASONS[reason]
    if reason.endswith(" joined"):
        return NEW_MEMBER
    if reason == "member left":
        return MEMBER_LEFT
    if reason.endswith("session timeout"):
        return SESSION_TIMEOUT
    if reason.endswith("rebalance timeout"):
        return REBALANCE_TIMEOUT
    if reason.startswith("topics"):
        return PARTITIONS_CHANGED
    return METADATA_CHANGED


@dataclass
class Note:
    group: str
    cause: str
    member_id: str | None
    detail: dict[str, Any]
    kind: str = MEMBER


@dataclass
class Trace:
    """One rebalance of one group, from leaving Stable/Empty until it settles."""

    started: int
    cause: str
    detail: dict[str, Any]
    before: Owned
    protocol: str | None
    generation_before: int
    state_before: str
    join_end: int | None = None
    waited_for: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    members_at_start: int = 0


class Journal:
    """The journal's soft state for one shard."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.notes: list[Note] = []
        self.join_times: dict[str, dict[str, int]] = {}
        self.traces: dict[str, Trace] = {}
        self.owned: dict[str, Owned] = {}
        # Partition counts of the topics a classic group consumed when it last became Stable.
        self.partition_counts: dict[str, dict[str, int]] = {}

    # ---- what operations tell it while they run ---------------------------------------------

    def note(self, group: str, cause: str, member_id: str | None = None, **detail: Any) -> None:
        """A membership change with its cause; the first note of an operation that starts a
        rebalance is that rebalance's cause."""
        if self.enabled:
            self.notes.append(Note(group, cause, member_id, {k: v for k, v in detail.items() if v is not None}))

    def assignment(self, group: str, cause: str, **detail: Any) -> None:
        """A share group's new epoch and target assignment (share groups have no rebalance: no
        member gives anything up, so the new assignment is the whole story)."""
        if self.enabled:
            self.notes.append(Note(group, cause, None, detail, ASSIGNMENT))

    def joined(self, group: str, member_id: str, now: int) -> None:
        """A member's JoinGroup arrived (an eager member has just given up its partitions)."""
        if self.enabled:
            self.join_times.setdefault(group, {}).setdefault(member_id, now)

    def rejoined(self, st: Any, group: Any, member: Any, cause: str, client_reason: str | None) -> None:
        """A member of a Stable classic group sent JoinGroup and so starts a rebalance: the leader
        (which is how it reacts to metadata) or a member whose subscription changed. When a topic
        the group consumes has grown since the last generation, that is the cause."""
        if not self.enabled:
            return
        detail: dict[str, Any] = {"client_id": member.client_id, "client_reason": client_reason}
        known = self.partition_counts.get(group.group_id, {})
        grown = {t: [n, st.topics.partition_count(t)] for t, n in known.items()
                 if st.topics.partition_count(t) not in (None, n)}
        if grown:
            cause = PARTITIONS_CHANGED
            detail["partitions"] = grown
        self.note(group.group_id, cause, member.member_id, **detail)

    # ---- turning an operation's output into events ------------------------------------------

    def collect(self, st: Any, out: Result, now: int) -> None:
        """Appends to ``out.events`` what the operation that produced ``out`` did."""
        if not self.enabled or (not self.notes and not out.transitions):
            return
        notes, self.notes = self.notes, []
        events = out.events
        by_group: dict[str, list[Note]] = {}
        for n in notes:
            by_group.setdefault(n.group, []).append(n)
            gtype, gen, state = _describe(st, n.group)
            events.append(GroupEvent(n.kind, n.group, gtype, gen, state, state, now, n.cause, n.member_id,
                                     n.detail))
            trace = self.traces.get(n.group)
            if trace is not None and n.kind == MEMBER:
                trace.notes.append({"cause": n.cause, "member_id": n.member_id, "at_ms": now - trace.started,
                                    **n.detail})
        for group, before, after, generation, members, reason in out.transitions:
            gtype = _group_type(st, group)
            first = by_group.get(group, [])
            trace = self.traces.get(group)
            # A streams group converges as a consumer group does (Assigning, then Reconciling); a
            # share group never rebalances (it is Empty or Stable: its epochs are ``assignment``s).
            rebalancing = (CLASSIC_REBALANCING if gtype == "classic" else () if gtype == "share"
                           else CONSUMER_REBALANCING)
            if trace is None and after in rebalancing:
                trace = self._start(st, group, gtype, before, generation, reason, first, now)
                trace.members_at_start = members
            cause = trace.cause if trace is not None else (first[0].cause if first else cause_of_reason(reason))
            detail: dict[str, Any] = {"reason": reason, "members": members}
            if gtype == "streams" and after == "NotReady":
                # Why no task runs: what the doctor reads to say which topics to create or fix.
                detail["topology_status"] = _streams_topology_status(st, group)
            events.append(GroupEvent(STATE, group, gtype, generation, before, after, now, cause, detail=detail))
            if trace is None:
                continue
            if after == "CompletingRebalance":
                trace.join_end = now
                trace.waited_for = self._slowest(group, trace, now)
            elif after in SETTLED:
                events.append(self._finish(st, group, gtype, generation, before, after, trace, now))

    def _start(self, st: Any, group: str, gtype: str, before: str, generation: int, reason: str,
               notes: list[Note], now: int) -> Trace:
        cause, detail = (notes[0].cause, dict(notes[0].detail)) if notes else (cause_of_reason(reason), {})
        if notes and notes[0].member_id is not None:
            detail["member_id"] = notes[0].member_id
        owned = self.owned.get(group)
        if owned is None:
            owned = _owned(st, group)
        trace = Trace(now, cause, detail, {m: set(ps) for m, ps in owned.items()}, _protocol(st, group),
                      generation, before)
        self.traces[group] = trace
        return trace

    def _slowest(self, group: str, trace: Trace, now: int) -> list[dict[str, Any]]:
        """The members the join phase waited for longest (the last to send JoinGroup)."""
        times = self.join_times.get(group, {})
        late = sorted(times.items(), key=lambda kv: -kv[1])[:3]
        return [{"member_id": m, "join_delay_ms": max(t - trace.started, 0)} for m, t in late]

    def _finish(self, st: Any, group: str, gtype: str, generation: int, before: str, after: str, trace: Trace,
                now: int) -> GroupEvent:
        del self.traces[group]
        joins = self.join_times.pop(group, {})
        after_owned = _owned(st, group) if after == "Stable" else {}
        if after == "Stable":
            self.owned[group] = after_owned
            classic = st.groups.get(group)
            topics = sorted(classic.subscribed_topics or ()) if classic is not None else []
            counts = {t: st.topics.partition_count(t) for t in topics}
            self.partition_counts[group] = {t: n for t, n in counts.items() if n is not None}
        else:
            self.owned.pop(group, None)
            self.partition_counts.pop(group, None)
        moved = _moved(trace.before, after_owned)
        cooperative = gtype in ("consumer", "streams") or "cooperative" in (trace.protocol or _protocol(st, group) or "")
        idle: dict[str, int] = {}
        for member_id, holds in after_owned.items():
            kept = holds & trace.before.get(member_id, set())
            if cooperative and kept:
                continue
            idle[member_id] = now - max(joins.get(member_id, trace.started), trace.started)
        join_ms = (trace.join_end - trace.started) if trace.join_end is not None else None
        # A join phase that ran into its deadline waiting for members that never rejoined stalled
        # because of them, whatever started it: that is the cause worth reporting.
        cause, cause_detail = trace.cause, trace.detail
        timed_out = [n for n in trace.notes if n["cause"] == REBALANCE_TIMEOUT]
        if timed_out and cause != REBALANCE_TIMEOUT:
            cause, cause_detail = REBALANCE_TIMEOUT, {**timed_out[0], "trigger": trace.cause,
                                                      "trigger_detail": trace.detail}
        detail: dict[str, Any] = {
            "rebalance_start": trace.started,
            "stall_ms": now - trace.started,
            "join_phase_ms": join_ms,
            "sync_phase_ms": (now - trace.join_end) if trace.join_end is not None else None,
            "outcome": after,
            "members_before": trace.members_at_start,
            "members_after": len(after_owned) if after == "Stable" else 0,
            "partitions_before": sum(len(ps) for ps in trace.before.values()),
            "protocol": _protocol(st, group),
            "waited_for": trace.waited_for,
            "no_partitions_ms": idle,
            "max_no_partitions_ms": max(idle.values(), default=0),
            # A streams group's tasks are named by subtopology, as Kafka Streams names them.
            "moved": [{"subtopology" if gtype == "streams" else "topic": t, "partition": p, "from": a, "to": b}
                      for (t, p), a, b in moved[:200]],
            "moved_count": len(moved),
            "cause_detail": cause_detail,
            "also": trace.notes[:50],
        }
        del before
        return GroupEvent(REBALANCE, group, gtype, generation, trace.state_before, after, now, cause,
                          detail=detail)



def _group_type(st: Any, group_id: str) -> str:
    if group_id in st.consumer_groups:
        return "consumer"
    if group_id in st.share_groups:
        return "share"
    return "streams" if group_id in st.streams.groups else "classic"


def _streams_topology_status(st: Any, group_id: str) -> list[dict[str, str]]:
    """The statuses that hold a streams group NotReady, from its topology as last configured."""
    group = st.streams.groups.get(group_id)
    configured = None if group is None else group.configured
    return [] if configured is None else configured.named_statuses()


def _describe(st: Any, group_id: str) -> tuple[str, int, str]:
    share = st.share_groups.get(group_id)
    if share is not None:
        return "share", share.group_epoch, share.state
    sgroup = st.streams.groups.get(group_id)
    if sgroup is not None:
        return "streams", sgroup.group_epoch, sgroup.state_name()
    cgroup = st.consumer_groups.get(group_id)
    if cgroup is not None:
        return "consumer", cgroup.group_epoch, str(cgroup.state.value)
    group = st.groups.get(group_id)
    if group is None:
        return "classic", -1, "Dead"
    return "classic", group.generation, group.state.value


def _protocol(st: Any, group_id: str) -> str | None:
    group = st.groups.get(group_id)
    return None if group is None else group.protocol_name


def assigned_partitions(assignment: bytes) -> set[tuple[str, int]]:
    """The partitions a classic consumer-protocol assignment names (none when it is not one)."""
    if len(assignment) < 2:
        return set()
    try:
        decoded = decode_assignment(assignment)
    except (DecodeError, ValueError):
        return set()
    return {(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions}


def _owned(st: Any, group_id: str) -> Owned:
    sgroup = st.streams.groups.get(group_id)
    if sgroup is not None:
        # A streams member owns active tasks: (subtopology id, partition).
        return {mid: {(s, p) for s, parts in m.assigned.active.items() for p in parts}
                for mid, m in sgroup.members.items()}
    cgroup = st.consumer_groups.get(group_id)
    if cgroup is not None:
        owned: Owned = {}
        for member_id, member in cgroup.members.items():
            parts: set[tuple[str, int]] = set()
            for topic_id, partitions in member.assigned_partitions.items():
                name = st.topics.topic_name(topic_id) or topic_id.hex()
                parts.update((name, p) for p in partitions)
            owned[member_id] = parts
        return owned
    group = st.groups.get(group_id)
    if group is None or group.protocol_type != "consumer":
        return {} if group is None else {m: set() for m in group.members}
    return {m.member_id: assigned_partitions(m.assignment) for m in group.members.values()}


def _moved(before: Owned, after: Owned) -> list[tuple[tuple[str, int], str | None, str | None]]:
    """Partitions whose holder changed: (partition, from member or None, to member or None)."""
    was = _holders(before.items())
    now = _holders(after.items())
    moved = []
    for tp in sorted(set(was) | set(now)):
        a, b = was.get(tp), now.get(tp)
        if a != b:
            moved.append((tp, a, b))
    return moved


def _holders(items: Iterable[tuple[str, set[tuple[str, int]]]]) -> dict[tuple[str, int], str]:
    holders: dict[tuple[str, int], str] = {}
    for member_id, parts in items:
        for tp in parts:
            holders[tp] = member_id
    return holders
