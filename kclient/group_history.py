"""``kcoord groups --history`` and ``--doctor``: the rebalance journal of a group, read with
Metadata and Fetch from ``__kcoord_group_events`` like any client would (in a cluster, each
partition from the node that leads it), and the doctor's findings on it.

``show`` is what the command calls: ``read_events`` (wire), then ``render_history`` and
``render_doctor`` (text, in the column style of ``kafka-consumer-groups.sh``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, TextIO

from doctor import Finding, diagnose
from kclient.wire_client import WireClient
from protocol.group_events import EVENTS_TOPIC, decode_event, journal_partition
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest
from protocol.record_batch import decode_records, iter_batches

FETCH = 1
FETCH_VERSION = 4
METADATA = 3
METADATA_VERSION = 9
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
# A partition whose owner is moving (a cluster node died or left) has no leader for a few seconds.
_MOVING = (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER)
_RETRY_S = 0.5


class JournalUnavailable(RuntimeError):
    """The broker keeps no journal (not kcoord, or ``group.events.enable=false``)."""


class _Moving(Exception):
    """The partition's leader changed or is not known yet: read Metadata again."""


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host or "127.0.0.1", int(port)


def read_events(bootstrap: str, group: str | None = None, *, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Every event of ``group`` (all groups when None) the journal holds, oldest first.

    Metadata says how many partitions the journal has and which node leads each (in a cluster,
    the owner of the ``__consumer_offsets`` partition of the same index); a group's events are in
    one partition (``journal_partition``), read from its leader."""
    deadline = time.monotonic() + timeout
    clients: dict[tuple[str, int], WireClient] = {}

    def client_for(address: tuple[str, int]) -> WireClient:
        client = clients.get(address)
        if client is None:
            client = clients[address] = WireClient(*address, client_id="kcoord-groups", timeout=timeout)
        return client

    try:
        bootstrap_address = _address(bootstrap)
        events: list[dict[str, Any]] = []
        done: set[int] = set()
        while True:
            leaders = _leaders(client_for(bootstrap_address), bootstrap, bootstrap_address)
            wanted = [journal_partition(group, len(leaders))] if group is not None else sorted(leaders)
            try:
                for partition in wanted:
                    if partition in done:
                        continue
                    address = leaders[partition]
                    if address is None:
                        raise _Moving
                    events += _read_partition(client_for(address), bootstrap, partition, group)[0]
                    done.add(partition)
                break
            except _Moving:
                if time.monotonic() > deadline:
                    raise JournalUnavailable(f"{EVENTS_TOPIC} has partitions without a leader (owners moving); "
                                             "try again") from None
                time.sleep(_RETRY_S)
        if len(wanted) > 1:
            events.sort(key=lambda e: int(e.get("timestamp", 0)))
        return events
    finally:
        for client in clients.values():
            client.close()


def _leaders(client: WireClient, bootstrap: str, address: tuple[str, int]) -> dict[int, tuple[str, int] | None]:
    """Each journal partition's leader address (None while it has none), from Metadata. A single
    broker is read where it was reached (its advertised host may not resolve here)."""
    meta = client.call(METADATA, METADATA_VERSION, MetadataRequest(
        topics=[MetadataRequest.Topic(name=EVENTS_TOPIC)], allow_auto_topic_creation=False))
    nodes = {b.node_id: (b.host, b.port) for b in meta.brokers}
    if len(nodes) == 1:
        nodes = dict.fromkeys(nodes, address)
    topic = next((t for t in meta.topics if t.name == EVENTS_TOPIC), None)
    if topic is None or topic.error_code == UNKNOWN_TOPIC_OR_PARTITION or not topic.partitions:
        raise JournalUnavailable(f"{bootstrap} keeps no {EVENTS_TOPIC} (not kcoord, or the journal is off)")
    if topic.error_code:
        raise JournalUnavailable(f"Metadata of {EVENTS_TOPIC} failed with error {topic.error_code}")
    return {p.partition_index: nodes.get(p.leader_id) for p in topic.partitions}


def _read_partition(client: WireClient, bootstrap: str, partition: int, group: str | None,
                    start: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The events of ``group`` (every group when None) in one journal partition from offset
    ``start`` on, read from its leader, and the offset to read from next time."""
    events: list[dict[str, Any]] = []
    offset = start
    while True:
        req = FetchRequest(
            max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
            topics=[FetchRequest.Topic(topic=EVENTS_TOPIC, partitions=[
                FetchRequest.Topic.Partition(partition=partition, fetch_offset=offset, partition_max_bytes=8 << 20)])])
        resp = client.call(FETCH, FETCH_VERSION, req)
        part = resp.responses[0].partitions[0]
        if part.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            raise JournalUnavailable(f"{bootstrap} keeps no {EVENTS_TOPIC} (not kcoord, or the journal is off)")
        if part.error_code in _MOVING:
            raise _Moving
        if part.error_code:
            raise JournalUnavailable(f"fetching {EVENTS_TOPIC}-{partition} failed with error {part.error_code}")
        progressed = False
        for batch in iter_batches(part.records or b"", allow_partial=True):
            for record in decode_records(batch):
                at = batch.base_offset + record.offset_delta
                if at < offset:
                    continue
                event = decode_event(record.value)
                if event is not None and (group is None or event.get("group") == group):
                    events.append(event)
            offset = batch.next_offset
            progressed = True
        if not progressed or offset >= part.high_watermark:
            return events, offset


class JournalTail:
    """The journal for a reader that keeps watching it (the console): each ``events`` call fetches
    only what was appended since the last one, and the last ``keep`` events of each group are kept
    in memory, so following a busy journal costs the broker the new records, not the whole topic.
    Safe to call from several threads."""

    def __init__(self, bootstrap: str, *, keep: int = 1000, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.keep = keep
        self.timeout = timeout
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, int], WireClient] = {}
        self._next: dict[int, int] = {}  # journal partition -> the offset to read from
        self._partitions = 0
        self._groups: dict[str, deque[dict[str, Any]]] = {}

    def events(self, group: str | None = None) -> list[dict[str, Any]]:
        """The kept events of ``group`` (of every group when None), oldest first, after reading
        what is new in its partition (in every partition). A partition whose leader is moving is
        read at the next call; a broker without a journal raises ``JournalUnavailable``."""
        with self._lock:
            try:
                self._catch_up(group)
            except (OSError, ConnectionError):
                # A kept connection the broker closed (idle, or a node restarted): once more on new ones.
                self._close()
                try:
                    self._catch_up(group)
                except (OSError, ConnectionError):
                    self._close()
                    raise
            if group is not None:
                return list(self._groups.get(group, ()))
            return sorted((e for kept in self._groups.values() for e in kept),
                          key=lambda e: int(e.get("timestamp", 0)))

    def positions(self) -> dict[int, int]:
        """Each journal partition read so far, and the offset the next read starts at."""
        with self._lock:
            return dict(self._next)

    def _client(self, address: tuple[str, int]) -> WireClient:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = WireClient(*address, client_id="kcoord-console",
                                                         timeout=self.timeout)
        return client

    def _catch_up(self, group: str | None) -> None:
        bootstrap_address = _address(self.bootstrap)
        leaders = _leaders(self._client(bootstrap_address), self.bootstrap, bootstrap_address)
        if len(leaders) != self._partitions:  # a single broker's journal grown for a cluster
            self._next.clear()
            self._groups.clear()
            self._partitions = len(leaders)
        wanted = [journal_partition(group, len(leaders))] if group is not None else sorted(leaders)
        for partition in wanted:
            address = leaders.get(partition)
            if address is None:
                continue
            try:
                found, self._next[partition] = _read_partition(
                    self._client(address), self.bootstrap, partition, None, self._next.get(partition, 0))
            except _Moving:
                continue
            for event in found:
                name = str(event.get("group", ""))
                kept = self._groups.get(name)
                if kept is None:
                    kept = self._groups[name] = deque(maxlen=self.keep)
                kept.append(event)

    def _close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def close(self) -> None:
        with self._lock:
            self._close()


