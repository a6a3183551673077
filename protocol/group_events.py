"""The record format of ``__kcoord_group_events``, the rebalance journal: what readers decode.

Key: the JSON object ``{"version": 1, "group": <group id>}``. Value: one JSON object with
``version``, ``kind`` (``member``, ``state`` or ``rebalance``), ``group``, ``group_type``
(``classic`` or ``consumer``), ``generation`` (the group epoch for consumer groups),
``state_before``, ``state_after``, ``timestamp`` (ms), ``cause`` (one of ``CAUSES``) and the kind's
own fields (docs/journal.md). A reader skips a record whose version it does not
know rather than guess at it.

Partitions: a single broker keeps one (every group's events in partition 0); a cluster keeps as
many as ``__consumer_offsets`` has, and a group's events go to the partition of the same index as
its ``__consumer_offsets`` partition (``broker.coordinator.partitioning.journal_partition``),
written by the node that coordinates the group.
"""

from __future__ import annotations

import json
from typing import Any

EVENTS_TOPIC = "__kcoord_group_events"
VERSION = 1
CAUSES = (
    "new-member-joined", "static-member-rejoined", "member-left", "session-timeout", "rebalance-timeout",
    "sync-timeout", "leader-rejoined", "metadata-changed", "partition-count-changed", "member-fenced",
    "removed-by-admin", "shard-loaded",
)


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
