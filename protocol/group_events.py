"""The rebalance journal's format, ``__kcoord_group_events``: its vocabulary, its events, how they
are encoded into records and decoded from them, and which partition holds a group's events. The
coordinator makes the events, the broker writes them, ``kcoord groups --history``, the doctor and
the Spark analysis read them; all of them take the format from here.

Encoding (``VERSION`` 1): the record key is the JSON object ``{"version": 1, "group": <group
id>}``, the value one JSON object with ``version``, ``kind`` (``member``, ``state``, ``rebalance``,
``assignment`` or ``delivery``), ``group``, ``group_type`` (``classic``, ``consumer``, ``streams`` or
``share``), ``generation`` (the group epoch for consumer, streams and share groups), ``state_before``,
``state_after``, ``timestamp`` (ms), ``cause`` (one of ``CAUSES``) and the kind's own fields
(docs/journal.md); the record timestamp
is the event's. JSON because every client and tool (kcat, the console consumer, Spark's JSON
functions) reads it without a schema; ``version`` in key and value lets a later encoding change
without breaking readers that check it: a reader skips a record whose version it does not know
rather than guess at it.

Partitions: a single broker keeps one (every group's events in partition 0); a cluster keeps as
many as ``__consumer_offsets`` has, and a group's events go to the partition of the same index as
its ``__consumer_offsets`` partition (``journal_partition``), written by the node that coordinates
the group.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from protocol.partitioning import partition_for

EVENTS_TOPIC = "__kcoord_group_events"
VERSION = 1

# The kinds of event. A share group (KIP-932) has no rebalance: members never give partitions up
# and a partition may go to several members, so a new group epoch is an ``assignment`` event (what
# each member gained and lost) rather than a ``rebalance``; its share partitions' trouble with
# deliveries (records archived at the delivery limit, acquisition locks that expired) is a
# ``delivery`` event, one per share partition and fetch, acknowledgement or expiry round.
MEMBER, STATE, REBALANCE = "member", "state", "rebalance"
ASSIGNMENT, DELIVERY = "assignment", "delivery"
KINDS = (MEMBER, STATE, REBALANCE, ASSIGNMENT, DELIVERY)

# The causes, in the order docs/journal.md lists them.
NEW_MEMBER = "new-member-joined"
STATIC_REJOINED = "static-member-rejoined"
MEMBER_LEFT = "member-left"
SESSION_TIMEOUT = "session-timeout"
REBALANCE_TIMEOUT = "rebalance-timeout"
SYNC_TIMEOUT = "sync-timeout"
LEADER_REJOINED = "leader-rejoined"
METADATA_CHANGED = "metadata-changed"
PARTITIONS_CHANGED = "partition-count-changed"
FENCED = "member-fenced"
ADMIN = "removed-by-admin"
SHARD_LOADED = "shard-loaded"
# Share groups' deliveries (``delivery`` events): records archived because they were delivered
# ``share.delivery.count.limit`` times (poison records), and acquisition locks that expired
# before the member acknowledged (``share.record.lock.duration.ms``).
DELIVERY_LIMIT = "delivery-limit-reached"
LOCK_EXPIRED = "acquisition-lock-expired"
CAUSES = (NEW_MEMBER, STATIC_REJOINED, MEMBER_LEFT, SESSION_TIMEOUT, REBALANCE_TIMEOUT, SYNC_TIMEOUT,
          LEADER_REJOINED, METADATA_CHANGED, PARTITIONS_CHANGED, FENCED, ADMIN, SHARD_LOADED,
          DELIVERY_LIMIT, LOCK_EXPIRED)


@dataclass(frozen=True)
class GroupEvent:
    """One journal entry. ``kind`` is ``member`` (a membership change), ``state`` (a phase of a
    rebalance: a state transition), ``rebalance`` (the summary once the group settles),
    ``assignment`` (a share group's new epoch and target assignment) or ``delivery`` (a share
    partition's records archived at the delivery limit or whose locks expired)."""

    kind: str
    group: str
    group_type: str
    generation: int
    state_before: str
    state_after: str
    timestamp: int
    cause: str
    member_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The event as readers decode it (``decode_event``)."""
        doc: dict[str, Any] = {
            "version": VERSION, "kind": self.kind, "group": self.group, "group_type": self.group_type,
            "generation": self.generation, "state_before": self.state_before, "state_after": self.state_after,
            "timestamp": self.timestamp, "cause": self.cause,
        }
        if self.member_id is not None:
            doc["member_id"] = self.member_id
        doc.update(self.detail)
        return doc


# One encoder for every event: json.dumps with options builds a new one per call.
_VALUE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


@functools.lru_cache(maxsize=4096)
def encode_key(group: str) -> bytes:
    return json.dumps({"version": VERSION, "group": group}, separators=(",", ":")).encode()


def encode_event(event: GroupEvent) -> tuple[bytes, bytes, int]:
    """(key, value, timestamp) of the record that carries ``event``."""
    return encode_key(event.group), _VALUE_ENCODER.encode(event.to_json()).encode(), event.timestamp


def decode_event(value: bytes | None) -> dict[str, Any] | None:
    """The event a record value holds, or None for anything this version cannot read."""
    if not value:
        return None
    try:
        doc = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None
    return doc


@functools.lru_cache(maxsize=8192)
def journal_partition(group_id: str, partitions: int) -> int:
    """The partition of the journal that holds ``group_id``'s events, in a journal of
    ``partitions`` partitions: 0 in the one-partition layout of a single broker; in a cluster's,
    which has as many partitions as ``__consumer_offsets``, the index of the group's
    ``__consumer_offsets`` partition, so that the node coordinating the group writes it."""
    return 0 if partitions <= 1 else partition_for(group_id, partitions)