def _ts(ms: Any) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(ms) / 1000)) + f".{int(ms) % 1000:03d}Z"


def _secs(ms: Any) -> str:
    return "-" if ms is None else f"{int(ms) / 1000:.3f}s"


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    rows = [header, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _who(event: dict[str, Any]) -> str:
    detail = event.get("cause_detail") or {}
    member = event.get("member_id") or detail.get("member_id") or ""
    client = event.get("client_id") or detail.get("client_id") or ""
    return f"{client}/{member}" if client and member else (member or client or "-")


def render_history(events: list[dict[str, Any]], group: str) -> str:
    """Rebalances of ``group`` (one line each: cause, stall, phases, moves, who was waited for),
    then every membership change, as ``kafka-consumer-groups.sh`` prints tables. A share group
    has no rebalances: its new epochs (what each member gained and lost) and its share partitions'
    delivery trouble (poison records, expired locks) instead."""
    mine = [e for e in events if e.get("group") == group]
    if not mine:
        return f"Consumer group '{group}' has no recorded history."
    if any(e.get("group_type") == "share" for e in mine):
        return _render_share(group, mine)
    rebalances = [e for e in mine if e.get("kind") == "rebalance"]
    lines = [f"GROUP {group}: {len(rebalances)} rebalances\n"]
    rows = []
    for r in rebalances:
        waited = r.get("waited_for") or []
        rows.append([
            _ts(r.get("rebalance_start", r["timestamp"])), str(r.get("generation")), str(r.get("cause")),
            str((r.get("cause_detail") or {}).get("client_reason") or "-")[:40],
            _secs(r.get("stall_ms")), _secs(r.get("join_phase_ms")), _secs(r.get("sync_phase_ms")),
            _secs(r.get("max_no_partitions_ms")), str(r.get("moved_count", 0)),
            f"{r.get('members_before', '-')}->{r.get('members_after', '-')}",
            (f"{waited[0]['member_id']} (+{_secs(waited[0]['join_delay_ms'])})" if waited else "-"),
        ])
    lines.append(_table(["STARTED", "GENERATION", "CAUSE", "CLIENT-REASON", "STALL", "JOIN", "SYNC",
                         "NO-PARTITIONS", "MOVED", "MEMBERS", "WAITED-FOR"], rows))
    lines += _not_ready(mine)
    lines += _membership(mine)
    return "\n".join(lines)


def _not_ready(mine: list[dict[str, Any]]) -> list[str]:
    """A streams group's spells of NotReady (its topology could not run: no task assigned), each
    with the statuses that held it and when it left (``-``: it still is)."""
    states = sorted((e for e in mine if e.get("kind") == "state"), key=lambda e: int(e.get("timestamp", 0)))
    rows: list[list[str]] = []
    for i, e in enumerate(states):
        if e.get("state_after") != "NotReady" or e.get("state_before") == "NotReady":
            continue
        left = next((x for x in states[i + 1:] if x.get("state_after") != "NotReady"), None)
        statuses = "; ".join(f"{s.get('status')}: {s.get('detail')}" for s in e.get("topology_status") or []
                             if isinstance(s, dict))
        rows.append([_ts(e["timestamp"]), "-" if left is None else _ts(left["timestamp"]), statuses or "-"])
    return ["\nTOPOLOGY NOT READY\n", _table(["FROM", "UNTIL", "STATUS"], rows)] if rows else []


def _membership(mine: list[dict[str, Any]]) -> list[str]:
    members = [e for e in mine if e.get("kind") == "member"]
    if not members:
        return []
    return ["\nMEMBERSHIP CHANGES\n", _table(["TIME", "CAUSE", "MEMBER", "DETAIL"], [
        [_ts(e["timestamp"]), str(e.get("cause")), _who(e), _member_detail(e)] for e in members])]


def _partitions(by_member: Any) -> str:
    if not by_member:
        return "-"
    return " ".join(f"{m}:{','.join(ps)}" for m, ps in sorted(by_member.items()))[:80]


def _ranges(ranges: Any) -> str:
    shown = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in (ranges or [])[:6])
    return (shown + (",..." if len(ranges or []) > 6 else "")) or "-"


def _render_share(group: str, mine: list[dict[str, Any]]) -> str:
    """A share group's history: its epochs, its delivery trouble, its membership changes."""
    assignments = [e for e in mine if e.get("kind") == "assignment"]
    deliveries = [e for e in mine if e.get("kind") == "delivery"]
    lines = [f"SHARE GROUP {group}: {len(assignments)} assignments, {len(deliveries)} delivery problems\n"]
    lines.append(_table(["TIME", "EPOCH", "CAUSE", "REASON", "MEMBERS", "PARTITIONS", "SHARED", "GAINED", "LOST"], [
        [_ts(e["timestamp"]), f"{e.get('epoch_before', '-')}->{e.get('generation')}", str(e.get("cause")),
         str(e.get("reason") or "-")[:40], str(e.get("members", "-")), str(e.get("partitions", "-")),
         str(e.get("shared_partitions", "-")), _partitions(e.get("gained")), _partitions(e.get("lost"))]
        for e in assignments]))
    if deliveries:
        lines.append("\nDELIVERY PROBLEMS\n")
        lines.append(_table(["TIME", "CAUSE", "PARTITION", "RECORDS", "OFFSETS", "LIMIT", "LOCK", "MEMBERS"], [
            [_ts(e["timestamp"]), str(e.get("cause")), f"{e.get('topic')}-{e.get('partition')}",
             str(e.get("records", "-")), _ranges(e.get("offsets")), str(e.get("delivery_limit", "-")),
             _secs(e.get("lock_duration_ms")), ",".join(e.get("members") or [])[:60] or "-"]
            for e in deliveries]))
    lines += _membership(mine)
    return "\n".join(lines)


def _member_detail(e: dict[str, Any]) -> str:
    parts = []
    for key in ("client_reason", "instance_id", "avoided_rebalance", "last_heartbeat_age_ms",
                "rebalance_timeout_ms", "why", "partitions", "action", "subscribed_topics"):
        if e.get(key) is not None:
            parts.append(f"{key}={e[key]}")
    return " ".join(parts) or "-"


def render_doctor(findings: list[Finding], group: str | None = None) -> str:
    chosen = [f for f in findings if group is None or f.group == group]
    if not chosen:
        return "No findings: " + (f"group '{group}'" if group else "no group") + " shows a known rebalance problem."
    blocks = []
    for f in chosen:
        blocks.append(f"[{f.rule}] group {f.group}: {f.evidence}\n"
                      f"  seen {f.count} times, {_ts(min(f.timestamps))} .. {_ts(max(f.timestamps))}"
                      + (f"; members: {', '.join(f.members[:5])}" if f.members else "")
                      + f"\n  recommendation: {f.recommendation}")
    return "\n\n".join(blocks)


def show(bootstrap: str, group: str | None, *, history: bool, doctor: bool, out: TextIO | None = None) -> int:
    """``--history`` (needs a group) and/or ``--doctor`` (one group, or all); returns the exit status."""
    out = out or sys.stdout
    if history and not group:
        print("Error: --history needs --group", file=out)
        return 1
    try:
        events = read_events(bootstrap, group)
    except (JournalUnavailable, OSError) as exc:
        print(f"Error: {exc}", file=out)
        return 1
    if history:
        assert group is not None
        print(render_history(events, group), file=out)
    if doctor:
        print(render_doctor(diagnose(events), group), file=out)
    return 0
